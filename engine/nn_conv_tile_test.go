package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvTile checks the tile kernel in use (assembly where the CPU has it) and the
// portable one against a float64 sum, over depths, strides and offset tables, masks, one
// to three row blocks, the add and Relu flags and a nil bias, and checks that lanes
// outside the masks are left alone.
func TestConvTile(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	impls := []struct {
		name string
		f    func(int, []float32, []float32, []float32, int, []float32, []float32, int, []float32, uint64, uint64, int, int, *tileOffs, *tileAct)
	}{{"generic", convTileGeneric}}
	if convTileOK() {
		impls = append(impls, struct {
			name string
			f    func(int, []float32, []float32, []float32, int, []float32, []float32, int, []float32, uint64, uint64, int, int, *tileOffs, *tileAct)
		}{"assembly", convTile})
	} else {
		t.Log("no AVX-512: checking the portable kernel only")
	}
	masks := []uint64{0xffff, 0x1, 0x7fff, 0x8001, 0}
	for _, im := range impls {
		for trial := 0; trial < 300; trial++ {
			k := []int{0, 1, 2, 9, 31, 144}[trial%6]
			ldb := 16 + r.IntN(40)
			ldc := 16 + r.IntN(40)
			m0, m1 := masks[r.IntN(len(masks))], masks[r.IntN(len(masks))]
			flags := r.IntN(2) | r.IntN(2)*tilePrefetch // tileAdd, and the prefetch hint, or not
			acts := []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.5}, {lo: 0, hi: 6}, {swish: true, a: 1.0 / 6, b: 0.5}}
			act := acts[r.IntN(len(acts))]
			ta, _ := dw3x3Flags(act)
			var tact *tileAct
			if act != nil {
				tact = &ta
			}
			nrb := 1 + r.IntN(3)
			a := make([]float32, 8*k*nrb+1)
			b0 := make([]float32, max(k, 1)*ldb)
			b1 := make([]float32, max(k, 1)*ldb)
			c0 := make([]float32, 8*nrb*ldc)
			c1 := make([]float32, 8*nrb*ldc)
			for _, s := range [][]float32{a, b0, b1, c0, c1} {
				for i := range s {
					s[i] = r.Float32()*2 - 1
				}
			}
			var bias []float32
			if trial%3 != 0 {
				bias = make([]float32, 8*nrb)
				for i := range bias {
					bias[i] = r.Float32()*2 - 1
				}
			}
			// Half the trials read the rows of B through an offset table.
			var offs *tileOffs
			row := func(i int) int { return i * ldb }
			if trial%2 == 1 {
				offs = &tileOffs{off: make([]int64, k)}
				for i := range offs.off {
					offs.off[i] = 4 * int64(r.IntN(len(b0)-15))
					offs.max = max(offs.max, offs.off[i])
				}
				row = func(i int) int { return int(offs.off[i] / 4) }
			}
			old0, old1 := append([]float32(nil), c0...), append([]float32(nil), c1...)
			im.f(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, tact)
			for p, pan := range []struct {
				b, c, old []float32
				m         uint64
			}{{b0, c0, old0, m0}, {b1, c1, old1, m1}} {
				for i := range pan.c {
					rr, j := i/ldc, i%ldc
					if j >= 16 || pan.m&(1<<j) == 0 {
						if math.Float32bits(pan.c[i]) != math.Float32bits(pan.old[i]) {
							t.Fatalf("%s trial %d: panel %d wrote masked-out c[%d]", im.name, trial, p, i)
						}
						continue
					}
					var want, mag float64
					switch {
					case flags&tileAdd != 0 && bias != nil:
						want = float64(pan.old[i]) + float64(bias[rr])
					case flags&tileAdd != 0:
						want = float64(pan.old[i])
					case bias != nil:
						want = float64(bias[rr])
					}
					mag = math.Abs(want)
					if flags&tileAdd != 0 && bias != nil {
						mag = math.Abs(float64(pan.old[i])) + math.Abs(float64(bias[rr]))
					}
					for q := 0; q < k; q++ {
						v := float64(a[8*k*(rr/8)+8*q+rr%8]) * float64(pan.b[row(q)+j])
						want += v
						mag += math.Abs(v)
					}
					// Activations are 1.5-Lipschitz at most on these values (HardSwish).
					tol := 1.5*float64(k+1)*6e-8*mag + 1e-30
					switch {
					case act == nil:
					case act.relu:
						want = max(want, 0)
					case act.swish:
						want *= min(max(want/6+0.5, 0), 1)
						tol += 1e-7 * math.Abs(want)
					default:
						want = min(max(want, float64(act.lo)), float64(act.hi))
					}
					got := float64(pan.c[i])
					if math.Abs(got-want) > tol {
						t.Fatalf("%s trial %d (k=%d flags=%d act %+v): panel %d c[%d,%d] = %g, want %g", im.name, trial, k, flags, act, p, rr, j, got, want)
					}
					if act != nil && act.relu && math.Signbit(got) {
						t.Fatalf("%s trial %d: Relu left a negative zero or value %g", im.name, trial, got)
					}
				}
			}
		}
	}
}

