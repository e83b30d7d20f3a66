//go:build !purego

package quadratic

import "golang.org/x/sys/cpu"

// haveSIMD reports whether the AVX-512 passes of kernels_amd64.s can run here.
// golang.org/x/sys/cpu applies GODEBUG (cpu.avx512f=off) to these flags, which is how
// tests run the other kernels on an AVX-512 machine.
func haveSIMD() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ }

// haveAVX2 reports whether gemm256 (gemm_amd64.s) can run here.
func haveAVX2() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

//go:noescape
func gemm256(m, n, k int, a *float64, lda int, b *float64, ldb int, c *float64, ldc int)

// gemmAVX2 is gemmFMA in AVX2 assembly for the columns that fill whole 4-lane registers;
// the remaining columns (and k = 0) go to gemmFMA, which computes the same bits.
func gemmAVX2(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	n4 := n &^ 3
	if m == 0 || n4 == 0 || k == 0 {
		gemmFMA(m, n, k, a, lda, b, ldb, c, ldc)
		return
	}
	_, _, _ = a[(m-1)*lda+k-1], b[(k-1)*ldb+n4-1], c[(m-1)*ldc+n4-1]
	gemm256(m, n4, k, &a[0], lda, &b[0], ldb, &c[0], ldc)
	if n4 < n {
		gemmFMA(m, n-n4, k, a, lda, b[n4:], ldb, c[n4:], ldc)
	}
}

//go:noescape
func yQ512(x, l, y, w, b *float64, n, d int, inv, iv, v, rho float64)

//go:noescape
func zS512(x, l, z, zt, sq *float64, n int, inv, iv, v float64)

//go:noescape
func yS512(z, zt, y, w, l, b, s *float64, n, d int, rho float64)

//go:noescape
func yR512(x, l, y, w, b *float64, keys, thrs *uint64, offs *int, n, d int, inv, iv, v, rho float64)

//go:noescape
func dual512(x, xp, y, l *float64, flags *int64, n, d int, rho float64) (candidates int)

//go:noescape
func gemm512(m, n, k int, a *float64, lda int, b *float64, ldb int, c *float64, ldc int)

// The wrappers take the same arguments as the Go passes; callers check simdFits first.

func yQSIMD(x, l, y, w, b []float64, c passConsts) {
	if len(x) == 0 {
		return
	}
	d := len(b)
	_, _, _ = l[len(x)-1], y[len(x)-1], w[len(x)-1]
	yQ512(&x[0], &l[0], &y[0], &w[0], &b[0], len(x)/d, d, c.inv, c.iv, c.v, c.rho)
}

func zSSIMD(x, l, z, zt, sq []float64, c passConsts) {
	if len(x) == 0 {
		return
	}
	_, _, _, _ = l[len(x)-1], z[len(x)-1], zt[len(x)-1], sq[len(x)-1]
	zS512(&x[0], &l[0], &z[0], &zt[0], &sq[0], len(x), c.inv, c.iv, c.v)
}

func ySSIMD(z, zt, y, w, l, b, s []float64, c passConsts) {
	if len(s) == 0 {
		return
	}
	d := len(b)
	e := len(s)*d - 1
	_, _, _, _, _ = z[e], zt[e], y[e], w[e], l[e]
	yS512(&z[0], &zt[0], &y[0], &w[0], &l[0], &b[0], &s[0], len(s), d, c.rho)
}

func yRSIMD(x, l, y, w, b []float64, keys, thrs []uint64, offs []int, c passConsts) {
	if len(keys) == 0 {
		return
	}
	d := len(b)
	e := len(keys)*d - 1
	_, _, _, _, _, _ = x[e], l[e], y[e], w[e], thrs[len(keys)-1], offs[len(keys)-1]
	yR512(&x[0], &l[0], &y[0], &w[0], &b[0], &keys[0], &thrs[0], &offs[0], len(keys), d, c.inv, c.iv, c.v, c.rho)
}

func dualSIMD(x, xp, y, l []float64, flags []int64, d int, rho float64) (candidates int) {
	if len(flags) == 0 {
		return 0
	}
	e := len(flags)*d - 1
	_, _, _, _ = x[e], xp[e], y[e], l[e]
	return dual512(&x[0], &xp[0], &y[0], &l[0], &flags[0], len(flags), d, rho)
}

func gemmSIMD(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	_, _, _ = a[(m-1)*lda+k-1], b[(k-1)*ldb+n-1], c[(m-1)*ldc+n-1]
	gemm512(m, n, k, &a[0], lda, &b[0], ldb, &c[0], ldc)
}
