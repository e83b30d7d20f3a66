package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// refConvGrad is the adjoint of refConv over the same taps: every product x·w that
// refConv adds into an output adds gy·w into gx, gy·x into gw, and each output adds gy
// into gb.
func refConvGrad(x []float64, xs []int, w []float64, ws []int, gy []float64, group int, strides, dil, pads []int) (gx, gw, gb []float64) {
	gx, gw, gb = make([]float64, len(x)), make([]float64, len(w)), make([]float64, ws[0])
	os := refConvShape(xs, ws, strides, dil, pads)
	plane := numel(os[2:])
	for f, g := range gy {
		gb[f/plane%ws[0]] += g
	}
	refConvTaps(xs, ws, group, strides, dil, pads, func(f, _, xf, wf int) {
		gx[xf] += gy[f] * w[wf]
		gw[wf] += gy[f] * x[xf]
	})
	return gx, gw, gb
}

// smallMapCases returns convolutions whose kernel reaches beyond the image (a 5×5 kernel
// on a 2×2 or 1×1 map, as MobileNetV3 and EfficientNet have at 32 pixels): depthwise,
// depthwise with two outputs per channel, grouped and regular, over images of 1 to 3
// pixels a side, every stride, dilation and pad combination small enough, kept where the
// output has at least one position. Most kernel offsets then reach no image value from
// any window position.
func smallMapCases() []convCase {
	type kind struct {
		name        string
		c, m, group int
	}
	kinds := []kind{{"dw", 2, 2, 2}, {"dw_mult2", 2, 4, 2}, {"group2", 4, 4, 2}, {"full", 2, 3, 1}}
	imgs := [][2]int{{1, 1}, {2, 2}, {1, 3}, {3, 2}}
	kerns := [][2]int{{5, 5}, {3, 3}, {2, 4}}
	strides := [][2]int{{1, 1}, {2, 2}, {3, 1}}
	// Per dimension: pads as fractions of the dilated kernel's reach ek − 1.
	padPairs := func(ek int) [][2]int {
		r := ek - 1
		return [][2]int{{0, r}, {r, 0}, {r / 2, r - r/2}, {r, r}, {1, 0}}
	}
	var cases []convCase
	for _, k := range kinds {
		for _, img := range imgs {
			for _, kn := range kerns {
				for _, s := range strides {
					for _, d := range []int{1, 2} {
						ek0, ek1 := (kn[0]-1)*d+1, (kn[1]-1)*d+1
						for _, p0 := range padPairs(ek0) {
							for _, p1 := range padPairs(ek1) {
								if img[0]+p0[0]+p0[1] < ek0 || img[1]+p1[0]+p1[1] < ek1 {
									continue // no window fits: the op rejects it
								}
								cases = append(cases, convCase{
									name:    fmt.Sprintf("%s_%dx%d_k%dx%d_s%dx%d_d%d_p%d.%d.%d.%d", k.name, img[0], img[1], kn[0], kn[1], s[0], s[1], d, p0[0], p1[0], p0[1], p1[1]),
									x:       []int{2, k.c, img[0], img[1]},
									w:       []int{k.m, k.c / k.group, kn[0], kn[1]},
									bias:    true,
									group:   k.group,
									strides: []int{s[0], s[1]},
									dil:     []int{d, d},
									pads:    []int{p0[0], p1[0], p0[1], p1[1]},
								})
							}
						}
					}
				}
			}
		}
	}
	// 1-D and 3-D windows, and auto_pad, beyond tiny images.
	cases = append(cases,
		convCase{name: "dw_1d_k5_on1", x: []int{2, 3, 1}, w: []int{3, 1, 5}, group: 3, pads: []int{2, 2}, bias: true},
		convCase{name: "full_1d_k5_on2_s2", x: []int{2, 2, 2}, w: []int{3, 2, 5}, strides: []int{2}, pads: []int{4, 1}},
		convCase{name: "dw_3d_k353_on121", x: []int{1, 2, 1, 2, 1}, w: []int{2, 1, 3, 5, 3}, group: 2, pads: []int{1, 2, 1, 1, 2, 1}, bias: true},
		convCase{name: "full_3d_k353_on121", x: []int{2, 2, 1, 2, 1}, w: []int{3, 2, 3, 5, 3}, pads: []int{2, 3, 0, 0, 1, 2}, strides: []int{1, 2, 1}},
		convCase{name: "dw_same_upper_k5_on2", x: []int{2, 2, 2, 2}, w: []int{2, 1, 5, 5}, group: 2, strides: []int{2, 2}, autoPad: "SAME_UPPER", refPads: []int{1, 1, 2, 2}, bias: true},
		convCase{name: "dw_same_lower_k5_on1", x: []int{2, 2, 1, 1}, w: []int{2, 1, 5, 5}, group: 2, autoPad: "SAME_LOWER", refPads: []int{2, 2, 2, 2}},
	)
	return cases
}

