package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Helpers that assemble small ONNX models in memory for the graph tests.

func gNode(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Input: in, Output: out, Attribute: attrs, Name: proto.String(op + "_" + strings.Join(out, "_"))}
}

// gInput declares a tensor value; dims below 0 are symbolic.
func gInput(name string, dt onnxpb.TensorProto_DataType, dims ...int64) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		if d < 0 {
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}})
		} else {
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: sh}}}}
}

// gInputAny declares a tensor value without a shape.
func gInputAny(name string, dt onnxpb.TensorProto_DataType) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt))}}}}
}

func gModel(opset int64, nodes []*onnxpb.NodeProto, inputs []*onnxpb.ValueInfoProto, outputs []string, inits ...*onnxpb.TensorProto) *onnxio.Model {
	gp := &onnxpb.GraphProto{Name: proto.String("test"), Node: nodes, Input: inputs, Initializer: inits}
	for _, o := range outputs {
		gp.Output = append(gp.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	return &onnxio.Model{Name: "test.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:       gp,
	}}
}

func gFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func mustBuild(t testing.TB, m *onnxio.Model) *Graph {
	t.Helper()
	g, err := Build(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBuildReportsEveryUnsupportedNode checks that one single-line error names every
// node that cannot run, before any planning.
func TestBuildReportsEveryUnsupportedNode(t *testing.T) {
	nodes := []*onnxpb.NodeProto{
		gNode("Identity", []string{"x"}, []string{"a"}),
		gNode("NoSuchOp", []string{"a"}, []string{"b"}),
		gNode("Pad", []string{"b", "pads"}, []string{"c"}, attrS("mode", "mirror")),
		{OpType: proto.String("Relu"), Domain: proto.String("com.example"), Input: []string{"c"}, Output: []string{"d"}, Name: proto.String("custom")},
		// onnxruntime's domain holds MatMulNBits and much else that the engine does not run.
		{OpType: proto.String("Relu"), Domain: proto.String(MSDomain), Input: []string{"d"}, Output: []string{"e"}, Name: proto.String("contrib")},
	}
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2)}, []string{"e"},
		onnxio.Int64Tensor("pads", []int64{2}, []int64{1, 1}))
	_, err := Build(m, Options{})
	if err == nil {
		t.Fatal("Build accepted unsupported nodes")
	}
	msg := err.Error()
	for _, want := range []string{"4 unsupported", `"NoSuchOp_b" (NoSuchOp)`, `"Pad_c" (Pad)`, "mirror", `"custom" (Relu)`, "com.example", `"contrib" (Relu)`, MSDomain} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
}

// TestTopologicalOrder runs a graph whose nodes are listed consumers first.
func TestTopologicalOrder(t *testing.T) {
	nodes := []*onnxpb.NodeProto{
		gNode("Transpose", []string{"b"}, []string{"y"}),
		gNode("Reshape", []string{"a", "shape"}, []string{"b"}),
		gNode("Identity", []string{"x"}, []string{"a"}),
	}
	m := gModel(14, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 6)}, []string{"y"},
		onnxio.Int64Tensor("shape", []int64{2}, []int64{2, 3}))
	g := mustBuild(t, m)
	out, err := g.Forward(nil, NewFloat([]int{6}, []float32{0, 1, 2, 3, 4, 5}))
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 3, 1, 4, 2, 5}
	if !slices.Equal(out[0].Shape, []int{3, 2}) || !slices.Equal(out[0].F, want) {
		t.Fatalf("got %v %v, want [3 2] %v", out[0].Shape, out[0].F, want)
	}
}

func TestBuildRejectsCyclesAndDanglingInputs(t *testing.T) {
	in := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2)}
	cyc := gModel(13, []*onnxpb.NodeProto{
		gNode("Identity", []string{"b"}, []string{"a"}),
		gNode("Identity", []string{"a"}, []string{"b"}),
	}, in, []string{"b"})
	if _, err := Build(cyc, Options{}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: got %v", err)
	}
	dangling := gModel(13, []*onnxpb.NodeProto{gNode("Identity", []string{"nowhere"}, []string{"a"})}, in, []string{"a"})
	if _, err := Build(dangling, Options{}); err == nil || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("dangling input: got %v", err)
	}
}

