package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/qtool/qtool/internal/testenv"
)

// requireOpenBLAS loads OpenBLAS or skips; under CI=true a missing library is
// a failure, because CI installs it.
func requireOpenBLAS(t testing.TB) *OpenBLAS {
	t.Helper()
	if err := platformErr(); err != nil {
		t.Skip(err)
	}
	o, err := LoadOpenBLAS(Options{})
	if err != nil {
		testenv.Missing(t, "OpenBLAS not available (%v); to run these tests: apt-get install libopenblas0", err)
	}
	return o
}

var transposes = []gblas.Transpose{gblas.NoTrans, gblas.Trans, gblas.ConjTrans}

const eps32 = 0x1p-23

// randSlice fills n floats uniformly in [-1, 1).
func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 2*rng.Float32() - 1
	}
	return s
}

// pad is the sentinel written into the gaps between rows (ld > width) and
// after the last element; no routine may change it.
const pad = float32(-12345.5)

// randMatrix returns an r×c row-major matrix with leading dimension ld whose
// padding holds the sentinel.
func randMatrix(rng *rand.Rand, r, c, ld int) []float32 {
	s := make([]float32, max(r*ld, 1)+3)
	for i := range s {
		s[i] = pad
	}
	for i := range r {
		for j := range c {
			s[i*ld+j] = 2*rng.Float32() - 1
		}
	}
	return s
}

// gemmBound is a forward error bound for one element of alpha*op(A)*op(B) +
// beta*C computed in float32 by any summation order: (k+2)·eps times the sum
// of the magnitudes of the terms (Higham, Accuracy and Stability of Numerical
// Algorithms, §3.5), evaluated in float64.
func gemmBound(aTrans, bTrans bool, i, j, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta, c0 float32) float64 {
	s := math.Abs(float64(beta) * float64(c0))
	if beta == 0 {
		s = 0
	}
	for l := range k {
		var av, bv float32
		if aTrans {
			av = a[l*lda+i]
		} else {
			av = a[i*lda+l]
		}
		if bTrans {
			bv = b[j*ldb+l]
		} else {
			bv = b[l*ldb+j]
		}
		s += math.Abs(float64(alpha) * float64(av) * float64(bv))
	}
	return float64(k+2) * eps32 * s
}

func TestSgemmMatchesGonum(t *testing.T) {
	o := requireOpenBLAS(t)
	rng := rand.New(rand.NewPCG(1, 1))
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 1, 33}, {1, 19, 4}, {2, 3, 0}, {65, 67, 129}, {130, 3, 257}, {31, 200, 9}}
	nan := float32(math.NaN())
	for _, tA := range transposes {
		for _, tB := range transposes {
			for _, sz := range sizes {
				for _, extra := range []int{0, 3} {
					for _, ab := range [][2]float32{{1, 0}, {1, 1}, {-0.5, 2.5}, {0, 0.5}, {0, 1}, {1.5, 0}} {
						m, n, k := sz[0], sz[1], sz[2]
						alpha, beta := ab[0], ab[1]
						aT, bT := tA != gblas.NoTrans, tB != gblas.NoTrans
						ar, ac := m, k
						if aT {
							ar, ac = k, m
						}
						br, bc := k, n
						if bT {
							br, bc = n, k
						}
						lda, ldb, ldc := max(ac, 1)+extra, max(bc, 1)+extra, n+extra
						a := randMatrix(rng, ar, ac, lda)
						b := randMatrix(rng, br, bc, ldb)
						c0 := randMatrix(rng, m, n, ldc)
						if beta == 0 {
							// BLAS: with beta == 0, C is output only; garbage
							// (NaN) in it must not reach the result.
							for i := range m {
								for j := range n {
									c0[i*ldc+j] = nan
								}
							}
						}
						name := fmt.Sprintf("%c%c/m%d_n%d_k%d/ld+%d/alpha%g_beta%g", tA, tB, m, n, k, extra, alpha, beta)
						want := append([]float32(nil), c0...)
						gonum.Implementation{}.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, want, ldc)
						got := append([]float32(nil), c0...)
						o.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, got, ldc)
						for idx := range got {
							i, j := idx/ldc, idx%ldc
							if i >= m || j >= n {
								if math.Float32bits(got[idx]) != math.Float32bits(c0[idx]) {
									t.Fatalf("%s: padding element %d changed from %v to %v", name, idx, c0[idx], got[idx])
								}
								continue
							}
							if math.IsNaN(float64(got[idx])) || math.IsNaN(float64(want[idx])) {
								t.Fatalf("%s: C[%d,%d] = %v (gonum %v), want a number", name, i, j, got[idx], want[idx])
							}
							tol := gemmBound(aT, bT, i, j, k, alpha, a, lda, b, ldb, beta, c0[idx])
							if d := math.Abs(float64(got[idx] - want[idx])); d > 2*tol {
								t.Fatalf("%s: C[%d,%d] = %v, gonum %v, |diff| %g > 2×bound %g", name, i, j, got[idx], want[idx], d, tol)
							}
						}
					}
				}
			}
		}
	}
}

