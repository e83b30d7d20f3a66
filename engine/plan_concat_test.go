package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// fireModel is a SqueezeNet fire module whose Concat takes, besides what concatInPlace
// places (two expansions, 1×1 and 3×3 with Relu, and the squeeze's output, which the
// expansions read before the Concat does), what it must leave to copy: the graph input
// itself, a Reshape (a view of another buffer) and another Concat's output; a second
// Concat on the last axis (more than one block before the axis); then a 1×1 convolution,
// the graph's output along with the Concats'.
func fireModel(r *rand.Rand, n int64) *onnxio.Model {
	f := onnxpb.TensorProto_FLOAT
	w := func(name string, dims ...int64) *onnxpb.TensorProto {
		size := int64(1)
		for _, d := range dims {
			size *= d
		}
		return onnxio.FloatTensor(name, dims, gFloats(r, int(size)))
	}
	nodes := []*onnxpb.NodeProto{
		gNode("Conv", []string{"x", "ws", "bs"}, []string{"s0"}),
		gNode("Relu", []string{"s0"}, []string{"s"}),
		gNode("Conv", []string{"s", "w1"}, []string{"e10"}),
		gNode("Relu", []string{"e10"}, []string{"e1"}),
		gNode("Conv", []string{"s", "w3", "b3"}, []string{"e30"}, attrInts("pads", 1, 1, 1, 1)),
		gNode("Relu", []string{"e30"}, []string{"e3"}),
		gNode("Conv", []string{"x", "wv"}, []string{"v0"}),
		gNode("Reshape", []string{"v0", "shape"}, []string{"v"}),
		gNode("Concat", []string{"e1", "e3"}, []string{"inner"}, attrI("axis", 1)),
		gNode("Concat", []string{"inner", "s", "x", "v"}, []string{"c"}, attrI("axis", 1)),
		gNode("Conv", []string{"x", "wl"}, []string{"l0"}),
		gNode("Conv", []string{"x", "wm"}, []string{"l1"}),
		gNode("Concat", []string{"l0", "l1"}, []string{"cl"}, attrI("axis", 3)),
		gNode("Conv", []string{"c", "wo"}, []string{"y"}),
	}
	inits := []*onnxpb.TensorProto{
		w("ws", 4, 6, 1, 1), w("bs", 4), w("w1", 5, 4, 1, 1), w("w3", 7, 4, 3, 3), w("b3", 7),
		w("wv", 3, 6, 1, 1), onnxio.Int64Tensor("shape", []int64{4}, []int64{n, 3, 9, 13}),
		w("wl", 2, 6, 1, 1), w("wm", 2, 6, 1, 1), w("wo", 3, 25, 1, 1),
	}
	gp := &onnxpb.GraphProto{Name: proto.String("fire"), Node: nodes, Initializer: inits,
		Input:  []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{n, 6, 9, 13})},
		Output: []*onnxpb.ValueInfoProto{typedValue("y", f, []int64{n, 3, 9, 13}), typedValue("c", f, []int64{n, 25, 9, 13}), typedValue("cl", f, []int64{n, 2, 9, 26})}}
	return &onnxio.Model{Name: "fire.onnx", Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}, Graph: gp}}
}

// fireRuns runs fireModel at batch n twice per plan, copying every Concat input and
// placing what concatInPlace places, and returns the model, its input and both plans'
// outputs, after checking how many inputs each placed.
func fireRuns(t *testing.T, n int64) (*onnxio.Model, []float32, [2][][]float32) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, uint64(n)))
	m := fireModel(r, n)
	x := gFloats(r, int(n*6*9*13))
	in := NewFloat([]int{int(n), 6, 9, 13}, x)
	want := 0
	switch {
	case n == 1:
		want = 3
	case convDirectOK():
		// The two expansions, written a Concat row apart (the squeeze has other
		// readers); without the direct path's tiles nothing is placed.
		want = 2
	}
	outs := concatPlans(t, m, in, want)
	return m, x, outs
}

