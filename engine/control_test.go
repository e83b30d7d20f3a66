package engine

import (
	"errors"
	"math"
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
	scan := scanCase()
	nodes, inits := whileModel(3)
	while := gradCase{name: "Loop/while", opset: 13, nodes: nodes,
		params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "w", shape: []int64{3, 3}}}, ints: inits, out: []string{"v"}}
	return []gradCase{plan("If/plan-time-then", 1), plan("If/plan-time-else", 0), run("If/run-time-then", "Greater"), run("If/run-time-else", "Less"), loop, while, scan}
}

// scanCase is a Scan over two inputs, along different axes and in both directions, whose
// body reads a weight of the enclosing graph; its scan outputs are stacked along the
// first, the last and a middle axis, one of them in reverse.
func scanCase() gradCase {
	f := onnxpb.TensorProto_FLOAT
	body := subgraph("body", []*onnxpb.ValueInfoProto{gInputAny("s_in", f), gInputAny("a_t", f), gInputAny("b_t", f)},
		[]string{"s_out", "y1_t", "y2_t", "y3_t"},
		gNode("Mul", []string{"s_in", "w"}, []string{"sw"}),
		gNode("Add", []string{"sw", "a_t"}, []string{"p"}),
		gNode("Tanh", []string{"p"}, []string{"q"}),
		gNode("Mul", []string{"b_t", "q"}, []string{"r"}),
		gNode("Add", []string{"q", "r"}, []string{"s_out"}),
		gNode("Identity", []string{"s_out"}, []string{"y1_t"}),
		gNode("Mul", []string{"s_out", "a_t"}, []string{"y2_t"}),
		gNode("Identity", []string{"q"}, []string{"y3_t"}))
	return gradCase{name: "Scan/axes+directions", opset: 16, nodes: []*onnxpb.NodeProto{
		gNode("Scan", []string{"s0", "a", "b"}, []string{"s", "y1", "y2", "y3"}, attrG("body", body), attrI("num_scan_inputs", 2),
			attrInts("scan_input_axes", 1, -1), attrInts("scan_input_directions", 0, 1),
			attrInts("scan_output_axes", 0, -1, 1), attrInts("scan_output_directions", 1, 0, 0)),
	}, params: []gradParam{{name: "s0", shape: []int64{2, 3}}, {name: "a", shape: []int64{2, 4, 3}}, {name: "b", shape: []int64{2, 3, 4}}, {name: "w", shape: []int64{3}}},
		out: []string{"s", "y1", "y2", "y3"}}
}