// TestSgemmAlphaZeroDoesNotReadAB checks the reference-BLAS rule that with
// alpha == 0 the operands are not referenced: NaN in A or B gives C = beta*C,
// for both backends and both sides of the small-problem threshold. gonum and
// OpenBLAS 0.3.21 on their own both propagate such NaN when beta != 1.
func TestSgemmAlphaZeroDoesNotReadAB(t *testing.T) {
	check := func(t *testing.T, impl gblas.Float32) {
		nan := float32(math.NaN())
		for _, n := range []int{2, 40} {
			a := make([]float32, n*n)
			b := make([]float32, n*n)
			c := make([]float32, n*n)
			for i := range c {
				a[i], b[i], c[i] = 1, 1, float32(i)
			}
			a[0], b[n+1] = nan, nan
			impl.Sgemm(gblas.NoTrans, gblas.NoTrans, n, n, n, 0, a, n, b, n, 3, c, n)
			for i := range c {
				if c[i] != 3*float32(i) {
					t.Fatalf("n=%d: C[%d] = %v, want %v", n, i, c[i], 3*float32(i))
				}
			}
		}
	}
	t.Run("go", func(t *testing.T) { check(t, Go{}) })
	t.Run("openblas", func(t *testing.T) { check(t, requireOpenBLAS(t)) })
}

// vecIndex returns the storage index of element i of a strided vector of n
// elements, walking backwards for negative increments as BLAS does.
func vecIndex(i, n, inc int) int {
	if inc < 0 {
		return (n - 1 - i) * -inc
	}
	return i * inc
}

func randVec(rng *rand.Rand, n, inc int) []float32 {
	if inc < 0 {
		inc = -inc
	}
	s := make([]float32, max((n-1)*inc+1, 1)+2)
	for i := range s {
		s[i] = pad
	}
	for i := range n {
		s[i*inc] = 2*rng.Float32() - 1
	}
	return s
}

func TestSgemvMatchesGonum(t *testing.T) {
	o := requireOpenBLAS(t)
	rng := rand.New(rand.NewPCG(2, 1))
	nan := float32(math.NaN())
	for _, tA := range transposes {
		for _, sz := range [][2]int{{1, 1}, {3, 7}, {33, 1}, {1, 40}, {129, 65}, {257, 300}, {300, 513}, {1, 70001}, {70001, 1}} {
			for _, extra := range []int{0, 5} {
				for _, inc := range [][2]int{{1, 1}, {2, 3}, {-1, 1}, {1, -2}, {-3, -1}} {
					for _, ab := range [][2]float32{{1, 0}, {1, 1}, {-0.5, 2.5}, {0, 0.5}, {0, 0}} {
						m, n := sz[0], sz[1]
						incX, incY := inc[0], inc[1]
						alpha, beta := ab[0], ab[1]
						lenX, lenY := n, m
						if tA != gblas.NoTrans {
							lenX, lenY = m, n
						}
						lda := n + extra
						a := randMatrix(rng, m, n, lda)
						x := randVec(rng, lenX, incX)
						y0 := randVec(rng, lenY, incY)
						if beta == 0 {
							for i := range lenY {
								y0[vecIndex(i, lenY, incY)] = nan
							}
						}
						name := fmt.Sprintf("%c/m%d_n%d/ld+%d/inc%d,%d/alpha%g_beta%g", tA, m, n, extra, incX, incY, alpha, beta)
						want := append([]float32(nil), y0...)
						gonum.Implementation{}.Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, want, incY)
						got := append([]float32(nil), y0...)
						o.Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, got, incY)
						absInc := max(incY, -incY)
						for idx := range got {
							if idx%absInc != 0 || idx/absInc >= lenY {
								if math.Float32bits(got[idx]) != math.Float32bits(y0[idx]) {
									t.Fatalf("%s: y[%d] outside the vector changed from %v to %v", name, idx, y0[idx], got[idx])
								}
								continue
							}
							if math.IsNaN(float64(got[idx])) || math.IsNaN(float64(want[idx])) {
								t.Fatalf("%s: y[%d] = %v (gonum %v), want a number", name, idx, got[idx], want[idx])
							}
							// Element idx of storage is vector element i.
							i := idx / absInc
							if incY < 0 {
								i = lenY - 1 - i
							}
							var s float64
							for l := range lenX {
								var av float32
								if tA != gblas.NoTrans {
									av = a[l*lda+i]
								} else {
									av = a[i*lda+l]
								}
								s += math.Abs(float64(alpha) * float64(av) * float64(x[vecIndex(l, lenX, incX)]))
							}
							if beta != 0 {
								s += math.Abs(float64(beta) * float64(y0[idx]))
							}
							tol := float64(lenX+2) * eps32 * s
							if d := math.Abs(float64(got[idx] - want[idx])); d > 2*tol {
								t.Fatalf("%s: y[%d] = %v, gonum %v, |diff| %g > 2×bound %g", name, i, got[idx], want[idx], d, tol)
							}
						}
					}
				}
			}
		}
	}
}

