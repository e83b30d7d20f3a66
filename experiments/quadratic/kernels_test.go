package quadratic

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// bitsEqual compares bit patterns, signed zeros included. Any NaN equals any NaN: which
// operand's payload x86 propagates depends on the compiler's operand order, and nothing in
// the experiment reads a payload (a diverged run's score is +Inf, written as null).
func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.IsNaN(a[i]) && math.IsNaN(b[i]) {
			continue
		}
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// awkward draws values that stress the passes: exact ties of the lattice (k + ½)·v, ±0,
// numbers just below a tie, magnitudes beyond 2^52·v where every float is a lattice point,
// ±Inf and NaN, among ordinary Gaussian ones.
func awkward(rng *rand.Rand, v float64) float64 {
	switch rng.IntN(12) {
	case 0:
		return v * (float64(rng.IntN(21)-10) + 0.5)
	case 1:
		return math.Copysign(0, float64(rng.IntN(2)*2-1))
	case 2:
		return math.Nextafter(v*(float64(rng.IntN(21)-10)+0.5), math.Inf(-1))
	case 3:
		return math.Ldexp(rng.NormFloat64(), 53+rng.IntN(10))
	case 4:
		return -1e-300
	case 5:
		return []float64{math.Inf(1), math.Inf(-1), math.NaN()}[rng.IntN(3)]
	default:
		return 40 * rng.NormFloat64()
	}
}

func fill(rng *rand.Rand, v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = awkward(rng, v)
	}
	return out
}

func clone(v ...[]float64) [][]float64 {
	out := make([][]float64, len(v))
	for i, x := range v {
		out[i] = append([]float64(nil), x...)
	}
	return out
}

