package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// dwCases are depthwise geometries of the padded-plane path: MobileNet and EfficientNet
// layers (5×5, 7×7, stride 2, 3×3 rows wider than the 3×3 assembly takes), the OCR
// classifier's (2, 1) strides, a channel multiplier, asymmetric padding, rows of
// exactly 16 and 32 outputs, planes smaller than the kernel, and heights that are and are
// not multiples of the assembly's blocks of four rows.
var dwCases = []convCase{
	{name: "k5_s1", x: []int{2, 4, 14, 14}, w: []int{4, 1, 5, 5}, group: 4, pads: []int{2, 2, 2, 2}, bias: true},
	{name: "k5_s2", x: []int{2, 3, 15, 33}, w: []int{3, 1, 5, 5}, group: 3, strides: []int{2, 2}, pads: []int{2, 2, 2, 2}, bias: true},
	{name: "k3_s2", x: []int{3, 2, 16, 16}, w: []int{2, 1, 3, 3}, group: 2, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
	{name: "k3_s21", x: []int{2, 3, 12, 48}, w: []int{3, 1, 3, 3}, group: 3, strides: []int{2, 1}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "k7_mult2", x: []int{1, 2, 9, 20}, w: []int{4, 1, 7, 7}, group: 2, pads: []int{3, 3, 3, 3}, bias: true},
	{name: "k3_same_wide", x: []int{2, 2, 5, 40}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "k5_row16", x: []int{1, 2, 4, 16}, w: []int{2, 1, 5, 5}, group: 2, pads: []int{2, 2, 2, 2}},
	{name: "k5_s2_row32", x: []int{1, 2, 3, 64}, w: []int{2, 1, 5, 5}, group: 2, strides: []int{2, 2}, pads: []int{2, 2, 2, 2}},
	{name: "k4x2_asym", x: []int{2, 3, 7, 9}, w: []int{3, 1, 4, 2}, group: 3, strides: []int{3, 2}, pads: []int{0, 1, 2, 0}, bias: true},
	{name: "k5_on_2x2", x: []int{2, 2, 2, 2}, w: []int{2, 1, 5, 5}, group: 2, pads: []int{2, 2, 2, 2}, bias: true},
	{name: "k5_s2_on_1x1", x: []int{3, 2, 1, 1}, w: []int{2, 1, 5, 5}, group: 2, strides: []int{2, 2}, pads: []int{2, 2, 2, 2}},
	// Six rows of 32: a block of four rows, then one that backs up two rows, in two
	// whole chunks a row (the non-temporal stores of a block).
	{name: "k3_rows32", x: []int{1, 2, 6, 32}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	// Three rows of 48, as in the OCR classifier's late layers, and seven rows of 20: a
	// block of four whose fourth row lies below the plane, and one after a whole block.
	{name: "k5_rows3x48", x: []int{2, 3, 3, 48}, w: []int{3, 1, 5, 5}, group: 3, pads: []int{2, 2, 2, 2}, bias: true},
	{name: "k3_rows7x20", x: []int{1, 2, 7, 20}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}},
}

// TestDepthwisePaddedPlane checks the padded-plane depthwise path: its assembly against
// dwPlaneGo and the generic loop bit for bit, and the kernel's output (with bias and
// each fused activation) against the float64 reference convolution, with 1 to 3
// workers. Without the assembly it checks dwPlaneGo alone against the reference.
func TestDepthwisePaddedPlane(t *testing.T) {
	for _, c := range dwCases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(16, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				want, _ := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, c.group, strides, dil, pads)
				k := buildKernel(t, n).(*convKernel)
				d, err := k.dims(c.x, c.w, n.Optional(in, 2))
				if err != nil {
					t.Fatal(err)
				}
				if !d.depthwise || !dwPadOK(&d.g) {
					t.Fatal("the padded plane does not take this case")
				}
				checkDWPlanes(t, &d, in[0].F, in[1].F)
				if !dwPlaneFast() {
					return
				}
				generic := buildKernel(t, n).(*convKernel)
				generic.noDWPad = true
				ctx := nntGoCtx(workers)
				// Backward: both paths against the float64 adjoint.
				gy := nntRand(r, nntRun(t, k, ctx, in)[0].Shape, -1, 1)
				wgx, wgw, wgb := refConvGrad(to64(in[0].F), c.x, to64(in[1].F), c.w, to64(gy.F), c.group, strides, dil, pads)
				for _, kk := range []*convKernel{k, generic} {
					out := nntRun(t, kk, ctx, in)
					grads := convGrads(t, kk, ctx, in, out, gy, true)
					nntClose(t, fmt.Sprintf("gX (padded %v)", !kk.noDWPad), grads[0].F, wgx, 1e-5, 1e-5)
					nntClose(t, fmt.Sprintf("gW (padded %v)", !kk.noDWPad), grads[1].F, wgw, 1e-4, 1e-5)
					if c.bias {
						nntClose(t, "gB", grads[2].F, wgb, 1e-4, 1e-5)
					}
				}
				for _, act := range testActs {
					wantAct := refAct(want, act)
					var outs [2][]float32
					for j, kk := range []*convKernel{k, generic} {
						y := nntRun(t, kk, ctx, in)[0]
						for i := range y.F {
							y.F[i] = float32(math.NaN())
						}
						if err := kk.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, nil); err != nil {
							t.Fatal(err)
						}
						outs[j] = y.F
					}
					nntClose(t, fmt.Sprintf("Y (act %v)", act), outs[0], wantAct, 1e-5, 1e-5)
					for i, v := range outs[0] {
						if math.Float32bits(v) != math.Float32bits(outs[1][i]) {
							t.Fatalf("act %v: Y[%d] = %v on the padded plane, %v on the generic loop", act, i, v, outs[1][i])
						}
					}
				}
			})
		}
	}
}