func TestLevel1MatchesGonum(t *testing.T) {
	o := requireOpenBLAS(t)
	g := gonum.Implementation{}
	rng := rand.New(rand.NewPCG(3, 1))
	nan := float32(math.NaN())
	for _, n := range []int{0, 1, 7, minLevel1 - 1, minLevel1, minLevel1 + 13, 3*minLevel1 + 1} {
		for _, inc := range [][2]int{{1, 1}, {2, 3}, {-1, 1}, {1, -2}, {-3, -2}} {
			incX, incY := inc[0], inc[1]
			x := randVec(rng, n, incX)
			y := randVec(rng, n, incY)
			name := fmt.Sprintf("n%d/inc%d,%d", n, incX, incY)

			var mag float64
			for i := range n {
				mag += math.Abs(float64(x[vecIndex(i, n, incX)]) * float64(y[vecIndex(i, n, incY)]))
			}
			want, got := g.Sdot(n, x, incX, y, incY), o.Sdot(n, x, incX, y, incY)
			if d := math.Abs(float64(got - want)); d > 2*float64(n+2)*eps32*mag {
				t.Errorf("Sdot %s = %v, gonum %v", name, got, want)
			}

			for _, alpha := range []float32{0, 1, -0.75} {
				wy := append([]float32(nil), y...)
				g.Saxpy(n, alpha, x, incX, wy, incY)
				gy := append([]float32(nil), y...)
				o.Saxpy(n, alpha, x, incX, gy, incY)
				for i := range gy {
					// One fused or unfused multiply-add per element: the
					// results may differ by at most one rounding.
					if d := math.Abs(float64(gy[i] - wy[i])); d > 2*eps32*(math.Abs(float64(wy[i]))+math.Abs(float64(y[i]))) {
						t.Fatalf("Saxpy %s alpha %g: y[%d] = %v, gonum %v", name, alpha, i, gy[i], wy[i])
					}
				}

				xs := append([]float32(nil), x...)
				if alpha == 0 && n > 0 && incX > 0 {
					// Scaling by zero writes zeros; NaN must not survive.
					xs[0] = nan
				}
				wx := append([]float32(nil), xs...)
				g.Sscal(n, alpha, wx, incX)
				gx := append([]float32(nil), xs...)
				o.Sscal(n, alpha, gx, incX)
				for i := range gx {
					if math.Float32bits(gx[i]) != math.Float32bits(wx[i]) {
						t.Fatalf("Sscal %s alpha %g: x[%d] = %v, gonum %v", name, alpha, i, gx[i], wx[i])
					}
				}
			}
		}
	}
}

