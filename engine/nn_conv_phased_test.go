package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// phasedCases are stride-2 windows the phase planes take on either kernel with up to 3
// workers (output rows of 12 pixels or more, sums of at most convPhasedMaxK rows, at
// least two images a worker): a 7×7 stem, 3×3 layers of few channels, odd and even
// images, pads of 0 to 3 and asymmetric ones, a 1×1 and a 2×2 kernel, groups.
var phasedCases = []convCase{
	{name: "3x3_p1_even", x: []int{6, 8, 28, 28}, w: []int{16, 8, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "3x3_p1_odd", x: []int{7, 5, 27, 29}, w: []int{12, 5, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "7x7_p3_stem", x: []int{6, 3, 32, 30}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}},
	{name: "3x3_asym_pads", x: []int{6, 4, 25, 26}, w: []int{9, 4, 3, 3}, strides: []int{2, 2}, pads: []int{0, 1, 2, 0}, bias: true},
	{name: "3x3_valid", x: []int{6, 6, 27, 27}, w: []int{24, 6, 3, 3}, strides: []int{2, 2}},
	{name: "1x1", x: []int{6, 6, 26, 26}, w: []int{10, 6, 1, 1}, strides: []int{2, 2}, bias: true},
	{name: "2x2_p0", x: []int{6, 4, 24, 24}, w: []int{8, 4, 2, 2}, strides: []int{2, 2}},
	{name: "group2", x: []int{6, 8, 24, 24}, w: []int{16, 4, 3, 3}, group: 2, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "5x5_p2", x: []int{6, 4, 30, 31}, w: []int{8, 4, 5, 5}, strides: []int{2, 2}, pads: []int{2, 2, 2, 2}, bias: true},
}

// TestConvPhased runs phasedCases on the direct path with and without the phase planes
// (noPhased: the column matrix of the stride-2 plan or rows), 1–3 workers, with
// activations and a residual, and checks that the two give the same bits (the same
// chains of fused multiply-adds) and match the float64 reference convolution.
func TestConvPhased(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	for _, c := range phasedCases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(71, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				var b64 []float64
				if c.bias {
					b64 = to64(in[2].F)
				}
				want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b64, max(c.group, 1), strides, dil, pads)
				res := nntRand(r, ws, -1, 1)
				ctx := nntGoCtx(workers)
				for _, withRes := range []bool{false, true} {
					for _, act := range testActs {
						var outs [2][]float32
						var runs [2]int
						for j, noPhased := range []bool{false, true} {
							k := buildKernel(t, n).(*convKernel)
							k.direct.noPhased = noPhased
							y := NewFloat(ws, make([]float32, len(want)))
							for i := range y.F {
								y.F[i] = float32(math.NaN())
							}
							var rt *Tensor
							if withRes {
								rt = res
							}
							// Twice: the second run finds the planes' padding already zero.
							for range 2 {
								if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, rt); err != nil {
									t.Fatal(err)
								}
							}
							outs[j], runs[j] = y.F, k.direct.phasedRuns
						}
						if runs[0] != 2 || runs[1] != 0 {
							t.Fatalf("phase planes ran %d and %d times, want 2 and 0", runs[0], runs[1])
						}
						exp := append([]float64(nil), want...)
						if withRes {
							for i, v := range res.F {
								exp[i] += float64(v)
							}
						}
						nntClose(t, fmt.Sprintf("phase planes, res %v, act %v", withRes, act), outs[0], refAct(exp, act), 1e-5, 1e-5)
						for i, v := range outs[0] {
							if math.Float32bits(v) != math.Float32bits(outs[1][i]) {
								t.Fatalf("res %v act %v: Y[%d] = %v, through the column matrix %v", withRes, act, i, v, outs[1][i])
							}
						}
					}
				}
			})
		}
	}
}

