package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// directCases adds to convCases the shapes the direct path treats specially: output
// channel counts that are not multiples of 8 (tiles through the landing area), planes
// with an odd number of 16-pixel panels (two images per work item, and a batch whose
// last item is alone), planes of one pixel, pointwise layers with groups, and the
// fmnist layers.
var directCases = append([]convCase{
	// One image and more row blocks than workers: the workers split the output channels.
	// One image and one output pixel: a matrix-vector product off the direct path.
	{name: "one_item_one_pixel", x: []int{1, 6, 3, 3}, w: []int{20, 6, 3, 3}, bias: true},
	{name: "one_item_m37", x: []int{1, 5, 12, 14}, w: []int{37, 5, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "m13_odd_batch", x: []int{5, 3, 9, 11}, w: []int{13, 3, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "m1_one_item", x: []int{1, 2, 6, 6}, w: []int{1, 2, 3, 3}, pads: []int{1, 1, 1, 1}},
	{name: "one_pixel", x: []int{3, 4, 3, 3}, w: []int{10, 4, 3, 3}, bias: true},
	{name: "pointwise_group2", x: []int{3, 6, 5, 7}, w: []int{10, 3, 1, 1}, group: 2, bias: true},
	{name: "pointwise_m20", x: []int{2, 17, 4, 4}, w: []int{20, 17, 1, 1}},
	{name: "fmnist_conv2", x: []int{4, 16, 14, 14}, w: []int{32, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "fmnist_stride2", x: []int{3, 32, 7, 7}, w: []int{64, 32, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}},
	{name: "fmnist_conv1", x: []int{3, 1, 28, 28}, w: []int{16, 1, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	// Unit strides and rows of 12 or more outputs take the implicit im2col.
	{name: "padded_dil_asym", x: []int{3, 3, 16, 17}, w: []int{10, 3, 3, 2}, dil: []int{2, 1}, pads: []int{1, 0, 2, 1}, bias: true},
	{name: "padded_group_odd_panels", x: []int{3, 4, 13, 13}, w: []int{6, 2, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "padded_wide", x: []int{2, 2, 5, 40}, w: []int{9, 2, 1, 5}, pads: []int{0, 2, 0, 2}},
	// Rows of 27 outputs run as packed panels along the padded rows on AVX-512 CPUs
	// (TestConvPanelsPacked): odd batch, groups, and one image whose output channels
	// the workers split.
	{name: "wide_rows_odd_batch", x: []int{3, 5, 27, 27}, w: []int{20, 5, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "wide_rows_group", x: []int{2, 4, 27, 27}, w: []int{6, 2, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}},
	{name: "wide_rows_one_item_m37", x: []int{1, 5, 27, 27}, w: []int{37, 5, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	// Rows of 8 to 11 outputs take the implicit im2col with AVX-512 (packed panels along
	// the padded rows), the gather table on AVX2.
	{name: "rows8_batch3", x: []int{3, 16, 8, 8}, w: []int{24, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "rows10_one_item", x: []int{1, 4, 10, 10}, w: []int{40, 4, 3, 3}, pads: []int{1, 1, 1, 1}},
	// Column stride 2 and output rows of 16 or more take the stride-2 row copies
	// (nnIm2colS2Rows): a 7×7 stem, odd and even input widths, dilation, a 1×1
	// downsampling layer, row stride 1, and a stem large enough to go in chunks of rows.
	{name: "s2rows_stem", x: []int{2, 3, 21, 40}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true},
	{name: "s2rows_odd_width_dil", x: []int{2, 4, 9, 37}, w: []int{10, 4, 3, 3}, strides: []int{2, 2}, dil: []int{1, 2}, pads: []int{1, 2, 0, 1}},
	{name: "s2rows_1x1", x: []int{3, 6, 8, 33}, w: []int{12, 6, 1, 1}, strides: []int{2, 2}, bias: true},
	{name: "s2rows_row_stride1", x: []int{1, 2, 6, 34}, w: []int{9, 2, 3, 2}, strides: []int{1, 2}, pads: []int{1, 0, 1, 1}},
	{name: "s2rows_chunked", x: []int{1, 3, 21, 224}, w: []int{16, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true},
}, convCases...)

// TestConvDirectMatchesGemm runs every case through the direct path, through im2col with
// the tile kernel and through im2col + Sgemm with gonum's BLAS, forward (plain, with Relu
// and with Clip fused) and backward, and checks them against the float64 reference
// convolution and against each other.
func TestConvDirectMatchesGemm(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	for _, c := range directCases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(5, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				want, _ := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, max(c.group, 1), strides, dil, pads)
				direct := buildKernel(t, n).(*convKernel)
				// The direct path's own products: fmnist_conv2 goes to the Winograd path
				// on the AVX2 path, which TestConvWinograd checks to its own bound.
				direct.forceDirect, direct.noWinograd = true, true
				gemm := buildKernel(t, n).(*convKernel)
				gemm.noDirect = true
				sgemm := buildKernel(t, n).(*convKernel)
				sgemm.noDirect, sgemm.noTile = true, true
				ctx := nntGoCtx(workers)
				// The weights as a frozen parameter's, which the tile kernel's im2col
				// path (and the direct path's cache) require.
				in[1].param = &Param{Name: "w", Value: in[1]}
				d, err := direct.dims(c.x, c.w, n.Optional(in, 2))
				if err != nil {
					t.Fatal(err)
				}
				if !d.depthwise && !direct.directOK(&d) {
					t.Fatal("the direct path does not take this case")
				}
				for _, act := range testActs {
					wantAct := refAct(want, act)
					outs := [3][]float32{}
					for j, k := range []*convKernel{direct, gemm, sgemm} {
						y := nntRun(t, k, ctx, in)[0]
						for i := range y.F {
							y.F[i] = float32(math.NaN())
						}
						if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, nil); err != nil {
							t.Fatal(err)
						}
						outs[j] = y.F
						nntClose(t, fmt.Sprintf("Y (path %d, act %v)", j, act), y.F, wantAct, 1e-5, 1e-5)
					}
					nntClose(t, "direct vs im2col", outs[0], to64(outs[1]), 1e-5, 1e-5)
					nntClose(t, "direct vs im2col + Sgemm", outs[0], to64(outs[2]), 1e-5, 1e-5)
				}

				out := nntRun(t, direct, ctx, in)
				gy := nntRand(r, out[0].Shape, -1, 1)
				grads := [2][]*Tensor{}
				for j, k := range []*convKernel{direct, gemm} {
					grads[j] = convGrads(t, k, ctx, in, out, gy, false)
				}
				// Scratch that a backward pass shares with the forward pass must not
				// change the next forward result.
				again := nntRun(t, direct, ctx, in)
				for i, v := range again[0].F {
					if math.Float32bits(v) != math.Float32bits(out[0].F[i]) {
						t.Fatalf("forward after backward: Y[%d] = %v, first forward %v", i, v, out[0].F[i])
					}
				}
				// The gradients of X and W are sums of up to n products, rounded in a
				// different order on each path; they may differ by 2·n·u times the sum
				// of the terms' magnitudes, which is the gradient of |X|, |W| at |gy|.
				mag := convGrads(t, gemm, ctx, convAbs(in), out, convAbs([]*Tensor{gy})[0], true)
				terms := out[0].Len()/out[0].Shape[1] + in[1].Len()
				for i := range in {
					for e, v := range grads[0][i].F {
						tol := 2*float64(terms)*0x1p-24*float64(mag[i].F[e]) + 1e-6
						if d := math.Abs(float64(v) - float64(grads[1][i].F[e])); d > tol {
							t.Fatalf("gradient of input %d [%d]: direct %g, gemm %g (difference %.3g > %.3g)", i, e, v, grads[1][i].F[e], d, tol)
						}
					}
				}
			})
		}
	}
}

// testActs are the activations a convolution fuses, as the tests run them.
var testActs = []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.75}, {swish: true, a: 1.0 / 6, b: 0.5}}

// refAct applies act (nil: none) to a copy of the reference values want, in float64.
func refAct(want []float64, act *nnClamp) []float64 {
	out := append([]float64(nil), want...)
	for i, v := range out {
		switch {
		case act == nil:
		case act.relu:
			out[i] = max(v, 0)
		case act.swish:
			out[i] = v * min(max(v/6+0.5, 0), 1)
		case act.silu:
			out[i] = v / (1 + math.Exp(-v))
		default:
			out[i] = min(max(v, float64(act.lo)), float64(act.hi))
		}
	}
	return out
}

// convGrads runs k's Backward at gy into gradients pre-filled with random values (or
// zeros with zero set), which Backward must add to, and returns them minus those values.
func convGrads(t *testing.T, k *convKernel, ctx *Context, in, out []*Tensor, gy *Tensor, zero bool) []*Tensor {
	t.Helper()
	gin := make([]*Tensor, len(in))
	start := make([]*Tensor, len(in))
	for i := range gin {
		if zero {
			gin[i] = NewFloat(in[i].Shape, make([]float32, in[i].Len()))
		} else {
			gin[i] = nntRand(rand.New(rand.NewPCG(9, uint64(i))), in[i].Shape, -1, 1)
		}
		start[i] = NewFloat(in[i].Shape, append([]float32(nil), gin[i].F...))
	}
	if err := k.Backward(ctx, in, out, []*Tensor{gy}, gin); err != nil {
		t.Fatal(err)
	}
	for i := range gin {
		for e := range gin[i].F {
			gin[i].F[e] -= start[i].F[e]
		}
	}
	return gin
}

// convAbs returns copies of the tensors with every value replaced by its magnitude.
func convAbs(in []*Tensor) []*Tensor {
	out := make([]*Tensor, len(in))
	for i, x := range in {
		f := make([]float32, len(x.F))
		for j, v := range x.F {
			f[j] = float32(math.Abs(float64(v)))
		}
		out[i] = NewFloat(x.Shape, f)
	}
	return out
}

// TestConvFusedPool checks a Conv with a MaxPool fused after its activation, on the
// direct path (2×2 windows, pooled per block of images) and on the fallback through the
// kernel's own buffer (3×3 windows, and im2col + Sgemm), against the float64 reference
// convolution pooled by hand.
func TestConvFusedPool(t *testing.T) {
	cases := []struct {
		c    convCase
		k, s int
	}{
		{convCase{name: "cnn_conv1", x: []int{5, 1, 28, 28}, w: []int{16, 1, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, 2, 2},
		{convCase{name: "odd_plane", x: []int{3, 3, 7, 9}, w: []int{10, 3, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, 2, 2},
		{convCase{name: "window3", x: []int{2, 2, 8, 8}, w: []int{8, 2, 3, 3}, pads: []int{1, 1, 1, 1}}, 3, 2},
		// Three images of an odd number of panels: two blocks of two images, more than
		// the plan's buffer holds for two workers.
		{convCase{name: "window3_odd_panels", x: []int{3, 2, 6, 6}, w: []int{8, 2, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, 3, 2},
		// A stem whose column matrix goes in chunks of output rows (nnIm2colS2Rows).
		{convCase{name: "s2rows_chunked", x: []int{2, 3, 23, 224}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true}, 2, 2},
		// One image: the two workers take its chunks of rows, the pool runs after.
		{convCase{name: "s2rows_chunked_one_item", x: []int{1, 3, 23, 224}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true}, 3, 2},
		// Three images: each pooled from its chunks' rows (pooledChunks), windows of 3
		// across the chunks of 3 rows.
		{convCase{name: "s2rows_chunked_ring", x: []int{3, 3, 23, 224}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true}, 3, 2},
		// One image whose column matrix is whole: the two workers take halves of its
		// output channels and pool their planes (ResNet-18's stem at 32 px; 20 channels:
		// parts of one and two row blocks, the second ending in a partial block).
		{convCase{name: "one_image_stem", x: []int{1, 3, 32, 32}, w: []int{64, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true}, 3, 2},
		{convCase{name: "one_image_m20", x: []int{1, 4, 12, 12}, w: []int{20, 4, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, 2, 2},
	}
	for _, tc := range cases {
		for _, noDirect := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/noDirect=%v", tc.c.name, noDirect), func(t *testing.T) {
				c := tc.c
				r := rand.New(rand.NewPCG(11, 12))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				y, ys := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, 1, strides, dil, pads)
				for i, v := range y {
					y[i] = max(v, 0)
				}
				N, M, H, W := ys[0], ys[1], ys[2], ys[3]
				PH, PW := (H-tc.k)/tc.s+1, (W-tc.k)/tc.s+1
				want := make([]float64, N*M*PH*PW)
				for p := 0; p < N*M; p++ {
					for i := 0; i < PH; i++ {
						for j := 0; j < PW; j++ {
							m := math.Inf(-1)
							for a := 0; a < tc.k; a++ {
								for e := 0; e < tc.k; e++ {
									m = max(m, y[(p*H+i*tc.s+a)*W+j*tc.s+e])
								}
							}
							want[(p*PH+i)*PW+j] = m
						}
					}
				}
				k := buildKernel(t, n).(*convKernel)
				k.noDirect = noDirect
				k.forceDirect = !noDirect
				pn := nntNode("MaxPool", 12, 1, 1, attrInts("kernel_shape", int64(tc.k), int64(tc.k)), attrInts("strides", int64(tc.s), int64(tc.s)))
				pool := buildKernel(t, pn).(*poolKernel)
				out := NewFloat([]int{N, M, PH, PW}, make([]float32, len(want)))
				for i := range out.F {
					out.F[i] = float32(math.NaN())
				}
				ctx := nntGoCtx(2)
				full := NewFloat(slices.Clone(ys), make([]float32, N*M*H*W))
				if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), out, &nnClamp{relu: true}, pool, full, nil); err != nil {
					t.Fatal(err)
				}
				nntClose(t, "pooled Y", out.F, want, 1e-5, 1e-5)
				if got, wantParts := k.direct.poolParts > 0, N == 1 && !noDirect && convDirectOK() && !strings.Contains(tc.c.name, "chunked"); got != wantParts {
					t.Fatalf("output channels split ahead of the pool %v, want %v", got, wantParts)
				}
				if !noDirect && convDirectOK() {
					// Without the plan's buffer the direct path pools from blocks of its
					// own.
					for i := range out.F {
						out.F[i] = float32(math.NaN())
					}
					if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), out, &nnClamp{relu: true}, pool, nil, nil); err != nil {
						t.Fatal(err)
					}
					nntClose(t, "pooled Y, no plan buffer", out.F, want, 1e-5, 1e-5)
				}
			})
		}
	}
}

// TestConvResidual checks a Conv that adds a residual before its activation, as fused
// plans run the Add of a residual block: on the direct path (the kernel starts from the
// residual), on im2col + Sgemm and on depthwise convolutions (the sum added after),
// against the float64 reference convolution plus the residual.
func TestConvResidual(t *testing.T) {
	cases := []convCase{
		{name: "pointwise", x: []int{3, 8, 7, 7}, w: []int{16, 8, 1, 1}, bias: true},
		{name: "strided_1x1", x: []int{3, 8, 14, 14}, w: []int{13, 8, 1, 1}, strides: []int{2, 2}},
		{name: "padded_3x3", x: []int{2, 4, 14, 14}, w: []int{8, 4, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "depthwise", x: []int{2, 6, 7, 7}, w: []int{6, 1, 3, 3}, group: 6, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "one_item_m37", x: []int{1, 5, 12, 14}, w: []int{37, 5, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "wide_rows", x: []int{3, 4, 27, 27}, w: []int{13, 4, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "wide_rows_one_item", x: []int{1, 4, 27, 27}, w: []int{24, 4, 3, 3}, pads: []int{1, 1, 1, 1}},
		{name: "s2rows_chunked", x: []int{2, 3, 23, 224}, w: []int{8, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true},
		{name: "rows8", x: []int{3, 16, 8, 8}, w: []int{16, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	}
	for _, c := range cases {
		for _, noDirect := range []bool{false, true} {
			for _, act := range []*nnClamp{nil, {lo: -0.25, hi: 0.5}, {swish: true, a: 1.0 / 6, b: 0.5}} {
				t.Run(fmt.Sprintf("%s/noDirect=%v/act=%v", c.name, noDirect, act), func(t *testing.T) {
					r := rand.New(rand.NewPCG(61, 62))
					n, strides, dil, pads := c.node(11)
					in := c.inputs(r)
					var b []float64
					if c.bias {
						b = to64(in[2].F)
					}
					want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, max(c.group, 1), strides, dil, pads)
					res := nntRand(r, ws, -1, 1)
					for i, v := range res.F {
						want[i] += float64(v)
						if act != nil {
							w32 := []float32{float32(want[i])}
							act.applyNoBias(w32, w32)
							want[i] = float64(w32[0])
						}
					}
					k := buildKernel(t, n).(*convKernel)
					k.noDirect = noDirect
					k.forceDirect = !noDirect
					y := NewFloat(ws, make([]float32, len(want)))
					for i := range y.F {
						y.F[i] = float32(math.NaN())
					}
					if err := k.run(nntGoCtx(2), in[0], in[1], n.Optional(in, 2), y, act, nil, nil, res); err != nil {
						t.Fatal(err)
					}
					nntClose(t, "Y", y.F, want, 1e-5, 1e-5)
				})
			}
		}
	}
}

// TestConvDirectWorkersAgree checks that the forward direct path gives bit-identical
// outputs for any number of workers, however they share out the images, and that the
// backward pass is bit-identical from run to run for a fixed number.
func TestConvDirectWorkersAgree(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	for _, c := range directCases[:10] {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(81, 82))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			var first []float32
			for _, workers := range []int{1, 2, 3, 7} {
				k := buildKernel(t, n).(*convKernel)
				k.forceDirect = true
				y := nntRun(t, k, nntGoCtx(workers), in)[0].F
				if first == nil {
					first = y
					continue
				}
				for i, v := range y {
					if math.Float32bits(v) != math.Float32bits(first[i]) {
						t.Fatalf("%d workers: Y[%d] = %v, one worker %v", workers, i, v, first[i])
					}
				}
			}
			k := buildKernel(t, n).(*convKernel)
			k.forceDirect = true
			ctx := nntGoCtx(3)
			out := nntRun(t, k, ctx, in)
			gy := nntRand(r, out[0].Shape, -1, 1)
			a := convGrads(t, k, ctx, in, out, gy, true)
			b := convGrads(t, k, ctx, in, out, gy, true)
			for i := range a {
				for e, v := range a[i].F {
					if math.Float32bits(v) != math.Float32bits(b[i].F[e]) {
						t.Fatalf("gradient of input %d [%d]: %v, then %v", i, e, v, b[i].F[e])
					}
				}
			}
		})
	}
}

// TestS2Row checks s2Row (the assembly where the CPU has it) against s2RowGo at every
// length to 70, with src holding exactly the 2n − 1 values it may read: a read past them
// would take values of the canary after it.
func TestS2Row(t *testing.T) {
	for n := 0; n <= 70; n++ {
		buf := make([]float32, 2*n+40)
		for i := range buf {
			buf[i] = float32(i)
		}
		src := buf[:max(0, 2*n-1)]
		got, want := make([]float32, n), make([]float32, n)
		s2Row(got, src)
		s2RowGo(want, src)
		for j := range want {
			if got[j] != want[j] || want[j] != float32(2*j) {
				t.Fatalf("n = %d: dst[%d] = %v, s2RowGo %v, want %v", n, j, got[j], want[j], 2*j)
			}
		}
	}
}

// TestS2Rows checks s2Rows (one assembly call for all rows where the CPU has it) against
// s2RowGo row by row, at every row length to 40 and 1 to 4 rows, with src holding
// exactly the values the last row reads and dst's rows spaced with gaps that must stay
// untouched.
func TestS2Rows(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for rows := 1; rows <= 4; rows++ {
			lds, ldd := 2*n+3, n+2
			src := make([]float32, (rows-1)*lds+2*n-1)
			for i := range src {
				src[i] = float32(i) + 0.5
			}
			got := make([]float32, (rows-1)*ldd+n+2)
			for i := range got {
				got[i] = -1
			}
			want := slices.Clone(got)
			s2Rows(got, ldd, src, lds, n, rows)
			for i := range rows {
				s2RowGo(want[i*ldd:i*ldd+n], src[i*lds:i*lds+2*n-1])
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("n = %d, %d rows: dst[%d] = %v, s2RowGo row by row %v", n, rows, j, got[j], want[j])
				}
			}
		}
	}
}

// TestIm2colS2Rows checks nnIm2colS2Rows, whole and by ranges of output rows, against
// the column matrix written out from the definition of the window.
func TestIm2colS2Rows(t *testing.T) {
	for _, c := range directCases {
		if len(c.x) != 4 || (c.strides == nil || c.strides[1] != 2) {
			continue
		}
		n, _, _, _ := c.node(11)
		k := buildKernel(t, n).(*convKernel)
		d, err := k.dims(c.x, c.w, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := &d.g
		if !nnUseS2Rows(g) {
			continue
		}
		r := rand.New(rand.NewPCG(4, 4))
		x := nntRand(r, []int{d.Cg, g.in[1], g.in[2]}, -1, 1).F
		K, O, OW := g.kSize(), g.outSize(), g.out[2]
		want := make([]float32, d.Cg*K*O)
		for ch := 0; ch < d.Cg; ch++ {
			for k1 := 0; k1 < g.k[1]; k1++ {
				for k2 := 0; k2 < g.k[2]; k2++ {
					row := (ch*g.k[1]+k1)*g.k[2] + k2
					for o1 := 0; o1 < g.out[1]; o1++ {
						for o2 := 0; o2 < OW; o2++ {
							i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
							i2 := o2*g.s[2] - g.pb[2] + k2*g.d[2]
							if i1 >= 0 && i1 < g.in[1] && i2 >= 0 && i2 < g.in[2] {
								want[row*O+o1*OW+o2] = x[(ch*g.in[1]+i1)*g.in[2]+i2]
							}
						}
					}
				}
			}
		}
		for _, step := range []int{g.out[1], 1, 2, 3} {
			for lo := 0; lo < g.out[1]; lo += step {
				hi := min(g.out[1], lo+step)
				ld := (hi - lo) * OW
				col := make([]float32, d.Cg*K*ld)
				for i := range col {
					col[i] = float32(math.NaN())
				}
				nnIm2colS2Rows(g, d.Cg, x, col, ld, lo, hi)
				for row := 0; row < d.Cg*K; row++ {
					for p := 0; p < ld; p++ {
						if got, w := col[row*ld+p], want[row*O+lo*OW+p]; got != w {
							t.Fatalf("%s, output rows [%d, %d): col[%d][%d] = %v, want %v", c.name, lo, hi, row, p, got, w)
						}
					}
				}
			}
		}
		t.Logf("%s: checked", c.name)
	}
}

// TestConvStreamedOutput runs convolutions with the non-temporal stores of the direct
// path on (from 1 MB of output, where convStreamMin sets 32 MB) and checks them bit for
// bit against the same kernel with ordinary stores: pointwise, padded 3×3, stride 2 and
// depthwise (the padded-plane path, whose chunks of 16 stream where they are aligned),
// with and without a bias, plain and with each activation (those the kernel applies
// stream; SiLU, applied after it from a landing area, only with AVX-512), with 1 to 3
// workers. Planes of a multiple of
// 16 pixels have their rows 64-byte aligned, and take the non-temporal stores; odd ones
// never do. A call under the threshold does not ask for them.
func TestConvStreamedOutput(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	const streamMin = 1 << 18
	cases := []convCase{
		{name: "pointwise", x: []int{3, 16, 32, 48}, w: []int{96, 16, 1, 1}, bias: true},
		{name: "pointwise_odd", x: []int{3, 16, 37, 41}, w: []int{96, 16, 1, 1}, bias: true},
		{name: "pad1_3x3", x: []int{2, 8, 32, 48}, w: []int{184, 8, 3, 3}, pads: []int{1, 1, 1, 1}},
		{name: "stride2_stem", x: []int{2, 3, 129, 127}, w: []int{40, 3, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "depthwise_3x3", x: []int{3, 32, 64, 48}, w: []int{32, 1, 3, 3}, group: 32, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "depthwise_5x5_s2_odd", x: []int{2, 48, 129, 97}, w: []int{48, 1, 5, 5}, group: 48, strides: []int{2, 2}, pads: []int{2, 2, 2, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(61, 62))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			in[1].param = &Param{Name: "w", Value: in[1]}
			ws := refConvShape(c.x, c.w, strides, dil, pads)
			for _, act := range append(testActs, &nnClamp{silu: true}) {
				for _, workers := range []int{1, 2, 3} {
					var outs [3][]float32
					var streamed [3]int
					for i, min := range []int{-1, streamMin, 0} {
						k := buildKernel(t, n).(*convKernel)
						k.streamMin = min
						d, err := k.dims(c.x, c.w, n.Optional(in, 2))
						if err != nil {
							t.Fatal(err)
						}
						if size := d.N * d.M * d.g.outSize(); size < streamMin || size >= convStreamMin {
							t.Fatalf("output of %d values: want [%d, %d)", size, streamMin, convStreamMin)
						}
						y := NewFloat(ws, make([]float32, d.N*d.M*d.g.outSize()))
						if err := k.run(nntGoCtx(workers), in[0], in[1], n.Optional(in, 2), y, act, nil, nil, nil); err != nil {
							t.Fatal(err)
						}
						outs[i], streamed[i] = y.F, k.direct.streamed
					}
					wantStream := act == nil || !act.silu || convTileOK()
					if streamed[0] != 0 || streamed[2] != 0 || (streamed[1] != 0) != wantStream {
						t.Fatalf("act %+v: %v passes asked for non-temporal stores (never, from %d values, from convStreamMin; want streaming in the second: %v)",
							act, streamed, streamMin, wantStream)
					}
					for i, v := range outs[1] {
						if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
							t.Fatalf("act %+v, %d workers: Y[%d] = %v streamed, %v with ordinary stores", act, workers, i, v, outs[0][i])
						}
					}
				}
			}
		})
	}
}

// TestConvPointwisePixelSplit checks that pointwise layers at batch 1 and 2, which the
// workers split by pixels where the weights are smaller than an image's input, give the
// same bits as the split by output channels and as one worker: SqueezeNet's and
// MobileNetV2's shapes, planes of a multiple of 32 pixels and not, with a bias and each
// activation (SiLU too), with a residual added (MobileNetV2's projections), 2, 3 and 5
// workers. A layer with more output channels than pixels, and one whose panel pairs split
// less evenly than its row blocks (14 × 14), stay split by channels (the negative
// controls of the condition): at 2 workers each case must take the split it names.
func TestConvPointwisePixelSplit(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	cases := []struct {
		convCase
		res   bool
		split bool // taken at 2 workers
	}{
		{convCase{name: "squeeze_128to16@55", x: []int{1, 128, 55, 55}, w: []int{16, 128, 1, 1}, bias: true}, false, true},
		{convCase{name: "expand_16to64@55", x: []int{1, 16, 55, 55}, w: []int{64, 16, 1, 1}, bias: true}, false, true},
		{convCase{name: "mbv2_16to96@32_b2", x: []int{2, 16, 32, 32}, w: []int{96, 16, 1, 1}}, false, false},
		{convCase{name: "odd_24to20@9x13", x: []int{1, 24, 9, 13}, w: []int{20, 24, 1, 1}, bias: true}, false, true},
		{convCase{name: "classifier_64to200@13", x: []int{1, 64, 13, 13}, w: []int{200, 64, 1, 1}, bias: true}, false, false},
		{convCase{name: "proj_144to24@56_res", x: []int{1, 144, 56, 56}, w: []int{24, 144, 1, 1}, bias: true}, true, true},
		{convCase{name: "proj_60to20@9x13_res", x: []int{1, 60, 9, 13}, w: []int{20, 60, 1, 1}}, true, true},
		{convCase{name: "proj_576to96@14_res", x: []int{1, 576, 14, 14}, w: []int{96, 576, 1, 1}, bias: true}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(71, 72))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			ws := refConvShape(c.x, c.w, strides, dil, pads)
			var res *Tensor
			if c.res {
				res = NewFloat(ws, make([]float32, numel(ws)))
				for i := range res.F {
					res.F[i] = r.Float32()*2 - 1
				}
			}
			for _, act := range append(testActs, &nnClamp{silu: true}) {
				if res != nil && act != nil {
					continue // the plan fuses a residual only without an activation
				}
				var ref []float32
				for _, workers := range []int{1, 2, 3, 5} {
					for _, noSplit := range []bool{true, false} {
						k := buildKernel(t, n).(*convKernel)
						k.noPixelSplit = noSplit
						y := NewFloat(ws, make([]float32, numel(ws)))
						if err := k.run(nntGoCtx(workers), in[0], in[1], n.Optional(in, 2), y, act, nil, nil, res); err != nil {
							t.Fatal(err)
						}
						if got := k.direct.pixSplit > 0; workers == 2 && !noSplit && got != c.split {
							t.Fatalf("act %+v, 2 workers: split by pixels %v, want %v", act, got, c.split)
						}
						if ref == nil {
							ref = y.F
							continue
						}
						for i, v := range y.F {
							if math.Float32bits(v) != math.Float32bits(ref[i]) {
								t.Fatalf("act %+v, %d workers, pixel split off %v: Y[%d] = %v, one worker %v", act, workers, noSplit, i, v, ref[i])
							}
						}
					}
				}
			}
		})
	}
}

// TestConvRingPool checks that a fused MaxPool after a column matrix made in chunks of
// output rows, pooled from each chunk's rows as they are made (pooledChunks), gives the
// same bits as pooling the whole output after the products (noRingPool): SqueezeNet's
// stem (3×3 stride 2, an odd number of panels, pool 3×3 stride 2 in ceil mode),
// ResNet's (7×7 stride 2, pool 3×3 stride 2 padded), chunks of one row under windows of
// three (two rows carried), and a 2×2 pool; 1 to 3 workers, with and without bias, Relu
// and HardSwish. The reference convolution pooled in float64 is TestConvFusedPool's.
func TestConvRingPool(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	cases := []struct {
		c    convCase
		k, s int
		pad  int
		ceil bool
	}{
		{convCase{name: "squeezenet_stem", x: []int{3, 3, 67, 224}, w: []int{16, 3, 3, 3}, strides: []int{2, 2}, bias: true}, 3, 2, 0, true},
		{convCase{name: "resnet_stem", x: []int{3, 3, 40, 224}, w: []int{16, 3, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}}, 3, 2, 1, false},
		{convCase{name: "one_row_chunks", x: []int{3, 8, 40, 320}, w: []int{8, 8, 7, 7}, strides: []int{2, 2}, pads: []int{3, 3, 3, 3}, bias: true}, 3, 2, 1, false},
		{convCase{name: "pool2x2", x: []int{3, 3, 40, 256}, w: []int{24, 3, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true}, 2, 2, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			r := rand.New(rand.NewPCG(71, 72))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			in[1].param = &Param{Name: "w", Value: in[1]}
			ys := refConvShape(c.x, c.w, strides, dil, pads)
			attrs := []*onnxpb.AttributeProto{attrInts("kernel_shape", int64(tc.k), int64(tc.k)), attrInts("strides", int64(tc.s), int64(tc.s)),
				attrInts("pads", int64(tc.pad), int64(tc.pad), int64(tc.pad), int64(tc.pad))}
			if tc.ceil {
				attrs = append(attrs, attrI("ceil_mode", 1))
			}
			pn := nntNode("MaxPool", 12, 1, 1, attrs...)
			for _, act := range []*nnClamp{nil, {relu: true}, {swish: true, a: 1.0 / 6, b: 0.5}} {
				for _, workers := range []int{1, 2, 3} {
					var outs [2][]float32
					for i, noRing := range []bool{true, false} {
						k := buildKernel(t, n).(*convKernel)
						k.noRingPool = noRing
						// The column matrix's ring: batches of two images a worker take
						// the phase planes (TestConvPhasedPooled).
						k.direct.noPhased = true
						pool := buildKernel(t, pn).(*poolKernel)
						pouts, err := pool.Infer([]*Tensor{{DType: Float32, Shape: ys}})
						if err != nil {
							t.Fatal(err)
						}
						out := NewFloat(pouts[0].Shape, make([]float32, numel(pouts[0].Shape)))
						for j := range out.F {
							out.F[j] = float32(math.NaN())
						}
						full := NewFloat(slices.Clone(ys), make([]float32, numel(ys)))
						if err := k.run(nntGoCtx(workers), in[0], in[1], n.Optional(in, 2), out, act, pool, full, nil); err != nil {
							t.Fatal(err)
						}
						if want := i; k.direct.ringPooled != want {
							t.Fatalf("noRingPool %v: %d passes pooled from the ring, want %d", noRing, k.direct.ringPooled, want)
						}
						outs[i] = out.F
					}
					for j, v := range outs[1] {
						if math.Float32bits(v) != math.Float32bits(outs[0][j]) {
							t.Fatalf("act %+v, %d workers: pooled Y[%d] = %v from the ring, %v from the whole output", act, workers, j, v, outs[0][j])
						}
					}
				}
			}
		})
	}
}

// TestConvPointwiseBlocks checks that pointwise layers whose products go in blocks of 16
// rows of the sum and of the output (pointwiseBlocks: planes of 512 pixels or more, whole
// images to a worker, more than 32 input and output channels together) give the same
// bits as all rows at once (noKBlocks), and the float64 reference convolution within
// float32 rounding: SqueezeNet's squeeze and expansion at 55 × 55, a sum and an output
// whose last blocks are partial (40 and 20 rows), an input large enough for groups of
// four row blocks (160 × 900 values, 40 rows), an odd number of panels (two images to
// a work item), groups, a residual, and every activation with SiLU; 1 to 3 workers. A
// 14 × 14 plane, a layer of 16 + 16 channels and a streamed output must not take the
// path (the negative controls of its condition). Smaller planes whose sums are longer
// than 256 go in blocks of 128 rows of the sum over all their rows (convKBlockWide).
func TestConvPointwiseBlocks(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	cases := []struct {
		c       convCase
		res     bool
		stream  bool
		blocked bool
		parts   bool // blocked whatever the workers: each takes a part of the rows
	}{
		{c: convCase{name: "squeeze_128to16@55", x: []int{3, 128, 55, 55}, w: []int{16, 128, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "expand_16to64@55", x: []int{2, 16, 55, 55}, w: []int{64, 16, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "partial_40to20_odd_panels", x: []int{3, 40, 21, 25}, w: []int{20, 40, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "group2_24to20", x: []int{2, 48, 24, 24}, w: []int{40, 24, 1, 1}, group: 2}, blocked: true},
		{c: convCase{name: "wide_input_160to40@30", x: []int{2, 160, 30, 30}, w: []int{40, 160, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "residual_40to24", x: []int{2, 40, 23, 23}, w: []int{24, 40, 1, 1}, bias: true}, res: true, blocked: true},
		{c: convCase{name: "streamed_40to72@32", x: []int{2, 40, 32, 32}, w: []int{72, 40, 1, 1}, bias: true}, stream: true},
		{c: convCase{name: "small_plane_64to64@14", x: []int{4, 64, 14, 14}, w: []int{64, 64, 1, 1}, bias: true}},
		// Smaller planes with sums longer than 256 take blocks of 128 rows over all rows
		// (convKBlockWide): a last block of 44 rows, a residual, groups; a sum of 256 must not.
		{c: convCase{name: "wide_sum_300to40@7", x: []int{3, 300, 7, 7}, w: []int{40, 300, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "wide_sum_residual_520to24@13", x: []int{2, 520, 13, 13}, w: []int{24, 520, 1, 1}, bias: true}, res: true, blocked: true},
		{c: convCase{name: "wide_sum_group2_272to20@6", x: []int{2, 544, 6, 6}, w: []int{40, 272, 1, 1}, group: 2}, blocked: true},
		{c: convCase{name: "sum_of_256@7", x: []int{2, 256, 7, 7}, w: []int{32, 256, 1, 1}, bias: true}},
		// One image whose rows the workers split (more channels than pixels): each
		// worker's part in blocks of 128 rows of the sum (SqueezeNet's classifier at batch 1).
		{c: convCase{name: "wide_sum_batch1_300to40@5", x: []int{1, 300, 5, 5}, w: []int{40, 300, 1, 1}, bias: true}, blocked: true, parts: true},
		{c: convCase{name: "wide_sum_batch1_residual_520to44@6", x: []int{1, 520, 6, 6}, w: []int{44, 520, 1, 1}, bias: true}, res: true, blocked: true, parts: true},
		{c: convCase{name: "few_channels_16to16@32", x: []int{3, 16, 32, 32}, w: []int{16, 16, 1, 1}, bias: true}},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			pointwiseAB(t, c, 81, tc.res, func(k *convKernel, off bool) {
				k.noKBlocks = off
				if tc.stream {
					k.streamMin = 1
				}
			}, func(k *convKernel, act *nnClamp, workers int, off bool, O int) {
				// Fewer blocks of images than workers split the pixels instead.
				G := min(1+(O+15)/16%2, c.x[0])
				blocks := (c.x[0] + G - 1) / G
				want := tc.blocked
				if tc.stream {
					// Only where the output is not streamed (SiLU on AVX2 is not).
					want = k.direct.streamed == 0
				}
				if got := k.direct.kblocked > 0; got != (want && !off && (blocks >= workers || tc.parts)) {
					t.Fatalf("act %+v, %d workers, noKBlocks %v: took pointwiseBlocks %v", act, workers, off, got)
				}
				if tc.stream && !off && !tc.res && (act == nil || !act.silu || convTileOK()) && k.direct.streamed == 0 {
					t.Fatalf("act %+v: no non-temporal stores asked for", act)
				}
			})
		})
	}
}

// pointwiseAB runs convolution case c (with a residual when res) for every activation
// and SiLU on 1 to 3 workers twice, with set(k, true) and set(k, false) on fresh kernels,
// calls check after each run, and fails unless the two give the same bits and match the
// float64 reference within float32 rounding.
func pointwiseAB(t *testing.T, c convCase, seed uint64, res bool, set func(k *convKernel, off bool), check func(k *convKernel, act *nnClamp, workers int, off bool, O int)) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	n, strides, dil, pads := c.node(11)
	in := c.inputs(r)
	in[1].param = &Param{Name: "w", Value: in[1]}
	var b []float64
	if c.bias {
		b = to64(in[2].F)
	}
	want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, max(c.group, 1), strides, dil, pads)
	var rt *Tensor
	if res {
		rt = nntRand(r, ws, -1, 1)
		for i, v := range rt.F {
			want[i] += float64(v)
		}
	}
	for _, act := range append(testActs, &nnClamp{silu: true}) {
		wantAct := refAct(want, act)
		for _, workers := range []int{1, 2, 3} {
			var outs [2][]float32
			for j, off := range []bool{true, false} {
				k := buildKernel(t, n).(*convKernel)
				set(k, off)
				y := NewFloat(ws, make([]float32, numel(ws)))
				for i := range y.F {
					y.F[i] = float32(math.NaN())
				}
				if err := k.run(nntGoCtx(workers), in[0], in[1], n.Optional(in, 2), y, act, nil, nil, rt); err != nil {
					t.Fatal(err)
				}
				check(k, act, workers, off, ws[2]*ws[3])
				outs[j] = y.F
			}
			for i, v := range outs[1] {
				if math.Float32bits(v) != math.Float32bits(outs[0][i]) {
					t.Fatalf("act %+v, %d workers: Y[%d] = %v on the path, %v off it", act, workers, i, v, outs[0][i])
				}
			}
			nntClose(t, fmt.Sprintf("Y (act %+v, %d workers)", act, workers), outs[1], wantAct, 1e-5, 1e-5)
		}
	}
}

// TestConvRemainders checks that pointwise layers whose planes end in a few pixels past
// whole panels (7 × 7, 6 × 6, 10 × 10) and whose batch fills a shared panel leave those
// pixels to remainders, and that this gives the same bits as every pixel in its image's
// own panels (noRemainders) and the float64 reference within float32 rounding: a residual,
// two groups, a long sum (blocks of 128 rows in the images' panels, the whole sum in the
// shared ones), 33 images (two shared panel pairs), every activation with SiLU, 1 to 3
// workers. Planes of whole panels (8 × 8), nine pixels past them (5 × 5), a last panel
// that leaves less than a tenth of the lanes empty (14 × 14) and a batch whose last
// pixels fill half a panel must not take it.
func TestConvRemainders(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	cases := []struct {
		c    convCase
		res  bool
		want bool
	}{
		{c: convCase{name: "7x7_160to40", x: []int{16, 160, 7, 7}, w: []int{40, 160, 1, 1}, bias: true}, want: true},
		{c: convCase{name: "7x7_residual_24to36", x: []int{20, 24, 7, 7}, w: []int{36, 24, 1, 1}, bias: true}, res: true, want: true},
		{c: convCase{name: "6x6_group2", x: []int{8, 32, 6, 6}, w: []int{24, 16, 1, 1}, group: 2}, want: true},
		{c: convCase{name: "10x10_12to40", x: []int{5, 12, 10, 10}, w: []int{40, 12, 1, 1}, bias: true}, want: true},
		{c: convCase{name: "7x7_long_sum_300to24", x: []int{17, 300, 7, 7}, w: []int{24, 300, 1, 1}, bias: true}, want: true},
		{c: convCase{name: "7x7_33_images", x: []int{33, 8, 7, 7}, w: []int{16, 8, 1, 1}, bias: true}, want: true},
		{c: convCase{name: "8x8_whole_panels", x: []int{16, 16, 8, 8}, w: []int{16, 16, 1, 1}, bias: true}},
		{c: convCase{name: "5x5_nine_past", x: []int{16, 16, 5, 5}, w: []int{16, 16, 1, 1}, bias: true}},
		{c: convCase{name: "7x7_few_images", x: []int{8, 16, 7, 7}, w: []int{16, 16, 1, 1}, bias: true}},
		{c: convCase{name: "14x14_few_empty_lanes", x: []int{8, 16, 14, 14}, w: []int{16, 16, 1, 1}, bias: true}},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			pointwiseAB(t, c, 83, tc.res, func(k *convKernel, off bool) {
				k.noRemainders = off
			}, func(k *convKernel, act *nnClamp, workers int, off bool, O int) {
				// A Clip with a NaN bound runs after the kernel, over whole planes.
				_, inKernel := dw3x3Flags(act)
				inKernel = inKernel || act != nil && act.silu
				p := O / 16
				took := tc.want && !off && (act == nil || inKernel) && (c.x[0]+p%2)/(1+p%2) >= workers
				if got := k.direct.remaindered > 0; got != took {
					t.Fatalf("act %+v, %d workers, noRemainders %v: took remainders %v", act, workers, off, got)
				}
			})
		})
	}
}

// TestConvGemmTileBlocks checks that one image's convolutions on planes too small for
// the direct path (forwardGemmTile) with sums longer than 256 take them in blocks of 128
// rows (pointwiseBlocks over the worker's share of the row blocks) and give the same bits
// as the whole sum at once (noKBlocks), and the float64 reference within float32
// rounding: ResNet-18's last stage in small (a 3×3 layer on a 7 × 7 plane), a stride-2
// layer to 7 × 7 whose last block is partial (360 = 2·128 + 104 rows), groups, rows that
// end in a partial row block, and a residual; every activation and SiLU, 1 to 3
// workers, on the AVX-512 and the AVX2 path. A sum of 243 rows must not take the blocks
// (the negative control).
func TestConvGemmTileBlocks(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the tile path does not run")
	}
	cases := []struct {
		c       convCase
		res     bool
		blocked bool
	}{
		{c: convCase{name: "layer4_64to40@7", x: []int{1, 64, 7, 7}, w: []int{40, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "stride2_40to24@14", x: []int{1, 40, 14, 14}, w: []int{24, 40, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true}, blocked: true},
		{c: convCase{name: "group2_48to36@6", x: []int{1, 96, 6, 6}, w: []int{36, 48, 3, 3}, pads: []int{1, 1, 1, 1}, group: 2}, blocked: true},
		{c: convCase{name: "residual_64to20@6", x: []int{1, 64, 6, 6}, w: []int{20, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, res: true, blocked: true},
		{c: convCase{name: "sum_of_243@7", x: []int{1, 27, 7, 7}, w: []int{16, 27, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			pointwiseAB(t, tc.c, 91, tc.res, func(k *convKernel, off bool) {
				// The AVX2 path sends one image through these layers to forwardGemmTile
				// by itself (forwardDirectOK); AVX-512's direct path takes their rows,
				// so there they are sent to it.
				k.noKBlocks, k.noDirect = off, true
			}, func(k *convKernel, act *nnClamp, workers int, off bool, O int) {
				if got := k.direct.kblocked > 0; got != (tc.blocked && !off) {
					t.Fatalf("act %+v, %d workers, noKBlocks %v: took pointwiseBlocks %v", act, workers, off, got)
				}
			})
		})
	}
}

// TestConvForwardDirectOK checks which forward passes leave the direct path on the AVX2
// path (forwardDirectOK): one image through a 3×3 layer of 32 channels on rows of 7 or
// 11, or a stride-2 layer to rows of 7, takes the column matrix, while rows of 13, a
// pointwise layer on rows of 7, a batch of 4 on rows of 7, and layers the Winograd path
// takes (64 channels on the AVX2 path) keep it. With AVX-512 (packed lanes) every one keeps it.
func TestConvForwardDirectOK(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
	}
	cases := []struct {
		c      convCase
		narrow bool // leaves the direct path on the AVX2 path
	}{
		{convCase{name: "3x3_rows_of_7", x: []int{1, 32, 7, 7}, w: []int{32, 32, 3, 3}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "3x3_rows_of_7_64ch", x: []int{1, 64, 7, 7}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}}, false},
		{convCase{name: "stride2_to_rows_of_7", x: []int{1, 32, 14, 14}, w: []int{64, 32, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "3x3_rows_of_11", x: []int{1, 16, 9, 11}, w: []int{16, 16, 3, 3}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "3x3_rows_of_13", x: []int{1, 16, 9, 13}, w: []int{16, 16, 3, 3}, pads: []int{1, 1, 1, 1}}, false},
		{convCase{name: "pointwise_rows_of_7", x: []int{1, 64, 7, 7}, w: []int{64, 64, 1, 1}}, false},
		{convCase{name: "batch4_rows_of_7", x: []int{4, 64, 7, 7}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}}, false},
		{convCase{name: "winograd_rows_of_7", x: []int{8, 128, 7, 7}, w: []int{128, 128, 3, 3}, pads: []int{1, 1, 1, 1}}, false},
	}
	for _, tc := range cases {
		n, _, _, _ := tc.c.node(11)
		k := buildKernel(t, n).(*convKernel)
		in := tc.c.inputs(rand.New(rand.NewPCG(1, 2)))
		d := mustDims(t, k, tc.c, in)
		if !k.directOK(d) {
			t.Fatalf("%s: directOK false, a case for forwardDirectOK needs it", tc.c.name)
		}
		want := !(tc.narrow && !convTileOK())
		if got := k.forwardDirectOK(d); got != want {
			t.Errorf("%s: forwardDirectOK %v, want %v (AVX-512 tile kernel %v)", tc.c.name, got, want, convTileOK())
		}
		if got := k.stridedOK(d); got != want {
			t.Errorf("%s: stridedOK %v, want %v: a Concat must place only what forwardDirect writes", tc.c.name, got, want)
		}
	}
}