// panicOf runs f and returns the value it panicked with, or nil.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestPanicsMatchGonum(t *testing.T) {
	o := requireOpenBLAS(t)
	g := gonum.Implementation{}
	big := make([]float32, 5*minLevel1)
	s := make([]float32, 12)
	type call struct {
		name string
		run  func(gblas.Float32)
	}
	calls := []call{
		{"gemm bad tA", func(b gblas.Float32) { b.Sgemm('X', gblas.NoTrans, 2, 2, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm bad tB", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, 0, 2, 2, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm m<0", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, -1, 2, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm n<0", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, -1, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm k<0", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 2, -1, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm lda", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 2, 3, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm lda trans", func(b gblas.Float32) { b.Sgemm(gblas.Trans, gblas.NoTrans, 3, 2, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"gemm ldb", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 3, 2, 1, s, 2, s, 2, 0, s, 3) }},
		{"gemm ldb trans", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.Trans, 2, 2, 3, 1, s, 3, s, 2, 0, s, 2) }},
		{"gemm ldc", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 3, 2, 1, s, 2, s, 3, 0, s, 2) }},
		{"gemm short a", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 3, 2, 4, 1, s[:11], 4, s, 2, 0, s, 2) }},
		{"gemm short b", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 3, 4, 1, s, 4, s[:11], 3, 0, s, 3) }},
		{"gemm short c", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 4, 3, 1, 1, s, 1, s, 3, 0, s[:11], 3) }},
		{"gemm empty ok", func(b gblas.Float32) { b.Sgemm(gblas.NoTrans, gblas.NoTrans, 0, 3, 1, 1, nil, 1, nil, 3, 0, nil, 3) }},
		{"gemv bad t", func(b gblas.Float32) { b.Sgemv('X', 2, 2, 1, s, 2, s, 1, 0, s, 1) }},
		{"gemv m<0", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, -2, 2, 1, s, 2, s, 1, 0, s, 1) }},
		{"gemv n<0", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 2, -2, 1, s, 2, s, 1, 0, s, 1) }},
		{"gemv lda", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 2, 3, 1, s, 2, s, 1, 0, s, 1) }},
		{"gemv incx", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 2, 2, 1, s, 2, s, 0, 0, s, 1) }},
		{"gemv incy", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 2, 2, 1, s, 2, s, 1, 0, s, 0) }},
		{"gemv short x", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 2, 4, 1, s, 4, s[:3], 1, 0, s, 1) }},
		{"gemv short x neg", func(b gblas.Float32) { b.Sgemv(gblas.Trans, 4, 2, 1, s, 2, s[:6], -2, 0, s, 1) }},
		{"gemv short y", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 4, 2, 1, s, 2, s, 1, 0, s[:7], 2) }},
		{"gemv short a", func(b gblas.Float32) { b.Sgemv(gblas.NoTrans, 4, 3, 1, s[:11], 3, s, 1, 0, s, 1) }},
		{"axpy incx", func(b gblas.Float32) { b.Saxpy(len(big), 1, big, 0, big, 1) }},
		{"axpy incy", func(b gblas.Float32) { b.Saxpy(len(big), 1, big, 1, big, 0) }},
		{"axpy n<0", func(b gblas.Float32) { b.Saxpy(-1, 1, big, 1, big, 1) }},
		{"axpy short x", func(b gblas.Float32) { b.Saxpy(len(big), 1, big[1:], 1, big, 1) }},
		{"axpy short y", func(b gblas.Float32) { b.Saxpy(len(big)/2, 1, big, 1, big, -2) }},
		{"axpy short small", func(b gblas.Float32) { b.Saxpy(5, 1, s, 3, s, 1) }},
		{"dot incx", func(b gblas.Float32) { b.Sdot(len(big), big, 0, big, 1) }},
		{"dot n<0", func(b gblas.Float32) { b.Sdot(-3, big, 1, big, 1) }},
		{"dot short x", func(b gblas.Float32) { b.Sdot(len(big), big[1:], 1, big, 1) }},
		{"dot short y neg", func(b gblas.Float32) { b.Sdot(len(big)/2, big, 1, big, -2) }},
		{"scal incx 0", func(b gblas.Float32) { b.Sscal(len(big), 2, big, 0) }},
		{"scal incx<0 ok", func(b gblas.Float32) { b.Sscal(len(big), 2, big, -1) }},
		{"scal n<0", func(b gblas.Float32) { b.Sscal(-1, 2, big, 1) }},
		{"scal short", func(b gblas.Float32) { b.Sscal(len(big), 2, big, 2) }},
	}
	for _, c := range calls {
		want := panicOf(func() { c.run(g) })
		got := panicOf(func() { c.run(o) })
		if got != want {
			t.Errorf("%s: OpenBLAS panics with %v, gonum with %v", c.name, got, want)
		}
	}
}