// TestConvTileActEdges checks the kernel's fused activations bit for bit against the
// portable definition, which computes them as the Relu, Clip and HardSwish kernels do,
// on NaNs of either sign, signed zeros, infinities and values at and around the bounds.
func TestConvTileActEdges(t *testing.T) {
	if !convTileOK() {
		t.Skip("no AVX-512 tile kernel on this CPU; the portable kernel is the definition")
	}
	b := []float32{math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00001), float32(math.Copysign(0, -1)), 0,
		float32(math.Inf(1)), float32(math.Inf(-1)), -0.5, 0.5, 6, -3, 3, 2.9999998, -1e-30, 1e-30, 7, -7}
	a := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	for _, act := range []*nnClamp{{relu: true}, {lo: -0.5, hi: 0.5}, {lo: 0, hi: 6}, {lo: float32(math.Inf(-1)), hi: 0}, {lo: 1, hi: -1}, {swish: true, a: 1.0 / 6, b: 0.5}} {
		ta, ok := dw3x3Flags(act)
		if !ok {
			t.Fatalf("act %+v not encodable", act)
		}
		c0, c1 := make([]float32, 8*16), make([]float32, 8*16)
		g0, g1 := make([]float32, 8*16), make([]float32, 8*16)
		convTile(1, a, b, b, 16, c0, c1, 16, nil, 0xffff, 0xffff, 0, 1, nil, &ta)
		convTileGeneric(1, a, b, b, 16, g0, g1, 16, nil, 0xffff, 0xffff, 0, 1, nil, &ta)
		// The kernel's sum starts at +0, so −0 reaches the activation as +0.
		want := make([]float32, len(b))
		for i, v := range b {
			var zero float32
			want[i] = zero + v
		}
		act.applyNoBias(want, want)
		for i := range c0 {
			if !sameBits(c0[i], g0[i]) || !sameBits(c1[i], g1[i]) {
				t.Fatalf("act %+v lane %d: assembly %#x %#x, portable %#x %#x", act, i, math.Float32bits(c0[i]), math.Float32bits(c1[i]), math.Float32bits(g0[i]), math.Float32bits(g1[i]))
			}
			if !sameBits(g0[i], want[i%16]) {
				t.Fatalf("act %+v of %v: portable kernel %v (%#x), nnClamp %v (%#x)", act, b[i%16], g0[i], math.Float32bits(g0[i]), want[i%16], math.Float32bits(want[i%16]))
			}
		}
	}
}

