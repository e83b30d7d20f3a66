package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// subgraph is a control-flow body with untyped-shape float inputs (Loop's first two,
// the iteration number and the condition, are integers).
func subgraph(name string, inputs []*onnxpb.ValueInfoProto, outputs []string, nodes ...*onnxpb.NodeProto) *onnxpb.GraphProto {
	g := &onnxpb.GraphProto{Name: proto.String(name), Node: nodes, Input: inputs}
	for _, o := range outputs {
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	return g
}

func attrG(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}

// ifNode is an If whose branches each compute one value from outer-scope names.
func ifNode(cond string, out []string, then, els *onnxpb.GraphProto) *onnxpb.NodeProto {
	return gNode("If", []string{cond}, out, attrG("then_branch", then), attrG("else_branch", els))
}

// loopBody is a Loop body with the iteration number i, the condition c and the
// loop-carried values carried.
func loopBody(carried []string, outputs []string, nodes ...*onnxpb.NodeProto) *onnxpb.GraphProto {
	in := []*onnxpb.ValueInfoProto{gInput("i", onnxpb.TensorProto_INT64), gInput("c", onnxpb.TensorProto_BOOL)}
	for _, v := range carried {
		in = append(in, gInputAny(v, onnxpb.TensorProto_FLOAT))
	}
	return subgraph("body", in, outputs, nodes...)
}

func scalarInt(name string, v int64) *onnxpb.TensorProto {
	return onnxio.Int64Tensor(name, nil, []int64{v})
}

// controlGradCases differentiate through If (both kinds of condition, each branch) and
// Loop (loop-carried values, scan outputs, the iteration number inside the body).
func controlGradCases() []gradCase {
	mulBranch := subgraph("then", nil, []string{"t"}, gNode("Mul", []string{"x", "w"}, []string{"t"}))
	negBranch := subgraph("else", nil, []string{"e"}, gNode("Neg", []string{"x"}, []string{"e0"}), gNode("Mul", []string{"e0", "w"}, []string{"e1"}), gNode("Sigmoid", []string{"e1"}, []string{"e"}))
	plan := func(name string, c int64) gradCase {
		return gradCase{name: name, opset: 13, nodes: []*onnxpb.NodeProto{ifNode("c", []string{"y"}, mulBranch, negBranch)},
			params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "w", shape: []int64{3}}}, ints: []*onnxpb.TensorProto{scalarInt("c", c)}, out: []string{"y"}}
	}
	// A condition computed from float values is decided per run; |x| sums to more than
	// -1 and never to less, so each case takes a known branch.
	run := func(name, cmp string) gradCase {
		return gradCase{name: name, opset: 13, nodes: []*onnxpb.NodeProto{
			gNode("Abs", []string{"x"}, []string{"a"}),
			gNode("ReduceSum", []string{"a"}, []string{"s"}, attrI("keepdims", 0)),
			gNode(cmp, []string{"s", "m1"}, []string{"c"}),
			ifNode("c", []string{"y"}, mulBranch, negBranch),
			gNode("Mul", []string{"y", "x"}, []string{"z"}),
		}, params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "w", shape: []int64{3}}},
			ints: []*onnxpb.TensorProto{onnxio.FloatTensor("m1", nil, []float32{-1})}, out: []string{"z"}}
	}
	loop := gradCase{name: "Loop/carried+scan", opset: 13, nodes: []*onnxpb.NodeProto{
		gNode("Loop", []string{"M", "", "x"}, []string{"v", "s"}, attrG("body", loopBody([]string{"v_in"}, []string{"c", "v_out", "s_out"},
			gNode("MatMul", []string{"v_in", "w"}, []string{"p"}),
			gNode("Gather", []string{"b", "i"}, []string{"bi"}),
			gNode("Add", []string{"p", "bi"}, []string{"q"}),
			gNode("Tanh", []string{"q"}, []string{"v_out"}),
			gNode("Mul", []string{"v_out", "v_in"}, []string{"s_out"}),
		))),
	}, params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "w", shape: []int64{3, 3}}, {name: "b", shape: []int64{4, 3}}},
		ints: []*onnxpb.TensorProto{scalarInt("M", 4)}, out: []string{"v", "s"}}
	return []gradCase{plan("If/plan-time-then", 1), plan("If/plan-time-else", 0), run("If/run-time-then", "Greater"), run("If/run-time-else", "Less"), loop}
}

