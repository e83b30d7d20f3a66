package onnxio

import (
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// constantMLP builds x[batch,3] → Gemm(W, b) → y with W and b held by Constant nodes, and
// a Reshape shape as an initializer, the mix some converters write.
func constantMLP() *Model {
	g := &onnxpb.GraphProto{
		Name: proto.String("g"),
		Node: []*onnxpb.NodeProto{
			constantNode("W", FloatTensor("", []int64{2, 3}, seq(1, 6))),
			constantNode("b", FloatTensor("", []int64{2}, []float32{0.5, -0.5})),
			node("Gemm", "fc", []string{"x", "W", "b"}, []string{"h"}),
			node("Reshape", "flat", []string{"h", "shape"}, []string{"y"}),
		},
		Initializer: []*onnxpb.TensorProto{Int64Tensor("shape", []int64{2}, []int64{-1, 2})},
		Input:       []*onnxpb.ValueInfoProto{valueInfo("x", "batch", 3)},
		Output:      []*onnxpb.ValueInfoProto{valueInfo("y", "batch", 2)},
	}
	return newModel(g)
}

func TestConstantParams(t *testing.T) {
	m := constantMLP()
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	ps := m.Params()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"shape", "W", "b"}) {
		t.Fatalf("Params = %v, want [shape W b] (initializers first, then Constant nodes)", names)
	}
	if ps[0].Node != nil || ps[1].Node == nil || ps[1].Node.GetOpType() != "Constant" {
		t.Errorf("Param.Node: initializer %v, constant %v", ps[0].Node, ps[1].Node)
	}
	w, err := m.Tensor(ps[1].Tensor)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(w.Float, seq(1, 6)) || !slices.Equal(w.Dims, []int64{2, 3}) {
		t.Errorf("W = %v %v", w.Dims, w.Float)
	}

	// SetParam writes into the Constant node, a save and load keeps the new value, and
	// nothing else changes.
	before := proto.Clone(m.Proto).(*onnxpb.ModelProto)
	if err := m.SetParam("W", FloatTensor("ignored", []int64{2, 3}, []float32{-1, 1, -1, 1, -1, 1})); err != nil {
		t.Fatal(err)
	}
	if len(m.Proto.Graph.Initializer) != 1 || m.Proto.Graph.Node[0].GetOpType() != "Constant" {
		t.Fatal("SetParam moved the Constant's value")
	}
	out := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	back := mustLoad(t, out)
	if !proto.Equal(back.Proto, m.Proto) {
		t.Fatal("save and load changed the model")
	}
	p, ok := back.Param("W")
	if !ok {
		t.Fatal("W is gone")
	}
	got, _ := back.Tensor(p.Tensor)
	if !sameBits(got.Float, []float32{-1, 1, -1, 1, -1, 1}) || p.Tensor.GetName() != "W" {
		t.Errorf("W after SetParam and reload = %v (tensor name %q)", got.Float, p.Tensor.GetName())
	}
	// Restoring the old value gives back the original model except the tensor's name.
	old := proto.Clone(before.Graph.Node[0].Attribute[0].T).(*onnxpb.TensorProto)
	if err := back.SetParam("W", old); err != nil {
		t.Fatal(err)
	}
	before.Graph.Node[0].Attribute[0].T.Name = proto.String("W")
	if !proto.Equal(back.Proto, before) {
		t.Error("setting the old value back did not restore the model")
	}

	// Initializers are replaced in place.
	if err := m.SetParam("shape", Int64Tensor("", []int64{2}, []int64{2, -1})); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Tensor(m.Proto.Graph.Initializer[0]); !slices.Equal(s.Int, []int64{2, -1}) {
		t.Errorf("shape = %v", s.Int)
	}
	err = m.SetParam("nope", FloatTensor("", nil, []float32{1}))
	checkOneLine(t, err, "test.onnx", `no parameter named "nope"`)
}

// TestConstantsFile reads testdata/constants.onnx, whose weights onnx's Python helper put
// in Constant nodes at opset 9, and checks that all four are lifted with their shapes.
func TestConstantsFile(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "constants.onnx"))
	if m.Opset("") != 9 || m.Proto.GetIrVersion() != 4 {
		t.Fatalf("opset %d, IR %d", m.Opset(""), m.Proto.GetIrVersion())
	}
	ps := m.Params()
	if len(ps) != 4 {
		t.Fatalf("%d params, want 4", len(ps))
	}
	want := map[string][]int64{"W1": {4, 6}, "b1": {4}, "W2": {4, 3}, "b2": {3}}
	for _, p := range ps {
		if p.Node == nil {
			t.Errorf("%s is not a Constant", p.Name)
		}
		v, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.Dims, want[p.Name]) || len(v.Float) != v.Len() {
			t.Errorf("%s: dims %v, %d values", p.Name, v.Dims, len(v.Float))
		}
	}
}

