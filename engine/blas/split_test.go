package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Products large enough to be cut into pieces must still be the right products (within
// the float32 error bound of gonum's result), and their bits must not depend on how many
// goroutines run the pieces: that is what keeps qtool's results independent of the thread
// count.
func TestSplitSgemmIndependentOfThreads(t *testing.T) {
	o := requireOpenBLAS(t)
	defer o.SetThreads(o.Threads())
	rng := rand.New(rand.NewPCG(3, 3))
	for _, sz := range [][3]int{{300, 200, 100}, {40, 500, 300}, {1000, 33, 257}, {17, 1100, 400}} {
		m, n, k := sz[0], sz[1], sz[2]
		if _, parts := splitParts(max(m, n), m*n*k); parts < 2 {
			t.Fatalf("%v: not split; the test needs a bigger shape", sz)
		}
		for _, tA := range transposes {
			for _, tB := range transposes {
				aT, bT := tA != gblas.NoTrans, tB != gblas.NoTrans
				ar, ac, br, bc := m, k, k, n
				if aT {
					ar, ac = k, m
				}
				if bT {
					br, bc = n, k
				}
				lda, ldb, ldc := ac+3, bc+1, n+2
				a, b := randMatrix(rng, ar, ac, lda), randMatrix(rng, br, bc, ldb)
				c0 := randMatrix(rng, m, n, ldc)
				const alpha, beta = 1.5, 0.5
				want := slices.Clone(c0)
				gonum.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
				var first []float32
				for _, threads := range []int{1, 2, 5} {
					o.SetThreads(threads)
					got := slices.Clone(c0)
					o.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc)
					name := fmt.Sprintf("%c%c/m%d_n%d_k%d/threads%d", tA, tB, m, n, k, threads)
					if first == nil {
						first = got
						for idx := range got {
							i, j := idx/ldc, idx%ldc
							if i >= m || j >= n {
								if got[idx] != c0[idx] {
									t.Fatalf("%s: padding element %d changed", name, idx)
								}
								continue
							}
							tol := gemmBound(aT, bT, i, j, k, alpha, a, lda, b, ldb, beta, c0[idx])
							if d := math.Abs(float64(got[idx] - want[idx])); !(d <= 2*tol) {
								t.Fatalf("%s: C[%d,%d] = %v, gonum %v, |diff| %g > 2×bound %g", name, i, j, got[idx], want[idx], d, tol)
							}
						}
					} else if !slices.Equal(got, first) {
						t.Fatalf("%s: different bits than with 1 thread", name)
					}
				}
			}
		}
	}
}

func TestSplitSgemvIndependentOfThreads(t *testing.T) {
	o := requireOpenBLAS(t)
	defer o.SetThreads(o.Threads())
	rng := rand.New(rand.NewPCG(4, 4))
	for _, sz := range [][2]int{{3000, 1500}, {700, 7000}} {
		m, n := sz[0], sz[1]
		for _, tA := range transposes {
			for _, inc := range [][2]int{{1, 1}, {2, 3}, {-1, 1}, {1, -2}} {
				incX, incY := inc[0], inc[1]
				lenX, lenY := n, m
				if tA != gblas.NoTrans {
					lenX, lenY = m, n
				}
				lda := n + 1
				a := randMatrix(rng, m, n, lda)
				x, y0 := randVec(rng, lenX, incX), randVec(rng, lenY, incY)
				want := slices.Clone(y0)
				gonum.Implementation{}.Sgemv(tA, m, n, 1, a, lda, x, incX, 0.5, want, incY)
				var first []float32
				for _, threads := range []int{1, 2, 5} {
					o.SetThreads(threads)
					got := slices.Clone(y0)
					o.Sgemv(tA, m, n, 1, a, lda, x, incX, 0.5, got, incY)
					name := fmt.Sprintf("%c/m%d_n%d/inc%d,%d/threads%d", tA, m, n, incX, incY, threads)
					if first != nil {
						if !slices.Equal(got, first) {
							t.Fatalf("%s: different bits than with 1 thread", name)
						}
						continue
					}
					first = got
					for idx := range got {
						// Loose here (gemv's bound is checked in TestSgemvMatchesGonum):
						// a misplaced piece is off by O(1), not by rounding.
						if d := math.Abs(float64(got[idx] - want[idx])); !(d <= 1e-2) {
							t.Fatalf("%s: y[%d] = %v, gonum %v", name, idx, got[idx], want[idx])
						}
					}
				}
			}
		}
	}
}

// Loading must leave OpenBLAS single-threaded whatever OPENBLAS_NUM_THREADS (or an earlier
// caller) set, because OpenBLAS's own threading changes the bits with the thread count.
func TestLoadMakesOpenBLASSingleThreaded(t *testing.T) {
	o := requireOpenBLAS(t)
	o.lib.setNumThreads(2)
	o2, err := LoadOpenBLAS(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := o2.lib.getNumThreads(); n != 1 {
		t.Fatalf("OpenBLAS runs %d threads per call after loading, want 1", n)
	}
}