// The AVX-512 passes must give the bits of the Go passes, which are the formulas of admmq's
// step functions, on every kind of input, ties and non-finite values included.
func TestSIMDPassesMatchGo(t *testing.T) {
	if !haveSIMD() {
		t.Skip("this CPU lacks AVX-512F; the Go passes are the ones used here")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 200; trial++ {
		d := 8 << rng.IntN(4)
		n := 1 + rng.IntN(40)
		v := 8.0
		rho := math.Ldexp(1+rng.Float64(), rng.IntN(30)-20)
		c := passConsts{inv: 1 / rho, iv: 1 / v, v: v, rho: rho}
		if trial%7 == 0 {
			c.inv = 1 // ties of x + λ/ρ come through unscaled
		}
		x, l, b := fill(rng, v, n*d), fill(rng, v, n*d), fill(rng, v, d)
		y := make([]float64, n*d)
		for i := range y {
			if rng.IntN(3) == 0 {
				y[i] = awkward(rng, v)
			} else {
				y[i] = c.proj(x[i] + float64(l[i]*c.inv)) // rows where p = y, as near a fixed point
			}
		}

		g, s := clone(y, make([]float64, n*d)), clone(y, make([]float64, n*d))
		yQGo(x, l, g[0], g[1], b, c)
		yQSIMD(x, l, s[0], s[1], b, c)
		if !bitsEqual(g[0], s[0]) || !bitsEqual(g[1], s[1]) {
			t.Fatalf("trial %d: ADMM-Q y-update differs (d=%d n=%d ρ=%g)", trial, d, n, rho)
		}

		gz, sz := clone(make([]float64, n*d), make([]float64, n*d), make([]float64, n*d)), clone(make([]float64, n*d), make([]float64, n*d), make([]float64, n*d))
		zSGo(x, l, gz[0], gz[1], gz[2], c)
		zSSIMD(x, l, sz[0], sz[1], sz[2], c)
		for k := range gz {
			if !bitsEqual(gz[k], sz[k]) {
				t.Fatalf("trial %d: ADMM-S first half, output %d differs", trial, k)
			}
		}
		fac := make([]float64, n)
		for r := range fac {
			fac[r] = []float64{1, 2, 0, 0.25, rng.Float64(), math.NaN(), math.Nextafter(1, 0)}[rng.IntN(7)]
		}
		g, s = clone(y, make([]float64, n*d)), clone(y, make([]float64, n*d))
		ySGo(gz[0], gz[1], g[0], g[1], l, b, fac, c)
		ySSIMD(gz[0], gz[1], s[0], s[1], l, b, fac, c)
		if !bitsEqual(g[0], s[0]) || !bitsEqual(g[1], s[1]) {
			t.Fatalf("trial %d: ADMM-S second half differs", trial)
		}

		keys, thrs, offs := make([]uint64, n), make([]uint64, n), make([]int, n)
		for r := range keys {
			keys[r], thrs[r] = maskParams([]float64{0.01, 0.3, 0.5, 0.99, 1}[rng.IntN(5)], rng.Uint64(), rng.IntN(30000), uint64(rng.IntN(7)))
			offs[r] = rng.IntN(50) * d
		}
		g, s = clone(y, make([]float64, n*d)), clone(y, make([]float64, n*d))
		yRGo(x, l, g[0], g[1], b, keys, thrs, offs, c)
		yRSIMD(x, l, s[0], s[1], b, keys, thrs, offs, c)
		if !bitsEqual(g[0], s[0]) || !bitsEqual(g[1], s[1]) {
			t.Fatalf("trial %d: ADMM-R y-update differs", trial)
		}

		// Dual update: some rows at a fixed point (x = x_prev, y = x so that λ stays).
		xp := append([]float64(nil), x...)
		yy := append([]float64(nil), y...)
		for r := 0; r < n; r++ {
			switch rng.IntN(4) {
			case 0:
				copy(yy[r*d:(r+1)*d], x[r*d:(r+1)*d])
			case 1:
				copy(yy[r*d:(r+1)*d], x[r*d:(r+1)*d])
				xp[r*d+rng.IntN(d)] += 1
			case 2:
				xp[r*d+rng.IntN(d)] = math.NaN()
			}
		}
		gf, sf := make([]int64, n), make([]int64, n)
		g, s = clone(l), clone(l)
		gc := dualGo(x, xp, yy, g[0], gf, d, rho)
		sc := dualSIMD(x, xp, yy, s[0], sf, d, rho)
		if !bitsEqual(g[0], s[0]) {
			t.Fatalf("trial %d: λ-update differs", trial)
		}
		if gc != sc {
			t.Fatalf("trial %d: %d freeze candidates (Go), %d (AVX-512)", trial, gc, sc)
		}
		for r := range gf {
			if (gf[r]&flagChanged != 0) != (sf[r]&flagChanged != 0) || (gf[r]&flagNonFinite != 0) != (sf[r]&flagNonFinite != 0) {
				t.Fatalf("trial %d row %d: dual flags %#x (Go) vs %#x (AVX-512)", trial, r, gf[r], sf[r])
			}
		}
	}
}

// The fixed-point flags must mean what the driver's check means: unchanged exactly when
// every λ and x element is bit-equal to before, non-finite exactly when some x is ±Inf/NaN.
func TestDualFlags(t *testing.T) {
	d := 8
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	y := append([]float64(nil), x...)
	l := []float64{1, -1, 2, -2, 0, 0, 3, 3}
	for _, c := range []struct {
		name          string
		edit          func(x, xp []float64)
		changed, nonf bool
	}{
		{"fixed point", func(x, xp []float64) {}, false, false},
		{"x moved", func(x, xp []float64) { xp[3] = 4.5 }, true, false},
		{"diverged", func(x, xp []float64) { x[5], xp[5] = math.Inf(1), math.Inf(1) }, true, true},
	} {
		for name, dual := range map[string]func(x, xp, y, l []float64, flags []int64, d int, rho float64) int{"go": dualGo, "simd": dualSIMD} {
			if name == "simd" && !haveSIMD() {
				continue
			}
			xx, xp, ll := append([]float64(nil), x...), append([]float64(nil), x...), append([]float64(nil), l...)
			c.edit(xx, xp)
			f := make([]int64, 1)
			cand := dual(xx, xp, y, ll, f, d, 3)
			if want := c.nonf || !c.changed; (cand == 1) != want {
				t.Errorf("%s %s: %d freeze candidates, want %v", name, c.name, cand, want)
			}
			if got := f[0]&flagChanged != 0; got != c.changed {
				t.Errorf("%s %s: changed = %v, want %v", name, c.name, got, c.changed)
			}
			if got := f[0]&flagNonFinite != 0; got != c.nonf {
				t.Errorf("%s %s: non-finite = %v, want %v", name, c.name, got, c.nonf)
			}
		}
	}
}

// gemmFMA and its assembly must agree on strided operands and every panel shape: the
// AVX-512 kernel for n a multiple of 8, the AVX2 one for any n (its wrapper hands the
// columns past the last multiple of 4 to gemmFMA).
func TestGemmAsmMatchesGo(t *testing.T) {
	gemms := map[string]gemmFunc{}
	if haveSIMD() {
		gemms["AVX-512"] = gemmSIMD
	}
	if haveAVX2() {
		gemms["AVX2"] = gemmAVX2
	}
	if len(gemms) == 0 {
		t.Skip("this CPU has neither AVX-512F nor AVX2+FMA (or GODEBUG turned them off)")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for name, g := range gemms {
		for _, m := range []int{1, 2, 3, 4, 5, 7, 8, 9, 33} {
			for _, n := range []int{1, 3, 4, 5, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 66, 72, 96} {
				if name == "AVX-512" && n%8 != 0 {
					continue
				}
				for _, k := range []int{1, 3, 8, 64} {
					lda, ldb, ldc := k+rng.IntN(3), n+rng.IntN(3), n+rng.IntN(3)
					a, b := fill(rng, 8, m*lda), fill(rng, 8, k*ldb)
					c1, c2 := fill(rng, 8, m*ldc), fill(rng, 8, m*ldc)
					copy(c2, c1)
					gemmFMA(m, n, k, a, lda, b, ldb, c1, ldc)
					g(m, n, k, a, lda, b, ldb, c2, ldc)
					if !bitsEqual(c1, c2) {
						t.Fatalf("m=%d n=%d k=%d: %s product differs from gemmFMA", m, n, k, name)
					}
				}
			}
		}
	}
}

// gemmFMA is the chain fma(a_i,k−1, b_k−1,j, … fma(a_i0, b_0j, +0)) in order of k, checked
// against an independent evaluation of that definition with math/big (exact product and
// sum, rounded once per step, which is what a fused multiply-add is).
func TestGemmFMAIsTheSequentialChain(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const m, n, k = 3, 5, 40
	a, b, c := make([]float64, m*k), make([]float64, k*n), make([]float64, m*n)
	for i := range a {
		a[i] = rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20)
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	gemmFMA(m, n, k, a, k, b, n, c, n)
	naive := 0
	for i := range m {
		for j := range n {
			var want, s float64
			for p := range k {
				// Exact at this precision: a product of two float64 and a sum with another.
				x := new(big.Float).SetPrec(2200).SetFloat64(a[i*k+p])
				x.Mul(x, new(big.Float).SetFloat64(b[p*n+j]))
				x.Add(x, new(big.Float).SetFloat64(want))
				want, _ = x.Float64() // one rounding, to nearest even
				s += float64(a[i*k+p] * b[p*n+j])
			}
			if math.Float64bits(c[i*n+j]) != math.Float64bits(want) {
				t.Fatalf("c[%d,%d] = %v, want the FMA chain %v", i, j, c[i*n+j], want)
			}
			if s != want {
				naive++
			}
		}
	}
	// With these magnitudes, separate rounding of each product must show up somewhere;
	// otherwise the test could not tell the chain from a plain multiply-add loop.
	if naive == 0 {
		t.Fatal("test data too easy: unfused products give the same bits")
	}
}

// rowSums adds each row left to right, as admmq's SoftPrepare does.
func TestRowSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 7, 8, 9, 17} {
		d := 16
		sq := make([]float64, n*d)
		for i := range sq {
			sq[i] = math.Ldexp(rng.Float64(), rng.IntN(80)-40)
		}
		out := make([]float64, n)
		rowSums(sq, d, out)
		for r := range out {
			var s float64
			for _, v := range sq[r*d : (r+1)*d] {
				s += v
			}
			if math.Float64bits(s) != math.Float64bits(out[r]) {
				t.Fatalf("n=%d row %d: %v, want %v", n, r, out[r], s)
			}
		}
	}
}