// TestDigitsMLPConstants checks the committed testmodels/digits-mlp.onnx, written with
// Constant weights on purpose: Params lifts them, SetParam writes back, and a round trip
// is exact.
func TestDigitsMLPConstants(t *testing.T) {
	path := filepath.Join("..", "testmodels", "digits-mlp.onnx")
	requireAsset(t, path, "run testmodels/make.py")
	m := mustLoad(t, path)
	consts := 0
	for _, p := range m.Params() {
		if p.Node != nil {
			consts++
		}
	}
	if consts == 0 {
		t.Fatal("digits-mlp.onnx has no Constant-node parameters")
	}
	var target string
	for name, c := range m.ParamRoles() {
		if c.Role == RoleWeight {
			target = name
			break
		}
	}
	if target == "" {
		t.Fatal("no weight among digits-mlp's parameters")
	}
	p, _ := m.Param(target)
	v, err := m.Tensor(p.Tensor)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Float {
		if v.Float[i] >= 0 {
			v.Float[i] = 1
		} else {
			v.Float[i] = -1
		}
	}
	if err := m.SetParam(target, FloatTensor(target, v.Dims, v.Float)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "digits.onnx")
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	back := mustLoad(t, out)
	if !proto.Equal(back.Proto, m.Proto) {
		t.Fatal("round trip after SetParam changed the model")
	}
	q, _ := back.Param(target)
	got, _ := back.Tensor(q.Tensor)
	if !sameBits(got.Float, v.Float) {
		t.Error("the binarized weight did not survive the round trip")
	}
	t.Logf("digits-mlp: %d Constant-node parameters; %s binarized and reloaded", consts, target)
}