func TestControlFlowGradients(t *testing.T) {
	for _, c := range controlGradCases() {
		t.Run(c.name, func(t *testing.T) {
			checkGraphGrad(t, c)
			c.eval = true
			checkGraphGrad(t, c)
		})
	}
}

// shapeIfModel holds an If on the batch size (as torch exports `if x.size(0) == 1`) whose
// branches read x from the enclosing graph, and a Loop over a layer whose trip count is
// computed from x's width.
func shapeIfModel() *onnxio.Model {
	return gModel(13, []*onnxpb.NodeProto{
		gNode("Shape", []string{"x"}, []string{"sh"}),
		gNode("Gather", []string{"sh", "zero"}, []string{"n"}),
		gNode("Equal", []string{"n", "one"}, []string{"c"}),
		ifNode("c", []string{"h"},
			subgraph("then", nil, []string{"t"}, gNode("Mul", []string{"x", "w"}, []string{"t"})),
			subgraph("else", nil, []string{"e"}, gNode("Add", []string{"x", "w"}, []string{"e"}))),
		gNode("Gather", []string{"sh", "one"}, []string{"width"}),
		gNode("Loop", []string{"width", "", "h"}, []string{"y"}, attrG("body", loopBody([]string{"h_in"}, []string{"c", "h_out"},
			gNode("MatMul", []string{"h_in", "r"}, []string{"p"}),
			gNode("Relu", []string{"p"}, []string{"h_out"}),
		))),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}, []string{"y"},
		scalarInt("zero", 0), scalarInt("one", 1),
		onnxio.FloatTensor("w", []int64{3}, []float32{1, 2, 3}),
		onnxio.FloatTensor("r", []int64{3, 3}, []float32{0.5, 0, 0, 0.1, 1, 0, 0, 0.2, -1}))
}

// TestControlFlowPlansFlat: an If decided from shapes contributes only its taken branch
// to the plan, per batch size, and an unrolled Loop one copy of its body per iteration;
// the plan has exactly the steps of the same graph without control flow, and its runs
// allocate nothing.
func TestControlFlowPlansFlat(t *testing.T) {
	g := mustBuild(t, shapeIfModel())
	for _, n := range []int{1, 2} {
		x := NewFloat([]int{n, 3}, gFloats(rand.New(rand.NewPCG(1, uint64(n))), 3*n))
		out, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, 3*n)
		w := []float32{1, 2, 3}
		for i, v := range x.F {
			if n == 1 {
				want[i] = v * w[i%3]
			} else {
				want[i] = v + w[i%3]
			}
		}
		r := []float32{0.5, 0, 0, 0.1, 1, 0, 0, 0.2, -1}
		for range 3 {
			next := make([]float32, len(want))
			for b := range n {
				for j := range 3 {
					var s float32
					for k := range 3 {
						s += want[b*3+k] * r[k*3+j]
					}
					next[b*3+j] = max(s, 0)
				}
			}
			want = next
		}
		if err := closeTensors(out[0], NewFloat([]int{n, 3}, want), 1e-6, 1e-6); err != nil {
			t.Errorf("batch %d: %v", n, err)
		}
		// Mul or Add, then three MatMul+Relu: nothing else runs.
		var ops []string
		for _, st := range g.last.steps {
			ops = append(ops, st.node.op)
			if st.on != nil {
				t.Errorf("batch %d: step %s is guarded in a plan-time If", n, st.node.op)
			}
		}
		first := "Add"
		if n == 1 {
			first = "Mul"
		}
		if wantOps := []string{first, "MatMul", "Relu", "MatMul", "Relu", "MatMul", "Relu"}; !slices.Equal(ops, wantOps) {
			t.Errorf("batch %d: plan runs %v, want %v", n, ops, wantOps)
		}
		if a := testing.AllocsPerRun(20, func() { g.Forward(nil, x) }); a != 0 {
			t.Errorf("batch %d: %v allocations per run", n, a)
		}
	}
}