// sameBits reports whether a and b have the same bits, or are both NaN.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestDW3x3Plane checks the assembly depthwise planes against the portable nnDW3x3 and
// nnDW3x3Back for every row width it takes and several heights: the forward plane with
// bias and each activation (edge values included, compared bit for bit with nnClamp's
// own loops after the portable plane plus bias), the input gradient it makes with add,
// and the weight gradient.
func TestDW3x3Plane(t *testing.T) {
	if !dw3x3Fast(1) {
		t.Skip("no AVX-512 depthwise planes on this CPU; nnDW3x3 is the definition")
	}
	r := rand.New(rand.NewPCG(21, 22))
	inf := float32(math.Inf(1))
	acts := []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.5}, {lo: 0, hi: 6}, {lo: -inf, hi: 0.25}, {swish: true, a: 1.0 / 6, b: 0.5}}
	for wd := 1; wd <= 16; wd++ {
		for _, h := range []int{1, 2, 3, 7} {
			n := h * wd
			x := make([]float32, n)
			for i := range x {
				x[i] = r.Float32()*4 - 2
			}
			// Edge values where the plane has room for them.
			edges := []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), inf, -inf, -3, 3}
			for i := 0; i < len(edges) && 2*i < n; i++ {
				x[2*i] = edges[i]
			}
			w := make([]float32, 9)
			for i := range w {
				w[i] = r.Float32()*2 - 1
			}
			w[4] = 1 // the centre tap carries edge values through unchanged in sign
			bias := []float32{r.Float32() - 0.5}
			for ai, act := range acts {
				want := make([]float32, n)
				nnDW3x3(x, w, want, h, wd, false)
				for i := range want {
					want[i] += bias[0]
				}
				if act != nil {
					act.applyNoBias(want, want)
				}
				got := make([]float32, n)
				if !dw3x3Plane(x, got, h, wd, w, bias, act, false) {
					t.Fatalf("%d×%d act %d: not applied", h, wd, ai)
				}
				for i := range got {
					if !dw3x3Same(got[i], want[i]) {
						t.Fatalf("%d×%d act %d: y[%d] = %v (%#x), want %v (%#x)", h, wd, ai, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
			// Backward on finite values: gx with add, and gw.
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			gy := make([]float32, n)
			for i := range gy {
				gy[i] = r.Float32()*2 - 1
			}
			gxWant, gwWant := make([]float32, n), make([]float32, 9)
			gxGot, gwGot := make([]float32, n), make([]float32, 9)
			for i := range gxWant {
				gxWant[i] = float32(i)
				gxGot[i] = float32(i)
			}
			nnDW3x3Back(x, w, gy, gxWant, gwWant, h, wd)
			flip := [9]float32{w[8], w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0]}
			dw3x3Plane(gy, gxGot, h, wd, flip[:], nil, nil, true)
			dw3x3GradW(x, gy, h, wd, gwGot)
			for i := range gxGot {
				if d := math.Abs(float64(gxGot[i] - gxWant[i])); d > 1e-5*(1+math.Abs(float64(gxWant[i]))) {
					t.Fatalf("%d×%d: gx[%d] = %v, want %v", h, wd, i, gxGot[i], gxWant[i])
				}
			}
			for i := range gwGot {
				if d := math.Abs(float64(gwGot[i] - gwWant[i])); d > 1e-5*float64(n) {
					t.Fatalf("%d×%d: gw[%d] = %v, want %v", h, wd, i, gwGot[i], gwWant[i])
				}
			}
		}
	}
}

// dw3x3Same compares two results bit for bit, except that NaNs match any NaN and that
// the summation order may differ by rounding on finite values.
func dw3x3Same(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || a == 0 || b == 0 {
		return math.Float32bits(a) == math.Float32bits(b)
	}
	return math.Abs(float64(a-b)) <= 1e-5*(1+math.Abs(float64(b)))
}

// TestMaxPool2x2Plane checks the assembly 2×2 max pool and its gradient bit for bit
// against the Go loops (NaN for NaN) on planes of every output width up to 20, odd input
// sizes (the last row and column dropped) and edge values: NaN, ±0 pairs, ±∞.
func TestMaxPool2x2Plane(t *testing.T) {
	if !maxPool2x2Fast() {
		t.Skip("no AVX-512 max pool on this CPU; maxPool2x2Go is the definition")
	}
	r := rand.New(rand.NewPCG(31, 32))
	negz := float32(math.Copysign(0, -1))
	edges := []float32{float32(math.NaN()), negz, 0, float32(math.Inf(1)), float32(math.Inf(-1))}
	for ow := 1; ow <= 20; ow++ {
		for _, oh := range []int{1, 2, 5} {
			for _, extra := range []int{0, 1} {
				H, W := 2*oh+extra, 2*ow+extra
				g := nnGeom{in: [nnMaxSpatial]int{1, H, W}, out: [nnMaxSpatial]int{1, oh, ow}, k: [nnMaxSpatial]int{1, 2, 2},
					s: [nnMaxSpatial]int{1, 2, 2}, d: [nnMaxSpatial]int{1, 1, 1}}
				if !g.is2x2() {
					t.Fatalf("%d×%d: geometry is not 2×2", H, W)
				}
				x := make([]float32, H*W)
				for i := range x {
					switch r.IntN(4) {
					case 0:
						x[i] = edges[r.IntN(len(edges))]
					case 1:
						x[i] = []float32{0, negz}[r.IntN(2)]
					default:
						x[i] = r.Float32()*2 - 1
					}
				}
				want, got := make([]float32, oh*ow+1), make([]float32, oh*ow+1)
				want[oh*ow], got[oh*ow] = 42, 42 // past the plane: must stay
				maxPool2x2Go(&g, x, want)
				maxPool2x2Plane(&g, x, got)
				for i := range got {
					a, b := got[i], want[i]
					if (a != a) != (b != b) || (a == a && math.Float32bits(a) != math.Float32bits(b)) {
						t.Fatalf("%d×%d → %d×%d: y[%d] = %v (%#x), want %v (%#x)", H, W, oh, ow, i, a, math.Float32bits(a), b, math.Float32bits(b))
					}
				}
				// Backward: the gradient to the first window element equal to y (ties
				// are frequent here: zeros of either sign), added to what gx held.
				gy := make([]float32, oh*ow)
				for i := range gy {
					gy[i] = float32(i + 1)
				}
				gxWant, gxGot := make([]float32, H*W+1), make([]float32, H*W+1)
				for i := range gxWant {
					gxWant[i] = float32(i) / 8
					gxGot[i] = float32(i) / 8
				}
				maxPool2x2BackGo(&g, x, want, gy, gxWant)
				maxPool2x2BackPlane(&g, x, want, gy, gxGot)
				for i := range gxGot {
					if math.Float32bits(gxGot[i]) != math.Float32bits(gxWant[i]) {
						t.Fatalf("%d×%d → %d×%d: gx[%d] = %v, want %v", H, W, oh, ow, i, gxGot[i], gxWant[i])
					}
				}
			}
		}
	}
}

