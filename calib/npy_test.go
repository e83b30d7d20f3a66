package calib

import (
	"archive/zip"
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npy"
	"github.com/sbinet/npyio/npz"
)

// writeNpy writes v with npyio, the reference writer. npyio takes the shape from nested Go
// arrays, so nested slices are converted to arrays first.
func writeNpy(t testing.TB, dir, name string, v any) string {
	t.Helper()
	v = toArrays(v)
	var b bytes.Buffer
	if err := npy.Write(&b, v); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, b.Bytes(), false)
}

// nchw returns n samples of c×h×w where element (i,ch,y,x) = 1000i + 100ch + 10y + x.
func nchw(n, c, h, w int) [][][][]float32 {
	v := make([][][][]float32, n)
	for i := range v {
		v[i] = make([][][]float32, c)
		for ch := range c {
			v[i][ch] = make([][]float32, h)
			for y := range h {
				v[i][ch][y] = make([]float32, w)
				for x := range w {
					v[i][ch][y][x] = float32(1000*i + 100*ch + 10*y + x)
				}
			}
		}
	}
	return v
}

// nhwcOf returns the same values laid out channels-last.
func nhwcOf(v [][][][]float32) [][][][]float32 {
	n, c, h, w := len(v), len(v[0]), len(v[0][0]), len(v[0][0][0])
	r := make([][][][]float32, n)
	for i := range n {
		r[i] = make([][][]float32, h)
		for y := range h {
			r[i][y] = make([][]float32, w)
			for x := range w {
				r[i][y][x] = make([]float32, c)
				for ch := range c {
					r[i][y][x][ch] = v[i][ch][y][x]
				}
			}
		}
	}
	return r
}

func checkNCHW(t *testing.T, x []float32, n, c, h, w int) {
	t.Helper()
	for i := range n {
		for ch := range c {
			for y := range h {
				for xx := range w {
					want := float32(1000*i + 100*ch + 10*y + xx)
					if got := x[((i*c+ch)*h+y)*w+xx]; got != want {
						t.Fatalf("element (%d,%d,%d,%d) = %v, want %v", i, ch, y, xx, got, want)
					}
				}
			}
		}
	}
}

// toArrays converts nested slices to nested fixed-size arrays of the same shape.
func toArrays(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.Len() == 0 || rv.Index(0).Kind() != reflect.Slice {
		return v
	}
	var conv func(reflect.Value) reflect.Value
	conv = func(s reflect.Value) reflect.Value {
		if s.Kind() != reflect.Slice {
			return s
		}
		first := conv(s.Index(0))
		a := reflect.New(reflect.ArrayOf(s.Len(), first.Type())).Elem()
		for i := range s.Len() {
			a.Index(i).Set(conv(s.Index(i)))
		}
		return a
	}
	return conv(rv).Interface()
}

func TestNpyDtypesAndLabels(t *testing.T) {
	dir := t.TempDir()
	ys := writeNpy(t, dir, "y.npy", []int64{2, 0, 1})
	cases := map[string]any{
		"f32": [][]float32{{1, 2}, {3, 4}, {5, 6}},
		"f64": [][]float64{{1, 2}, {3, 4}, {5, 6}},
		"i64": [][]int64{{1, 2}, {3, 4}, {5, 6}},
		"u8":  [][]uint8{{255, 2}, {3, 4}, {5, 6}},
	}
	for name, v := range cases {
		for _, mem := range []int64{0, 1} {
			p := writeNpy(t, dir, name+".npy", v)
			d := mustOpen(t, p, Input{Shape: shape(-1, 2), Classes: 3}, Options{Labels: ys, MaxMemory: mem})
			x, y := readAll(t, d)
			want := []float32{1, 2, 3, 4, 5, 6}
			if name == "u8" {
				want = []float32{1, 2.0 / 255, 3.0 / 255, 4.0 / 255, 5.0 / 255, 6.0 / 255}
			}
			if !slices.Equal(x, want) || !slices.Equal(y, []int64{2, 0, 1}) {
				t.Errorf("%s mem %d: x %v y %v, want %v", name, mem, x, y, want)
			}
		}
	}
}