// TestRunTimeIfAllocatesNothing: an If decided per run keeps both branches behind a
// guard; switching between them allocates nothing.
func TestRunTimeIfAllocatesNothing(t *testing.T) {
	c := controlGradCases()[2]
	m := gModel(13, c.nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}, []string{"z"},
		onnxio.FloatTensor("m1", nil, []float32{0}), onnxio.FloatTensor("w", []int64{3}, []float32{1, 2, 3}))
	g := mustBuild(t, m)
	pos := NewFloat([]int{2, 3}, []float32{1, 1, 1, 1, 1, 1})
	for _, x := range []*Tensor{pos, NewFloat([]int{2, 3}, make([]float32, 6))} {
		if _, err := g.Forward(nil, x); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := g.Forward(nil, pos)
	if out[0].F[1] != 2 {
		t.Errorf("then branch: got %v", out[0].F)
	}
	var flip bool
	if a := testing.AllocsPerRun(20, func() {
		flip = !flip
		x := pos
		if flip {
			x = NewFloat([]int{2, 3}, pos.F[:6:6]) // same signature, another tensor
		}
		g.Forward(nil, x)
	}); a > 1 {
		t.Errorf("%v allocations per run", a)
	}
}

// TestControlFlowRefusals: the forms qtool cannot plan are refused with one line naming
// the node, and unrolling is bounded by the memory limit.
func TestControlFlowRefusals(t *testing.T) {
	body := loopBody([]string{"v_in"}, []string{"c", "v_out"}, gNode("Neg", []string{"v_in"}, []string{"v_out"}))
	in := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}
	// A trip count computed from float data.
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
		gNode("Cast", []string{"s"}, []string{"M"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", body)),
	}, in, []string{"y"})
	_, err := mustBuild(t, m).Forward(nil, NewFloat([]int{1, 3}, []float32{1, 2, 3}))
	if err == nil || !strings.Contains(err.Error(), `node "Loop_y" (Loop): the trip count is computed at run time`) {
		t.Errorf("run-time trip count: %v", err)
	}
	// Branches of a run-time If with different shapes.
	m = gModel(13, []*onnxpb.NodeProto{
		gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
		gNode("Greater", []string{"s", "z"}, []string{"c"}),
		ifNode("c", []string{"y"}, subgraph("then", nil, []string{"x"}), subgraph("else", nil, []string{"s"})),
	}, in, []string{"y"}, onnxio.FloatTensor("z", nil, []float32{0}))
	_, err = mustBuild(t, m).Forward(nil, NewFloat([]int{1, 3}, []float32{1, 2, 3}))
	if err == nil || !strings.Contains(err.Error(), `node "If_y" (If): the condition is known only at run time, and output 0 is float32 [1 3] in then_branch but float32 [] in else_branch`) {
		t.Errorf("run-time If with different shapes: %v", err)
	}
	// An unrolled Loop over the memory limit.
	m = gModel(13, []*onnxpb.NodeProto{gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", body))}, in, []string{"y"}, scalarInt("M", 10000))
	g, err := Build(m, Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(nil, NewFloat([]int{1, 3}, []float32{1, 2, 3}))
	var me *MemoryError
	if !errors.As(err, &me) || me.Node != "Neg_v_out" {
		t.Errorf("unrolling 10000 iterations in 1 MiB: %v", err)
	}
}

// TestNestedControlFlow: an If inside a Loop body reads the body's values and the
// iteration number; the body's initializers are constants of the graph.
func TestNestedControlFlow(t *testing.T) {
	inner := ifNode("odd", []string{"u"},
		subgraph("then", nil, []string{"a"}, gNode("Add", []string{"v_in", "k"}, []string{"a"})),
		subgraph("else", nil, []string{"b"}, gNode("Mul", []string{"v_in", "k"}, []string{"b"})))
	body := loopBody([]string{"v_in"}, []string{"c", "u"},
		gNode("Gather", []string{"parity", "i"}, []string{"r"}),
		gNode("Equal", []string{"r", "one"}, []string{"odd"}),
		inner)
	body.Initializer = []*onnxpb.TensorProto{ints("parity", 0, 1, 0, 1), scalarInt("one", 1), onnxio.FloatTensor("k", nil, []float32{3})}
	m := gModel(13, []*onnxpb.NodeProto{gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", body))},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1)}, []string{"y"}, scalarInt("M", 4))
	out, err := mustBuild(t, m).Forward(nil, NewFloat([]int{1}, []float32{1}))
	if err != nil {
		t.Fatal(err)
	}
	// i=0: ×3 → 3; i=1: +3 → 6; i=2: ×3 → 18; i=3: +3 → 21.
	if out[0].F[0] != 21 {
		t.Errorf("got %v, want 21", out[0].F)
	}
}