// TestInputsThatAreInitializers follows IR < 4, where every initializer is also listed
// as a graph input.
func TestInputsThatAreInitializers(t *testing.T) {
	m := gModel(9, []*onnxpb.NodeProto{gNode("Concat", []string{"x", "w"}, []string{"y"}, attrI("axis", 0))},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2), gInput("w", onnxpb.TensorProto_FLOAT, 1)}, []string{"y"},
		onnxio.FloatTensor("w", []int64{1}, []float32{7}))
	g := mustBuild(t, m)
	if len(g.Inputs()) != 1 || g.Inputs()[0].Name != "x" {
		t.Fatalf("inputs %v, want only x", g.Inputs())
	}
	out, err := g.Forward(nil, NewFloat([]int{2}, []float32{1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].F, []float32{1, 2, 7}) {
		t.Fatalf("got %v", out[0].F)
	}
}

func TestInputValidation(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{gNode("Identity", []string{"x"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 4)}, []string{"y"})
	g := mustBuild(t, m)
	cases := []struct {
		in   []*Tensor
		want string
	}{
		{nil, "got 0 inputs"},
		{[]*Tensor{NewFloat([]int{2, 5}, make([]float32, 10))}, "dimension 1 is 5, want 4"},
		{[]*Tensor{NewFloat([]int{8}, make([]float32, 8))}, "rank 1"},
		{[]*Tensor{NewInt([]int{2, 4}, make([]int64, 8))}, "holds int64 values"},
		{[]*Tensor{NewFloat([]int{2, 4}, make([]float32, 7))}, "has 7 values"},
		{[]*Tensor{nil}, "is nil"},
	}
	for _, c := range cases {
		_, err := g.Forward(nil, c.in...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("inputs %v: got error %v, want one containing %q", c.in, err, c.want)
			continue
		}
		if c.in != nil && !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("error %q does not name the input", err)
		}
	}
	// Any batch size is accepted for the symbolic dimension.
	for _, n := range []int{1, 3} {
		if _, err := g.Forward(nil, NewFloat([]int{n, 4}, make([]float32, 4*n))); err != nil {
			t.Errorf("batch %d: %v", n, err)
		}
	}
}

// shapeSubgraphModel is the pattern exporters emit for x.view(x.size(0), -1):
// Shape → Gather → Unsqueeze → Concat → Reshape.
func shapeSubgraphModel() *onnxio.Model {
	nodes := []*onnxpb.NodeProto{
		gNode("Shape", []string{"x"}, []string{"s"}),
		gNode("Constant", nil, []string{"zero"}, attrT("value", onnxio.Int64Tensor("", nil, []int64{0}))),
		gNode("Gather", []string{"s", "zero"}, []string{"n"}, attrI("axis", 0)),
		gNode("Unsqueeze", []string{"n", "axes"}, []string{"n1"}),
		gNode("Constant", nil, []string{"minus1"}, attrInts("value_ints", -1)),
		gNode("Concat", []string{"n1", "minus1"}, []string{"shape"}, attrI("axis", 0)),
		gNode("Reshape", []string{"x", "shape"}, []string{"flat"}),
		gNode("Transpose", []string{"flat"}, []string{"y"}, attrInts("perm", 1, 0)),
	}
	return gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3, 4)}, []string{"y"},
		onnxio.Int64Tensor("axes", []int64{1}, []int64{0}))
}