// concatPlans runs m on in twice per plan, with a plan that copies every Concat input
// and one that places what concatInPlace places, checks that the second placed want
// inputs and the first none, and returns both plans' outputs.
func concatPlans(t *testing.T, m *onnxio.Model, in *Tensor, want int) [2][][]float32 {
	t.Helper()
	var outs [2][][]float32
	for i, copyAll := range []bool{true, false} {
		g, err := Build(m, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		g.noConcatInPlace = copyAll
		// Twice: the second run finds the buffers as the first left them.
		for range 2 {
			o, err := g.Forward(&Context{Workers: 2}, in)
			if err != nil {
				t.Fatal(err)
			}
			outs[i] = nil
			for _, v := range o {
				outs[i] = append(outs[i], slices.Clone(v.F))
			}
		}
		w := want
		if copyAll {
			w = 0
		}
		if got := g.last.concatParts; got != w {
			t.Errorf("batch %d, copy all %v: %d Concat inputs placed, want %d", in.Shape[0], copyAll, got, w)
		}
	}
	return outs
}

// TestConcatInPlace: at batch 1 the expansions and the squeeze of fireModel are written
// straight into the Concats' outputs (three inputs placed, the rest copied; none along
// the last axis); at batch 2 the two expansions, each image's planes a row of the Concat
// apart, where the CPU has the direct path; and the outputs are the bits of the plan that
// copies every input.
func TestConcatInPlace(t *testing.T) {
	for _, n := range []int64{1, 2} {
		_, _, outs := fireRuns(t, n)
		for o := range outs[0] {
			for i, v := range outs[1][o] {
				if math.Float32bits(v) != math.Float32bits(outs[0][o][i]) {
					t.Fatalf("batch %d, output %d [%d]: %v in place, %v copied", n, o, i, v, outs[0][o][i])
				}
			}
		}
	}
}

// TestConcatInPlaceAgainstOnnxruntime compares fireModel's outputs, inputs placed in the
// Concat's output, with onnxruntime 1.30's within float32 rounding (1e-5 relative).
func TestConcatInPlaceAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for _, n := range []int64{1, 2} {
		m, x, outs := fireRuns(t, n)
		b, err := proto.Marshal(m.Proto)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: []int64{n, 6, 9, 13}, Data: x}})
		if err != nil {
			t.Fatalf("onnxruntime: %v", err)
		}
		for o, rt := range ref {
			for i, v := range rt.Data {
				if d := math.Abs(float64(v) - float64(outs[1][o][i])); d > 1e-5*(1+math.Abs(float64(v))) {
					t.Fatalf("batch %d, output %d [%d]: %v, onnxruntime %v", n, o, i, outs[1][o][i], v)
				}
			}
		}
	}
}

