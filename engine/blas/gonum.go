package blas

import (
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Go is gonum's pure-Go implementation with two corrections that make it
// behave like the reference BLAS and like OpenBLAS:
//   - Sgemv never writes outside the vector y. In gonum v0.17.0, Sgemv with
//     a transposed A, beta == 0 and incY == 1 clears all of y, not just its
//     first n elements, so a y that is a prefix view of a longer buffer
//     loses the rest of it.
//   - Sgemm with alpha == 0 does not read A and B, so NaN or Inf in them
//     cannot reach C; gonum multiplies them by zero when beta != 1.
type Go struct {
	gonum.Implementation
}

var _ gblas.Float32 = Go{}

// Sgemm computes C = alpha * op(A) * op(B) + beta * C exactly as gonum does
// except that with alpha == 0 it only scales C.
func (g Go) Sgemm(tA, tB gblas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	_, _, work := checkGemm(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	if !work {
		return
	}
	if alpha == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Sgemv computes y = alpha * op(A) * x + beta * y exactly as gonum does but
// touches only the elements of y that belong to the vector.
func (g Go) Sgemv(tA gblas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	_, lenY, work := checkGemv(tA, m, n, a, lda, x, incX, y, incY)
	if !work {
		return
	}
	g.Implementation.Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, y[:(lenY-1)*max(incY, -incY)+1], incY)
}
