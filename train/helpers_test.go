package train

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npz"
)

// fixture reads one array of an .npz file in testdata into dst (*[]float64, *[]float32 or
// *[]int64) and returns its shape.
func fixture(t *testing.T, file, key string, dst any) []int {
	t.Helper()
	path := filepath.Join("testdata", file)
	f, err := npz.Open(path)
	if err != nil {
		t.Fatalf("%s: %v (regenerate with testdata/make_fixtures.py)", path, err)
	}
	defer f.Close()
	name := key + ".npy"
	h := f.Header(name)
	if h == nil {
		t.Fatalf("%s: no array %q", path, key)
	}
	if err := f.Read(name, dst); err != nil {
		t.Fatalf("%s: %s: %v", path, key, err)
	}
	return slices.Clone(h.Descr.Shape)
}

func fixture64(t *testing.T, file, key string) []float64 {
	var v []float64
	fixture(t, file, key, &v)
	return v
}

func fixture32(t *testing.T, file, key string) []float32 {
	var v []float32
	fixture(t, file, key, &v)
	return v
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// relErr is |a−b| / max(|b|, floor).
func relErr(a, b, floor float64) float64 {
	return math.Abs(a-b) / math.Max(math.Abs(b), floor)
}
