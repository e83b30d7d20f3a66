package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDWLanes checks the lanes path (8 channels in the lanes, AVX2) bit for bit against
// dwPlaneGo, the definition of the one-plane-at-a-time kernels it replaces, over 3×3 and 5×5 windows, unit stride and stride 2 (and
// 2 along rows only), symmetric and one-sided padding, planes of 3 to 14 columns (rows of
// 7, 14 and 16 outputs, last groups of 1 to 8 pixels), no bias, Relu, Clip, HardSwish,
// SiLU and no activation, on 1–3 workers; and the kernel itself against dwLanesGo, its definition
// (the AVX2 kernel wherever the CPU has it, AVX-512 or not; dwLanesGo itself without).
func TestDWLanes(t *testing.T) {
	type geo struct {
		C, H, W, K     int
		s1, s2         int
		pads           [4]int64
		bias           bool
		act            *nnClamp
		actName, label string
	}
	acts := []struct {
		name string
		a    *nnClamp
	}{{"none", nil}, {"relu", &nnClamp{relu: true}}, {"clip", &nnClamp{lo: 0, hi: 6}}, {"hardswish", &nnClamp{swish: true, a: 1.0 / 6, b: 0.5}}, {"silu", &nnClamp{silu: true}}}
	var cases []geo
	for i, g := range []geo{
		{C: 16, H: 14, W: 14, K: 3, s1: 1, s2: 1, pads: [4]int64{1, 1, 1, 1}},
		{C: 24, H: 7, W: 7, K: 3, s1: 1, s2: 1, pads: [4]int64{1, 1, 1, 1}},
		{C: 16, H: 14, W: 14, K: 3, s1: 2, s2: 2, pads: [4]int64{1, 1, 1, 1}},
		{C: 8, H: 7, W: 7, K: 5, s1: 1, s2: 1, pads: [4]int64{2, 2, 2, 2}},
		{C: 16, H: 14, W: 14, K: 5, s1: 2, s2: 2, pads: [4]int64{2, 2, 2, 2}},
		{C: 8, H: 9, W: 11, K: 3, s1: 2, s2: 1, pads: [4]int64{1, 1, 1, 1}},
		{C: 8, H: 5, W: 14, K: 3, s1: 1, s2: 1, pads: [4]int64{0, 2, 1, 0}},
		{C: 8, H: 4, W: 3, K: 3, s1: 1, s2: 1, pads: [4]int64{1, 1, 1, 1}},
		{C: 8, H: 6, W: 16, K: 3, s1: 1, s2: 1, pads: [4]int64{1, 1, 1, 1}},
	} {
		a := acts[i%len(acts)]
		g.act, g.actName, g.bias = a.a, a.name, i%3 != 2
		cases = append(cases, g)
	}
	for ci, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			name := fmt.Sprintf("C%d_%dx%d_k%d_s%d%d_%s_bias%v/w%d", c.C, c.H, c.W, c.K, c.s1, c.s2, c.actName, c.bias, workers)
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(53, uint64(ci*4+workers)))
				N := 1 + ci%3
				x, w := []int{N, c.C, c.H, c.W}, []int{c.C, 1, c.K, c.K}
				in := []*Tensor{nntRand(r, x, -2, 2), nntRand(r, w, -1, 1), nil}
				if c.bias {
					in[2] = nntRand(r, w[:1], -1, 1)
				}
				n := nntNode("Conv", 13, 3, 1, attrInts("pads", c.pads[0], c.pads[1], c.pads[2], c.pads[3]),
					attrInts("kernel_shape", int64(c.K), int64(c.K)), attrInts("strides", int64(c.s1), int64(c.s2)), attrI("group", int64(c.C)))
				k := buildKernel(t, n).(*convKernel)
				var b *Tensor
				if c.bias {
					b = in[2]
				}
				d, err := k.dims(x, w, b)
				if err != nil {
					t.Fatal(err)
				}
				ctx := &Context{Workers: workers}
				var bias []float32
				if b != nil {
					bias = b.F
				}
				O := d.g.outSize()
				got := make([]float32, N*c.C*O)
				k.forwardDWLanes(ctx, &d, in[0].F, in[1].F, bias, got, c.act)
				// The reference: every plane alone through dwPlaneGo, the definition of the
				// padded-plane kernels the lanes replace, then the bias and activation as
				// planeBiasAct applies them (the 3×3 AVX-512 kernel rounds otherwise).
				var pl dwPlan
				pl.setup(&d.g)
				pl.split, pl.cs = 0, d.g.s[2] // dwPlaneGo on the row as it is
				pl.offs = pl.offs[:0]
				for k1 := 0; k1 < c.K; k1++ {
					for k2 := 0; k2 < c.K; k2++ {
						pl.offs = append(pl.offs, int64(4*(k1*pl.pw+k2)))
					}
				}
				want := make([]float32, N*c.C*O)
				xp := make([]float32, pl.size)
				isz := c.H * c.W
				for p := 0; p < N*c.C; p++ {
					clear(xp)
					padRows(xp[int(c.pads[0])*pl.pw+int(c.pads[1]):], in[0].F[p*isz:(p+1)*isz], c.H, c.W, pl.pw)
					dwPlaneGo(&pl, xp, want[p*O:(p+1)*O], in[1].F[(p%c.C)*c.K*c.K:], false)
					var bm []float32
					if bias != nil {
						bm = bias[p%c.C : p%c.C+1]
					}
					planeBiasAct(want[p*O:(p+1)*O], bm, c.act)
				}
				for i, v := range got {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						t.Fatalf("y[%d] (plane %d, pixel %d) = %v through the lanes, %v plane by plane", i, i/O, i%O, v, want[i])
					}
				}
				// The kernel against its definition on the same padded buffer.
				l := k.dwLanes.setup(&d.g)
				buf := &k.dwLaneBuf[0]
				ta, _ := dw3x3Flags(c.act)
				y0, y1 := make([]float32, 8*O+5), make([]float32, 8*O+5)
				var bv []float32
				if bias != nil {
					bv = bias[:8]
				}
				dwLanesRun(l, buf.p, y0, O, buf.w, bv, ta)
				dwLanesGo(l, buf.p, y1, O, buf.w, bv, ta)
				for i := range y0 {
					if math.Float32bits(y0[i]) != math.Float32bits(y1[i]) {
						t.Fatalf("kernel y[%d] = %v, dwLanesGo %v", i, y0[i], y1[i])
					}
				}
			})
		}
	}
}

