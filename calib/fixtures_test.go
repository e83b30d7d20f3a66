package calib

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npy"
	"github.com/sbinet/npyio/npz"
)

// The fixtures under testdata/ were made by NumPy and PIL with testdata/make_fixtures.py.

func TestNumPyFixtures(t *testing.T) {
	want := make([]float32, 24)
	for i := range want {
		want[i] = (float32(i) - 5) / 4
	}
	y := "testdata/numpy/y_i4.npy"
	for _, name := range []string{"x_be", "x_f8", "x_fortran", "x_v2"} {
		d := mustOpen(t, "testdata/numpy/"+name+".npy", Input{Shape: shape(-1, 2, 3), Classes: 4}, Options{Labels: y})
		x, l := readAll(t, d)
		if !slices.Equal(x, want) || !slices.Equal(l, []int64{3, 0, 2, 1}) {
			t.Errorf("%s: x %v labels %v", name, x, l)
		}
	}
	_, err := openIn("testdata/numpy/x_be.npy", Input{Shape: shape(-1, 6), Classes: 4}, Options{Labels: "testdata/numpy/y_onehot.npy"})
	wantErr(t, err, "y_onehot.npy", "(N,)", "argmax")
	// Without the classes, (N, T) labels are one label per position of a sequence.
	d, err := openIn("testdata/numpy/x_be.npy", Input{Shape: shape(-1, 6)}, Options{Labels: "testdata/numpy/y_onehot.npy"})
	if err != nil {
		t.Fatal(err)
	}
	if w := LabelsPerSample(d); w != 4 {
		t.Errorf("(4, 4) labels: %d per sample, want 4", w)
	}
	d.Close()
	_, err = openIn("testdata/numpy/x_fortran.npy", Input{Shape: shape(-1, 6)}, Options{MaxMemory: 10})
	wantErr(t, err, "x_fortran.npy", "Fortran", "ascontiguousarray")

	// NHWC uint8 images from np.savez_compressed against the same images saved NCHW with
	// np.savez, and against the raw NHWC array read by npyio.
	var ref []uint8
	f, err := os.Open("testdata/numpy/nhwc_ref.npy")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := readNpyio(f, &ref); err != nil {
		t.Fatal(err)
	}
	in := Input{Shape: shape(-1, 3, 6, 7), Classes: 5}
	for _, mem := range []int64{0, 1} {
		a := mustOpen(t, "testdata/numpy/nhwc_compressed.npz", in, Options{XKey: "images", YKey: "labels", Layout: NHWC, NoScale: true, MaxMemory: mem})
		b := mustOpen(t, "testdata/numpy/nchw.npz", in, Options{NoScale: true, MaxMemory: mem})
		xa, ya := readAll(t, a)
		xb, yb := readAll(t, b)
		if !slices.Equal(xa, xb) || !slices.Equal(ya, yb) || !slices.Equal(ya, []int64{0, 1, 2, 3, 4}) {
			t.Fatalf("mem %d: NHWC and NCHW files differ (labels %v %v)", mem, ya, yb)
		}
		for i := range 5 {
			for c := range 3 {
				for h := range 6 {
					for w := range 7 {
						if got, want := xa[((i*3+c)*6+h)*7+w], float32(ref[((i*6+h)*7+w)*3+c]); got != want {
							t.Fatalf("(%d,%d,%d,%d) = %v, want %v", i, c, h, w, got, want)
						}
					}
				}
			}
		}
	}
}

func readNpyio(f *os.File, v *[]uint8) error { return npy.Read(f, v) }

// pilExpected reads PIL's outputs with npyio.
func pilExpected(t *testing.T, key string) []uint8 {
	t.Helper()
	f, err := os.Open("testdata/pil/expected.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v []uint8
	if err := npz.Read(f, key+".npy", &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

// TestPILResize compares --resize, --stretch and --grayscale with what PIL (as torchvision
// uses it) makes of the same PNGs: calib resamples in the same fixed-point arithmetic, so the
// results must be identical.
func TestPILResize(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	for _, c := range []struct {
		suffix string
		opts   Options
		ch     int64
	}{
		{"crop", Options{Resize: 16}, 3},
		{"stretch", Options{Resize: 16, Stretch: true}, 3},
		{"gray_crop", Options{Resize: 16, Color: Grayscale}, 1},
	} {
		c.opts.NoScale = true
		d := mustOpen(t, "testdata/pil/imgs", Input{Shape: shape(-1, 16, 16, c.ch)}, c.opts)
		x, _ := readAll(t, d)
		n := int(16 * 16 * c.ch)
		for i, name := range names {
			want := pilExpected(t, name+"_"+c.suffix)
			off, worst := 0, 0.0
			for k, v := range want {
				diff := float64(x[i*n+k]) - float64(v)
				if diff < 0 {
					diff = -diff
				}
				if diff > 0 {
					off++
				}
				worst = max(worst, diff)
			}
			if worst > 0 {
				t.Errorf("%s_%s: differs from PIL by up to %v (%d of %d values differ)", name, c.suffix, worst, off, n)
			}
		}
	}
	// Grayscale conversion alone must match PIL's convert("L") exactly.
	for _, name := range names {
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join("testdata/pil/imgs", name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, name+".png", b, false)
		d := mustOpen(t, dir, Input{Shape: shape(-1, 1, -1, -1)}, Options{Color: Grayscale, NoScale: true})
		x, _ := readAll(t, d)
		want := pilExpected(t, name+"_gray")
		for k, v := range want {
			if x[k] != float32(v) {
				t.Fatalf("%s: gray pixel %d = %v, PIL %d", name, k, x[k], v)
			}
		}
		if len(x) != len(want) {
			t.Fatalf("%s: %d gray pixels, PIL %d", name, len(x), len(want))
		}
	}
}