// TestConvKernelBeyondImage runs every small-map case forward and backward, with one and
// two workers, on every path the case can take (the direct path where the CPU has it,
// im2col + Sgemm, the depthwise loops), and checks outputs and gradients against the
// float64 reference convolution and its adjoint.
func TestConvKernelBeyondImage(t *testing.T) {
	cases := smallMapCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(len(c.name))))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			var b []float64
			if c.bias {
				b = to64(in[2].F)
			}
			group := max(c.group, 1)
			want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, group, strides, dil, pads)
			gy := nntRand(r, ws, -1, 1)
			wgx, wgw, wgb := refConvGrad(to64(in[0].F), c.x, to64(in[1].F), c.w, to64(gy.F), group, strides, dil, pads)
			for _, noDirect := range []bool{false, true} {
				if noDirect && c.group > 1 && c.w[1] == 1 {
					continue // depthwise: one path
				}
				for _, workers := range []int{1, 2} {
					k := buildKernel(t, n).(*convKernel)
					k.noDirect = noDirect
					k.forceDirect = !noDirect
					what := fmt.Sprintf("noDirect=%v workers=%d", noDirect, workers)
					ctx := nntGoCtx(workers)
					out := nntRun(t, k, ctx, in)
					if !nnShapeEq(out[0].Shape, ws) {
						t.Fatalf("%s: shape %v, want %v", what, out[0].Shape, ws)
					}
					nntClose(t, what+": Y", out[0].F, want, 1e-5, 1e-5)
					gin := make([]*Tensor, len(in))
					for i, x := range in {
						gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
					}
					if err := k.Backward(ctx, in, out, []*Tensor{gy}, gin); err != nil {
						t.Fatalf("%s: backward: %v", what, err)
					}
					nntClose(t, what+": dX", gin[0].F, wgx, 1e-5, 1e-5)
					nntClose(t, what+": dW", gin[1].F, wgw, 1e-5, 1e-5)
					if c.bias {
						nntClose(t, what+": dB", gin[2].F, wgb, 1e-5, 1e-5)
					}
				}
			}
		})
	}
}

// TestConvKernelBeyondImageGradient checks a few of the small-map cases' Backward by
// finite differences too, independently of the reference adjoint.
func TestConvKernelBeyondImageGradient(t *testing.T) {
	for _, c := range []convCase{
		{name: "dw_k5_on2_s1", x: []int{2, 2, 2, 2}, w: []int{2, 1, 5, 5}, group: 2, pads: []int{2, 2, 2, 2}, bias: true},
		{name: "dw_k5_on1", x: []int{2, 3, 1, 1}, w: []int{3, 1, 5, 5}, group: 3, pads: []int{2, 2, 2, 2}, bias: true},
		{name: "dw_k5_on2_s2_d2", x: []int{2, 2, 2, 2}, w: []int{4, 1, 5, 5}, group: 2, strides: []int{2, 2}, dil: []int{2, 2}, pads: []int{4, 3, 4, 5}},
		{name: "full_k5_on2", x: []int{2, 2, 2, 2}, w: []int{3, 2, 5, 5}, pads: []int{2, 2, 2, 2}, bias: true},
		{name: "full_k5_on1_s2", x: []int{2, 2, 1, 3}, w: []int{3, 2, 5, 5}, strides: []int{2, 2}, pads: []int{2, 1, 2, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, _, _, _ := c.node(11)
			nntGradCheck(t, nntGradCase{name: c.name, op: "Conv", opset: 11, attrs: n.Proto.Attribute, inputs: c.inputs})
		})
	}
}
