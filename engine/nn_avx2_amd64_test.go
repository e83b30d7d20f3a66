//go:build amd64 && !purego

package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvTileAVX2 checks the AVX2 tile kernel bit for bit against convTileGeneric,
// its portable definition (the same FMAs in the same order, so no tolerance), on
// every CPU with AVX2 and FMA, AVX-512 or not: depths 0 to 40, strides and offset
// tables, full, empty, single-lane and random masks (the masked loads and stores), one
// to three row blocks and fewer rows than they hold (convTileRows), tileAdd with and
// without a bias, each fused activation, and
// inputs with NaNs of either sign, signed zeros and infinities. Lanes outside the
// masks must keep their old bits.
func TestConvTileAVX2(t *testing.T) {
	if !convTileAVX2OK() {
		t.Skip("no AVX2 and FMA on this CPU: the AVX2 tile kernel does not run (the portable kernel is the definition)")
	}
	r := rand.New(rand.NewPCG(16, 2))
	special := []float32{float32(math.NaN()), math.Float32frombits(0xffc00001), float32(math.Copysign(0, -1)), 0,
		float32(math.Inf(1)), float32(math.Inf(-1)), 6, -3, 0.5, -0.5}
	acts := []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.5}, {lo: 0, hi: 6}, {lo: float32(math.Inf(-1)), hi: 0},
		{lo: 1, hi: -1}, {swish: true, a: 1.0 / 6, b: 0.5}}
	for trial := 0; trial < 2000; trial++ {
		k := []int{0, 1, 2, 3, 9, 27, 40}[trial%7]
		ldb := 16 + r.IntN(24)
		ldc := 16 + r.IntN(24)
		masks := [2]uint64{}
		for p := range masks {
			switch r.IntN(5) {
			case 0:
				masks[p] = 0xffff
			case 1:
				masks[p] = 0
			case 2:
				masks[p] = 1 << r.IntN(16)
			case 3:
				masks[p] = 1<<(1+r.IntN(16)) - 1
			default:
				masks[p] = r.Uint64() & 0xffff
			}
		}
		flags := r.IntN(2) | r.IntN(2)*tilePrefetch // tileAdd, and the prefetch hint, or not
		act := acts[r.IntN(len(acts))]
		tact := tileTestAct(act)
		nrb := 1 + r.IntN(3)
		a := make([]float32, 8*k*nrb)
		b0 := make([]float32, max(k, 1)*ldb)
		b1 := make([]float32, max(k, 1)*ldb)
		c0 := make([]float32, 8*nrb*ldc)
		c1 := make([]float32, 8*nrb*ldc)
		fillTile(r, trial, special, a, b0, b1, c0, c1)
		bias := tileTestBias(r, trial, nrb)
		var offs *tileOffs
		if trial%2 == 1 {
			offs = randTileOffs(r, k, len(b0))
		}
		// Every fifth trial asks for fewer rows than the blocks hold (convTileRows): the
		// quads that hold them must be the portable kernel's, the quads past them untouched.
		rows := 8 * nrb
		if trial%5 == 2 {
			rows = 1 + r.IntN(8*nrb)
		}
		sameAsGeneric(t, fmt.Sprintf("trial %d (k=%d nrb=%d rows=%d ldc=%d masks %#x flags %d act %+v offs %v)", trial, k, nrb, rows, ldc, masks, flags, act, offs != nil),
			k, a, b0, b1, ldb, c0, c1, ldc, bias, masks[0], masks[1], flags, nrb, rows, offs, tact)
	}
}