// BenchmarkDWLanes times MobileNetV2's and EfficientNet's depthwise layers on 14 × 14 and
// 7 × 7 planes at batch 32 through the lanes and plane by plane, in one process (run it
// with GODEBUG=cpu.avx512f=off on an AVX-512 CPU: the lanes path is the AVX2 path's):
//
//	GODEBUG=cpu.avx512f=off go test ./engine -run '^$' -bench DWLanes -benchtime 20x
func BenchmarkDWLanes(b *testing.B) {
	for _, s := range []struct{ C, HW, K, S int }{
		{384, 14, 3, 1}, {576, 14, 3, 1}, {576, 14, 3, 2}, {960, 7, 3, 1}, {672, 14, 5, 1}, {1152, 7, 5, 1},
	} {
		for _, lanes := range []bool{true, false} {
			name := fmt.Sprintf("%d@%d_k%ds%d/", s.C, s.HW, s.K, s.S)
			if lanes {
				name += "lanes"
			} else {
				name += "planes"
			}
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(2, 2))
				x, w := []int{32, s.C, s.HW, s.HW}, []int{s.C, 1, s.K, s.K}
				in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
				in[1].param = &Param{Name: "w", Value: in[1]}
				p := int64(s.K / 2)
				k := buildKernel(b, nntNode("Conv", 13, 3, 1, attrInts("pads", p, p, p, p), attrInts("kernel_shape", int64(s.K), int64(s.K)),
					attrInts("strides", int64(s.S), int64(s.S)), attrI("group", int64(s.C)))).(*convKernel)
				k.noDWLanes = !lanes
				ctx := benchCtx(b)
				outs := nntRun(b, k, ctx, in)
				for b.Loop() {
					if err := k.Forward(ctx, in, outs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
