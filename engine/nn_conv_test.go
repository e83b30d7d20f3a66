package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// refConvTaps visits every product of the direct convolution, written independently of
// the engine's kernels: for each output position f (its flat index in the output of shape
// os), each tap whose input lies inside the image calls tap(f, m, xf, wf) with the output
// channel m and the flat indices of the input and weight values multiplied. Pads are
// (begin..., end...).
func refConvTaps(xs, ws []int, group int, strides, dil, pads []int, tap func(f, m, xf, wf int)) {
	nd := len(xs) - 2
	C, M := xs[1], ws[0]
	Cg, Mg := C/group, M/group
	os := refConvShape(xs, ws, strides, dil, pads)
	oi := make([]int, len(os))
	ki := make([]int, nd)
	xi := make([]int, len(xs))
	wi := make([]int, len(ws))
	K := numel(ws[2:])
	for f := range numel(os) {
		nntUnravel(f, os, oi)
		n, m := oi[0], oi[1]
		grp := m / Mg
		for c := 0; c < Cg; c++ {
			for kf := 0; kf < K; kf++ {
				nntUnravel(kf, ws[2:], ki)
				xi[0], xi[1] = n, grp*Cg+c
				inside := true
				for j := 0; j < nd; j++ {
					p := oi[2+j]*strides[j] - pads[j] + ki[j]*dil[j]
					if p < 0 || p >= xs[2+j] {
						inside = false
					}
					xi[2+j] = p
				}
				if !inside {
					continue
				}
				wi[0], wi[1] = m, c
				copy(wi[2:], ki)
				tap(f, m, nntRavel(xi, xs), nntRavel(wi, ws))
			}
		}
	}
}

// refConvShape is the output shape of a convolution with explicit pads.
func refConvShape(xs, ws []int, strides, dil, pads []int) []int {
	nd := len(xs) - 2
	os := []int{xs[0], ws[0]}
	for j := 0; j < nd; j++ {
		ek := (ws[2+j]-1)*dil[j] + 1
		os = append(os, (xs[2+j]+pads[j]+pads[nd+j]-ek)/strides[j]+1)
	}
	return os
}

// refConv is a direct float64 convolution over any number of spatial dimensions with
// explicit pads (begin..., end...): y = Σ x·w + b over refConvTaps.
func refConv(x []float64, xs []int, w []float64, ws []int, b []float64, group int, strides, dil, pads []int) ([]float64, []int) {
	os := refConvShape(xs, ws, strides, dil, pads)
	y := make([]float64, numel(os))
	if b != nil {
		plane := numel(os[2:])
		for f := range y {
			y[f] = b[f/plane%ws[0]]
		}
	}
	refConvTaps(xs, ws, group, strides, dil, pads, func(f, m, xf, wf int) {
		y[f] += x[xf] * w[wf]
	})
	return y, os
}

// refConvTranspose scatters every input element through the kernel, the definition of
// the transposed convolution, with explicit pads and output padding.
func refConvTranspose(x []float64, xs []int, w []float64, ws []int, b []float64, group int, strides, dil, pads, outPad []int) ([]float64, []int) {
	nd := len(xs) - 2
	N, C, Mg := xs[0], xs[1], ws[1]
	Cg, M := C/group, Mg*group
	os := []int{N, M}
	for j := 0; j < nd; j++ {
		os = append(os, strides[j]*(xs[2+j]-1)+outPad[j]+(ws[2+j]-1)*dil[j]+1-pads[j]-pads[nd+j])
	}
	y := make([]float64, numel(os))
	xi := make([]int, len(xs))
	ki := make([]int, nd)
	yi := make([]int, len(os))
	wi := make([]int, len(ws))
	K := numel(ws[2:])
	for f := range x {
		nntUnravel(f, xs, xi)
		n, c := xi[0], xi[1]
		grp := c / Cg
		for mg := 0; mg < Mg; mg++ {
			for kf := 0; kf < K; kf++ {
				nntUnravel(kf, ws[2:], ki)
				yi[0], yi[1] = n, grp*Mg+mg
				inside := true
				for j := 0; j < nd; j++ {
					p := xi[2+j]*strides[j] + ki[j]*dil[j] - pads[j]
					if p < 0 || p >= os[2+j] {
						inside = false
					}
					yi[2+j] = p
				}
				if !inside {
					continue
				}
				wi[0], wi[1] = c, mg
				copy(wi[2:], ki)
				y[nntRavel(yi, os)] += x[f] * w[nntRavel(wi, ws)]
			}
		}
	}
	if b != nil {
		inner := numel(os[2:])
		for f := range y {
			y[f] += b[(f/inner)%M]
		}
	}
	return y, os
}

