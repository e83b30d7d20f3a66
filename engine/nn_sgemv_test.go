package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmOneRow checks nnSgemm and nnSgemmLD on products of one row, which go to the
// BLAS's Sgemv, against a float64 reference: both transpositions of each operand,
// leading dimensions wider than the operands (a transposed row then lies lda apart),
// alpha and beta, C not read when beta is 0, on gonum's BLAS and on QTOOL_BLAS's.
func TestSgemmOneRow(t *testing.T) {
	ctxs := map[string]*Context{"go": nntGoCtx(1), "env": nntCtx(t, 2)}
	for name, ctx := range ctxs {
		for _, n := range []int{1, 37, 1000} {
			for _, k := range []int{1, 300} {
				for _, ta := range []bool{false, true} {
					for _, tb := range []bool{false, true} {
						for _, ld := range []bool{false, true} {
							for _, ab := range [][2]float32{{1, 0}, {0.5, 1}} {
								t.Run(fmt.Sprintf("%s/n%d/k%d/ta%v/tb%v/ld%v/beta%v", name, n, k, ta, tb, ld, ab[1]), func(t *testing.T) {
									oneRowCase(t, ctx, n, k, ta, tb, ld, ab[0], ab[1])
								})
							}
						}
					}
				}
			}
		}
	}
}

func oneRowCase(t *testing.T, ctx *Context, n, k int, ta, tb, ld bool, alpha, beta float32) {
	r := rand.New(rand.NewPCG(uint64(n), uint64(k)))
	pad := 0
	if ld {
		pad = 3
	}
	// op(A) is 1 × k: A is 1 × k (lda ≥ k) or k × 1 (lda ≥ 1); op(B) is k × n: B is
	// k × n (ldb ≥ n) or n × k (ldb ≥ k).
	lda, arows := k+pad, 1
	if ta {
		lda, arows = 1+pad, k
	}
	ldb, brows := n+pad, k
	if tb {
		ldb, brows = k+pad, n
	}
	a := make([]float32, arows*lda)
	b := make([]float32, brows*ldb)
	for i := range a {
		a[i] = r.Float32()*2 - 1
	}
	for i := range b {
		b[i] = r.Float32()*2 - 1
	}
	c0 := make([]float32, n)
	for i := range c0 {
		c0[i] = r.Float32()*2 - 1
	}
	aAt := func(p int) float64 {
		if ta {
			return float64(a[p*lda])
		}
		return float64(a[p])
	}
	bAt := func(p, j int) float64 {
		if tb {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	want := make([]float64, n)
	scale := make([]float64, n)
	for j := range n {
		var s, m float64
		for p := range k {
			s += aAt(p) * bAt(p, j)
			m += math.Abs(aAt(p) * bAt(p, j))
		}
		want[j] = float64(alpha) * s
		scale[j] = math.Abs(float64(alpha))*m + 1
		if beta != 0 {
			want[j] += float64(beta) * float64(c0[j])
			scale[j] += math.Abs(float64(beta) * float64(c0[j]))
		}
	}
	for _, withLD := range []bool{false, true} {
		if !withLD && ld {
			continue // nnSgemm derives the leading dimensions from the shapes
		}
		c := make([]float32, n)
		if beta == 0 {
			for i := range c {
				c[i] = float32(math.NaN()) // must not be read
			}
		} else {
			copy(c, c0)
		}
		if withLD {
			nnSgemmLD(ctx.BLAS, ta, tb, 1, n, k, alpha, a, lda, b, ldb, beta, c, n)
		} else {
			nnSgemm(ctx.BLAS, ta, tb, 1, n, k, alpha, a, b, beta, c)
		}
		for j := range n {
			if d := math.Abs(float64(c[j]) - want[j]); !(d <= 1e-6*scale[j]) {
				t.Fatalf("LD %v: C[%d] = %v, want %v (|error| %g, bound %g)", withLD, j, c[j], want[j], d, 1e-6*scale[j])
			}
		}
	}
}
