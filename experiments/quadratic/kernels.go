package quadratic

import (
	"math"

	"github.com/qtool/qtool/admmq"
)

// The element-wise passes of one iteration over a block of runs stored as consecutive rows
// of length d. They are admmq's UpdateYQ, UpdateYR, SoftPrepare/SoftFactor/SoftApply and
// UpdateDual written for many runs at once; these Go versions define the arithmetic and the
// assembly versions (kernels_amd64.s) must give the same bits. Products are wrapped in
// float64() so that no compiler fuses them into a multiply-add.

// passConsts are the scalars of one job: 1/ρ, 1/v, v and ρ (v a power of two, so that
// z·(1/v) is exactly z/v).
type passConsts struct{ inv, iv, v, rho float64 }

func (c passConsts) proj(z float64) float64 { return c.v * admmq.RoundHalfUp(z*c.iv) }

// rhs is w = ρy − b − λ, the right-hand side of the exact x-update.
func (c passConsts) rhs(y, b, l float64) float64 { return float64(c.rho*y) - b - l }

// yQGo is the ADMM-Q y-update y = P_A(x + λ/ρ), fused with w.
func yQGo(x, l, y, w, b []float64, c passConsts) {
	d := len(b)
	for o := 0; o < len(x); o += d {
		x, l, y, w := x[o:o+d], l[o:o+d], y[o:o+d], w[o:o+d]
		for i := range x {
			y[i] = c.proj(x[i] + float64(l[i]*c.inv))
			w[i] = c.rhs(y[i], b[i], l[i])
		}
	}
}

// zSGo is the first half of the ADMM-S y-update: z = x + λ/ρ, zt = P_A(z) and the squares
// (zt − z)² whose sum, row by row and in order, is ‖z − P_A(z)‖².
func zSGo(x, l, z, zt, sq []float64, c passConsts) {
	for i := range x {
		z[i] = x[i] + float64(l[i]*c.inv)
		zt[i] = c.proj(z[i])
		sq[i] = float64((zt[i] - z[i]) * (zt[i] - z[i]))
	}
}

// rowSums writes the sum of each row of sq, added left to right, to out. Eight rows at a
// time keep eight independent additions in flight; each row's order is unchanged.
func rowSums(sq []float64, d int, out []float64) {
	n := len(out)
	r := 0
	for ; r+8 <= n; r += 8 {
		b := sq[r*d : (r+8)*d]
		r0, r1, r2, r3 := b[0:d], b[d:2*d], b[2*d:3*d], b[3*d:4*d]
		r4, r5, r6, r7 := b[4*d:5*d], b[5*d:6*d], b[6*d:7*d], b[7*d:8*d]
		var s0, s1, s2, s3, s4, s5, s6, s7 float64
		for i := range r0 {
			s0 += r0[i]
			s1 += r1[i]
			s2 += r2[i]
			s3 += r3[i]
			s4 += r4[i]
			s5 += r5[i]
			s6 += r6[i]
			s7 += r7[i]
		}
		out[r], out[r+1], out[r+2], out[r+3] = s0, s1, s2, s3
		out[r+4], out[r+5], out[r+6], out[r+7] = s4, s5, s6, s7
	}
	for ; r < n; r++ {
		var s float64
		for _, v := range sq[r*d : (r+1)*d] {
			s += v
		}
		out[r] = s
	}
}

// softFactor is admmq.SoftFactor(dist2, β, ρ) with bRho = β/ρ computed once per run:
// 1 when β/ρ > ‖z − P_A(z)‖ or the distance is 0, else β/(ρ‖z − P_A(z)‖).
func softFactor(dist2, bRho float64) float64 {
	d := math.Sqrt(dist2)
	if bRho > d || d == 0 {
		return 1
	}
	return bRho / d
}

// ySGo is the second half of the ADMM-S y-update with the factor s of each row
// (admmq.SoftFactor): y = P_A(z) exactly when s ≥ 1, else z + s·(P_A(z) − z); fused with w.
func ySGo(z, zt, y, w, l, b, s []float64, c passConsts) {
	d := len(b)
	for r, sr := range s {
		o := r * d
		z, zt, y, w, l := z[o:o+d], zt[o:o+d], y[o:o+d], w[o:o+d], l[o:o+d]
		if sr >= 1 {
			copy(y, zt)
		} else {
			for i := range y {
				y[i] = z[i] + float64(sr*(zt[i]-z[i]))
			}
		}
		for i := range y {
			w[i] = c.rhs(y[i], b[i], l[i])
		}
	}
}

// maskParams returns the key and threshold of admmq.Mask{P: p, Seed: seed, Iter: it,
// Stream: stream}: element e is updated when maskBit(key, thr, e). This restates admmq's
// counter-based generator so that the assembly can evaluate it eight elements at a time;
// TestMaskBitMatchesAdmmq holds the two together.
func maskParams(p float64, seed uint64, it int, stream uint64) (key, thr uint64) {
	key = splitmix(seed ^ splitmix(uint64(it)^splitmix(stream+0x632be59bd9b4e019)))
	if p >= 1 {
		return key, 1 << 53 // every 53-bit uniform is below
	}
	return key, uint64(p * (1 << 53))
}

const golden = 0x9e3779b97f4a7c15

func maskBit(key, thr uint64, e int) bool { return splitmix(key^uint64(e)*golden)>>11 < thr }

// yRGo is the ADMM-R y-update: ŷ = P_A(x + λ/ρ), and y_i = ŷ_i where the row's mask (key,
// threshold, and the element offset of the row within its mask) is on; fused with w.
func yRGo(x, l, y, w, b []float64, keys, thrs []uint64, offs []int, c passConsts) {
	d := len(b)
	for r := range keys {
		o := r * d
		x, l, y, w := x[o:o+d], l[o:o+d], y[o:o+d], w[o:o+d]
		for i := range x {
			if p := c.proj(x[i] + float64(l[i]*c.inv)); p != y[i] && maskBit(keys[r], thrs[r], offs[r]+i) {
				y[i] = p
			}
			w[i] = c.rhs(y[i], b[i], l[i])
		}
	}
}

// Bits of dualGo's flags.
const (
	flagChanged   = 0xffff       // λ or x changed in the row
	flagNonFinite = 0xffff << 16 // x has an infinite or NaN element
)

// dualGo is the multiplier update λ += ρ(x − y). flags[r] tells whether row r's λ or x
// changed (x against xp, the previous iterate) and whether x is not finite; candidates
// counts the rows that are unchanged or not finite, the only ones that can freeze.
func dualGo(x, xp, y, l []float64, flags []int64, d int, rho float64) (candidates int) {
	for r := range flags {
		o := r * d
		x, xp, y, l := x[o:o+d], xp[o:o+d], y[o:o+d], l[o:o+d]
		var f int64
		for i := range x {
			nl := l[i] + float64(rho*(x[i]-y[i]))
			if nl != l[i] || x[i] != xp[i] {
				f |= 1
			}
			if t := x[i] * 0; t != t { // x·0 is NaN exactly when x is ±Inf or NaN
				f |= 1 << 16
			}
			l[i] = nl
		}
		flags[r] = f
		if f&flagChanged == 0 || f&flagNonFinite != 0 {
			candidates++
		}
	}
	return candidates
}