// TestConvPhasedNotTaken checks the phase planes' limits: rows narrower than the direct
// path's padded rows take (11 pixels on the AVX2 path, 7 with AVX-512), dilation,
// strides other than 2 in both dimensions, sums longer than convPhasedMaxK (288 rows),
// and batches of fewer than two images a worker (3 images, 2 workers).
func TestConvPhasedNotTaken(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no tile kernel on this CPU")
	}
	narrow := 22 // 11 output pixels a row
	if convTileOK() {
		narrow = 14
	}
	for _, c := range []convCase{
		{name: "narrow_rows", x: []int{4, 4, 24, narrow}, w: []int{8, 4, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
		{name: "dilated", x: []int{4, 4, 30, 30}, w: []int{8, 4, 3, 3}, strides: []int{2, 2}, dil: []int{2, 2}, pads: []int{2, 2, 2, 2}},
		{name: "stride_2x1", x: []int{4, 4, 30, 30}, w: []int{8, 4, 3, 3}, strides: []int{2, 1}, pads: []int{1, 1, 1, 1}},
		{name: "stride_3", x: []int{4, 4, 45, 45}, w: []int{8, 4, 3, 3}, strides: []int{3, 3}, pads: []int{1, 1, 1, 1}},
		{name: "long_sum", x: []int{4, 32, 28, 28}, w: []int{8, 32, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
		{name: "batch_3_of_2_workers", x: []int{3, 4, 28, 28}, w: []int{8, 4, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(72, 1))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, nil, 1, strides, dil, pads)
			k := buildKernel(t, n).(*convKernel)
			k.forceDirect = true
			y := NewFloat(ws, make([]float32, len(want)))
			if err := k.run(nntGoCtx(2), in[0], in[1], nil, y, nil, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			nntClose(t, "Y", y.F, want, 1e-5, 1e-5)
			if k.direct.phasedRuns != 0 {
				t.Fatal("the phase planes ran")
			}
		})
	}
}

// TestConvPhasedPooled checks the phase planes under a fused MaxPool (ResNet-18's stem
// and its 3×3 stride-2 pool; SqueezeNet's 3×3 stem), with the plan's buffer of the whole
// output and without it: the same bits as through the column matrix, 1–3 workers.
func TestConvPhasedPooled(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	for _, c := range []convCase{
		{name: "resnet_stem", x: []int{6, 3, 40, 38}, w: []int{16, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true},
		{name: "squeezenet_stem", x: []int{7, 3, 41, 41}, w: []int{12, 3, 3, 3}, strides: []int{2, 2}, bias: true},
	} {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(74, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				_, ys := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, nil, 1, strides, dil, pads)
				pn := nntNode("MaxPool", 12, 1, 1, attrInts("kernel_shape", 3, 3), attrInts("strides", 2, 2))
				N, M, H, W := ys[0], ys[1], ys[2], ys[3]
				ps := []int{N, M, (H-3)/2 + 1, (W-3)/2 + 1}
				ctx := nntGoCtx(workers)
				for _, withFull := range []bool{true, false} {
					var outs [2][]float32
					var runs [2]int
					for j, noPhased := range []bool{false, true} {
						k := buildKernel(t, n).(*convKernel)
						k.direct.noPhased = noPhased
						pool := buildKernel(t, pn).(*poolKernel)
						out := NewFloat(ps, make([]float32, numel(ps)))
						for i := range out.F {
							out.F[i] = float32(math.NaN())
						}
						var full *Tensor
						if withFull {
							full = NewFloat(slices.Clone(ys), make([]float32, numel(ys)))
						}
						if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), out, &nnClamp{relu: true}, pool, full, nil); err != nil {
							t.Fatal(err)
						}
						outs[j], runs[j] = out.F, k.direct.phasedRuns
					}
					if runs[0] != 1 || runs[1] != 0 {
						t.Fatalf("phase planes ran %d and %d times, want 1 and 0", runs[0], runs[1])
					}
					for i, v := range outs[0] {
						if math.Float32bits(v) != math.Float32bits(outs[1][i]) || v != v {
							t.Fatalf("plan buffer %v: pooled Y[%d] = %v, through the column matrix %v", withFull, i, v, outs[1][i])
						}
					}
				}
			})
		}
	}
}