func nntI64(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func nntOnes(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

type convCase struct {
	name     string
	x, w     []int
	bias     bool
	group    int
	strides  []int
	dil      []int
	pads     []int  // explicit pads for the node; nil: none given
	autoPad  string // "" = NOTSET
	refPads  []int  // pads the reference uses (derived by hand for auto_pad)
	kernAttr bool   // give kernel_shape
}

var convCases = []convCase{
	{name: "basic_pad1", x: []int{1, 1, 5, 5}, w: []int{1, 1, 3, 3}, pads: []int{1, 1, 1, 1}, kernAttr: true},
	{name: "no_pad", x: []int{1, 1, 5, 5}, w: []int{1, 1, 3, 3}, pads: []int{0, 0, 0, 0}},
	{name: "strides_asym_pad", x: []int{2, 1, 7, 5}, w: []int{2, 1, 3, 3}, strides: []int{2, 2}, pads: []int{1, 0, 1, 0}, bias: true},
	{name: "strides_no_pad", x: []int{2, 1, 7, 5}, w: []int{1, 1, 3, 3}, strides: []int{2, 2}, pads: []int{0, 0, 0, 0}},
	{name: "strides_pad", x: []int{3, 2, 7, 5}, w: []int{3, 2, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	// SAME_LOWER, stride 2 on 5: out 3, total pad (3-1)*2+3-5 = 2, split 1/1.
	{name: "same_lower", x: []int{1, 1, 5, 5}, w: []int{1, 1, 3, 3}, strides: []int{2, 2}, autoPad: "SAME_LOWER", refPads: []int{1, 1, 1, 1}},
	// SAME_UPPER/LOWER with an odd total: on 6 with stride 1 and kernel 2, total 1.
	{name: "same_upper_odd", x: []int{2, 2, 6, 6}, w: []int{2, 2, 2, 2}, autoPad: "SAME_UPPER", refPads: []int{0, 0, 1, 1}},
	{name: "same_lower_odd", x: []int{2, 2, 6, 6}, w: []int{2, 2, 2, 2}, autoPad: "SAME_LOWER", refPads: []int{1, 1, 0, 0}},
	{name: "valid", x: []int{2, 2, 6, 5}, w: []int{3, 2, 3, 2}, strides: []int{2, 1}, autoPad: "VALID", refPads: []int{0, 0, 0, 0}},
	{name: "dilations", x: []int{2, 2, 7, 7}, w: []int{2, 2, 2, 3}, dil: []int{2, 3}, pads: []int{1, 2, 0, 1}, bias: true},
	{name: "group2", x: []int{3, 4, 6, 6}, w: []int{6, 2, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "depthwise", x: []int{3, 3, 6, 7}, w: []int{3, 1, 3, 3}, group: 3, pads: []int{1, 1, 1, 1}, strides: []int{1, 2}, bias: true},
	{name: "depthwise_mult2_dil", x: []int{2, 2, 7, 7}, w: []int{4, 1, 2, 2}, group: 2, dil: []int{2, 2}, pads: []int{0, 1, 1, 0}, bias: true},
	// 3×3 "same" depthwise convolutions take nnDW3x3, down to planes one pixel wide.
	{name: "depthwise_3x3_same", x: []int{2, 3, 5, 6}, w: []int{6, 1, 3, 3}, group: 3, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "depthwise_3x3_row", x: []int{2, 2, 1, 4}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}},
	{name: "depthwise_3x3_column", x: []int{1, 2, 3, 1}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}},
	{name: "depthwise_3x3_wide", x: []int{1, 2, 3, nnDWRowMax + 2}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "depthwise_3x3_2x2", x: []int{2, 2, 2, 2}, w: []int{2, 1, 3, 3}, group: 2, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "pointwise", x: []int{3, 4, 5, 5}, w: []int{3, 4, 1, 1}, bias: true},
	{name: "pointwise_strided", x: []int{2, 3, 5, 5}, w: []int{2, 3, 1, 1}, strides: []int{2, 2}},
	{name: "1d", x: []int{2, 2, 9}, w: []int{3, 2, 3}, strides: []int{2}, pads: []int{1, 2}, bias: true},
	// A kernel dimension above nnRangeK takes the untabulated range path.
	{name: "1d_long_kernel", x: []int{2, 2, 40}, w: []int{2, 2, 17}, strides: []int{3}, pads: []int{8, 7}, bias: true},
	{name: "3d", x: []int{2, 2, 4, 5, 4}, w: []int{2, 2, 2, 3, 2}, pads: []int{1, 0, 1, 0, 1, 1}, strides: []int{1, 2, 1}, bias: true},
}

func (c convCase) node(opset int64) (*Node, []int, []int, []int) {
	nd := len(c.x) - 2
	var attrs []*onnxpb.AttributeProto
	strides, dil, refPads := c.strides, c.dil, c.refPads
	if strides != nil {
		attrs = append(attrs, attrInts("strides", nntI64(strides)...))
	} else {
		strides = nntOnes(nd, 1)
	}
	if dil != nil {
		attrs = append(attrs, attrInts("dilations", nntI64(dil)...))
	} else {
		dil = nntOnes(nd, 1)
	}
	if c.pads != nil {
		attrs = append(attrs, attrInts("pads", nntI64(c.pads)...))
		refPads = c.pads
	}
	if refPads == nil {
		refPads = nntOnes(2*nd, 0)
	}
	if c.autoPad != "" {
		attrs = append(attrs, attrS("auto_pad", c.autoPad))
	}
	if c.group > 0 {
		attrs = append(attrs, attrI("group", int64(c.group)))
	}
	if c.kernAttr {
		attrs = append(attrs, attrInts("kernel_shape", nntI64(c.w[2:])...))
	}
	nIn := 2
	if c.bias {
		nIn = 3
	}
	return nntNode("Conv", opset, nIn, 1, attrs...), strides, dil, refPads
}

func (c convCase) inputs(r *rand.Rand) []*Tensor {
	in := []*Tensor{nntRand(r, c.x, -1, 1), nntRand(r, c.w, -1, 1)}
	if c.bias {
		in = append(in, nntRand(r, []int{c.w[0]}, -1, 1))
	}
	return in
}

func TestConvForwardMatchesDirect(t *testing.T) {
	for _, c := range convCases {
		for _, workers := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				out := nntRun(t, buildKernel(t, n), nntCtx(t, workers), in)
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				group := max(c.group, 1)
				want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, group, strides, dil, pads)
				if !nnShapeEq(out[0].Shape, ws) {
					t.Fatalf("shape %v, want %v", out[0].Shape, ws)
				}
				nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
			})
		}
	}
}