// TestIm2colTable checks the gather-table im2col (assembly gather where available)
// against nnIm2col's row loops, and its col2im against nnCol2im, on 2-D geometries with
// strides, dilations, asymmetric padding and windows larger than the image.
func TestIm2colTable(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := 0; trial < 200; trial++ {
		var g nnGeom
		g.nd = 2
		g.in = [nnMaxSpatial]int{1, 1 + r.IntN(20), 1 + r.IntN(40)}
		g.k = [nnMaxSpatial]int{1, 1 + r.IntN(4), 1 + r.IntN(4)}
		g.s = [nnMaxSpatial]int{1, 1 + r.IntN(3), 1 + r.IntN(3)}
		g.d = [nnMaxSpatial]int{1, 1 + r.IntN(2), 1 + r.IntN(2)}
		g.pb = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.pe = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.out[0] = 1
		ok := true
		for j := 1; j < 3; j++ {
			span := (g.k[j]-1)*g.d[j] + 1
			n := g.in[j] + g.pb[j] + g.pe[j] - span
			if n < 0 {
				ok = false
				break
			}
			g.out[j] = n/g.s[j] + 1
		}
		if !ok {
			continue
		}
		C := 1 + r.IntN(3)
		K, O := g.kSize(), g.outSize()
		x := make([]float32, C*g.inSize())
		for i := range x {
			x[i] = r.Float32()
		}
		ld := O + r.IntN(5)
		want, got := make([]float32, C*K*ld), make([]float32, C*K*ld)
		nnIm2col(&g, C, x, want, ld)
		var tab nnGatherTable
		tab.table(&g).im2col(C, x, got, ld)
		for rr := 0; rr < C*K; rr++ {
			for o := 0; o < O; o++ {
				if got[rr*ld+o] != want[rr*ld+o] {
					t.Fatalf("trial %d %+v: col[%d, %d] = %v, want %v", trial, g, rr, o, got[rr*ld+o], want[rr*ld+o])
				}
			}
		}
		gx1, gx2 := make([]float32, len(x)), make([]float32, len(x))
		col := make([]float32, len(want))
		for i := range col {
			col[i] = r.Float32()
		}
		nnCol2im(&g, C, append([]float32(nil), col...), gx1, ld)
		tab.col2im(C, col, gx2, ld)
		for i := range gx1 {
			if math.Abs(float64(gx1[i]-gx2[i])) > 1e-5 {
				t.Fatalf("trial %d: col2im gx[%d] = %v, want %v", trial, i, gx2[i], gx1[i])
			}
		}
	}
}