// checkDWPlanes runs every plane of d through dwPlaneGo, and through dwPlane when it is
// assembly, and compares them bit for bit and with the reference taps in float64.
func checkDWPlanes(t *testing.T, d *convDims, x, w []float32) {
	t.Helper()
	var p dwPlan
	p.setup(&d.g)
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	buf := make([]float32, p.size)
	for i := range buf {
		buf[i] = float32(math.NaN()) // overrun lanes must not reach the output
	}
	for i := 0; i < (g.in[1]+g.pb[1]+g.pe[1])*p.pw; i++ {
		buf[i] = 0
	}
	for m := 0; m < d.M; m++ {
		c := m / d.Mg
		p.fill(buf, x[c*isz:(c+1)*isz])
		want := make([]float32, O)
		dwPlaneGo(&p, buf, want, w[m*K:(m+1)*K], false)
		for o1 := 0; o1 < g.out[1]; o1++ {
			for o2 := 0; o2 < g.out[2]; o2++ {
				var s float64
				for k1 := 0; k1 < g.k[1]; k1++ {
					for k2 := 0; k2 < g.k[2]; k2++ {
						i1, i2 := o1*g.s[1]+k1-g.pb[1], o2*g.s[2]+k2-g.pb[2]
						if i1 >= 0 && i1 < g.in[1] && i2 >= 0 && i2 < g.in[2] {
							s += float64(w[m*K+k1*g.k[2]+k2]) * float64(x[c*isz+i1*g.in[2]+i2])
						}
					}
				}
				if got := float64(want[o1*g.out[2]+o2]); math.Abs(got-s) > 1e-5*(1+math.Abs(s)) {
					t.Fatalf("plane %d: dwPlaneGo [%d, %d] = %v, reference %v", m, o1, o2, got, s)
				}
			}
		}
		// With each activation (and a Clip with a NaN bound, which the assembly leaves
		// to planeBiasAct), with and without a bias: dwPlane against dwPlaneGo plus
		// planeBiasAct.
		// Add mode, and the weight gradient of a random output gradient: assembly
		// against the definitions bit for bit, and the gradient against float64.
		gy := make([]float32, O)
		for i := range gy {
			gy[i] = float32(math.Sin(float64(m*O+i))) / 2
		}
		addGot, addWant := append([]float32(nil), gy...), append([]float32(nil), gy...)
		dwPlaneAdd(&p, buf, addGot, w[m*K:(m+1)*K])
		dwPlaneGo(&p, buf, addWant, w[m*K:(m+1)*K], true)
		gwGot, gwWant := make([]float32, K), make([]float32, K)
		for t := range gwGot {
			gwGot[t], gwWant[t] = 0.5, 0.5
		}
		dwGradW(&p, buf, gy, gwGot)
		dwGradWGo(&p, buf, gy, gwWant)
		for i := range addGot {
			if math.Float32bits(addGot[i]) != math.Float32bits(addWant[i]) {
				t.Fatalf("plane %d: dwPlaneAdd [%d] = %v, dwPlaneGo %v", m, i, addGot[i], addWant[i])
			}
		}
		for k1 := 0; k1 < g.k[1]; k1++ {
			for k2 := 0; k2 < g.k[2]; k2++ {
				tap := k1*g.k[2] + k2
				if math.Float32bits(gwGot[tap]) != math.Float32bits(gwWant[tap]) {
					t.Fatalf("plane %d: dwGradW [%d] = %v, dwGradWGo %v", m, tap, gwGot[tap], gwWant[tap])
				}
				s := 0.5
				for o1 := 0; o1 < g.out[1]; o1++ {
					for o2 := 0; o2 < g.out[2]; o2++ {
						i1, i2 := o1*g.s[1]+k1-g.pb[1], o2*g.s[2]+k2-g.pb[2]
						if i1 >= 0 && i1 < g.in[1] && i2 >= 0 && i2 < g.in[2] {
							s += float64(gy[o1*g.out[2]+o2]) * float64(x[c*isz+i1*g.in[2]+i2])
						}
					}
				}
				if math.Abs(float64(gwGot[tap])-s) > 1e-5*(1+float64(O)) {
					t.Fatalf("plane %d: dwGradW [%d] = %v, reference %v", m, tap, gwGot[tap], s)
				}
			}
		}
		// With stream, the plane starts 64-byte aligned (the non-temporal stores) or one
		// value after (the ordinary ones).
		acts := append([]*nnClamp{{lo: float32(math.NaN()), hi: 0.5}, {silu: true}}, testActs...)
		for _, act := range acts {
			for _, bias := range [][]float32{nil, {0.25}} {
				wantAct := append([]float32(nil), want...)
				planeBiasAct(wantAct, bias, act)
				for _, stream := range []bool{false, true} {
					for shift := range 2 {
						got := alignedF32(O+1, shift)
						got[O] = 42
						dwPlane(&p, buf, got[:O], w[m*K:(m+1)*K], bias, act, stream, make([]float32, O))
						if got[O] != 42 {
							t.Fatalf("plane %d: dwPlane wrote past the plane", m)
						}
						for i := range wantAct {
							if math.Float32bits(got[i]) != math.Float32bits(wantAct[i]) {
								t.Fatalf("plane %d, act %v, bias %v, stream %v (shift %d): dwPlane [%d] = %v, dwPlaneGo %v",
									m, act, bias, stream, shift, i, got[i], wantAct[i])
							}
						}
					}
				}
			}
		}
	}
}