func TestNpyLayouts(t *testing.T) {
	dir := t.TempDir()
	const n, c, h, w = 2, 3, 4, 5
	v := nchw(n, c, h, w)
	pc := writeNpy(t, dir, "nchw.npy", v)
	pl := writeNpy(t, dir, "nhwc.npy", nhwcOf(v))
	for _, mem := range []int64{0, 1} {
		d := mustOpen(t, pc, Input{Shape: shape(-1, c, h, w)}, Options{MaxMemory: mem})
		x, _ := readAll(t, d)
		checkNCHW(t, x, n, c, h, w)

		// Channels-last data fed to an NCHW model is transposed.
		d = mustOpen(t, pl, Input{Shape: shape(-1, c, h, w)}, Options{Layout: NHWC, MaxMemory: mem})
		x, _ = readAll(t, d)
		checkNCHW(t, x, n, c, h, w)

		// NCHW data fed to an NHWC model is transposed too: compare with the NHWC file.
		d = mustOpen(t, pc, Input{Shape: shape(-1, h, w, c)}, Options{MaxMemory: mem})
		x, _ = readAll(t, d)
		d2 := mustOpen(t, pl, Input{Shape: shape(-1, h, w, c)}, Options{Layout: NHWC, MaxMemory: mem})
		x2, _ := readAll(t, d2)
		if !slices.Equal(x, x2) || !slices.Equal(d.SampleShape(), []int64{h, w, c}) {
			t.Errorf("NCHW file into NHWC model differs from the NHWC file")
		}
	}
	// Forgetting Options.Layout is reported with the fix.
	_, err := openIn(pl, Input{Name: "input", Shape: shape(-1, c, h, w)}, Options{})
	wantErr(t, err, "nhwc.npy", "[4 5 3]", `"input"`)
	wantFix(t, err, Setting{"Layout", NHWC})
}

// TestNpyLayoutAsIs feeds samples that already have the model's shape: they are taken as
// they are whatever Options.Layout says, and no layout is suggested for data that no
// conversion makes fit.
func TestNpyLayoutAsIs(t *testing.T) {
	dir := t.TempDir()
	// [2,76,32,1]: an OCR-style channels-last batch, element i holding i.
	v := make([][][][]float32, 2)
	var want []float32
	for i := range v {
		v[i] = make([][][]float32, 76)
		for y := range v[i] {
			v[i][y] = make([][]float32, 32)
			for x := range v[i][y] {
				f := float32(len(want))
				v[i][y][x] = []float32{f}
				want = append(want, f)
			}
		}
	}
	p := writeNpy(t, dir, "hwc.npy", v)
	in := Input{Name: "x", Shape: shape(-1, 76, 32, 1)}
	for _, l := range []Layout{NCHW, NHWC} {
		for _, mem := range []int64{0, 1} {
			d := mustOpen(t, p, in, Options{Layout: l, MaxMemory: mem})
			x, _ := readAll(t, d)
			if !slices.Equal(d.SampleShape(), []int64{76, 32, 1}) || !slices.Equal(x, want) {
				t.Errorf("layout %v mem %d: shape %v, values changed", l, mem, d.SampleShape())
			}
		}
	}
	// Neither layout fits: the error suggests no layout.
	_, err := openIn(p, Input{Name: "x", Shape: shape(-1, 76, 31, 1)}, Options{})
	wantErr(t, err, "hwc.npy", "[76 32 1]")
	var se *ShapeError
	if !errors.As(err, &se) || len(se.Fix) != 0 {
		t.Errorf("%v: want a *ShapeError with no fix", err)
	}
}

func TestNpyReshapes(t *testing.T) {
	dir := t.TempDir()
	v := make([][][]float32, 3)
	for i := range v {
		v[i] = [][]float32{{float32(i), 1, 2}, {3, 4, 5}}
	}
	p := writeNpy(t, dir, "x.npy", v)
	for _, in := range [][]int64{{-1, 6}, {-1, 1, 2, 3}, {-1, 2, 3, 1}, {-1, 2, 3}, {-1, -1}, {-1, 1, -1, 3}} {
		d := mustOpen(t, p, Input{Shape: in}, Options{})
		x, _ := readAll(t, d)
		if x[6] != 1 || x[12] != 2 || x[13] != 1 || len(x) != 18 {
			t.Errorf("%v: %v", in, x)
		}
		if SampleSize(d) != 6 {
			t.Errorf("%v: sample shape %v", in, d.SampleShape())
		}
	}
	for _, in := range [][]int64{{-1, 7}, {-1, 3, 2}, {-1, 2, 2, 2}} {
		_, err := openIn(p, Input{Shape: in}, Options{})
		wantErr(t, err, "x.npy", "[2 3]")
	}
}

