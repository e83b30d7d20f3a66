package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// gradParam is a float parameter of a gradient-check model.
type gradParam struct {
	name  string
	shape []int64
	pos   bool // values in [0.5, ∞), for variances
}

// gradCase is a model whose float parameters are all trainable; the check compares
// Backward's parameter gradients of L = Σ w·y (w random, y every float output) with
// central differences of L.
type gradCase struct {
	name   string
	opset  int64
	nodes  []*onnxpb.NodeProto
	params []gradParam
	ints   []*onnxpb.TensorProto
	out    []string
	eval   bool // run in inference mode instead of training mode
	// noUnroll runs every Loop at run time, as when its trip count is known only then.
	noUnroll bool
}

func (c gradCase) model(r *rand.Rand) *onnxio.Model {
	inits := slices.Clone(c.ints)
	for _, p := range c.params {
		v := gFloats(r, numel64(p.shape))
		if p.pos {
			for i := range v {
				v[i] = 0.5 + v[i]*v[i]
			}
		}
		inits = append(inits, onnxio.FloatTensor(p.name, p.shape, v))
	}
	return gModel(c.opset, c.nodes, nil, c.out, inits...)
}

func numel64(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

// checkGraphGrad runs the finite-difference check of c.
func checkGraphGrad(t *testing.T, c gradCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
	g, err := Build(c.model(r), Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	g.noUnroll = c.noUnroll
	var names []string
	for _, p := range c.params {
		names = append(names, p.name)
	}
	if err := g.SetTrainable(names...); err != nil {
		t.Fatal(err)
	}
	// Every run draws Dropout masks from the same seed, so that the loss is a
	// deterministic function of the parameters.
	ctx := func() *Context {
		return &Context{Training: !c.eval, Rand: rand.New(rand.NewPCG(11, 13))}
	}
	outs, err := g.Forward(ctx())
	if err != nil {
		t.Fatal(err)
	}
	weights := make([]*Tensor, len(outs))
	for i, o := range outs {
		if o.DType == Float32 {
			weights[i] = NewFloat(slices.Clone(o.Shape), gFloats(r, o.Len()))
		}
	}
	loss := func() float64 {
		outs, err := g.Forward(ctx())
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for i, o := range outs {
			if w := weights[i]; w != nil {
				for j, v := range o.F {
					l += float64(w.F[j]) * float64(v)
				}
			}
		}
		return l
	}
	loss()
	if err := g.Backward(ctx(), weights...); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, n := range c.nodes {
		ops = append(ops, n.GetOpType())
	}
	checked := 0
	for _, name := range names {
		p := g.Param(name)
		analytic := slices.Clone(p.Grad.F)
		fdCheck(t, c.name+": d/d"+name, p.Value.F, func(j int) float64 { return float64(analytic[j]) }, loss,
			fdSpec{step: fixedStep(1e-2), atol: 1e-3, rtol: 1e-2}, ops...)
		checked += len(p.Value.F)
	}
	if checked == 0 {
		t.Fatalf("%s: no parameter elements checked", c.name)
	}
}

func ints(name string, v ...int64) *onnxpb.TensorProto {
	return onnxio.Int64Tensor(name, []int64{int64(len(v))}, v)
}

// shapeGradCases covers every differentiable shape op in each attribute and input form
// the conformance suite uses, plus the forms of later opsets.
func shapeGradCases() []gradCase {
	one := func(name string, opset int64, n *onnxpb.NodeProto, shape []int64, consts ...*onnxpb.TensorProto) gradCase {
		return gradCase{name: name, opset: opset, nodes: []*onnxpb.NodeProto{n}, params: []gradParam{{name: "x", shape: shape}}, ints: consts, out: n.Output}
	}
	x := []string{"x"}
	y := []string{"y"}
	cases := []gradCase{
		one("Identity", 16, gNode("Identity", x, y), []int64{2, 3}),
		// A float-to-float cast passes the gradient straight through.
		one("Cast/float", 13, gNode("Cast", x, y, attrI("to", int64(onnxpb.TensorProto_FLOAT))), []int64{2, 3}),
		one("Flatten/default", 13, gNode("Flatten", x, y), []int64{2, 3, 2}),
		one("Flatten/axis0", 13, gNode("Flatten", x, y, attrI("axis", 0)), []int64{2, 3, 2}),
		one("Flatten/axis-1", 13, gNode("Flatten", x, y, attrI("axis", -1)), []int64{2, 3, 2}),
		one("Reshape/0,-1", 14, gNode("Reshape", []string{"x", "s"}, y), []int64{2, 3, 2}, ints("s", 0, -1)),
		one("Reshape/allowzero", 14, gNode("Reshape", []string{"x", "s"}, y, attrI("allowzero", 1)), []int64{2, 3, 2}, ints("s", 3, 4)),
		one("Transpose/default", 13, gNode("Transpose", x, y), []int64{2, 3, 4}),
		one("Transpose/perm", 13, gNode("Transpose", x, y, attrInts("perm", 1, 2, 0)), []int64{2, 3, 4}),
		one("Squeeze/input", 13, gNode("Squeeze", []string{"x", "a"}, y), []int64{2, 1, 3, 1}, ints("a", -1, 1)),
		one("Squeeze/attr", 11, gNode("Squeeze", x, y, attrInts("axes", 1)), []int64{2, 1, 3}),
		one("Squeeze/all", 13, gNode("Squeeze", x, y), []int64{1, 3, 1}),
		one("Unsqueeze/input", 13, gNode("Unsqueeze", []string{"x", "a"}, y), []int64{2, 3}, ints("a", 0, -1)),
		one("Unsqueeze/attr", 11, gNode("Unsqueeze", x, y, attrInts("axes", 1)), []int64{2, 3}),
		one("Split/equal", 13, gNode("Split", x, []string{"y0", "y1"}, attrI("axis", 1)), []int64{2, 4}),
		one("Split/input", 13, gNode("Split", []string{"x", "s"}, []string{"y0", "y1", "y2"}), []int64{6, 2}, ints("s", 1, 3, 2)),
		one("Split/attr", 11, gNode("Split", x, []string{"y0", "y1"}, attrI("axis", -1), attrInts("split", 3, 1)), []int64{2, 4}),
		one("Split/num_outputs", 18, gNode("Split", x, []string{"y0", "y1", "y2"}, attrI("num_outputs", 3)), []int64{7, 2}),
		one("Slice/steps", 13, gNode("Slice", []string{"x", "st", "en", "ax", "sp"}, y), []int64{4, 5},
			ints("st", 0, 4), ints("en", 4, 0), ints("ax", 0, 1), ints("sp", 2, -2)),
		one("Slice/clamp-negative-axes", 13, gNode("Slice", []string{"x", "st", "en", "ax"}, y), []int64{3, 5},
			ints("st", -100, 1), ints("en", 100, -1), ints("ax", -2, -1)),
		one("Slice/attr", 9, gNode("Slice", x, y, attrInts("starts", 1), attrInts("ends", 1000), attrInts("axes", 1)), []int64{2, 4}),
		one("Gather/axis0", 13, gNode("Gather", []string{"x", "i"}, y), []int64{3, 2}, ints("i", 0, 2, -1, 0)),
		one("Gather/axis1-2d", 13, gNode("Gather", []string{"x", "i"}, y, attrI("axis", 1)), []int64{2, 3, 2},
			onnxio.Int64Tensor("i", []int64{2, 2}, []int64{1, -1, 1, 0})),
		one("Expand", 13, gNode("Expand", []string{"x", "s"}, y), []int64{3, 1}, ints("s", 2, 3, 4)),
		one("CumSum", 14, gNode("CumSum", []string{"x", "a"}, y), []int64{3, 4, 2}, onnxio.Int64Tensor("a", nil, []int64{1})),
		one("CumSum/exclusive-reverse", 14, gNode("CumSum", []string{"x", "a"}, y, attrI("exclusive", 1), attrI("reverse", 1)), []int64{3, 4}, onnxio.Int64Tensor("a", nil, []int64{-1})),
		one("CumSum/reverse-axis0", 14, gNode("CumSum", []string{"x", "a"}, y, attrI("reverse", 1)), []int64{4, 3}, onnxio.Int64Tensor("a", nil, []int64{0})),
		one("CumSum/exclusive", 14, gNode("CumSum", []string{"x", "a"}, y, attrI("exclusive", 1)), []int64{5}, onnxio.Int64Tensor("a", nil, []int64{0})),
		one("Tile", 13, gNode("Tile", []string{"x", "r"}, y), []int64{2, 3, 2}, ints("r", 2, 1, 3)),
		one("Tile/inner-once", 13, gNode("Tile", []string{"x", "r"}, y), []int64{2, 1}, ints("r", 3, 1)),
		one("Pad/constant", 13, gNode("Pad", []string{"x", "p"}, y), []int64{2, 3}, ints("p", 1, 0, 0, 2)),
		one("Pad/negative", 13, gNode("Pad", []string{"x", "p"}, y), []int64{3, 4}, ints("p", -1, 1, 0, -2)),
		one("Pad/reflect", 13, gNode("Pad", []string{"x", "p"}, y, attrS("mode", "reflect")), []int64{2, 3}, ints("p", 1, 2, 1, 2)),
		one("Pad/edge", 13, gNode("Pad", []string{"x", "p"}, y, attrS("mode", "edge")), []int64{2, 3}, ints("p", 0, 3, 2, 0)),
		one("Pad/wrap", 19, gNode("Pad", []string{"x", "p"}, y, attrS("mode", "wrap")), []int64{2, 3}, ints("p", 1, 4, 1, 0)),
		one("Pad/attr", 10, gNode("Pad", x, y, attrInts("pads", 1, 1, 0, 2), attrF("value", 2)), []int64{2, 3}),
		one("Pad/axes", 18, gNode("Pad", []string{"x", "p", "", "a"}, y, attrS("mode", "reflect")), []int64{2, 3}, ints("p", 2, 1), ints("a", -1)),
		one("Dropout/training-default-ratio", 13, gNode("Dropout", x, y), []int64{4, 5}),
		one("Dropout/training", 13, gNode("Dropout", []string{"x", "r"}, []string{"y", "m"}), []int64{4, 5}),
		one("Dropout/training-attr", 10, gNode("Dropout", x, y, attrF("ratio", 0.25)), []int64{4, 5}),
		{name: "Concat/shared", opset: 13, out: y, params: []gradParam{{name: "x", shape: []int64{2, 3}}, {name: "z", shape: []int64{2, 1}}},
			nodes: []*onnxpb.NodeProto{gNode("Concat", []string{"x", "z", "x"}, y, attrI("axis", -1))}},
		{name: "Pad/constant-value", opset: 13, out: y, params: []gradParam{{name: "x", shape: []int64{2, 2}}, {name: "v"}},
			nodes: []*onnxpb.NodeProto{gNode("Pad", []string{"x", "p", "v"}, y)}, ints: []*onnxpb.TensorProto{ints("p", 1, 0, 1, 1)}},
		// An output that other nodes also consume gets the caller's gradient plus theirs.
		{name: "graph/output-also-consumed", opset: 13, out: []string{"y", "a"}, params: []gradParam{{name: "x", shape: []int64{2, 3}}},
			ints: []*onnxpb.TensorProto{ints("s", 1), ints("e", 5), ints("ax", 0)},
			nodes: []*onnxpb.NodeProto{
				gNode("Transpose", x, []string{"a"}),
				gNode("Concat", []string{"a", "a"}, []string{"b"}, attrI("axis", 0)),
				gNode("Slice", []string{"b", "s", "e", "ax"}, y),
			}},
	}
	// Dropout/training reads its ratio from a float initializer that is not trained.
	for i := range cases {
		if cases[i].name == "Dropout/training" {
			cases[i].ints = append(cases[i].ints, onnxio.FloatTensor("r", nil, []float32{0.3}))
		}
	}
	return cases
}

func TestShapeOpGradients(t *testing.T) {
	for _, c := range shapeGradCases() {
		t.Run(c.name, func(t *testing.T) { checkGraphGrad(t, c) })
	}
}

// TestDropoutTraining checks the training-mode statistics and determinism of Dropout:
// kept elements are scaled by 1/(1-ratio), about ratio of them are dropped, the mask
// output agrees, and the same seed gives the same result.
func TestDropoutTraining(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{gNode("Dropout", []string{"x", "r"}, []string{"y", "m"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1)}, []string{"y", "m"},
		onnxio.FloatTensor("r", nil, []float32{0.2}))
	g := mustBuild(t, m)
	n := 20000
	x := NewFloat([]int{n}, make([]float32, n))
	for i := range x.F {
		x.F[i] = 1 + float32(i%7)
	}
	run := func(seed uint64) ([]float32, []int64) {
		out, err := g.Forward(&Context{Training: true, Rand: rand.New(rand.NewPCG(seed, 0))}, x)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out[0].F), slices.Clone(out[1].I)
	}
	y, mask := run(1)
	dropped := 0
	for i, v := range y {
		switch {
		case mask[i] == 0 && v == 0:
			dropped++
		case mask[i] == 1 && math.Abs(float64(v-x.F[i]/0.8)) < 1e-5:
		default:
			t.Fatalf("element %d: x %g, y %g, mask %d", i, x.F[i], v, mask[i])
		}
	}
	// Binomial(20000, 0.2) has standard deviation 57; allow 5 of them.
	if d := dropped - n/5; d < -285 || d > 285 {
		t.Errorf("%d of %d dropped, want about %d", dropped, n, n/5)
	}
	y2, _ := run(1)
	if !slices.Equal(y, y2) {
		t.Error("same seed, different outputs")
	}
	if y3, _ := run(2); slices.Equal(y, y3) {
		t.Error("different seeds, same outputs")
	}
	out, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].F, x.F) || slices.Contains(out[1].I, 0) {
		t.Error("inference-mode Dropout is not the identity with an all-true mask")
	}
}

