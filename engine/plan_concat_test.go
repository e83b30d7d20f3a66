package engine

import (
	"math"
	"math/rand/v2"
	"slices"
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
		w("wv", 3, 6, 1, 1), onnxio.Int64Tensor("shape", []int64{4}, []int64{n, 3, 9, 11}),
		w("wl", 2, 6, 1, 1), w("wm", 2, 6, 1, 1), w("wo", 3, 25, 1, 1),
	}
	gp := &onnxpb.GraphProto{Name: proto.String("fire"), Node: nodes, Initializer: inits,
		Input:  []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{n, 6, 9, 11})},
		Output: []*onnxpb.ValueInfoProto{typedValue("y", f, []int64{n, 3, 9, 11}), typedValue("c", f, []int64{n, 25, 9, 11}), typedValue("cl", f, []int64{n, 2, 9, 22})}}
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
	x := gFloats(r, int(n*6*9*11))
	in := NewFloat([]int{int(n), 6, 9, 11}, x)
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
		want := 0
		if n == 1 && !copyAll {
			want = 3
		}
		if got := g.last.concatParts; got != want {
			t.Errorf("batch %d, copy all %v: %d Concat inputs placed, want %d", n, copyAll, got, want)
		}
	}
	return m, x, outs
}

// TestConcatInPlace: at batch 1 the expansions and the squeeze of fireModel are written
// straight into the Concats' outputs (three inputs placed, the rest copied; none at batch
// 2, none along the last axis), and the outputs are the bits of the plan that copies
// every input.
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
		ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: []int64{n, 6, 9, 11}, Data: x}})
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