func TestConvGradient(t *testing.T) {
	for _, c := range convCases {
		t.Run(c.name, func(t *testing.T) {
			n, _, _, _ := c.node(11)
			nntGradCheck(t, nntGradCase{name: c.name, op: "Conv", opset: 11, attrs: n.Proto.Attribute, inputs: c.inputs})
		})
	}
}

type convTCase struct {
	name    string
	x, w    []int
	bias    bool
	group   int
	strides []int
	dil     []int
	pads    []int
	outPad  []int
}

var convTCases = []convTCase{
	{name: "default", x: []int{1, 1, 3, 3}, w: []int{1, 2, 3, 3}},
	{name: "1d", x: []int{2, 1, 3}, w: []int{1, 2, 3}, bias: true},
	// A kernel dimension above nnRangeK takes the untabulated range path.
	{name: "1d_long_kernel", x: []int{2, 2, 40}, w: []int{2, 2, 17}, strides: []int{3}, pads: []int{8, 7}, bias: true},
	{name: "3d", x: []int{1, 1, 3, 4, 3}, w: []int{1, 2, 3, 3, 2}},
	{name: "dilations", x: []int{2, 1, 3, 3}, w: []int{1, 1, 2, 2}, dil: []int{2, 2}},
	{name: "strides_outpad", x: []int{2, 1, 3, 3}, w: []int{1, 2, 3, 3}, strides: []int{3, 2}, outPad: []int{1, 1}, bias: true},
	{name: "pads", x: []int{2, 1, 3, 3}, w: []int{1, 2, 3, 3}, strides: []int{3, 2}, pads: []int{1, 2, 1, 2}},
	{name: "group", x: []int{3, 4, 3, 4}, w: []int{4, 3, 2, 3}, group: 2, strides: []int{2, 1}, pads: []int{0, 1, 1, 0}, bias: true},
}

func (c convTCase) node() (*Node, []int, []int, []int, []int) {
	nd := len(c.x) - 2
	var attrs []*onnxpb.AttributeProto
	strides, dil, pads, outPad := c.strides, c.dil, c.pads, c.outPad
	if strides != nil {
		attrs = append(attrs, attrInts("strides", nntI64(strides)...))
	} else {
		strides = nntOnes(nd, 1)
	}
	if dil != nil {
		attrs = append(attrs, attrInts("dilations", nntI64(dil)...))
	} else {
		dil = nntOnes(nd, 1)
	}
	if pads != nil {
		attrs = append(attrs, attrInts("pads", nntI64(pads)...))
	} else {
		pads = nntOnes(2*nd, 0)
	}
	if outPad != nil {
		attrs = append(attrs, attrInts("output_padding", nntI64(outPad)...))
	} else {
		outPad = nntOnes(nd, 0)
	}
	if c.group > 0 {
		attrs = append(attrs, attrI("group", int64(c.group)))
	}
	nIn := 2
	if c.bias {
		nIn = 3
	}
	return nntNode("ConvTranspose", 11, nIn, 1, attrs...), strides, dil, pads, outPad
}