// TestShapeSubgraphFolded checks that the shape arithmetic is folded away at plan time,
// for every batch size, and that steady-state runs allocate nothing.
func TestShapeSubgraphFolded(t *testing.T) {
	g := mustBuild(t, shapeSubgraphModel())
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 5, 2} {
		x := NewFloat([]int{n, 3, 4}, gFloats(r, n*12))
		out, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.last.steps) != 2 {
			t.Errorf("batch %d: %d nodes run, want 2 (Reshape, Transpose)", n, len(g.last.steps))
		}
		if !slices.Equal(out[0].Shape, []int{12, n}) {
			t.Fatalf("batch %d: shape %v", n, out[0].Shape)
		}
		for i := range n {
			for j := range 12 {
				if out[0].F[j*n+i] != x.F[i*12+j] {
					t.Fatalf("batch %d: y[%d,%d] = %g, want %g", n, j, i, out[0].F[j*n+i], x.F[i*12+j])
				}
			}
		}
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := g.Forward(nil, x); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("batch %d: %v allocations per steady-state Forward, want 0", n, allocs)
		}
	}
	if len(g.plans) != 2 {
		t.Errorf("%d plans cached, want 2", len(g.plans))
	}
}

// TestBufferReuse checks that a chain of nodes shares buffers once values are dead, and
// that the output is not overwritten by intermediate values.
func TestBufferReuse(t *testing.T) {
	var nodes []*onnxpb.NodeProto
	prev := "x"
	for i := range 6 {
		next := string(rune('a' + i))
		nodes = append(nodes, gNode("Transpose", []string{prev}, []string{next}))
		prev = next
	}
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 3)}, []string{prev, "b"})
	g := mustBuild(t, m)
	x := NewFloat([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	out, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].F, x.F) || !slices.Equal(out[0].Shape, x.Shape) {
		t.Errorf("six transposes: got %v %v, want the input", out[0].Shape, out[0].F)
	}
	if !slices.Equal(out[1].F, x.F) {
		t.Errorf("output b: got %v, want the input", out[1].F)
	}
	bufs := map[*float32]bool{}
	for _, v := range g.last.vals {
		if v != nil && len(v.F) > 0 {
			bufs[&v.F[0]] = true
		}
	}
	// x, the two pinned outputs, and at most two buffers that alternate.
	if len(bufs) > 5 {
		t.Errorf("%d distinct buffers for a chain of 6 nodes, want at most 5", len(bufs))
	}
}

// TestFloatParamsNotFolded makes sure a computation on a float parameter is not frozen
// at plan time: optimizers update parameters in place.
func TestFloatParamsNotFolded(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("Transpose", []string{"w"}, []string{"wt"}),
		gNode("Concat", []string{"x", "wt"}, []string{"y"}, attrI("axis", 0)),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 1)}, []string{"y"},
		onnxio.FloatTensor("w", []int64{1}, []float32{3}))
	g := mustBuild(t, m)
	x := NewFloat([]int{1}, []float32{1})
	if _, err := g.Forward(nil, x); err != nil {
		t.Fatal(err)
	}
	g.Param("w").Value.F[0] = 4
	out, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].F[1] != 4 {
		t.Fatalf("after updating w, got %v, want [1 4]", out[0].F)
	}
}

