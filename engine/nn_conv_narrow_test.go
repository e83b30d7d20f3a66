package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// narrowCases are convolutions the narrow path takes (fewer than 32 output pixels over
// the batch, or one an image; at least 16 output channels per group): partial 32-channel panels and
// partial second halves, pixels spilling into a second and third row block, groups,
// strides, taps trimmed to the centre, and pointwise layers whose column matrix is the
// image itself (batch 1) or a gathered one.
var narrowCases = []convCase{
	{name: "m40_2x2", x: []int{1, 24, 2, 2}, w: []int{40, 24, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "m33_1x1_trimmed", x: []int{1, 16, 1, 1}, w: []int{33, 16, 3, 3}, pads: []int{1, 1, 1, 1}},
	{name: "m16_stride2_batch3", x: []int{3, 8, 4, 4}, w: []int{16, 8, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "group2_3x3_batch2", x: []int{2, 12, 3, 3}, w: []int{64, 6, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "m17_valid", x: []int{1, 20, 5, 5}, w: []int{17, 20, 3, 3}},
	{name: "pointwise_batch5", x: []int{5, 16, 1, 1}, w: []int{48, 16, 1, 1}, bias: true},
	{name: "pointwise_batch1_m100", x: []int{1, 64, 1, 1}, w: []int{100, 64, 1, 1}, bias: true},
	{name: "stride2_to_1x1", x: []int{1, 32, 2, 2}, w: []int{96, 32, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
	// One pixel an image takes the narrow path at any batch: a pointwise layer whose
	// rows of A come straight from x, groups, and a strided one through im2col.
	{name: "pointwise_batch40", x: []int{40, 16, 1, 1}, w: []int{48, 16, 1, 1}, bias: true},
	{name: "pointwise_batch37_group2", x: []int{37, 24, 1, 1}, w: []int{40, 12, 1, 1}, group: 2},
	{name: "stride2_to_1x1_batch33", x: []int{33, 8, 2, 2}, w: []int{32, 8, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	// Up to 64 pixels whose last 16-pixel panel would be half empty or more: ResNet-18's
	// 7 × 7 planes (few channels here, and a partial panel of them), 6 × 6 ones, and
	// four images of 3 × 3 (36 pixels, a row block and a half).
	{name: "7x7_m80", x: []int{1, 24, 7, 7}, w: []int{80, 24, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "6x6_m64_from_12x12_s2", x: []int{1, 16, 12, 12}, w: []int{64, 16, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
	{name: "3x3_batch4", x: []int{4, 8, 3, 3}, w: []int{56, 8, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
}

// TestConvNarrowNotTaken checks narrowOK's edges past 32 pixels: whole panels of pixels
// (8 × 8), a last panel more than half full (5 × 5 planes of two images: 50 = 3·16 + 2
// is taken, 7 × 7 of two, 98 pixels, is over 64), and channels that fill fewer of their
// lanes than the pixels do (49 pixels fill 77 %, 48 channels 75 %).
func TestConvNarrowNotTaken(t *testing.T) {
	for _, c := range []struct {
		x, w []int
		want bool
	}{
		{[]int{1, 16, 8, 8}, []int{64, 16, 3, 3}, false},
		{[]int{2, 16, 5, 5}, []int{64, 16, 3, 3}, true},
		{[]int{2, 16, 7, 7}, []int{64, 16, 3, 3}, false},
		{[]int{1, 16, 7, 7}, []int{48, 16, 3, 3}, false},
		{[]int{1, 16, 7, 7}, []int{64, 16, 3, 3}, true},
		{[]int{1, 16, 6, 6}, []int{64, 16, 3, 3}, true},
		{[]int{1, 16, 10, 10}, []int{64, 16, 3, 3}, false},
	} {
		k, d := pad1Dims(t, c.x, c.w)
		if got := k.narrowOK(&d); got != c.want {
			t.Errorf("x %v, w %v: narrowOK %v, want %v", c.x, c.w, got, c.want)
		}
	}
}

// fmaChainConv is the convolution as the tile kernel's contract computes it, in float32:
// each output starts at its bias (or 0) and adds x·w one fused multiply-add at a time in
// the column matrix's order (input channel, then kernel row, then kernel column), a
// padding tap adding 0·w; then the activation.
func fmaChainConv(x []float32, xs []int, w []float32, ws []int, b []float32, group int, strides, pads []int, act *nnClamp) []float32 {
	N, C, H, W := xs[0], xs[1], xs[2], xs[3]
	M, Cg, KH, KW := ws[0], ws[1], ws[2], ws[3]
	OH := (H+pads[0]+pads[2]-KH)/strides[0] + 1
	OW := (W+pads[1]+pads[3]-KW)/strides[1] + 1
	Mg := M / group
	var t tileAct
	if act != nil {
		t, _ = dw3x3Flags(act)
	}
	y := make([]float32, N*M*OH*OW)
	for n := range N {
		for m := range M {
			grp := m / Mg
			for oh := range OH {
				for ow := range OW {
					var s float32
					if b != nil {
						s = b[m]
					}
					for c := range Cg {
						ci := grp*Cg + c
						for kh := range KH {
							for kw := range KW {
								ih, iw := oh*strides[0]-pads[0]+kh, ow*strides[1]-pads[1]+kw
								var v float32
								if ih >= 0 && ih < H && iw >= 0 && iw < W {
									v = x[((n*C+ci)*H+ih)*W+iw]
								}
								s = float32(math.FMA(float64(v), float64(w[((m*Cg+c)*KH+kh)*KW+kw]), float64(s)))
							}
						}
					}
					if act != nil {
						s = t.apply(s)
					}
					y[((n*M+m)*OH+oh)*OW+ow] = s
				}
			}
		}
	}
	return y
}

// TestConvNarrow runs narrowCases through the narrow path (frozen weights, as it
// requires) on 1–3 workers and checks every output against the fused multiply-add chain
// of the tile kernel's contract, exactly, and against the float64 reference convolution;
// at batch 1 it must also equal forwardGemmTile's own products bit for bit.
func TestConvNarrow(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the narrow path does not run")
	}
	for _, c := range narrowCases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(7, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				in[1].param = &Param{Name: "w", Value: in[1]}
				var b64 []float64
				var b []float32
				if c.bias {
					b, b64 = in[2].F, to64(in[2].F)
				}
				group := max(c.group, 1)
				want, _ := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b64, group, strides, dil, pads)
				narrow := buildKernel(t, n).(*convKernel)
				narrow.noDirect = true
				tile := buildKernel(t, n).(*convKernel)
				tile.noDirect, tile.noNarrow = true, true
				ctx := nntGoCtx(workers)
				d, err := narrow.dims(c.x, c.w, n.Optional(in, 2))
				if err != nil {
					t.Fatal(err)
				}
				if !narrow.narrowOK(&d) {
					t.Fatal("the narrow path does not take this case")
				}
				for _, act := range testActs {
					chain := fmaChainConv(in[0].F, c.x, in[1].F, c.w, b, group, strides, pads, act)
					var outs [2][]float32
					for j, k := range []*convKernel{narrow, tile} {
						outs[j] = runTwice(t, k, ctx, n, in, act)
					}
					nntClose(t, fmt.Sprintf("narrow path, act %v", act), outs[0], refAct(want, act), 1e-5, 1e-5)
					for i, v := range outs[0] {
						// == rather than bits: a tap trimmed away adds no 0·w, which
						// can turn a −0 sum into +0.
						if v != chain[i] {
							t.Fatalf("act %v: Y[%d] = %v, the FMA chain gives %v", act, i, v, chain[i])
						}
						if c.x[0] == 1 && v != outs[1][i] {
							t.Fatalf("act %v: Y[%d] = %v, forwardGemmTile's products %v", act, i, v, outs[1][i])
						}
					}
				}
				if narrow.direct.packs != 1 {
					t.Errorf("the weights were packed %d times over %d runs, want once", narrow.direct.packs, 2*len(testActs))
				}
			})
		}
	}
}

// runTwice runs k on in with act into an output first filled with NaN, twice (the
// second run reads the weights packed by the first), and returns the output.
func runTwice(t *testing.T, k *convKernel, ctx *Context, n *Node, in []*Tensor, act *nnClamp) []float32 {
	t.Helper()
	y := nntRun(t, k, ctx, in)[0]
	for i := range y.F {
		y.F[i] = float32(math.NaN())
	}
	for range 2 {
		if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return y.F
}

// pad1Dims builds the kernel of a Conv of weight shape w with pads of 1 and the dims of
// its call on input shape x, for tests of the paths' rules.
func pad1Dims(t *testing.T, x, w []int) (*convKernel, convDims) {
	t.Helper()
	n, _, _, _ := convCase{x: x, w: w, pads: []int{1, 1, 1, 1}}.node(11)
	k := buildKernel(t, n).(*convKernel)
	d, err := k.dims(x, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k, d
}
