//go:build linux && (amd64 || arm64)

package quadexp

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/qtool/qtool/internal/testenv"
)

// The allocation-free Fortran call must compute exactly what cblas_dgemm computes for the
// same row-major operands, and gemmFMA (and its assembly) must compute the same bits:
// OpenBLAS is the independent reference for the sequential FMA chain that every backend of
// the experiment uses.
func TestGemmMatchesOpenBLAS(t *testing.T) {
	h, err := purego.Dlopen("libopenblas.so.0", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		testenv.Missing(t, "OpenBLAS not found (apt-get install libopenblas0): %v", err)
	}
	var cblas func(order, transA, transB, m, n, k int32, alpha float64, a *float64, lda int32, b *float64, ldb int32, beta float64, c *float64, ldc int32)
	purego.RegisterLibFunc(&cblas, h, "cblas_dgemm")
	newGemm, _, err := openBLASDgemm()
	if err != nil {
		t.Fatal(err)
	}
	g := newGemm()
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {50, 16, 16}, {1050, 64, 64}, {7, 5, 3}}
	for _, d := range []int{8, 16, 32, 64} {
		for _, m := range []int{1, 3, 4, 5, 50, 133, 500} {
			sizes = append(sizes, [3]int{m, d, d})
		}
	}
	for _, sz := range sizes {
		m, n, k := sz[0], sz[1], sz[2]
		a, b := make([]float64, m*k), make([]float64, k*n)
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		for i := range b {
			b[i] = rng.NormFloat64()
		}
		c1, c2, c3 := make([]float64, m*n), make([]float64, m*n), make([]float64, m*n)
		g(m, n, k, a, k, b, n, c1, n)
		cblas(101, 111, 111, int32(m), int32(n), int32(k), 1, &a[0], int32(k), &b[0], int32(n), 0, &c2[0], int32(n))
		gemmFMA(m, n, k, a, k, b, n, c3, n)
		if !slices.Equal(c1, c2) {
			t.Fatalf("%v: dgemm_ and cblas_dgemm differ", sz)
		}
		if !bitsEqual(c1, c3) {
			t.Fatalf("%v: gemmFMA differs from OpenBLAS", sz)
		}
		if haveSIMD() && n%8 == 0 {
			c4 := make([]float64, m*n)
			gemmSIMD(m, n, k, a, k, b, n, c4, n)
			if !bitsEqual(c1, c4) {
				t.Fatalf("%v: AVX-512 product differs from OpenBLAS", sz)
			}
		}
		// SyscallN's variadic argument slice escapes (go:uintptrescapes): one allocation,
		// against a dozen through RegisterFunc's reflection.
		allocs := testing.AllocsPerRun(10, func() { g(m, n, k, a, k, b, n, c1, n) })
		if allocs > 1 {
			t.Errorf("%v: %v allocations per call, want at most 1", sz, allocs)
		}
	}
}