// TestControlFlowGradients checks every case as planned and, where it holds a Loop, with
// every Loop run at run time.
func TestControlFlowGradients(t *testing.T) {
	for _, c := range controlGradCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, noUnroll := range []bool{false, true} {
				if noUnroll && !strings.HasPrefix(c.name, "Loop") {
					continue
				}
				c.noUnroll = noUnroll
				c.eval = false
				checkGraphGrad(t, c)
				c.eval = true
				checkGraphGrad(t, c)
			}
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
// the node.
func TestControlFlowRefusals(t *testing.T) {
	in := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}
	// Branches of a run-time If with different shapes.
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
		gNode("Greater", []string{"s", "z"}, []string{"c"}),
		ifNode("c", []string{"y"}, subgraph("then", nil, []string{"x"}), subgraph("else", nil, []string{"s"})),
	}, in, []string{"y"}, onnxio.FloatTensor("z", nil, []float32{0}))
	_, err := mustBuild(t, m).Forward(nil, NewFloat([]int{1, 3}, []float32{1, 2, 3}))
	if err == nil || !strings.Contains(err.Error(), `node "If_y" (If): the condition is known only at run time, and output 0 is float32 [1 3] in then_branch but float32 [] in else_branch`) {
		t.Errorf("run-time If with different shapes: %v", err)
	}
	// Loops run at run time: scan outputs whose length the data decide, and a
	// loop-carried value that grows.
	for _, c := range []struct {
		name, want string
		body       *onnxpb.GraphProto
		outs       []string
	}{
		{"scan", "the trip count is computed at run time and the loop has scan outputs",
			loopBody([]string{"v_in"}, []string{"c", "v_out", "v_in"}, gNode("Neg", []string{"v_in"}, []string{"v_out"})), []string{"y", "ys"}},

		{"growing", "loop-carried value 0 enters the body as float32 [1 3] and leaves it as float32 [2 3]",
			loopBody([]string{"v_in"}, []string{"c", "v_out"}, gNode("Concat", []string{"v_in", "v_in"}, []string{"v_out"}, attrI("axis", 0))), []string{"y"}},
	} {
		m := gModel(13, []*onnxpb.NodeProto{
			gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
			gNode("Cast", []string{"s"}, []string{"M"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
			gNode("Loop", []string{"M", "", "x"}, c.outs, attrG("body", c.body)),
		}, in, c.outs)
		_, err := mustBuild(t, m).Forward(nil, NewFloat([]int{1, 3}, []float32{1, 2, 3}))
		if err == nil || !strings.Contains(err.Error(), `(Loop): `+c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Training through a run-time Loop whose body draws Dropout masks: its gradient would
	// recompute the body with other masks. Inference-mode gradients and training-mode runs
	// without gradients are fine.
	m = gModel(13, []*onnxpb.NodeProto{
		gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
		gNode("Cast", []string{"s"}, []string{"M"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", loopBody([]string{"v_in"}, []string{"c", "v_out"},
			gNode("Mul", []string{"v_in", "w"}, []string{"p"}), gNode("Dropout", []string{"p"}, []string{"v_out"})))),
	}, in, []string{"y"}, onnxio.FloatTensor("w", []int64{3}, []float32{1, 2, 3}))
	g := mustBuild(t, m)
	x := NewFloat([]int{1, 3}, []float32{1, 0, 1})
	for _, c := range []struct {
		ctx       *Context
		trainable bool
	}{{&Context{Training: true}, false}, {nil, true}} {
		if c.trainable {
			if err := g.SetTrainable("w"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := g.Forward(c.ctx, x); err != nil {
			t.Errorf("training %v, trainable %v: %v", c.ctx != nil, c.trainable, err)
		}
	}
	_, err = g.Forward(&Context{Training: true}, x)
	if err == nil || !strings.Contains(err.Error(), `node "Loop_y" (Loop): runs at run time and its body holds Dropout node "Dropout_v_out" in training mode`) {
		t.Errorf("training a run-time Loop with Dropout: %v", err)
	}
}

// whileModel is a `while` loop as torch.jit.script exports one: the condition, before the
// loop and in the body, compares a loop-carried counter with a limit computed from a float
// value, so that both are known only at run time; the body reads w from the enclosing
// graph.
func whileModel(limit float32) (nodes []*onnxpb.NodeProto, inits []*onnxpb.TensorProto) {
	body := subgraph("body", []*onnxpb.ValueInfoProto{gInput("i", onnxpb.TensorProto_INT64), gInput("c", onnxpb.TensorProto_BOOL),
		gInputAny("v_in", onnxpb.TensorProto_FLOAT), gInput("k_in", onnxpb.TensorProto_INT64)},
		[]string{"c_out", "v_out", "k_out"},
		gNode("MatMul", []string{"v_in", "w"}, []string{"p"}),
		gNode("Tanh", []string{"p"}, []string{"q"}),
		gNode("Add", []string{"q", "v_in"}, []string{"v_out"}),
		gNode("Add", []string{"k_in", "one"}, []string{"k_out"}),
		gNode("Less", []string{"k_out", "lim"}, []string{"c_out"}))
	return []*onnxpb.NodeProto{
		gNode("Cast", []string{"limf"}, []string{"lim"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Less", []string{"zero", "lim"}, []string{"c0"}),
		gNode("Loop", []string{"", "c0", "x", "zero"}, []string{"v", "k"}, attrG("body", body)),
	}, []*onnxpb.TensorProto{onnxio.FloatTensor("limf", nil, []float32{limit}), scalarInt("zero", 0), scalarInt("one", 1)}
}

// TestRunTimeLoop: Loops whose trip count or condition the data decide run at run time,
// one plan serving every trip count; loops too long to unroll run that way too.
func TestRunTimeLoop(t *testing.T) {
	in := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}
	neg := loopBody([]string{"v_in"}, []string{"c", "v_out"}, gNode("Neg", []string{"v_in"}, []string{"v_out"}))
	// The trip count is the sum of x: y = (-1)^Σx · x.
	g := mustBuild(t, gModel(13, []*onnxpb.NodeProto{
		gNode("ReduceSum", []string{"x"}, []string{"s"}, attrI("keepdims", 0)),
		gNode("Cast", []string{"s"}, []string{"M"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", neg)),
	}, in, []string{"y"}))
	for _, x := range [][]float32{{1, 2, 3}, {1, 1, 1}, {0, 0, 0}, {1, 2, 4}} {
		out, err := g.Forward(nil, NewFloat([]int{1, 3}, x))
		if err != nil {
			t.Fatal(err)
		}
		sign := float32(1 - 2*(int(x[0]+x[1]+x[2])%2))
		if want := []float32{sign * x[0], sign * x[1], sign * x[2]}; !slices.Equal(out[0].F, want) {
			t.Errorf("x %v: got %v, want %v", x, out[0].F, want)
		}
	}
	if len(g.plans) != 1 {
		t.Errorf("%d plans for one input signature", len(g.plans))
	}
	x := NewFloat([]int{1, 3}, []float32{1, 2, 3})
	if a := testing.AllocsPerRun(10, func() { g.Forward(nil, x) }); a > 0 {
		t.Errorf("%v allocations per run", a)
	}

	// 10000 iterations do not fit unrolled in 1 MiB; they run at run time.
	m := gModel(13, []*onnxpb.NodeProto{gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body", neg))}, in, []string{"y"}, scalarInt("M", 10001))
	g, err := Build(m, Options{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{-1, -2, -3}; !slices.Equal(out[0].F, want) {
		t.Errorf("10001 negations: got %v, want %v", out[0].F, want)
	}
	if n := len(g.last.steps); n != 1 {
		t.Errorf("%d steps, want the loop's one", n)
	}
	// Recording for the gradient keeps each iteration's carried values: 10001 of 4 KiB do
	// not fit in 1 MiB, which the run reports instead of allocating them.
	m = gModel(13, []*onnxpb.NodeProto{gNode("Loop", []string{"M", "", "x"}, []string{"y"}, attrG("body",
		loopBody([]string{"v_in"}, []string{"c", "v_out"}, gNode("Mul", []string{"v_in", "w"}, []string{"v_out"}))))},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 1, 1024)}, []string{"y"},
		scalarInt("M", 10001), onnxio.FloatTensor("w", []int64{1024}, slices.Repeat([]float32{1}, 1024)))
	if g, err = Build(m, Options{MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	big := NewFloat([]int{1, 1024}, make([]float32, 1024))
	if _, err := g.Forward(nil, big); err != nil {
		t.Fatalf("without recording: %v", err)
	}
	if err := g.SetTrainable("w"); err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(nil, big)
	var me *MemoryError
	if !errors.As(err, &me) || me.Node != "Loop_y" || !me.Total {
		t.Errorf("recording 10001 iterations in 1 MiB: %v", err)
	}

	// A while loop: the counter ends at the limit, whatever it is.
	for _, limit := range []float32{0, 1, 3} {
		nodes, inits := whileModel(limit)
		inits = append(inits, onnxio.FloatTensor("w", []int64{3, 3}, []float32{0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5}))
		out, err := mustBuild(t, gModel(13, nodes, in, []string{"v", "k"}, inits...)).Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(x.F)
		for range int(limit) {
			for j, v := range want {
				want[j] = float32(math.Tanh(float64(v*0.5))) + v
			}
		}
		if err := closeTensors(out[0], NewFloat([]int{1, 3}, want), 1e-6, 1e-6); err != nil || out[1].I[0] != int64(limit) {
			t.Errorf("limit %v: got %v and k %v, want %v (%v)", limit, out[0].F, out[1].I, want, err)
		}
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