func TestNpyMeanStd(t *testing.T) {
	dir := t.TempDir()
	p := writeNpy(t, dir, "x.npy", nchw(1, 2, 1, 2))
	d := mustOpen(t, p, Input{Shape: shape(-1, 2, 1, 2)}, Options{Mean: []float64{1, 100}, Std: []float64{2, 4}})
	x, _ := readAll(t, d)
	want := []float32{(0 - 1) / 2.0, (1 - 1) / 2.0, (100 - 100) / 4.0, (101 - 100) / 4.0}
	if !slices.Equal(x, want) {
		t.Errorf("got %v, want %v", x, want)
	}
	_, err := openIn(p, Input{Shape: shape(-1, 2, 1, 2)}, Options{Mean: []float64{1, 2, 3}})
	wantErr(t, err, "3 values", "2 channels")
}

func TestNpyErrors(t *testing.T) {
	dir := t.TempDir()
	nan := writeNpy(t, dir, "nan.npy", [][]float32{{1, 2}, {3, float32(nanf())}})
	for _, mem := range []int64{0, 1} {
		d, err := openIn(nan, Input{Shape: shape(-1, 2)}, Options{MaxMemory: mem})
		if err == nil {
			err = d.Read([]int{1}, make([]float32, 2), nil)
			d.Close()
		}
		wantErr(t, err, "nan.npy", "sample 1", "element 1", "NaN")
	}
	u16 := writeNpy(t, dir, "u16.npy", []uint16{1, 2})
	_, err := openIn(u16, Input{Shape: shape(-1)}, Options{})
	wantErr(t, err, "u16.npy", "unsupported dtype", "<u2")

	good := writeNpy(t, dir, "x.npy", [][]float32{{1, 2}, {3, 4}, {5, 6}})
	b, _ := os.ReadFile(good)
	tr := writeFile(t, dir, "trunc.npy", b[:len(b)-5], false)
	_, err = openIn(tr, Input{Shape: shape(-1, 2)}, Options{})
	wantErr(t, err, "trunc.npy", "truncated", "sample 2")

	ybad := writeNpy(t, dir, "ybad.npy", []int64{0, 10, 1})
	_, err = openIn(good, Input{Shape: shape(-1, 2), Classes: 10}, Options{Labels: ybad})
	wantErr(t, err, "ybad.npy", "entry 1", "label 10", "10 classes")
	yshort := writeNpy(t, dir, "yshort.npy", []int64{0, 1})
	_, err = openIn(good, Input{Shape: shape(-1, 2)}, Options{Labels: yshort})
	wantErr(t, err, "yshort.npy", "2 labels", "3 samples")
	yf := writeNpy(t, dir, "yf.npy", []float32{0, 1.5, 1})
	_, err = openIn(good, Input{Shape: shape(-1, 2)}, Options{Labels: yf})
	wantErr(t, err, "yf.npy", "entry 1", "not an integer")
}

func nanf() float64 {
	var z float64
	return z / z
}