// TestIm2colS2 checks the stride-2 assembly im2col against nnIm2col's row loops on 2-D
// geometries with column stride 2: any row stride, dilations, padding, and output rows up
// to 16 wide.
func TestIm2colS2(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	runs := 0
	for trial := 0; trial < 400; trial++ {
		var g nnGeom
		g.nd = 2
		g.in = [nnMaxSpatial]int{1, 1 + r.IntN(12), 1 + r.IntN(34)}
		g.k = [nnMaxSpatial]int{1, 1 + r.IntN(4), 1 + r.IntN(4)}
		g.s = [nnMaxSpatial]int{1, 1 + r.IntN(3), 2}
		g.d = [nnMaxSpatial]int{1, 1 + r.IntN(2), 1 + r.IntN(2)}
		g.pb = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.pe = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.out[0] = 1
		ok := true
		for j := 1; j < 3; j++ {
			n := g.in[j] + g.pb[j] + g.pe[j] - ((g.k[j]-1)*g.d[j] + 1)
			if n < 0 {
				ok = false
				break
			}
			g.out[j] = n/g.s[j] + 1
		}
		if !ok || !im2colS2Fast(&g) {
			continue
		}
		runs++
		C := 1 + r.IntN(3)
		K, O := g.kSize(), g.outSize()
		x := make([]float32, C*g.inSize())
		for i := range x {
			x[i] = r.Float32() + 1
		}
		want, got := make([]float32, C*K*O), make([]float32, C*K*O+1)
		got[C*K*O] = 42 // past the matrix: must stay
		nnIm2col(&g, C, x, want, O)
		var plan s2Plan
		p := plan.plan(&g, C)
		// Twice, on different images: what the plan does not write must stay zero.
		im2colS2(p, make([]float32, len(x)), got)
		im2colS2(p, x, got)
		for i, v := range want {
			if math.Float32bits(got[i]) != math.Float32bits(v) {
				t.Fatalf("trial %d %+v: col[%d] = %v, want %v", trial, g, i, got[i], v)
			}
		}
		if got[C*K*O] != 42 {
			t.Fatalf("trial %d: wrote past the matrix", trial)
		}
	}
	if runs == 0 && convTileOK() {
		t.Fatal("no geometry took the stride-2 im2col")
	}
	t.Logf("%d geometries", runs)
}

// TestTranspose checks transpose (scatter stores in assembly where available) against
// the definition on every shape up to 40 × 40, leaving t beyond R·C alone.
func TestTranspose(t *testing.T) {
	type rc struct{ R, C int }
	var cases []rc
	for R := 1; R <= 40; R++ {
		for C := 1; C <= 40; C++ {
			cases = append(cases, rc{R, C})
		}
	}
	// packRows' 8 × K blocks, which take transpose8AVX512 by whole chunks of 16 columns.
	for _, C := range []int{64, 100, 576, 1001} {
		cases = append(cases, rc{8, C})
	}
	for _, c := range cases {
		R, C := c.R, c.C
		{
			a := make([]float32, R*C)
			for i := range a {
				a[i] = float32(i + 1)
			}
			got := make([]float32, R*C+1)
			got[R*C] = -1
			transpose(got, a, R, C)
			for r := 0; r < R; r++ {
				for c := 0; c < C; c++ {
					if got[c*R+r] != a[r*C+c] {
						t.Fatalf("%d×%d: t[%d, %d] = %v, want %v", R, C, c, r, got[c*R+r], a[r*C+c])
					}
				}
			}
			if got[R*C] != -1 {
				t.Fatalf("%d×%d: wrote past the matrix", R, C)
			}
		}
	}
}