// TestConvTile6AVX2 checks the AVX2 tile kernel's six-row form (convTile6AVX2, which
// convTileAVX2 takes for whole panels of 12 rows or more without HardSwish, each 12 rows
// as two sixes from any even row, so across two blocks of A at every split: 2 + 4, 4 + 2
// and 6 + 0 rows, the rest as quads) bit for bit against convTileGeneric: depths 1 to
// 144, two to eight row blocks and fewer rows than they hold, contiguous rows and offset tables, tileAdd with and without a
// bias, no activation and Relu, NaNs of either sign, signed zeros and infinities; the
// rows past the ones asked for keep their old bits.
func TestConvTile6AVX2(t *testing.T) {
	if !convTileAVX2OK() {
		t.Skip("no AVX2 and FMA on this CPU: the AVX2 tile kernel does not run (the portable kernel is the definition)")
	}
	r := rand.New(rand.NewPCG(66, 6))
	acts6 := []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.5}, {lo: 0, hi: 6}, {lo: float32(math.Inf(-1)), hi: 0}, {lo: 1, hi: -1}}
	special := []float32{float32(math.NaN()), math.Float32frombits(0xffc00001), float32(math.Copysign(0, -1)), 0,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	for trial := 0; trial < 1500; trial++ {
		k := []int{1, 2, 5, 9, 27, 40, 144}[trial%7]
		ldb, ldc := 16+r.IntN(24), 16+r.IntN(24)
		nrb := 2 + r.IntN(7)
		m1 := uint64(0xffff)
		if trial%6 == 5 {
			m1 = 0 // the second panel empty: skipped
		}
		flags := r.IntN(2) | r.IntN(2)*tilePrefetch // tileAdd, and the prefetch hint, or not
		act := acts6[trial%len(acts6)]
		tact := tileTestAct(act)
		a := make([]float32, 8*k*nrb)
		b0, b1 := make([]float32, k*ldb), make([]float32, k*ldb)
		c0, c1 := make([]float32, 8*nrb*ldc), make([]float32, 8*nrb*ldc)
		fillTile(r, trial, special, a, b0, b1, c0, c1)
		bias := tileTestBias(r, trial, nrb)
		var offs *tileOffs
		if trial%5 >= 3 {
			offs = randTileOffs(r, k, len(b0))
		}
		rows := 8 * nrb
		if trial%4 == 2 {
			rows = 1 + r.IntN(8*nrb)
		}
		sameAsGeneric(t, fmt.Sprintf("trial %d (k=%d nrb=%d rows=%d flags %d act %+v offs %v)", trial, k, nrb, rows, flags, act, offs != nil),
			k, a, b0, b1, ldb, c0, c1, ldc, bias, 0xffff, m1, flags, nrb, rows, offs, tact)
	}
}

// tileTestAct is the tile kernels' form of act (nil for none).
func tileTestAct(act *nnClamp) *tileAct {
	if act == nil {
		return nil
	}
	ta, _ := dw3x3Flags(act)
	return &ta
}

// tileTestBias is nil on every third trial, else a bias for nrb row blocks of values
// in [−1, 1).
func tileTestBias(r *rand.Rand, trial, nrb int) []float32 {
	if trial%3 == 0 {
		return nil
	}
	bias := make([]float32, 8*nrb)
	for i := range bias {
		bias[i] = r.Float32()*2 - 1
	}
	return bias
}

// fillTile fills each slice with values of [−2, 2), and on every fourth trial about one
// in twenty of them with one of special.
func fillTile(r *rand.Rand, trial int, special []float32, slices ...[]float32) {
	for _, s := range slices {
		for i := range s {
			s[i] = r.Float32()*4 - 2
			if trial%4 == 3 && r.IntN(20) == 0 {
				s[i] = special[r.IntN(len(special))]
			}
		}
	}
}

// sameAsGeneric runs convTileAVX2 on c0 and c1 and convTileGeneric on copies, and fails
// with desc unless the rows asked for (rounded up to quads) hold the same bits and the
// rows past them their old ones.
func sameAsGeneric(t *testing.T, desc string, k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb, rows int, offs *tileOffs, act *tileAct) {
	t.Helper()
	made := (rows + 3) &^ 3
	g0, g1 := append([]float32(nil), c0...), append([]float32(nil), c1...)
	o0, o1 := append([]float32(nil), c0...), append([]float32(nil), c1...)
	convTileAVX2(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, rows, offs, act)
	convTileGeneric(k, a, b0, b1, ldb, g0, g1, ldc, bias, m0, m1, flags, nrb, offs, act)
	for i := made * ldc; i < len(c0); i++ {
		g0[i], g1[i] = o0[i], o1[i]
	}
	for p, pair := range [2][2][]float32{{c0, g0}, {c1, g1}} {
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("%s: panel %d c[%d,%d] = %v (%#x), want %v (%#x)", desc, p, i/ldc, i%ldc,
					pair[0][i], math.Float32bits(pair[0][i]), pair[1][i], math.Float32bits(pair[1][i]))
			}
		}
	}
}