func TestNpz(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.npz")
	x := nchw(4, 1, 2, 3)
	if err := npz.Write(p, map[string]any{"x": toArrays(x), "y": []int64{3, 2, 1, 0}, "imgs": toArrays(x)}); err != nil {
		t.Fatal(err)
	}
	for _, mem := range []int64{0, 1} {
		d := mustOpen(t, p, Input{Shape: shape(-1, 1, 2, 3), Classes: 4}, Options{MaxMemory: mem})
		got, y := readAll(t, d)
		checkNCHW(t, got, 4, 1, 2, 3)
		if !slices.Equal(y, []int64{3, 2, 1, 0}) {
			t.Errorf("labels %v", y)
		}
		d = mustOpen(t, p, Input{Shape: shape(-1, 6)}, Options{XKey: "imgs", MaxMemory: mem})
		got, _ = readAll(t, d)
		if got[6] != 1000 || got[23] != 3012 {
			t.Errorf("imgs: %v", got)
		}
	}
	_, err := openIn(p, Input{Shape: shape(-1, 6)}, Options{XKey: "nope"})
	wantErr(t, err, "d.npz", `"nope"`, "imgs")
	wantOption(t, err, "XKey")
	_, err = openIn(p, Input{Shape: shape(-1, 6)}, Options{YKey: "labels"})
	wantErr(t, err, "d.npz", `"labels"`)
	wantOption(t, err, "YKey")

	// Without a y array the data set has no labels.
	q := filepath.Join(dir, "nolabels.npz")
	if err := npz.Write(q, map[string]any{"x": toArrays(x)}); err != nil {
		t.Fatal(err)
	}
	d := mustOpen(t, q, Input{Shape: shape(-1, 6)}, Options{})
	if d.HasLabels() {
		t.Error("HasLabels without y")
	}

	// Without XKey and without an "x" array, the array named after the model's input is
	// read; an explicit XKey still wins, and "x" is still the first choice.
	r := filepath.Join(dir, "named.npz")
	if err := npz.Write(r, map[string]any{"input": toArrays(x), "other": toArrays(x)}); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, mustOpen(t, r, Input{Name: "input", Shape: shape(-1, 1, 2, 3)}, Options{}))
	checkNCHW(t, got, 4, 1, 2, 3)
	_, err = openIn(r, Input{Name: "pixels", Shape: shape(-1, 6)}, Options{})
	wantOption(t, err, "XKey") // neither "x" nor the input's name
	_, err = openIn(r, Input{Name: "input", Shape: shape(-1, 6)}, Options{XKey: "nope"})
	wantOption(t, err, "XKey")
	both := filepath.Join(dir, "both.npz")
	if err := npz.Write(both, map[string]any{"x": toArrays(x), "input": toArrays(nchw(6, 1, 2, 3))}); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, both, Input{Name: "input", Shape: shape(-1, 1, 2, 3)}, Options{})
	if d.Len() != 4 {
		t.Errorf("both x and input: read %d samples, want x's 4", d.Len())
	}
}

// TestPayloadSized: an array whose data are there (a .npy file, an .npz member whose size
// the archive states) is read into a buffer of exactly its size, not one grown by
// doubling; a member shorter than its header promises is still refused as truncated.
func TestPayloadSized(t *testing.T) {
	dir := t.TempDir()
	x := nchw(5, 3, 7, 9)
	want := int64(5 * 3 * 7 * 9 * 4)
	p := writeNpy(t, dir, "x.npy", x)
	a, f, err := openNpyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := a.samples(1<<30, f)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rec.mem)) != want || int64(cap(rec.mem)) != want {
		t.Errorf(".npy: payload of %d bytes in a buffer of %d, want %d", len(rec.mem), cap(rec.mem), want)
	}
	q := filepath.Join(dir, "x.npz")
	if err := npz.Write(q, map[string]any{"x": toArrays(x)}); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	st, _ := zf.Stat()
	zr, err := zip.NewReader(zf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	za, zc, err := npzArray(zf, q, zr.File[0])
	if err != nil {
		t.Fatal(err)
	}
	rec, err = za.samples(1<<30, zc)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(rec.mem)) != want || int64(cap(rec.mem)) != want {
		t.Errorf(".npz: payload of %d bytes in a buffer of %d, want %d", len(rec.mem), cap(rec.mem), want)
	}
	// The same bytes, the header's shape claiming a sixth sample that is not there.
	short, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	tr := bytes.Replace(short, []byte("(5, 3, 7, 9)"), []byte("(6, 3, 7, 9)"), 1)
	if bytes.Equal(tr, short) {
		t.Fatal("the header's shape was not found")
	}
	// Stored raw, the archive's directory stating the sample's bytes too, so that the
	// buffer is made for them and the read comes up short.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "x.npy", Method: zip.Store, CRC32: crc32.ChecksumIEEE(tr),
		CompressedSize64: uint64(len(tr)), UncompressedSize64: uint64(len(tr)) + uint64(want/5)})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(tr)
	zw.Close()
	zr, err = zip.NewReader(bytes.NewReader(zb.Bytes()), int64(zb.Len()))
	if err != nil {
		t.Fatal(err)
	}
	za, zc, err = npzArray(nil, "short.npz", zr.File[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := za.samples(1<<30, zc); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a member shorter than its header: %v, want a truncation error", err)
	}
}