// TestConstantNodeParams checks that Constant-node tensors are parameters like
// initializers and that WriteParams stores values in the original element type.
func TestConstantNodeParams(t *testing.T) {
	half := &onnxpb.TensorProto{Name: proto.String("h"), Dims: []int64{2}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT16)), Int32Data: []int32{0x3c00, 0x4000}} // 1, 2
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("Constant", nil, []string{"c"}, attrT("value", onnxio.FloatTensor("", []int64{1}, []float32{5}))),
		gNode("Concat", []string{"x", "c", "h"}, []string{"y"}, attrI("axis", 0)),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 1)}, []string{"y"}, half)
	g := mustBuild(t, m)
	var names []string
	for _, p := range g.Params() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"h", "c"}) {
		t.Fatalf("params %v, want [h c]", names)
	}
	if err := g.SetTrainable("h", "c"); err != nil {
		t.Fatal(err)
	}
	g.Param("h").Value.F[1] = 2.0009765625 // between halves 2 and 2.001953125: ties to even, 2
	g.Param("h").Value.F[0] = 1.5
	g.Param("c").Value.F[0] = 0.1
	if err := g.WriteParams(m); err != nil {
		t.Fatal(err)
	}
	g2 := mustBuild(t, m)
	out, err := g2.Forward(nil, NewFloat([]int{1}, []float32{9}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{9, 0.1, 1.5, 2}; !slices.Equal(out[0].F, want) {
		t.Fatalf("after WriteParams: got %v, want %v", out[0].F, want)
	}
	p, _ := m.Param("h")
	if p.Tensor.GetDataType() != int32(onnxpb.TensorProto_FLOAT16) {
		t.Errorf("h stored as %v, want FLOAT16", p.Tensor.GetDataType())
	}
	if err := g.SetTrainable("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("SetTrainable(nope): %v", err)
	}
}

// TestHalfRounding checks float32ToHalf against onnxio's exact decoder: every half value
// round-trips, and every midpoint between neighbours rounds to the even one.
func TestHalfRounding(t *testing.T) {
	for h := range 1 << 16 {
		f := onnxio.HalfToFloat32(uint16(h))
		if f != f {
			if got := float32ToHalf(f); onnxio.HalfToFloat32(got) == onnxio.HalfToFloat32(got) {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got := float32ToHalf(f); got != uint16(h) && !(f == 0 && got&0x7fff == 0) {
			t.Fatalf("half %#04x (%g) became %#04x", h, f, got)
		}
		if h&0x7fff >= 0x7bff || h&0x7fff == 0x7fff {
			continue // no finite neighbour above
		}
		next := onnxio.HalfToFloat32(uint16(h + 1))
		mid := float32((float64(f) + float64(next)) / 2)
		if float64(mid) != (float64(f)+float64(next))/2 {
			continue
		}
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if got := float32ToHalf(mid); got != want {
			t.Fatalf("midpoint %g of %#04x and %#04x became %#04x, want %#04x", mid, h, h+1, got, want)
		}
	}
	if got := float32ToHalf(70000); got != 0x7c00 {
		t.Errorf("70000 became %#04x, want +Inf", got)
	}
	if got := float32ToHalf(float32(math.Inf(-1))); got != 0xfc00 {
		t.Errorf("-Inf became %#04x", got)
	}
}

// TestRunTimeErrorsNameTheNode checks that a kernel's run-time error reaches the caller
// as one line naming the model and node.
func TestRunTimeErrorsNameTheNode(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{gNode("Gather", []string{"x", "i"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 3), gInput("i", onnxpb.TensorProto_INT64, 1)}, []string{"y"})
	g := mustBuild(t, m)
	_, err := g.Forward(nil, NewFloat([]int{3}, []float32{1, 2, 3}), NewInt([]int{1}, []int64{5}))
	if err == nil {
		t.Fatal("out-of-range index accepted")
	}
	for _, want := range []string{"test.onnx", `"Gather_y" (Gather)`, "index 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	out, err := g.Forward(nil, NewFloat([]int{3}, []float32{1, 2, 3}), NewInt([]int{1}, []int64{-1}))
	if err != nil || out[0].F[0] != 3 {
		t.Fatalf("after the error: %v %v", out, err)
	}
}

// TestShapeThroughFloatConstants covers shape arithmetic that passes through float
// constants (Shape → Cast → Mul → Cast → Reshape): the float constant is a parameter, so
// the nodes stay in the plan, but their plan-time values let Reshape infer its shape.
func TestShapeThroughFloatConstants(t *testing.T) {
	nodes := []*onnxpb.NodeProto{
		gNode("Shape", []string{"x"}, []string{"s"}),
		gNode("Cast", []string{"s"}, []string{"sf"}, attrI("to", int64(onnxpb.TensorProto_FLOAT))),
		gNode("Mul", []string{"sf", "k"}, []string{"tf"}),
		gNode("Cast", []string{"tf"}, []string{"ti"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Reshape", []string{"x", "ti"}, []string{"y"}),
	}
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 4)}, []string{"y"},
		onnxio.FloatTensor("k", []int64{2}, []float32{0.5, 2}))
	g := mustBuild(t, m)
	for _, n := range []int{2, 6} {
		x := NewFloat([]int{n, 4}, gFloats(rand.New(rand.NewPCG(1, uint64(n))), 4*n))
		out, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out[0].Shape, []int{n / 2, 8}) || !slices.Equal(out[0].F, x.F) {
			t.Fatalf("batch %d: got shape %v", n, out[0].Shape)
		}
	}
}

// TestBuildReportsUnsupportedInsideSubgraphs: the unsupported nodes of control-flow
// bodies are listed with the path that leads to them (If's then_branch, a Loop nested in
// else_branch), supported ops inside them are not, and the error stays one line.
func TestBuildReportsUnsupportedInsideSubgraphs(t *testing.T) {
	body := func(name string, nodes ...*onnxpb.NodeProto) *onnxpb.GraphProto {
		return &onnxpb.GraphProto{Name: proto.String(name), Node: nodes}
	}
	graphAttr := func(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
	}
	loop := gNode("Loop", []string{"", ""}, []string{"l"}, graphAttr("body", body("loop_body",
		gNode("TfIdfVectorizer", []string{"x"}, []string{"h"}),
		gNode("Relu", []string{"x"}, []string{"y"}),
	)))
	ifNode := gNode("If", []string{"x"}, []string{"d"},
		graphAttr("then_branch", body("then", gNode("StringNormalizer", []string{"x"}, []string{"t"}), gNode("Neg", []string{"x"}, []string{"n"}))),
		graphAttr("else_branch", body("else", loop)))
	m := gModel(13, []*onnxpb.NodeProto{ifNode}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2),
		gInput("w", onnxpb.TensorProto_FLOAT, 2), gInput("r", onnxpb.TensorProto_FLOAT, 2)}, []string{"d"})
	_, err := Build(m, Options{})
	if err == nil {
		t.Fatal("Build accepted an If with unsupported bodies")
	}
	msg := err.Error()
	for _, want := range []string{
		`node "If_d" (If), then_branch: node "StringNormalizer_t" (StringNormalizer): op StringNormalizer is not supported`,
		`node "If_d" (If), else_branch: node "Loop_l" (Loop), body: node "TfIdfVectorizer_h" (TfIdfVectorizer): op TfIdfVectorizer is not supported`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	for _, supported := range []string{"(Neg)", "(Relu)"} {
		if strings.Contains(msg, supported) {
			t.Errorf("error %q lists a supported op %s", msg, supported)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
}

// TestNodeTime checks that Context.NodeTime hears of every node a run executes, once a
// run, in order, by name and op, and that a run without it reports nothing.
func TestNodeTime(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	w := &onnxpb.TensorProto{Name: proto.String("w"), Dims: []int64{3, 4}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: gFloats(r, 12)}
	nodes := []*onnxpb.NodeProto{
		gNode("MatMul", []string{"x", "w"}, []string{"h"}),
		gNode("Relu", []string{"h"}, []string{"a"}),
		gNode("Sigmoid", []string{"a"}, []string{"y"}),
	}
	g := mustBuild(t, gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 3)}, []string{"y"}, w))
	x := NewFloat([]int{2, 3}, gFloats(r, 6))
	if _, err := g.Forward(nil, x); err != nil {
		t.Fatal(err)
	}
	var got []string
	ctx := &Context{NodeTime: func(name, op string, d time.Duration) {
		if d < 0 {
			t.Errorf("%s: negative time %v", name, d)
		}
		got = append(got, name+":"+op)
	}}
	for range 2 {
		if _, err := g.Forward(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	once := []string{"MatMul_h:MatMul", "Relu_a:Relu", "Sigmoid_y:Sigmoid"}
	if want := append(slices.Clone(once), once...); !slices.Equal(got, want) {
		t.Errorf("NodeTime heard %v, want %v", got, want)
	}
	got = nil
	if _, err := g.Forward(nil, x); err != nil {
		t.Fatal(err)
	}
	if got != nil {
		t.Errorf("a run without NodeTime reported %v", got)
	}
}
