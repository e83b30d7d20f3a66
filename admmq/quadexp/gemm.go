package quadexp

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmFunc computes C = A·B for row-major A (m×k), B (k×n) and C (m×n).
type gemmFunc func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int)

// gonumDgemm is the pure-Go fallback, about five times slower than OpenBLAS here.
func gonumDgemm() gemmFunc {
	var impl gonum.Implementation
	return func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
		if m == 0 || n == 0 {
			return
		}
		impl.Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
}