// TestSigmoidAVX2 checks the AVX2 sigmoid against its definition sigmoidF32 bit for
// bit (NaN matching any NaN) on every CPU with AVX2 and FMA: random values, the edges
// of TestSigmoidVector, a dense sweep of −110…−80 where σ leaves the normal range (the
// two-step scaling that stands in for VSCALEFPS must round once, and what falls below
// the smallest normal is flushed to 0), and every length up to 20 for the tail, which
// must not write past y.
func TestSigmoidAVX2(t *testing.T) {
	if !convTileAVX2OK() {
		t.Skip("no AVX2 and FMA on this CPU: the AVX2 sigmoid does not run (sigmoidF32 is the definition)")
	}
	x := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0xffc00001), 110, -110, 120, -120, 88.7, -88.7, 87, -87, 103.9, -103.9, 104, -104, 1e-8, -1e-8, 1, -1}
	for v := float32(-110); v < -80; v += 0.0037 {
		x = append(x, v)
	}
	r := rand.New(rand.NewPCG(16, 3))
	for range 3000 {
		x = append(x, float32(r.NormFloat64()*10))
	}
	for n := 0; n <= 20; n++ {
		for _, in := range [][]float32{x[:n], x[len(x)-n:], x} {
			y := make([]float32, len(in)+1)
			y[len(in)] = 42
			expVecAVX2Slice(in, y[:len(in)], vecSigmoid)
			if y[len(in)] != 42 {
				t.Fatalf("length %d: wrote past y", len(in))
			}
			for i, v := range in {
				want := sigmoidF32(v)
				if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
					t.Fatalf("σ(%v) = %v (%#x), sigmoidF32 %v (%#x)", v, y[i], math.Float32bits(y[i]), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestDWPlaneAVX2 checks the AVX2 depthwise plane bit for bit against its definition,
// dwPlaneGo then planeBiasAct (and dwPlaneGo with add for dwAdd), on every CPU with
// AVX2 and FMA: random windows of 1 to 7 taps a side, row strides 1 to 3, column
// strides 1 and 2, output rows of 1 to 40 (so every tail of the 16-lane chunk), with
// and without a bias, each activation. The padded plane's slack past its last row is
// NaN, which must reach no output, and nothing past y may be written.
func TestDWPlaneAVX2(t *testing.T) {
	if !convTileAVX2OK() {
		t.Skip("no AVX2 and FMA on this CPU: the AVX2 depthwise plane does not run (dwPlaneGo is the definition)")
	}
	r := rand.New(rand.NewPCG(16, 4))
	ks := []int{1, 2, 3, 5, 7}
	for trial := 0; trial < 400; trial++ {
		var g nnGeom
		g.nd = 2
		g.in[0], g.k[0], g.out[0], g.s[0], g.d[0] = 1, 1, 1, 1, 1
		g.k[1], g.k[2] = ks[r.IntN(len(ks))], ks[r.IntN(len(ks))]
		g.s[1], g.s[2] = 1+r.IntN(3), 1+r.IntN(2)
		g.d[1], g.d[2] = 1, 1
		g.in[1], g.in[2] = 1+r.IntN(9), 1+r.IntN(80)
		for i := 1; i <= 2; i++ {
			g.pb[i], g.pe[i] = r.IntN(g.k[i]), r.IntN(g.k[i])
			g.out[i] = (g.in[i]+g.pb[i]+g.pe[i]-g.k[i])/g.s[i] + 1
		}
		if g.out[1] <= 0 || g.out[2] <= 0 || !dwPadOK(&g) {
			continue
		}
		var p dwPlan
		p.setup(&g)
		xp := make([]float32, p.size)
		for i := range xp {
			xp[i] = float32(math.NaN())
			if i < p.ph*p.pw {
				xp[i] = r.Float32()*4 - 2
			}
		}
		w := make([]float32, len(p.offs))
		for i := range w {
			w[i] = r.Float32()*2 - 1
		}
		O := g.out[1] * g.out[2]
		want := make([]float32, O)
		dwPlaneGo(&p, xp, want, w, false)
		for _, act := range append([]*nnClamp{nil}, testActs...) {
			ta, ok := dw3x3Flags(act)
			if !ok {
				continue
			}
			for _, bias := range [][]float32{nil, {0.25}} {
				exp := append([]float32(nil), want...)
				planeBiasAct(exp, bias, act)
				tb := ta
				var bv float32
				if bias != nil {
					tb.flags |= dwBias
					bv = bias[0]
				}
				got := make([]float32, O+1)
				got[O] = 42
				dwPlaneAsmAVX2(&p, xp, got[:O], w, bv, tb)
				for i := range got {
					if i < O && math.Float32bits(got[i]) == math.Float32bits(exp[i]) || i == O && got[i] == 42 {
						continue
					}
					t.Fatalf("trial %d %+v, act %+v, bias %v: y[%d of %d] = %v, definition %v", trial, g, act, bias, i, O, got[i], exp)
				}
			}
		}
		add, addWant := make([]float32, O+1), make([]float32, O)
		for i := range addWant {
			addWant[i] = r.Float32()
			add[i] = addWant[i]
		}
		add[O] = 42
		dwPlaneGo(&p, xp, addWant, w, true)
		dwPlaneAsmAVX2(&p, xp, add[:O], w, 0, tileAct{flags: dwAdd})
		for i := range addWant {
			if math.Float32bits(add[i]) != math.Float32bits(addWant[i]) || add[O] != 42 {
				t.Fatalf("trial %d %+v: add y[%d] = %v, definition %v (guard %v)", trial, g, i, add[i], addWant[i], add[O])
			}
		}
	}
}

// TestConvTileStream checks the non-temporal stores of tileStream: on 64-byte-aligned
// rows of whole panels, the assembly kernels (AVX-512, and AVX2 called directly) write
// the same bits as the portable kernel without the hint, and nothing outside the tile;
// rows that are not aligned, a masked lane, or tileAdd take the ordinary stores with the
// same results.
func TestConvTileStream(t *testing.T) {
	type tileFunc = func(int, []float32, []float32, []float32, int, []float32, []float32, int, []float32, uint64, uint64, int, int, *tileOffs, *tileAct)
	var impls []struct {
		name string
		f    tileFunc
	}
	if convTileOK() {
		impls = append(impls, struct {
			name string
			f    tileFunc
		}{"AVX-512", convTile})
	}
	if convTileAVX2OK() {
		impls = append(impls, struct {
			name string
			f    tileFunc
		}{"AVX2", func(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int, offs *tileOffs, act *tileAct) {
			convTileAVX2(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, 8*nrb, offs, act)
		}})
	}
	if len(impls) == 0 {
		t.Skip("no assembly tile kernel on this CPU; the portable kernel ignores the hint")
	}
	r := rand.New(rand.NewPCG(5, 9))
	streamed := 0
	for _, im := range impls {
		for trial := 0; trial < 240; trial++ {
			k := []int{1, 3, 16, 27, 64, 144}[trial%6]
			ldb := 32 + r.IntN(20)
			ldc := []int{32, 48, 64, 33}[trial%4]
			shift := 0
			if trial%5 == 4 {
				shift = 1 // not aligned: ordinary stores
			}
			m1 := uint64(0xffff)
			if trial%7 == 6 {
				m1 = 0x7fff
			}
			flags := tileStream
			if trial%11 == 10 {
				flags |= tileAdd
			}
			nrb := 1 + r.IntN(3)
			a := make([]float32, 8*k*nrb)
			b := make([]float32, k*ldb)
			bias := make([]float32, 8*nrb)
			c := alignedF32(8*nrb*ldc, shift)
			for _, s := range [][]float32{a, b, bias, c} {
				for i := range s {
					s[i] = r.Float32()*2 - 1
				}
			}
			var tact *tileAct
			if trial%3 == 1 {
				ta, _ := dw3x3Flags(&nnClamp{lo: 0, hi: 6})
				tact = &ta
			}
			want := append([]float32(nil), c...)
			convTileGeneric(k, a, b, b[16:], ldb, want, want[16:], ldc, bias, 0xffff, m1, flags&^tileStream, nrb, nil, tact)
			got := append(alignedF32(len(c), shift)[:0], c...)
			im.f(k, a, b, b[16:], ldb, got, got[16:], ldc, bias, 0xffff, m1, flags, nrb, nil, tact)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s trial %d (k=%d ldc=%d shift %d mask %#x flags %d): c[%d] = %g, the portable kernel %g",
						im.name, trial, k, ldc, shift, m1, flags, i, got[i], want[i])
				}
			}
			if tileAligned(got, ldc) && m1 == 0xffff && flags&tileAdd == 0 {
				streamed++
			}
		}
	}
	if streamed == 0 {
		t.Fatal("no trial had aligned whole panels: the non-temporal stores went untested")
	}
}