// alignedF32 returns n zero values that start shift values after a 64-byte boundary.
func alignedF32(n, shift int) []float32 {
	s := make([]float32, n+32)
	o := int((64 - uintptr(unsafe.Pointer(&s[0]))%64) % 64 / 4)
	return s[o+shift : o+shift+n]
}

// TestDWBackS2 checks dwBackS2 (the assembly where the CPU has it) against dwBackS2Go bit
// for bit at every row length to 40 and 1 to 3 rows, gx's odd values and everything
// past each row's last even value left alone; and dwBackTap against the row-by-row
// nnDepthwiseBackRow it replaces on the strided cases of dwCases of column stride 1 or 2
// and on dilated and odd-sized windows, every tap, bit for bit.
func TestDWBackS2(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	for n := 1; n <= 40; n++ {
		for rows := 1; rows <= 3; rows++ {
			ldx, ldy := 2*n+3, n+1
			gy := nntRand(r, []int{(rows-1)*ldy + n}, -2, 2).F
			got := nntRand(r, []int{(rows-1)*ldx + 2*n + 4}, -2, 2).F
			want := append([]float32(nil), got...)
			// An infinite w turns the product of any lane it should not touch into NaN.
			for _, w := range []float32{float32(r.NormFloat64()), float32(math.Inf(1))} {
				dwBackS2(got[:(rows-1)*ldx+2*n-1], ldx, gy, ldy, n, rows, w)
				dwBackS2Go(want, ldx, gy, ldy, n, rows, w)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n = %d, %d rows, w = %v: gx[%d] = %v, want %v", n, rows, w, i, got[i], want[i])
					}
				}
			}
		}
	}
	cases := []convCase{
		{name: "k3_s2_dil2", x: []int{1, 1, 17, 19}, w: []int{1, 1, 3, 3}, group: 1, strides: []int{2, 2}, dil: []int{2, 2}, pads: []int{2, 2, 2, 2}},
		{name: "k5_s12_odd", x: []int{1, 1, 11, 23}, w: []int{1, 1, 5, 5}, group: 1, strides: []int{1, 2}, pads: []int{2, 1, 2, 3}},
	}
	for _, c := range dwCases {
		if c.strides != nil && c.strides[1] <= 2 {
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		n, _, _, _ := c.node(11)
		k := buildKernel(t, n).(*convKernel)
		in := c.inputs(r)
		d, err := k.dims(in[0].Shape, in[1].Shape, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := &d.g
		gy := nntRand(r, []int{g.outSize()}, -2, 2).F
		got := nntRand(r, []int{g.inSize()}, -2, 2).F
		want := append([]float32(nil), got...)
		for k1 := 0; k1 < g.k[1]; k1++ {
			for k2 := 0; k2 < g.k[2]; k2++ {
				w := float32(r.NormFloat64())
				dwBackTap(g, w, gy, got, k1, k2)
				nnDepthwiseBackRow(g, w, nil, gy, want, 0, k1, k2)
			}
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: gx[%d] = %v, row by row %v", c.name, i, got[i], want[i])
			}
		}
	}
}
