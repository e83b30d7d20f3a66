//go:build !amd64 || purego

package quadratic

// haveSIMD is false: the assembly passes exist for amd64 only. The Go passes compute the
// same bits.
func haveSIMD() bool { return false }

// haveAVX2 is false for the same reason.
func haveAVX2() bool { return false }

func gemmAVX2(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	gemmFMA(m, n, k, a, lda, b, ldb, c, ldc)
}

func yQSIMD(x, l, y, w, b []float64, c passConsts) { yQGo(x, l, y, w, b, c) }

func zSSIMD(x, l, z, zt, sq []float64, c passConsts) { zSGo(x, l, z, zt, sq, c) }

func ySSIMD(z, zt, y, w, l, b, s []float64, c passConsts) { ySGo(z, zt, y, w, l, b, s, c) }

func yRSIMD(x, l, y, w, b []float64, keys, thrs []uint64, offs []int, c passConsts) {
	yRGo(x, l, y, w, b, keys, thrs, offs, c)
}

func dualSIMD(x, xp, y, l []float64, flags []int64, d int, rho float64) (candidates int) {
	return dualGo(x, xp, y, l, flags, d, rho)
}

func gemmSIMD(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	gemmFMA(m, n, k, a, lda, b, ldb, c, ldc)
}