func (c convTCase) inputs(r *rand.Rand) []*Tensor {
	in := []*Tensor{nntRand(r, c.x, -1, 1), nntRand(r, c.w, -1, 1)}
	if c.bias {
		in = append(in, nntRand(r, []int{c.w[1] * max(c.group, 1)}, -1, 1))
	}
	return in
}

func TestConvTransposeForwardMatchesScatter(t *testing.T) {
	for _, c := range convTCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			n, strides, dil, pads, outPad := c.node()
			in := c.inputs(r)
			out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), in)
			var b []float64
			if c.bias {
				b = to64(in[2].F)
			}
			want, ws := refConvTranspose(to64(in[0].F), c.x, to64(in[1].F), c.w, b, max(c.group, 1), strides, dil, pads, outPad)
			if !nnShapeEq(out[0].Shape, ws) {
				t.Fatalf("shape %v, want %v", out[0].Shape, ws)
			}
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
		})
	}
}

func TestConvTransposeGradient(t *testing.T) {
	cases := append([]convTCase(nil), convTCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, _, _, _, _ := c.node()
			nntGradCheck(t, nntGradCase{name: c.name, op: "ConvTranspose", opset: 11, attrs: n.Proto.Attribute, inputs: c.inputs})
		})
	}
	// The attribute forms the conformance suite uses that the scatter reference does not
	// take directly: output_shape (negative total padding) and auto_pad.
	for _, c := range []struct {
		name  string
		attrs []*onnxpb.AttributeProto
	}{
		{"output_shape", []*onnxpb.AttributeProto{attrInts("output_shape", 10, 8), attrInts("strides", 3, 2)}},
		{"kernel_shape_output_shape", []*onnxpb.AttributeProto{attrInts("kernel_shape", 3, 3), attrInts("output_padding", 1, 1), attrInts("output_shape", 10, 8), attrInts("strides", 3, 2)}},
		{"autopad_same_upper", []*onnxpb.AttributeProto{attrS("auto_pad", "SAME_UPPER"), attrInts("strides", 2, 2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: c.name, op: "ConvTranspose", opset: 11, attrs: c.attrs,
				inputs: func(r *rand.Rand) []*Tensor {
					return []*Tensor{nntRand(r, []int{1, 1, 3, 3}, -1, 1), nntRand(r, []int{1, 2, 3, 3}, -1, 1)}
				}})
		})
	}
}

func TestConvRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      *Node
		shapes [][]int
		want   string
	}{
		{"auto_pad", nntNode("Conv", 11, 2, 1, attrS("auto_pad", "SAME")), nil, "auto_pad"},
		{"channels", nntNode("Conv", 11, 2, 1), [][]int{{1, 3, 5, 5}, {2, 2, 3, 3}}, "channels"},
		{"group", nntNode("Conv", 11, 2, 1, attrI("group", 2)), [][]int{{1, 4, 5, 5}, {3, 2, 3, 3}}, "group"},
		{"too_small", nntNode("Conv", 11, 2, 1), [][]int{{1, 1, 2, 2}, {1, 1, 3, 3}}, "smaller"},
		{"4d_spatial", nntNode("Conv", 11, 2, 1), [][]int{{1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}}, "spatial"},
		{"kernel_shape", nntNode("Conv", 11, 2, 1, attrInts("kernel_shape", 2, 2)), [][]int{{1, 1, 5, 5}, {1, 1, 3, 3}}, "kernel_shape"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := opBuilder("Conv")(c.n)
			if err == nil {
				in := make([]*Tensor, len(c.shapes))
				for i, s := range c.shapes {
					in[i] = &Tensor{DType: Float32, Shape: s}
				}
				_, err = k.Infer(in)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "t_Conv") {
				t.Fatalf("error %v, want one naming the node and %q", err, c.want)
			}
		})
	}
}