// TestParamRoles classifies the parameters of a graph with every targeted operator and
// the parameters binarization must keep.
func TestParamRoles(t *testing.T) {
	f := func(name string, dims ...int64) *onnxpb.TensorProto {
		n := 1
		for _, d := range dims {
			n *= int(d)
		}
		return FloatTensor(name, dims, seq(0, n))
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("roles"),
		Node: []*onnxpb.NodeProto{
			node("Conv", "conv", []string{"x", "conv.w", "conv.b"}, []string{"c"}),
			node("BatchNormalization", "bn", []string{"c", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, []string{"n"}),
			node("ConvTranspose", "deconv", []string{"n", "deconv.w", "deconv.b"}, []string{"d"}),
			node("Reshape", "flat", []string{"d", "shape"}, []string{"r"}),
			node("Gemm", "gemm", []string{"gemm.a", "r", "gemm.c"}, []string{"g"}),
			node("MatMul", "mm", []string{"g", "mm.w"}, []string{"m"}),
			node("Add", "mm_bias", []string{"mm.b", "m"}, []string{"a"}),
			node("MatMul", "mm2", []string{"mm2.a", "mm2.b"}, []string{"m2"}),
			node("LayerNormalization", "ln", []string{"a", "ln.scale", "ln.bias"}, []string{"l"}),
			node("Mul", "scale", []string{"l", "scalar"}, []string{"s"}),
			node("Add", "residual", []string{"s", "tied"}, []string{"t"}),
			node("MatMul", "tied_mm", []string{"t", "tied"}, []string{"y"}),
			constantNode("const.w", f("", 2, 2)),
			node("Gemm", "gemm2", []string{"y", "const.w"}, []string{"z"}),
			node("Gather", "emb", []string{"table", "idx"}, []string{"e"}),
		},
		Initializer: []*onnxpb.TensorProto{
			f("conv.w", 4, 1, 3, 3), f("conv.b", 4), f("bn.scale", 4), f("bn.bias", 4), f("bn.mean", 4), f("bn.var", 4),
			f("deconv.w", 4, 2, 3, 3), f("deconv.b", 2), Int64Tensor("shape", []int64{2}, []int64{-1, 8}),
			f("gemm.a", 3, 2), f("gemm.c", 5), f("mm.w", 5, 5), f("mm.b", 5), f("mm2.a", 2, 3), f("mm2.b", 3, 2),
			f("ln.scale", 5), f("ln.bias", 5), f("scalar"), f("tied", 5, 5), f("table", 10, 4), Int64Tensor("idx", []int64{1}, []int64{3}),
		},
	}
	m := newModel(g)
	want := map[string]Role{
		"conv.w": RoleWeight, "conv.b": RoleBias,
		"bn.scale": RoleNorm, "bn.bias": RoleNorm, "bn.mean": RoleNorm, "bn.var": RoleNorm,
		"deconv.w": RoleWeight, "deconv.b": RoleBias, "shape": RoleOther,
		"gemm.a": RoleWeight, "gemm.c": RoleBias,
		"mm.w": RoleWeight, "mm.b": RoleBias, "mm2.a": RoleWeight, "mm2.b": RoleWeight,
		"ln.scale": RoleNorm, "ln.bias": RoleNorm, "scalar": RoleOther,
		"tied":    RoleWeight, // read by Add and MatMul: the weight role wins
		"const.w": RoleWeight, "table": RoleOther, "idx": RoleOther,
	}
	roles := m.ParamRoles()
	if len(roles) != len(want) {
		t.Errorf("%d roles, want %d", len(roles), len(want))
	}
	for name, r := range want {
		c, ok := roles[name]
		if !ok {
			t.Errorf("%s: not classified", name)
			continue
		}
		if c.Role != r {
			t.Errorf("%s: role %s, want %s", name, c.Role, r)
		}
		if (c.Role == RoleOther) != (c.Use.Node == nil) {
			t.Errorf("%s: role %s with deciding node %v", name, c.Role, c.Use.Node)
		}
		if got := m.ParamRole(name); got.Role != c.Role {
			t.Errorf("%s: ParamRole %s, ParamRoles %s", name, got.Role, c.Role)
		}
	}
	if c := roles["gemm.c"]; c.Use.Node.GetName() != "gemm" || c.Use.Input != 2 {
		t.Errorf("gemm.c decided by %s input %d", c.Use.Node.GetName(), c.Use.Input)
	}
	if uses := m.Consumers("tied"); len(uses) != 2 || uses[0].Node.GetName() != "residual" || uses[1].Input != 1 {
		t.Errorf("Consumers(tied) = %v", uses)
	}
	for r, s := range map[Role]string{RoleWeight: "weight", RoleBias: "bias", RoleNorm: "normalization", RoleOther: "other"} {
		if r.String() != s {
			t.Errorf("Role(%d).String() = %q, want %q", r, r.String(), s)
		}
	}
}

// TestSymbolicDims checks that named dimensions are reported and survive a round trip.
func TestSymbolicDims(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	in, out := m.Inputs(), m.Outputs()
	if len(in) != 1 || len(out) != 1 {
		t.Fatalf("inputs %v outputs %v", in, out)
	}
	if in[0].Name != "x" || in[0].Kind != "tensor" || in[0].Elem != onnxpb.TensorProto_FLOAT || in[0].ShapeString() != "[batch 6]" {
		t.Errorf("input = %+v (%s)", in[0], in[0].ShapeString())
	}
	if d := in[0].Shape[0]; d.Fixed || d.Param != "batch" || d.String() != "batch" {
		t.Errorf("batch dimension = %+v", d)
	}
	if out[0].ShapeString() != "[batch 3]" {
		t.Errorf("output shape %s", out[0].ShapeString())
	}
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, p).Inputs()[0].ShapeString(); got != "[batch 6]" {
		t.Errorf("after a round trip the input shape is %s", got)
	}
	// Unknown dimensions, scalars and undeclared shapes.
	vi := valueInfo("v", 2, "n")
	vi.Type.GetTensorType().Shape.Dim = append(vi.Type.GetTensorType().Shape.Dim, &onnxpb.TensorShapeProto_Dimension{})
	if s := ValueInfo(vi).ShapeString(); s != "[2 n ?]" {
		t.Errorf("shape %s, want [2 n ?]", s)
	}
	if s := ValueInfo(valueInfo("s")).ShapeString(); s != "[]" {
		t.Errorf("scalar shape %s, want []", s)
	}
	vi = valueInfo("u")
	vi.Type.GetTensorType().Shape = nil
	if s := ValueInfo(vi).ShapeString(); s != "?" {
		t.Errorf("undeclared shape %s, want ?", s)
	}
}

// TestInputsSkipInitializers checks that IR 3 models, which list initializers among the
// graph inputs, report only the inputs a caller feeds.
func TestInputsSkipInitializers(t *testing.T) {
	m := constantMLP()
	m.Proto.Graph.Input = append(m.Proto.Graph.Input, valueInfo("shape", 2))
	if in := m.Inputs(); len(in) != 1 || in[0].Name != "x" {
		t.Errorf("Inputs = %v", in)
	}
}