// maskParams and maskBit must reproduce admmq's ADMM-R masks bit for bit, and yRGo must be
// admmq's rule: y_i takes P_A(x + λ/ρ)_i where the projection differs and the mask is on.
func TestMaskBitMatchesAdmmq(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 2000; trial++ {
		m := admmq.Mask{P: []float64{0.01, 0.1, 0.5, 0.9, 0.99, 1, rng.Float64()}[rng.IntN(7)],
			Seed: rng.Uint64(), Iter: rng.IntN(100000), Stream: uint64(rng.IntN(8))}
		key, thr := maskParams(m.P, m.Seed, m.Iter, m.Stream)
		for k := 0; k < 50; k++ {
			e := rng.IntN(4000)
			if got, want := maskBit(key, thr, e), m.On(e); got != want {
				t.Fatalf("%+v element %d: bit %v, admmq %v", m, e, got, want)
			}
		}
	}
	c := passConsts{inv: 1 / 3.0, iv: 1 / 8.0, v: 8, rho: 3}
	d := 8
	x, l, b := fill(rng, 8, d), fill(rng, 8, d), fill(rng, 8, d)
	y0 := fill(rng, 8, d)
	m := admmq.Mask{P: 0.5, Seed: 3, Iter: 17, Stream: 2}
	key, thr := maskParams(m.P, m.Seed, m.Iter, m.Stream)
	y, w := append([]float64(nil), y0...), make([]float64, d)
	yRGo(x, l, y, w, b, []uint64{key}, []uint64{thr}, []int{40}, c)
	for i := range y {
		want := y0[i]
		if p := c.proj(x[i] + l[i]*c.inv); p != y0[i] && m.On(40+i) {
			want = p
		}
		if math.Float64bits(y[i]) != math.Float64bits(want) && !(math.IsNaN(y[i]) && math.IsNaN(want)) {
			t.Fatalf("element %d: y = %v, want %v", i, y[i], want)
		}
	}
}

// softFactor with β/ρ computed once must be admmq.SoftFactor bit for bit.
func TestSoftFactorMatchesAdmmq(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := 0; i < 100000; i++ {
		beta := math.Pow(10, -5+10*rng.Float64())
		rho := math.Pow(10, -3+6*rng.Float64())
		d2 := []float64{0, math.Pow(beta/rho, 2), math.Ldexp(rng.Float64(), rng.IntN(40)-20)}[rng.IntN(3)]
		got, want := softFactor(d2, beta/rho), admmq.SoftFactor(d2, beta, rho)
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("d2=%v β=%v ρ=%v: %v, admmq %v", d2, beta, rho, got, want)
		}
	}
}