// TestConvChunks checks Conv on batches that the kernel splits into several chunks of
// items (with a shorter last chunk), where outputs and gradients move between the
// item-major tensors and the chunk's side-by-side layout. Forward is compared with the
// direct float64 convolution; backward, too large for finite differences here, with the
// adjoint identities of a bilinear map: ⟨gx, dx⟩ = ⟨gy, conv(dx, w)⟩ and
// ⟨gw, dw⟩ = ⟨gy, conv(x, dw)⟩ for random directions dx and dw, and gb = Σ gy.
func TestConvChunks(t *testing.T) {
	cases := []convCase{
		// 8·9·54·54 columns per item: chunks of 2 items, 2 + 2 + 1.
		{name: "im2col_5_items", x: []int{5, 8, 54, 54}, w: []int{2, 8, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		// 64·40·40 per item: chunks of 5 items, 5 + 2.
		{name: "pointwise_7_items", x: []int{7, 64, 40, 40}, w: []int{2, 64, 1, 1}, bias: true},
		// 2·9·60·120 per item and group: chunks of 4 items, 4 + 1.
		{name: "group2_strided_5_items", x: []int{5, 4, 120, 120}, w: []int{2, 2, 3, 3}, group: 2, strides: []int{2, 1}, pads: []int{1, 1, 1, 1}, bias: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			k := buildKernel(t, n)
			k.(*convKernel).noDirect = true // chunks are the im2col + Sgemm path's
			if d, err := k.(*convKernel).dims(c.x, c.w, in[2]); err != nil || d.chunk() >= c.x[0] {
				t.Fatalf("case does not split the batch into chunks (chunk %d of %d, err %v)", d.chunk(), c.x[0], err)
			}
			ctx := nntCtx(t, 2)
			out := nntRun(t, k, ctx, in)
			group := max(c.group, 1)
			conv := func(x, w, b []float64) []float64 {
				y, _ := refConv(x, c.x, w, c.w, b, group, strides, dil, pads)
				return y
			}
			want := conv(to64(in[0].F), to64(in[1].F), to64(in[2].F))
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)

			gy := nntRand(r, out[0].Shape, -1, 1)
			gin := make([]*Tensor, 3)
			for i := range gin {
				gin[i] = NewFloat(in[i].Shape, make([]float32, in[i].Len()))
			}
			if err := k.(Differentiable).Backward(ctx, in, out, []*Tensor{gy}, gin); err != nil {
				t.Fatal(err)
			}
			dot := func(a []float64, b []float32) (s, mag float64) {
				for i, v := range a {
					s += v * float64(b[i])
					mag += math.Abs(v * float64(b[i]))
				}
				return s, mag
			}
			dx, dw := nntRand(r, c.x, -1, 1), nntRand(r, c.w, -1, 1)
			zb := make([]float64, c.w[0])
			for _, chk := range []struct {
				name   string
				g, dir []float32
				image  []float64
			}{
				{"gx", gin[0].F, dx.F, conv(to64(dx.F), to64(in[1].F), zb)},
				{"gw", gin[1].F, dw.F, conv(to64(in[0].F), to64(dw.F), zb)},
			} {
				got, gmag := dot(to64(chk.g), chk.dir)
				want, mag := dot(chk.image, gy.F)
				if d := math.Abs(got - want); d > 1e-5*max(mag, gmag) {
					t.Errorf("⟨%s, d⟩ = %.9g, ⟨gy, conv(d)⟩ = %.9g (difference %.3g, scale %.3g)", chk.name, got, want, d, mag)
				}
			}
			O := out[0].Len() / (c.x[0] * c.w[0])
			gb := make([]float64, c.w[0])
			for i, v := range gy.F {
				gb[(i/O)%c.w[0]] += float64(v)
			}
			nntClose(t, "gb", gin[2].F, gb, 1e-4, 1e-5)
		})
	}
}

// TestConvGeometryChange runs one Conv kernel on images of changing sizes, so that the
// im2col gather table it keeps is rebuilt for each new geometry and not reused stale.
func TestConvGeometryChange(t *testing.T) {
	c := convCase{name: "strided", x: []int{2, 2, 7, 5}, w: []int{3, 2, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true}
	n, strides, dil, pads := c.node(11)
	k := buildKernel(t, n)
	ctx := nntCtx(t, 2)
	for _, x := range [][]int{{2, 2, 7, 5}, {3, 2, 6, 6}, {2, 2, 7, 5}, {1, 2, 9, 4}} {
		c.x = x
		in := c.inputs(rand.New(rand.NewPCG(5, uint64(x[2]))))
		out := nntRun(t, k, ctx, in)
		want, _ := refConv(to64(in[0].F), x, to64(in[1].F), c.w, to64(in[2].F), 1, strides, dil, pads)
		nntClose(t, fmt.Sprintf("Y for X %v", x), out[0].F, want, 1e-5, 1e-5)
	}
}
