package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/testenv"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// boolTensor is a BOOL initializer, stored as ONNX stores bools outside raw_data.
func boolTensor(name string, dims []int64, v ...bool) *onnxpb.TensorProto {
	t := &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL))}
	for _, b := range v {
		t.Int32Data = append(t.Int32Data, int32(b2i64(b)))
	}
	return t
}

// TestWhereGradient checks Where's VJP by finite differences with X and Y trainable:
// equal shapes, a broadcast across all three operands (each operand broadcast along a
// different axis), and the attention-mask form (a [N,1,1,T] condition and a scalar Y).
func TestWhereGradient(t *testing.T) {
	const T, F = true, false
	where := gNode("Where", []string{"c", "x", "y"}, []string{"o"})
	cases := []gradCase{
		{name: "Where/same-shape", params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "y", shape: []int64{2, 3}}},
			ints: []*onnxpb.TensorProto{boolTensor("c", []int64{2, 3}, T, F, F, T, T, F)}},
		{name: "Where/broadcast-all", params: []gradParam{{name: "x", shape: []int64{3, 1}}, {name: "y", shape: []int64{1, 3, 4}}},
			ints: []*onnxpb.TensorProto{boolTensor("c", []int64{2, 1, 4}, T, F, T, T, F, F, T, F)}},
		{name: "Where/attention-mask", params: []gradParam{{name: "x", shape: []int64{2, 2, 3, 3}}, {name: "y"}},
			ints: []*onnxpb.TensorProto{boolTensor("c", []int64{2, 1, 1, 3}, T, T, F, T, F, F)}},
	}
	for _, c := range cases {
		c.opset, c.out, c.nodes = 16, []string{"o"}, []*onnxpb.NodeProto{where}
		t.Run(c.name, func(t *testing.T) { checkGraphGrad(t, c) })
	}
}

// TestWhereNoConditionGradient checks that a bool condition computed from a trainable
// parameter (x > 0 selecting x or 0, a hand-written Relu) trains: the comparison's bool
// output carries no gradient, so the graph builds for training and x's gradient is the
// one through Where alone.
func TestWhereNoConditionGradient(t *testing.T) {
	checkGraphGrad(t, gradCase{name: "Where/condition-from-param", opset: 13, out: []string{"o"},
		params: []gradParam{{name: "x", shape: []int64{3, 4}}},
		ints:   []*onnxpb.TensorProto{onnxio.FloatTensor("z", nil, []float32{0})},
		nodes: []*onnxpb.NodeProto{
			gNode("Greater", []string{"x", "z"}, []string{"c"}),
			gNode("Where", []string{"c", "x", "z"}, []string{"o"}),
		}})
}

// TestNotConformanceData runs ONNX's Not node tests, which the graph runner skips because
// their models declare opset 1 (Not is unchanged since), straight through the kernel.
func TestNotConformanceData(t *testing.T) {
	testenv.RequireFile(t, conformanceDir, "apt-get install libonnx-testdata")
	for _, name := range []string{"test_not_2d", "test_not_3d", "test_not_4d"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(conformanceDir, name)
			raw, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			mp := &onnxpb.ModelProto{}
			if err := proto.Unmarshal(raw, mp); err != nil {
				t.Fatal(err)
			}
			recordPassed(t, opsCovered.conf, mp)
			k := buildKernel(t, &Node{Proto: mp.GetGraph().GetNode()[0], Opset: 7})
			sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
			if len(sets) == 0 {
				t.Fatal("no data sets")
			}
			for _, set := range sets {
				read := func(f string) *Tensor {
					tt, err := onnxio.ReadTensorFile(filepath.Join(set, f))
					if err != nil {
						t.Fatal(err)
					}
					return fromONNX(tt)
				}
				x, want := read("input_0.pb"), read("output_0.pb")
				shapes, err := k.Infer([]*Tensor{{DType: x.DType, Shape: x.Shape}})
				if err != nil {
					t.Fatal(err)
				}
				out := &Tensor{DType: shapes[0].DType, Shape: shapes[0].Shape, I: make([]int64, x.Len())}
				if err := k.Forward(&Context{}, []*Tensor{x}, []*Tensor{out}); err != nil {
					t.Fatal(err)
				}
				if err := closeTensors(out, want, 0, 0); err != nil {
					t.Errorf("%s: %v", filepath.Base(set), err)
				}
			}
		})
	}
}

// TestLogicTypes checks the bool type bookkeeping: comparisons and Not declare BOOL
// outputs, so Cast from them and Where reading them see a bool; logical ops refuse float
// inputs; and Where takes its output type from X, not from the condition.
func TestLogicTypes(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("Less", []string{"a", "b"}, []string{"c"}),
		gNode("Not", []string{"c"}, []string{"nc"}),
		gNode("Where", []string{"nc", "a", "b"}, []string{"w"}),
		gNode("Cast", []string{"nc"}, []string{"f"}, attrI("to", int64(onnxpb.TensorProto_FLOAT))),
	}, []*onnxpb.ValueInfoProto{gInput("a", onnxpb.TensorProto_FLOAT, 3), gInput("b", onnxpb.TensorProto_FLOAT, 3)}, []string{"w", "f"})
	g := mustBuild(t, m)
	var types []string
	for _, n := range g.nodes {
		types = append(types, fmt.Sprint(n.n.InputType(0)))
	}
	if want := "[FLOAT BOOL BOOL BOOL]"; fmt.Sprint(types) != want {
		t.Errorf("first input types %v, want %s", types, want)
	}
	out, err := g.Forward(nil, NewFloat([]int{3}, []float32{1, 2, 3}), NewFloat([]int{3}, []float32{2, 2, 2}))
	if err != nil {
		t.Fatal(err)
	}
	if err := closeTensors(out[0], NewFloat([]int{3}, []float32{2, 2, 3}), 0, 0); err != nil {
		t.Error("Where:", err)
	}
	if err := closeTensors(out[1], NewFloat([]int{3}, []float32{0, 1, 1}), 0, 0); err != nil {
		t.Error("Cast from bool:", err)
	}
	bad := gModel(13, []*onnxpb.NodeProto{gNode("And", []string{"a", "a"}, []string{"c"})},
		[]*onnxpb.ValueInfoProto{gInput("a", onnxpb.TensorProto_FLOAT, 3)}, []string{"c"})
	if g, err := Build(bad, Options{}); err == nil {
		if _, err := g.Forward(nil, NewFloat([]int{3}, []float32{1, 0, 1})); err == nil {
			t.Error("And on float inputs ran")
		}
	}
}