// TestConcurrentSgemm runs products from two goroutines at once, as the
// engine does, and checks each against gonum.
func TestConcurrentSgemm(t *testing.T) {
	o := requireOpenBLAS(t)
	const m, n, k = 96, 130, 257
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(10, uint64(w)))
			a, b := randSlice(rng, m*k), randSlice(rng, k*n)
			want := make([]float32, m*n)
			gonum.Implementation{}.Sgemm(gblas.NoTrans, gblas.NoTrans, m, n, k, 1, a, k, b, n, 0, want, n)
			for range 20 {
				got := make([]float32, m*n)
				o.Sgemm(gblas.NoTrans, gblas.NoTrans, m, n, k, 1, a, k, b, n, 0, got, n)
				for i := range got {
					tol := gemmBound(false, false, i/n, i%n, k, 1, a, k, b, n, 0, 0)
					if d := math.Abs(float64(got[i] - want[i])); d > 2*tol {
						errs[w] = fmt.Errorf("goroutine %d: C[%d] = %v, gonum %v", w, i, got[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestSelect(t *testing.T) {
	impl, info, err := Select(ModeGo)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := impl.(Go); !ok || info.Name != ModeGo {
		t.Errorf("Select(go) = %T, %+v", impl, info)
	}

	if _, _, err := Select("fast"); err == nil || !strings.Contains(err.Error(), "auto, go or openblas") {
		t.Errorf("Select(fast) error = %v, want one naming the valid modes", err)
	}

	_, _, err = SelectWith(ModeOpenBLAS, Options{Path: "/nonexistent/libopenblas.so.0"})
	wantMsg := "apt-get install libopenblas0"
	if platformErr() != nil {
		wantMsg = "use QTOOL_BLAS=go"
	}
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("openblas with missing library: error = %v, want one containing %q", err, wantMsg)
	}
	impl, info, err = SelectWith(ModeAuto, Options{Path: "/nonexistent/libopenblas.so.0"})
	if err != nil || info.Name != ModeGo || info.Fallback == "" {
		t.Errorf("auto with missing library = %T, %+v, %v; want go with a fallback reason", impl, info, err)
	}
	if _, ok := impl.(Go); !ok {
		t.Errorf("auto with missing library = %T, want Go", impl)
	}
	if _, _, err := SelectWith(ModeOpenBLAS, Options{Threads: -1}); err == nil {
		t.Error("Threads -1 accepted")
	}

	o := requireOpenBLAS(t)
	impl, info, err = Select(ModeAuto)
	if err != nil || info.Name != ModeOpenBLAS || info.Library == "" || info.Threads < 1 {
		t.Fatalf("Select(auto) with OpenBLAS installed = %T, %+v, %v", impl, info, err)
	}
	if _, ok := impl.(*OpenBLAS); !ok {
		t.Errorf("Select(auto) = %T, want *OpenBLAS", impl)
	}
	old := o.Threads()
	defer o.SetThreads(old)
	if _, info, err := SelectWith(ModeOpenBLAS, Options{Threads: 1}); err != nil || info.Threads != 1 {
		t.Errorf("SelectWith(openblas, Threads 1) = %+v, %v", info, err)
	}
}

func TestModeFromEnv(t *testing.T) {
	t.Setenv(EnvVar, "")
	if m := ModeFromEnv(); m != ModeAuto {
		t.Errorf("unset: %q, want auto", m)
	}
	t.Setenv(EnvVar, " OpenBLAS ")
	if m := ModeFromEnv(); m != ModeOpenBLAS {
		t.Errorf("' OpenBLAS ': %q, want openblas", m)
	}
}

// TestGoSgemvStaysInVector checks that Go.Sgemv leaves the elements of y's
// buffer past the vector alone in every branch, including the transposed,
// beta == 0, unit-stride case where gonum v0.17.0 clears the whole slice.
func TestGoSgemvStaysInVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	for _, tA := range transposes {
		for _, beta := range []float32{0, 1, 0.5} {
			for _, incY := range []int{1, 2, -1} {
				const m, n = 5, 3
				a, x := randSlice(rng, m*n), randSlice(rng, max(m, n))
				lenY := m
				if tA != gblas.NoTrans {
					lenY = n
				}
				absInc := max(incY, -incY)
				y := randVec(rng, lenY, incY)
				y0 := append([]float32(nil), y...)
				Go{}.Sgemv(tA, m, n, 1, a, n, x, 1, beta, y, incY)
				for i := (lenY-1)*absInc + 1; i < len(y); i++ {
					if y[i] != y0[i] {
						t.Errorf("%c beta %g incY %d: y[%d] past the vector changed from %v to %v", tA, beta, incY, i, y0[i], y[i])
					}
				}
			}
		}
	}
}

// TestFitsCInt checks the guard that keeps problems too large for OpenBLAS's
// 32-bit ints in Go.
func TestFitsCInt(t *testing.T) {
	if !fitsCInt(0, 1, -1, math.MaxInt32, math.MinInt32) {
		t.Error("values within int32 rejected")
	}
	if fitsCInt(1, math.MaxInt32+1) || fitsCInt(math.MinInt32-1) {
		t.Error("values outside int32 accepted")
	}
}
