package calib

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// idxPixels returns n images of h×w where pixel (i, y, x) is (7i + 3y + x) mod 256.
func idxPixels(n, h, w int) []byte {
	b := make([]byte, n*h*w)
	for i := range n {
		for y := range h {
			for x := range w {
				b[(i*h+y)*w+x] = byte(7*i + 3*y + x)
			}
		}
	}
	return b
}

func TestIdxSmall(t *testing.T) {
	for _, gz := range []bool{false, true} {
		for _, maxMem := range []int64{0, 1} { // 1 byte forces streaming
			dir := t.TempDir()
			ext := ""
			if gz {
				ext = ".gz"
			}
			const n, h, w = 5, 4, 3
			img := writeFile(t, dir, "train-images-idx3-ubyte"+ext, idxBytes(0x08, []int{n, h, w}, idxPixels(n, h, w)), gz)
			writeFile(t, dir, "train-labels-idx1-ubyte"+ext, idxBytes(0x08, []int{n}, []byte{3, 1, 4, 1, 5}), gz)
			for _, in := range []Input{
				{Shape: shape(-1, h*w), Classes: 10},
				{Shape: shape(-1, 1, h, w), Classes: 10},
				{Shape: shape(-1, h, w, 1), Classes: 10},
				{Shape: shape(-1, h, w), Classes: 10},
			} {
				d := mustOpen(t, img, in, Options{MaxMemory: maxMem})
				if d.Len() != n || !d.HasLabels() {
					t.Fatalf("Len %d HasLabels %v", d.Len(), d.HasLabels())
				}
				if !slices.Equal(d.SampleShape(), in.Shape[1:]) {
					t.Errorf("%v: sample shape %v", in.Shape, d.SampleShape())
				}
				x, y := readAll(t, d)
				if !slices.Equal(y, []int64{3, 1, 4, 1, 5}) {
					t.Errorf("labels %v", y)
				}
				for i := range n {
					for yy := range h {
						for xx := range w {
							want := float32(byte(7*i+3*yy+xx)) / 255
							if got := x[(i*h+yy)*w+xx]; got != want {
								t.Fatalf("gz %v mem %d %v: sample %d pixel (%d,%d) = %v, want %v", gz, maxMem, in.Shape, i, yy, xx, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestIdxNoScaleAndLabelsFlag(t *testing.T) {
	dir := t.TempDir()
	img := writeFile(t, dir, "imgs.idx", idxBytes(0x08, []int{2, 2, 2}, []byte{0, 10, 20, 255, 1, 2, 3, 4}), false)
	lab := writeFile(t, dir, "other.idx", idxBytes(0x08, []int{2}, []byte{7, 2}), false)
	d := mustOpen(t, img, Input{Shape: shape(-1, 4)}, Options{NoScale: true, Labels: lab})
	x, y := readAll(t, d)
	if !slices.Equal(x, []float32{0, 10, 20, 255, 1, 2, 3, 4}) || !slices.Equal(y, []int64{7, 2}) {
		t.Errorf("x %v y %v", x, y)
	}
	// Without a labels file next to it, the data set has no labels.
	d2 := mustOpen(t, img, Input{Shape: shape(-1, 4)}, Options{})
	if d2.HasLabels() {
		t.Error("HasLabels without a labels file")
	}
}

func TestIdxErrors(t *testing.T) {
	dir := t.TempDir()
	full := idxBytes(0x08, []int{3, 2, 2}, idxPixels(3, 2, 2))
	trunc := writeFile(t, dir, "t-images-idx3-ubyte", full[:len(full)-3], false)
	_, err := openIn(trunc, Input{Shape: shape(-1, 4)}, Options{})
	wantErr(t, err, trunc, "truncated", "offset 25", "sample 2")

	truncGz := writeFile(t, dir, "g-images-idx3-ubyte.gz", full[:len(full)-3], true)
	_, err = openIn(truncGz, Input{Shape: shape(-1, 4)}, Options{})
	wantErr(t, err, truncGz, "truncated", "offset 25")
	_, err = openIn(truncGz, Input{Shape: shape(-1, 4)}, Options{MaxMemory: 1})
	wantErr(t, err, truncGz, "truncated", "offset 25")

	good := writeFile(t, dir, "a-images-idx3-ubyte", full, false)
	writeFile(t, dir, "a-labels-idx1-ubyte", idxBytes(0x08, []int{3}, []byte{0, 12, 1}), false)
	_, err = openIn(good, Input{Shape: shape(-1, 4), Classes: 10}, Options{})
	wantErr(t, err, "a-labels-idx1-ubyte", "entry 1", "offset 9", "label 12", "10 classes")

	writeFile(t, dir, "b-images-idx3-ubyte", full, false)
	writeFile(t, dir, "b-labels-idx1-ubyte", idxBytes(0x08, []int{2}, []byte{0, 1}), false)
	_, err = openIn(filepath.Join(dir, "b-images-idx3-ubyte"), Input{Shape: shape(-1, 4)}, Options{})
	wantErr(t, err, "2 labels", "3 samples")

	_, err = openIn(good, Input{Shape: shape(-1, 5)}, Options{})
	wantErr(t, err, "5 values", "2x2")

	_, err = openIn(filepath.Join(dir, "a-labels-idx1-ubyte"), Input{Shape: shape(-1, 4)}, Options{})
	wantErr(t, err, "labels file")
}

// fashionDir is where Debian's dataset-fashion-mnist installs Fashion-MNIST.
const fashionDir = "/usr/share/datasets/fashion-mnist"

func needFashion(t testing.TB) {
	testenv.RequireFile(t, filepath.Join(fashionDir, "t10k-images-idx3-ubyte.gz"), "apt-get install dataset-fashion-mnist")
}

func TestIdxFashionMNIST(t *testing.T) {
	needFashion(t)
	// Reference values read from the files with Python's gzip module.
	cases := []struct {
		name   string
		n      int
		first  []int64
		pixels map[[2]int]byte // (sample, pixel) → value
		sums   map[int]int
	}{
		{"train", 60000, []int64{9, 0, 0, 3, 0, 2, 7, 2, 5, 5},
			map[[2]int]byte{{0, 99}: 13, {0, 100}: 73, {0, 14*28 + 14}: 217, {1, 11}: 188, {59999, 239}: 71},
			map[int]int{0: 76247, 1: 84598, 59999: 16684}},
		{"t10k", 10000, []int64{9, 2, 1, 1, 6, 1, 4, 6, 5, 7},
			map[[2]int]byte{{0, 215}: 3, {0, 14*28 + 14}: 110, {1, 11}: 67, {9999, 14*28 + 14}: 132},
			map[int]int{0: 33456, 1: 100994, 9999: 24390}},
	}
	for _, c := range cases {
		for _, mem := range []int64{0, 1 << 20} { // in memory, and streamed from a temporary file
			path := filepath.Join(fashionDir, c.name+"-images-idx3-ubyte.gz")
			d := mustOpen(t, path, Input{Shape: shape(-1, 1, 28, 28), Classes: 10}, Options{MaxMemory: mem})
			if d.Len() != c.n {
				t.Fatalf("%s: Len %d", c.name, d.Len())
			}
			x, y := readAll(t, d)
			if !slices.Equal(y[:10], c.first) {
				t.Errorf("%s: first labels %v, want %v", c.name, y[:10], c.first)
			}
			hist := make([]int, 10)
			for _, l := range y {
				hist[l]++
			}
			for k, v := range hist {
				if v != c.n/10 {
					t.Errorf("%s: class %d has %d samples, want %d", c.name, k, v, c.n/10)
				}
			}
			for k, v := range c.pixels {
				if got, want := x[k[0]*784+k[1]], float32(v)/255; got != want {
					t.Errorf("%s: sample %d pixel %d = %v, want %v", c.name, k[0], k[1], got, want)
				}
			}
			for i, s := range c.sums {
				var sum float64
				for _, v := range x[i*784 : (i+1)*784] {
					sum += float64(v) * 255
				}
				if int(sum+0.5) != s {
					t.Errorf("%s: sample %d pixel sum %v, want %d", c.name, i, sum, s)
				}
			}
		}
	}
}

// TestNoInput: without a model input, samples keep the data's own shape.
func TestNoInput(t *testing.T) {
	dir := t.TempDir()
	img := writeFile(t, dir, "i-images-idx3-ubyte", idxBytes(0x08, []int{2, 3, 4}, idxPixels(2, 3, 4)), false)
	d := mustOpen(t, img, Input{}, Options{})
	if !slices.Equal(d.SampleShape(), []int64{1, 3, 4}) {
		t.Errorf("idx images: sample shape %v, want [1 3 4]", d.SampleShape())
	}
	p := writeNpy(t, dir, "x.npy", nchw(2, 3, 4, 5))
	d = mustOpen(t, p, Input{}, Options{})
	if x, _ := readAll(t, d); !slices.Equal(d.SampleShape(), []int64{3, 4, 5}) || x[119] != 1234 {
		t.Errorf(".npy: sample shape %v", d.SampleShape())
	}
}