// TestConvStridedOutput runs fused convolutions whose output a plan placed in a Concat
// (convBNKernel.ystride: each image's planes a Concat row apart, other inputs' planes in
// between) and checks every image's planes against the same convolution's unplaced
// output bit for bit, and that the planes between them are left as they were: pointwise
// layers on large planes (pointwiseBlocks, one and two blocks of the sum) and on 7 × 7
// planes whose last pixels go to shared panels (remainders), a padded 3×3, a
// stride-2 layer, a Clip after the kernel (NaN bound), a layer the Winograd path takes,
// and, through the copy that run falls back on, one without the direct path.
func TestConvStridedOutput(t *testing.T) {
	cases := []struct {
		c     convCase
		act   *nnClamp
		noDir bool
		extra int // the Concat's other channels, after this input's
	}{
		{c: convCase{name: "pointwise_blocks_128to16@24", x: []int{3, 128, 24, 24}, w: []int{16, 128, 1, 1}, bias: true}, act: &nnClamp{relu: true}, extra: 5},
		{c: convCase{name: "pointwise_remainders_24to20@7", x: []int{16, 24, 7, 7}, w: []int{20, 24, 1, 1}, bias: true}, act: &nnClamp{relu: true}, extra: 3},
		{c: convCase{name: "pointwise_rows_16to40@24", x: []int{2, 16, 24, 24}, w: []int{40, 16, 1, 1}}, act: &nnClamp{lo: -0.5, hi: 0.75}, extra: 3},
		{c: convCase{name: "padded_3x3_6to13@9x13", x: []int{2, 6, 9, 13}, w: []int{13, 6, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, act: &nnClamp{relu: true}, extra: 7},
		// Rows of 11: on the AVX2 path the column matrix's path, not placed (forwardDirectOK).
		{c: convCase{name: "padded_3x3_6to13@9x11", x: []int{2, 6, 9, 11}, w: []int{13, 6, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, act: &nnClamp{relu: true}, extra: 7},
		{c: convCase{name: "stride2_3x3", x: []int{3, 4, 17, 33}, w: []int{9, 4, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}}, extra: 2},
		{c: convCase{name: "clip_nan_bound", x: []int{2, 8, 9, 11}, w: []int{10, 8, 1, 1}, bias: true}, act: &nnClamp{lo: float32(math.NaN()), hi: 0.5}, extra: 1},
		{c: convCase{name: "winograd_64to64@14", x: []int{4, 64, 14, 14}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, act: &nnClamp{relu: true}, extra: 4},
		{c: convCase{name: "no_direct_path", x: []int{2, 6, 9, 11}, w: []int{13, 6, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, act: &nnClamp{relu: true}, noDir: true, extra: 3},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			r := rand.New(rand.NewPCG(91, 92))
			n, strides, dil, pads := c.node(11)
			in := c.inputs(r)
			in[1].param = &Param{Name: "w", Value: in[1]}
			ws := refConvShape(c.x, c.w, strides, dil, pads)
			N, M, O := ws[0], ws[1], ws[2]*ws[3]
			ctx := nntGoCtx(2)
			ref := NewFloat(ws, make([]float32, numel(ws)))
			plain := buildKernel(t, n).(*convKernel)
			plain.noDirect = tc.noDir
			if err := plain.run(ctx, in[0], in[1], n.Optional(in, 2), ref, tc.act, nil, nil, nil); err != nil {
				t.Fatal(err)
			}
			conv := buildKernel(t, n).(*convKernel)
			conv.noDirect = tc.noDir
			row := (M + tc.extra) * O
			k := &convBNKernel{conv: conv, noBN: true, ystride: row}
			whole := make([]float32, N*row)
			for i := range whole {
				whole[i] = float32(math.Inf(-1))
			}
			off := 2 * O // after two planes of another input
			if tc.extra < 2 {
				off = 0
			}
			y := &Tensor{DType: Float32, Shape: ws, F: whole[off : off+(N-1)*row+M*O]}
			for range 2 { // the second run finds the planes as the first left them
				if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, tc.act, nil, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			direct := conv.stridedOK(mustDims(t, conv, c, in))
			if placed := k.placeable(in[0], in[1], n.Optional(in, 2)); placed != direct {
				t.Errorf("placeable %v, the direct path writes it %v", placed, direct)
			}
			t.Logf("written in place by the direct path: %v", direct)
			if strings.HasPrefix(c.name, "pointwise_blocks") && direct && conv.direct.kblocked == 0 {
				t.Error("the pointwise layer did not take pointwiseBlocks")
			}
			if strings.HasPrefix(c.name, "pointwise_remainders") && direct && conv.direct.remaindered == 0 {
				t.Error("the pointwise layer did not leave its planes' last pixels to remainders")
			}
			if strings.HasPrefix(c.name, "winograd") && winoFast() && !conv.winogradOK(mustDims(t, conv, c, in), nil) {
				t.Error("the layer does not take the Winograd path")
			}
			for i := range N {
				for j := range M * O {
					got, want := whole[off+i*row+j], ref.F[i*M*O+j]
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("image %d [%d]: %v placed, %v unplaced", i, j, got, want)
					}
				}
			}
			for i, v := range whole {
				j := (i - off) % row
				if i >= off && i < off+(N-1)*row+M*O && j < M*O {
					continue
				}
				if !math.IsInf(float64(v), -1) {
					t.Fatalf("whole[%d] = %v, outside the placed planes", i, v)
				}
			}
		})
	}
}

// mustDims is d of conv's convolution of case c on inputs in, trimmed as run trims.
func mustDims(t *testing.T, conv *convKernel, c convCase, in []*Tensor) *convDims {
	t.Helper()
	var b *Tensor
	if len(in) > 2 {
		b = in[2]
	}
	d, err := conv.dims(in[0].Shape, in[1].Shape, b)
	if err != nil {
		t.Fatal(err)
	}
	d, _ = conv.trimmed(d, in[1])
	return &d
}

// stridedRuns builds, at batch 3, a Concat of four convolutions of one input, of which
// only the first may be written in place a row apart: a Conv with its Relu whose only
// reader is the Concat. The others are the negative controls of concatInPlace's
// conditions: a Conv without an activation (not a fused step), a Conv with its Relu and a
// MaxPool fused after it (its step writes the pool), and a Conv with its Relu that a
// Sigmoid reads too. It runs the model with a plan that copies every Concat input and
// with one that places what concatInPlace places, checks how many each placed, and
// returns the model, its input and both plans' outputs.
func stridedRuns(t *testing.T) (*onnxio.Model, []float32, [2][][]float32) {
	t.Helper()
	const n = 3
	f := onnxpb.TensorProto_FLOAT
	r := rand.New(rand.NewPCG(7, 8))
	w := func(name string, dims ...int64) *onnxpb.TensorProto {
		size := int64(1)
		for _, d := range dims {
			size *= d
		}
		return onnxio.FloatTensor(name, dims, gFloats(r, int(size)))
	}
	pads := attrInts("pads", 1, 1, 1, 1)
	nodes := []*onnxpb.NodeProto{
		gNode("Conv", []string{"x", "w1", "b1"}, []string{"c1"}, pads),
		gNode("Relu", []string{"c1"}, []string{"e1"}),
		gNode("Conv", []string{"x", "w2"}, []string{"e2"}, pads),
		gNode("Conv", []string{"x", "w3"}, []string{"c3"}, pads),
		gNode("Relu", []string{"c3"}, []string{"r3"}),
		gNode("MaxPool", []string{"r3"}, []string{"e3"}, attrInts("kernel_shape", 1, 1)),
		gNode("Conv", []string{"x", "w4"}, []string{"c4"}, pads),
		gNode("Relu", []string{"c4"}, []string{"e4"}),
		gNode("Sigmoid", []string{"e4"}, []string{"s4"}),
		gNode("Concat", []string{"e1", "e2", "e3", "e4"}, []string{"c"}, attrI("axis", 1)),
	}
	inits := []*onnxpb.TensorProto{w("w1", 5, 4, 3, 3), w("b1", 5), w("w2", 3, 4, 3, 3), w("w3", 2, 4, 3, 3), w("w4", 6, 4, 3, 3)}
	gp := &onnxpb.GraphProto{Name: proto.String("strided"), Node: nodes, Initializer: inits,
		Input:  []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{n, 4, 9, 13})},
		Output: []*onnxpb.ValueInfoProto{typedValue("c", f, []int64{n, 16, 9, 13}), typedValue("s4", f, []int64{n, 6, 9, 13})}}
	m := &onnxio.Model{Name: "strided.onnx", Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}, Graph: gp}}
	x := gFloats(r, n*4*9*13)
	want := 0
	if convDirectOK() {
		want = 1
	}
	outs := concatPlans(t, m, NewFloat([]int{n, 4, 9, 13}, x), want)
	return m, x, outs
}

// TestConcatStridedOnlyFusedSoleReader checks stridedRuns' placements (in stridedRuns) and
// that the plan that places gives the bits of the one that copies.
func TestConcatStridedOnlyFusedSoleReader(t *testing.T) {
	_, _, outs := stridedRuns(t)
	for o := range outs[0] {
		for i, v := range outs[1][o] {
			if math.Float32bits(v) != math.Float32bits(outs[0][o][i]) {
				t.Fatalf("output %d [%d]: %v in place, %v copied", o, i, v, outs[0][o][i])
			}
		}
	}
}

// TestConcatStridedAgainstOnnxruntime compares stridedRuns' placed outputs with
// onnxruntime 1.30's within float32 rounding (1e-5 relative).
func TestConcatStridedAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	m, x, outs := stridedRuns(t)
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: []int64{3, 4, 9, 13}, Data: x}})
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	for o, rt := range ref {
		for i, v := range rt.Data {
			if d := math.Abs(float64(v) - float64(outs[1][o][i])); d > 1e-5*(1+math.Abs(float64(v))) {
				t.Fatalf("output %d [%d]: %v, onnxruntime %v", o, i, outs[1][o][i], v)
			}
		}
	}
}