// TestShapeOpForward covers forms the conformance suite has no test for, against values
// worked out by hand.
func TestShapeOpForward(t *testing.T) {
	iota := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i)
		}
		return x
	}
	cases := []struct {
		name  string
		opset int64
		node  *onnxpb.NodeProto
		x     *Tensor
		ints  []*onnxpb.TensorProto
		want  []*Tensor
	}{
		{"Split/num_outputs-uneven", 18, gNode("Split", []string{"x"}, []string{"a", "b", "c"}, attrI("num_outputs", 3)),
			NewFloat([]int{7}, iota(7)), nil,
			[]*Tensor{NewFloat([]int{3}, []float32{0, 1, 2}), NewFloat([]int{3}, []float32{3, 4, 5}), NewFloat([]int{1}, []float32{6})}},
		{"Pad/wrap", 19, gNode("Pad", []string{"x", "p"}, []string{"y"}, attrS("mode", "wrap")),
			NewFloat([]int{3}, []float32{1, 2, 3}), []*onnxpb.TensorProto{ints("p", 2, 1)},
			[]*Tensor{NewFloat([]int{6}, []float32{2, 3, 1, 2, 3, 1})}},
		{"Pad/reflect-long", 13, gNode("Pad", []string{"x", "p"}, []string{"y"}, attrS("mode", "reflect")),
			NewFloat([]int{3}, []float32{1, 2, 3}), []*onnxpb.TensorProto{ints("p", 3, 0)},
			[]*Tensor{NewFloat([]int{6}, []float32{2, 3, 2, 1, 2, 3})}},
		{"Pad/negative-attr", 10, gNode("Pad", []string{"x"}, []string{"y"}, attrInts("pads", -1, 2), attrF("value", 9)),
			NewFloat([]int{3}, []float32{1, 2, 3}), nil,
			[]*Tensor{NewFloat([]int{4}, []float32{2, 3, 9, 9})}},
		{"Slice/attr-form", 9, gNode("Slice", []string{"x"}, []string{"y"}, attrInts("starts", -3), attrInts("ends", -1)),
			NewFloat([]int{5}, iota(5)), nil,
			[]*Tensor{NewFloat([]int{2}, []float32{2, 3})}},
		{"Slice/negative-step-clamp", 13, gNode("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"}),
			NewFloat([]int{5}, iota(5)), []*onnxpb.TensorProto{ints("s", 100), ints("e", -100), ints("a", 0), ints("st", -2)},
			[]*Tensor{NewFloat([]int{3}, []float32{4, 2, 0})}},
		{"Cast/float-to-int", 13, gNode("Cast", []string{"x"}, []string{"y"}, attrI("to", int64(onnxpb.TensorProto_INT32))),
			NewFloat([]int{4}, []float32{-2.7, -0.5, 0.5, 2.7}), nil,
			[]*Tensor{NewInt([]int{4}, []int64{-2, 0, 0, 2})}},
		{"Cast/float-to-bool", 13, gNode("Cast", []string{"x"}, []string{"y"}, attrI("to", int64(onnxpb.TensorProto_BOOL))),
			NewFloat([]int{3}, []float32{0, -0.1, 3}), nil,
			[]*Tensor{NewInt([]int{3}, []int64{0, 1, 1})}},
		{"Cast/float-to-uint8-wraps", 13, gNode("Cast", []string{"x"}, []string{"y"}, attrI("to", int64(onnxpb.TensorProto_UINT8))),
			NewFloat([]int{2}, []float32{255.9, 256}), nil,
			[]*Tensor{NewInt([]int{2}, []int64{255, 0})}},
		{"Cast/float-to-float16", 13, gNode("Cast", []string{"x"}, []string{"y"}, attrI("to", int64(onnxpb.TensorProto_FLOAT16))),
			NewFloat([]int{2}, []float32{1.0001, 65519}), nil,
			[]*Tensor{NewFloat([]int{2}, []float32{1, 65504})}},
		{"Squeeze/attr", 11, gNode("Squeeze", []string{"x"}, []string{"y"}, attrInts("axes", -3)),
			NewFloat([]int{1, 2, 1}, iota(2)), nil, []*Tensor{NewFloat([]int{2, 1}, iota(2))}},
		{"Unsqueeze/attr", 11, gNode("Unsqueeze", []string{"x"}, []string{"y"}, attrInts("axes", 0, 3)),
			NewFloat([]int{2, 1}, iota(2)), nil, []*Tensor{NewFloat([]int{1, 2, 1, 1}, iota(2))}},
		{"Shape/start-end", 15, gNode("Shape", []string{"x"}, []string{"y"}, attrI("start", -2), attrI("end", 100)),
			NewFloat([]int{2, 3, 4}, iota(24)), nil, []*Tensor{NewInt([]int{2}, []int64{3, 4})}},
		{"Dropout/mask-opset9", 9, gNode("Dropout", []string{"x"}, []string{"y", "m"}),
			NewFloat([]int{2}, []float32{3, 4}), nil,
			[]*Tensor{NewFloat([]int{2}, []float32{3, 4}), NewFloat([]int{2}, []float32{1, 1})}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := gModel(c.opset, []*onnxpb.NodeProto{c.node}, []*onnxpb.ValueInfoProto{gInputAny("x", onnxpb.TensorProto_FLOAT)}, c.node.Output, c.ints...)
			g := mustBuild(t, m)
			out, err := g.Forward(nil, c.x)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if err := closeTensors(out[i], w, 0, 0); err != nil {
					t.Errorf("output %d: %v (got %v)", i, err, out[i])
				}
			}
		})
	}
}