// TestColTPlan checks the copy plan for colᵀ against colT2D on 2-D geometries with
// strides, dilations and padding, twice per geometry so that the padding of the
// channel-last buffer is seen to stay zero.
func TestColTPlan(t *testing.T) {
	if !colTPlanFast() {
		t.Skip("no AVX-512 copy plan on this CPU; colT2D is the definition")
	}
	r := rand.New(rand.NewPCG(71, 72))
	for trial := 0; trial < 300; trial++ {
		var g nnGeom
		g.nd = 2
		g.in = [nnMaxSpatial]int{1, 1 + r.IntN(12), 1 + r.IntN(20)}
		g.k = [nnMaxSpatial]int{1, 1 + r.IntN(4), 1 + r.IntN(4)}
		g.s = [nnMaxSpatial]int{1, 1 + r.IntN(3), 1 + r.IntN(3)}
		g.d = [nnMaxSpatial]int{1, 1 + r.IntN(2), 1 + r.IntN(2)}
		g.pb = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.pe = [nnMaxSpatial]int{0, r.IntN(3), r.IntN(3)}
		g.out[0] = 1
		ok := true
		for j := 1; j < 3; j++ {
			n := g.in[j] + g.pb[j] + g.pe[j] - ((g.k[j]-1)*g.d[j] + 1)
			if n < 0 {
				ok = false
				break
			}
			g.out[j] = n/g.s[j] + 1
		}
		if !ok {
			continue
		}
		C := 1 + r.IntN(20)
		var plan cpPlan
		p := plan.plan(&g, C)
		xp := make([]float32, p.srcLen)
		for rep := 0; rep < 2; rep++ {
			xT := make([]float32, g.inSize()*C)
			for i := range xT {
				xT[i] = r.Float32() + 1
			}
			want := make([]float32, g.outSize()*C*g.kSize())
			got := make([]float32, len(want)+1)
			got[len(want)] = 42
			colT2D(&g, C, xT, want)
			p.fill(xp, xT)
			colTPlan(p, xp, got)
			for i, v := range want {
				if got[i] != v {
					t.Fatalf("trial %d %+v C=%d: colᵀ[%d] = %v, want %v", trial, g, C, i, got[i], v)
				}
			}
			if got[len(want)] != 42 {
				t.Fatalf("trial %d: wrote past colᵀ", trial)
			}
		}
	}
}

// TestConvTileFullPanels checks the tile kernel's loops for whole panels (both masks
// 0xffff, which load B without masks) bit for bit against the portable definition and
// against the masked loops: a run with one lane of the second panel masked off must give
// the same bits on every other lane. Both ways of reading B (rows ldb apart and the
// offset table) and the add, bias and activation flags are covered, with and without the
// prefetch hint, which takes a loop of its own.
func TestConvTileFullPanels(t *testing.T) {
	if !convTileOK() {
		t.Skip("no AVX-512 tile kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 3))
	for trial := 0; trial < 200; trial++ {
		k := []int{1, 2, 7, 64, 145}[trial%5]
		ldb, ldc := 16+r.IntN(40), 16+r.IntN(40)
		nrb := 1 + r.IntN(3)
		flags := r.IntN(2) | r.IntN(2)*tilePrefetch
		a := make([]float32, 8*k*nrb)
		b0, b1 := make([]float32, k*ldb), make([]float32, k*ldb)
		c0, c1 := make([]float32, 8*nrb*ldc), make([]float32, 8*nrb*ldc)
		var bias []float32
		if trial%3 != 0 {
			bias = make([]float32, 8*nrb)
		}
		for _, s := range [][]float32{a, b0, b1, c0, c1, bias} {
			for i := range s {
				s[i] = r.Float32()*2 - 1
			}
		}
		var offs *tileOffs
		if trial%2 == 1 {
			offs = randTileOffs(r, k, len(b0))
		}
		var tact *tileAct
		if trial%4 == 2 {
			ta, _ := dw3x3Flags(&nnClamp{relu: true})
			tact = &ta
		}
		run := func(f func(int, []float32, []float32, []float32, int, []float32, []float32, int, []float32, uint64, uint64, int, int, *tileOffs, *tileAct), m1 uint64) ([]float32, []float32) {
			d0, d1 := append([]float32(nil), c0...), append([]float32(nil), c1...)
			f(k, a, b0, b1, ldb, d0, d1, ldc, bias, 0xffff, m1, flags, nrb, offs, tact)
			return d0, d1
		}
		f0, f1 := run(convTile, 0xffff)
		g0, g1 := run(convTileGeneric, 0xffff)
		m0, m1 := run(convTile, 0x7fff)
		for i := range f0 {
			if math.Float32bits(f0[i]) != math.Float32bits(g0[i]) || math.Float32bits(f1[i]) != math.Float32bits(g1[i]) {
				t.Fatalf("trial %d (k=%d, offsets %v): c[%d] = %g, %g; the portable kernel gives %g, %g", trial, k, offs != nil, i, f0[i], f1[i], g0[i], g1[i])
			}
			if math.Float32bits(f0[i]) != math.Float32bits(m0[i]) || (i%ldc != 15 && math.Float32bits(f1[i]) != math.Float32bits(m1[i])) {
				t.Fatalf("trial %d (k=%d, offsets %v): c[%d] = %g, %g with whole panels, %g, %g with one lane masked", trial, k, offs != nil, i, f0[i], f1[i], m0[i], m1[i])
			}
		}
	}
}
