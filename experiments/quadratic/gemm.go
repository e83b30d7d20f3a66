package quadratic

import "math"

// gemmFunc computes C = A·B for row-major A (m×k), B (k×n) and C (m×n).
type gemmFunc func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int)

// gemmFMA computes C = A·B with each c_ij the chain of fused multiply-adds
// fma(a_i,k−1, b_k−1,j, … fma(a_i0, b_0j, +0)), in order of k. It defines the arithmetic
// that every kernel (gemmAVX2, gemmSIMD) must reproduce bit for bit, so that
// every backend, and every position of a row in a block, gives the same bits: a run's
// result must not depend on which other runs share its product.
func gemmFMA(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		ai := a[i*lda : i*lda+k]
		j := 0
		// Four columns at a time keep four independent chains in registers.
		for ; j+4 <= n; j += 4 {
			var c0, c1, c2, c3 float64
			for p, aip := range ai {
				bp := b[p*ldb+j : p*ldb+j+4]
				c0 = math.FMA(aip, bp[0], c0)
				c1 = math.FMA(aip, bp[1], c1)
				c2 = math.FMA(aip, bp[2], c2)
				c3 = math.FMA(aip, bp[3], c3)
			}
			ci[j], ci[j+1], ci[j+2], ci[j+3] = c0, c1, c2, c3
		}
		for ; j < n; j++ {
			var cj float64
			for p, aip := range ai {
				cj = math.FMA(aip, b[p*ldb+j], cj)
			}
			ci[j] = cj
		}
	}
}