// TestConstantForms checks every Constant attribute form qtool supports.
func TestConstantForms(t *testing.T) {
	cases := []struct {
		attr *onnxpb.AttributeProto
		want *Tensor
	}{
		{attrT("value", onnxio.Int64Tensor("", []int64{2}, []int64{4, 5})), NewInt([]int{2}, []int64{4, 5})},
		{attrF("value_float", 1.5), NewFloat([]int{}, []float32{1.5})},
		{attrFloats("value_floats", 1, 2), NewFloat([]int{2}, []float32{1, 2})},
		{attrI("value_int", -3), NewInt([]int{}, []int64{-3})},
		{attrInts("value_ints", 7, 8, 9), NewInt([]int{3}, []int64{7, 8, 9})},
	}
	for _, c := range cases {
		m := gModel(13, []*onnxpb.NodeProto{gNode("Constant", nil, []string{"y"}, c.attr)}, nil, []string{"y"})
		g := mustBuild(t, m)
		out, err := g.Forward(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := closeTensors(out[0], c.want, 0, 0); err != nil {
			t.Errorf("%s: %v", c.attr.GetName(), err)
		}
	}
	m := gModel(13, []*onnxpb.NodeProto{gNode("Constant", nil, []string{"y"}, attrS("value_string", "no"))}, nil, []string{"y"})
	if _, err := Build(m, Options{}); err == nil {
		t.Error("value_string accepted")
	}
}
