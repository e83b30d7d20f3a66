package calib

import (
	"slices"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// The files under ../testmodels are made by testmodels/make.py with NumPy from the same
// sources calib reads directly, so the two paths must agree.

func needFile(t *testing.T, path string) {
	t.Helper()
	testenv.RequireFile(t, path, "run testmodels/make.py")
}

// TestFMNISTCalibMatchesIdx: fmnist-calib.npz holds the first 1000 Fashion-MNIST test images
// divided by 255 in NumPy; calib's idx reader must give the same float32 values and labels.
func TestFMNISTCalibMatchesIdx(t *testing.T) {
	const npzPath = "../testmodels/fmnist-calib.npz"
	needFile(t, npzPath)
	needFashion(t)
	in := Input{Shape: shape(-1, 1, 28, 28), Classes: 10}
	a := mustOpen(t, npzPath, in, Options{})
	b := mustOpen(t, fashionDir+"/t10k-images-idx3-ubyte.gz", in, Options{})
	xa, ya := readAll(t, a)
	idx := make([]int, a.Len())
	for i := range idx {
		idx[i] = i
	}
	xb := make([]float32, len(xa))
	yb := make([]int64, len(ya))
	if err := b.Read(idx, xb, yb); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 1000 || !slices.Equal(ya, yb) {
		t.Fatalf("%d samples; labels differ: %v vs %v", a.Len(), ya[:10], yb[:10])
	}
	for i := range xa {
		if xa[i] != xb[i] {
			t.Fatalf("value %d: npz %v, idx %v", i, xa[i], xb[i])
		}
	}
	// The MLP's flat input reads the same file.
	m := mustOpen(t, npzPath, Input{Shape: shape(-1, 784), Classes: 10}, Options{})
	if xm, _ := readAll(t, m); !slices.Equal(xm, xa) {
		t.Error("[N,1,28,28] → [N,784] changed the values")
	}
}

// TestDigitsCSVMatchesNpz: the digits test split as CSV and as .npz.
func TestDigitsCSVMatchesNpz(t *testing.T) {
	needFile(t, "../testmodels/digits-test.npz")
	needFile(t, "../testmodels/digits-test.csv")
	in := Input{Shape: shape(-1, 64), Classes: 10}
	a := mustOpen(t, "../testmodels/digits-test.npz", in, Options{})
	b := mustOpen(t, "../testmodels/digits-test.csv", in, Options{})
	xa, ya := readAll(t, a)
	xb, yb := readAll(t, b)
	if a.Len() != 450 || !slices.Equal(xa, xb) || !slices.Equal(ya, yb) {
		t.Errorf("npz (%d samples) and CSV (%d) differ", a.Len(), b.Len())
	}
}
