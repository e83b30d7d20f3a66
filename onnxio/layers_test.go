package onnxio

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/testenv"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

func intAttribute(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// TestChannelAxis checks the schema against the weight layouts of the ONNX operator
// specification, attribute by attribute.
func TestChannelAxis(t *testing.T) {
	cases := []struct {
		op    string
		input int
		attrs []*onnxpb.AttributeProto
		dims  []int64
		want  int // −1: no axis
	}{
		{"Conv", 1, nil, []int64{8, 3, 3, 3}, 0},
		{"Conv", 1, nil, []int64{8, 3, 5}, 0},
		{"Conv", 1, []*onnxpb.AttributeProto{intAttribute("group", 4)}, []int64{8, 1, 3, 3}, 0},
		{"ConvTranspose", 1, nil, []int64{3, 8, 3, 3}, 1},
		{"ConvTranspose", 1, []*onnxpb.AttributeProto{intAttribute("group", 1)}, []int64{3, 8, 3, 3}, 1},
		{"ConvTranspose", 1, []*onnxpb.AttributeProto{intAttribute("group", 2)}, []int64{4, 3, 3, 3}, -1},
		{"Gemm", 1, nil, []int64{4, 7}, 1},
		{"Gemm", 1, []*onnxpb.AttributeProto{intAttribute("transB", 1)}, []int64{7, 4}, 0},
		{"Gemm", 1, []*onnxpb.AttributeProto{intAttribute("transA", 1)}, []int64{4, 7}, 1},
		{"Gemm", 0, nil, []int64{5, 4}, 0},
		{"Gemm", 0, []*onnxpb.AttributeProto{intAttribute("transA", 1)}, []int64{4, 5}, 1},
		{"Gemm", 0, []*onnxpb.AttributeProto{intAttribute("transB", 1)}, []int64{5, 4}, 0},
		{"Gemm", 1, nil, []int64{4, 7, 1}, -1},
		{"MatMul", 1, nil, []int64{4, 7}, 1},
		{"MatMul", 1, nil, []int64{2, 4, 7}, 2},
		{"MatMul", 0, nil, []int64{5, 4}, 0},
		{"MatMul", 0, nil, []int64{2, 5, 4}, 1},
		{"MatMul", 1, nil, []int64{4}, -1},
		{"LSTM", 1, nil, []int64{2, 32, 6}, 1},
		{"LSTM", 2, nil, []int64{1, 32, 8}, 1},
		{"GRU", 1, nil, []int64{2, 24, 6}, 1},
		{"RNN", 2, nil, []int64{1, 8, 8}, 1},
		{"LSTM", 3, nil, []int64{2, 64}, -1},
		{"LSTM", 0, nil, []int64{5, 3, 6}, -1},
		{"GRU", 1, nil, []int64{24, 6}, -1},
		{"Conv", 0, nil, []int64{1, 3, 8, 8}, -1},
		{"Conv", 2, nil, []int64{8}, -1},
		{"Add", 1, nil, []int64{4, 7}, -1},
		{"BatchNormalization", 1, nil, []int64{8}, -1},
	}
	for _, c := range cases {
		u := Use{Node: node(c.op, "n", []string{"a", "b", "c"}, []string{"y"}, c.attrs...), Input: c.input}
		got, err := u.ChannelAxis(c.dims)
		var cae *ChannelAxisError
		switch {
		case c.want < 0 && !errors.As(err, &cae):
			t.Errorf("%s input %d %v: axis %d, %v; want a *ChannelAxisError", c.op, c.input, c.dims, got, err)
		case c.want >= 0 && (err != nil || got != c.want):
			t.Errorf("%s input %d %v: axis %d, %v; want %d", c.op, c.input, c.dims, got, err, c.want)
		}
	}
	custom := node("Conv", "n", []string{"x", "w"}, []string{"y"})
	custom.Domain = proto.String("com.example")
	if _, err := (Use{Node: custom, Input: 1}).ChannelAxis([]int64{8, 3, 3, 3}); err == nil {
		t.Error("a Conv of another domain has a channel axis")
	}
}

// TestLayersAgreeWithRoles: every linear operator's weight inputs are exactly the inputs
// that have a channel axis, and the schema has no duplicate rows.
func TestLayersAgreeWithRoles(t *testing.T) {
	seen := map[string]bool{}
	for _, l := range Layers() {
		if seen[l.Op] {
			t.Errorf("%s has two rows", l.Op)
		}
		seen[l.Op] = true
		if l.Linear() == l.Normalization() {
			t.Errorf("%s: linear %v, normalization %v; want exactly one", l.Op, l.Linear(), l.Normalization())
		}
		if l.Linear() && len(l.Inputs(RoleWeight)) == 0 {
			t.Errorf("%s is linear but has no weight input", l.Op)
		}
		if got, ok := LayerOf(l.Op); !ok || got.Op != l.Op {
			t.Errorf("LayerOf(%s) = %v, %v", l.Op, got.Op, ok)
		}
	}
	for _, op := range []string{"Conv", "ConvTranspose", "Gemm", "MatMul"} {
		if l, ok := LayerOf(op); !ok || !l.Linear() {
			t.Errorf("%s is not a linear layer of the schema", op)
		}
	}
	if _, ok := LayerOf("Add"); ok {
		t.Error("Add has a row")
	}
}

// TestChannelAxisPyTorch checks the schema against what PyTorch exports (layers.py): each
// weight element holds 1 + the output channel autograd says it feeds, so the axis the
// schema gives must be the one whose index is that channel, and when the schema refuses,
// no axis may be.
func TestChannelAxisPyTorch(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "layers.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{ // by PyTorch module; −1: no single axis
		"conv.weight": 0, "deconv.weight": 1, "gdeconv.weight": -1, "linear.weight": 0,
		"onnx::MatMul_47": 1, "gemm_b.1": 1, "gemm_a.1": 0, "left.1": 0,
	}
	roles := m.ParamRoles()
	n := 0
	for _, p := range m.Params() {
		c := roles[p.Name]
		if c.Role != RoleWeight {
			continue
		}
		n++
		tt, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		explains := channelAxes(tt)
		axis, err := c.Use.ChannelAxis(tt.Dims)
		switch {
		case err != nil && len(explains) > 0:
			t.Errorf("%s %v (%s): %v, but axis %v holds the output channels", p.Name, tt.Dims, c.Use.Node.GetOpType(), err, explains)
		case err == nil && !(len(explains) == 1 && explains[0] == axis):
			t.Errorf("%s %v (%s): axis %d, but the output channels are on axes %v", p.Name, tt.Dims, c.Use.Node.GetOpType(), axis, explains)
		}
		if w, ok := want[p.Name]; !ok {
			t.Errorf("%s is a weight the fixture does not list", p.Name)
		} else if got := map[bool]int{true: axis, false: -1}[err == nil]; got != w {
			t.Errorf("%s: axis %d (%v), want %d", p.Name, got, err, w)
		}
	}
	if n != len(want) {
		t.Errorf("%d weights in layers.onnx, want %d", n, len(want))
	}
}

// channelAxes returns the axes along which index c holds exactly the values c+1.
func channelAxes(t *Tensor) []int {
	var axes []int
	for a := range t.Dims {
		inner := 1
		for _, d := range t.Dims[a+1:] {
			inner *= int(d)
		}
		ok := true
		for i, v := range t.Float {
			if v != float32((i/inner)%int(t.Dims[a])+1) {
				ok = false
				break
			}
		}
		if ok {
			axes = append(axes, a)
		}
	}
	return axes
}

// TestChannelAxisTestModels checks the schema on the shipped models, whose layers all
// have a bias or a BatchNormalization after them: the axis the schema gives is as long
// as that bias or normalisation scale, which has one value per output channel.
func TestChannelAxisTestModels(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testmodels", "*.onnx"))
	if len(paths) == 0 {
		testenv.Missing(t, "testmodels/ holds no .onnx file; they are made by testmodels/make.py")
	}
	for _, path := range paths {
		m, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		roles := m.ParamRoles()
		checked := 0
		for _, p := range m.Params() {
			c := roles[p.Name]
			if c.Role != RoleWeight {
				continue
			}
			dims := p.Tensor.GetDims()
			axis, err := c.Use.ChannelAxis(dims)
			if err != nil {
				t.Errorf("%s: %s: %v", path, p.Name, err)
				continue
			}
			bias := perChannelOf(m, c.Use)
			if bias == nil {
				t.Errorf("%s: %s (%s) has no bias or normalisation to check against", path, p.Name, c.Use.Node.GetOpType())
				continue
			}
			if n := numel(bias.GetDims()); dims[axis] != n {
				t.Errorf("%s: %s %v: axis %d has %d entries, the bias %s %d", path, p.Name, dims, axis, dims[axis], bias.GetName(), n)
			}
			checked++
		}
		if checked == 0 {
			t.Errorf("%s: no weight checked", path)
		}
	}
}

// perChannelOf returns a parameter with one value per output channel of u's node: its
// bias input, the parameter an Add adds to its output, or the scale of the
// BatchNormalization that reads it.
func perChannelOf(m *Model, u Use) *onnxpb.TensorProto {
	params := map[string]*onnxpb.TensorProto{}
	for _, p := range m.Params() {
		params[p.Name] = p.Tensor
	}
	in := u.Node.GetInput()
	if len(in) > 2 && u.Node.GetOpType() != "MatMul" {
		return params[in[2]]
	}
	for _, next := range m.Consumers(u.Node.GetOutput()[0]) {
		switch next.Node.GetOpType() {
		case "Add":
			return params[next.Node.GetInput()[1-next.Input]]
		case "BatchNormalization":
			return params[next.Node.GetInput()[1]]
		}
	}
	return nil
}

func numel(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// TestChannelAxisRecurrentPyTorch checks the LSTM, GRU and RNN rows of the schema against
// PyTorch's export (recurrent.py), whose W and R rows each hold one value (1 + PyTorch's
// row + 1000·direction): W and R are weights whose axis 1 runs over rows, every slice
// along it is one whole row of one direction, and B is a bias.
func TestChannelAxisRecurrentPyTorch(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "recurrent.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	roles := m.ParamRoles()
	weights := map[string]int{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		op := n.GetOpType()
		if op != "LSTM" && op != "GRU" && op != "RNN" {
			continue
		}
		in := n.GetInput()
		for i, want := range []Role{RoleWeight, RoleWeight, RoleBias} {
			if got := roles[in[i+1]].Role; got != want {
				t.Errorf("%s input %d (%s): role %v, want %v", op, i+1, in[i+1], got, want)
			}
		}
		for _, name := range in[1:3] {
			p, _ := m.Param(name)
			tt, err := m.Tensor(p.Tensor)
			if err != nil {
				t.Fatal(err)
			}
			axis, err := roles[name].Use.ChannelAxis(tt.Dims)
			if err != nil || axis != 1 {
				t.Errorf("%s %s %v: axis %d, %v; want 1", op, name, tt.Dims, axis, err)
				continue
			}
			// Slice [d, j, :] is constant, and no two slices hold the same row.
			rows, cols := int(tt.Dims[0]*tt.Dims[1]), int(tt.Dims[2])
			seen := map[float32]bool{}
			for r := range rows {
				v := tt.Float[r*cols]
				for _, u := range tt.Float[r*cols : (r+1)*cols] {
					if u != v {
						t.Errorf("%s %s: slice %d along axis 1 mixes rows %v and %v", op, name, r, v, u)
						break
					}
				}
				if seen[v] {
					t.Errorf("%s %s: row %v appears twice", op, name, v)
				}
				seen[v] = true
			}
			weights[op]++
		}
	}
	if len(weights) != 3 || weights["LSTM"] != 2 || weights["GRU"] != 2 || weights["RNN"] != 2 {
		t.Errorf("recurrent weights found: %v, want W and R of each of LSTM, GRU, RNN", weights)
	}
}

// TestRolesInBodies: a parameter read only inside an If branch or a Loop body has the role
// of that read, and comes in graph order where its control-flow node stands; a body that
// defines a name of its own (an initializer, an input) does not read the parameter of
// that name.
func TestRolesInBodies(t *testing.T) {
	graphAttr := func(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
	}
	then := &onnxpb.GraphProto{Name: proto.String("then"), Output: []*onnxpb.ValueInfoProto{valueInfo("t")},
		Node: []*onnxpb.NodeProto{node("MatMul", "branch", []string{"x", "wa"}, []string{"m"}), node("Add", "branch_bias", []string{"m", "ba"}, []string{"t"})}}
	els := &onnxpb.GraphProto{Name: proto.String("else"), Output: []*onnxpb.ValueInfoProto{valueInfo("e")},
		Initializer: []*onnxpb.TensorProto{FloatTensor("wb", []int64{4, 4}, seq(0, 16))}, // shadows the outer wb
		Node:        []*onnxpb.NodeProto{node("MatMul", "shadowed", []string{"x", "wb"}, []string{"e"})}}
	body := &onnxpb.GraphProto{Name: proto.String("body"),
		Input:  []*onnxpb.ValueInfoProto{valueInfo("i"), valueInfo("c"), valueInfo("h")},
		Output: []*onnxpb.ValueInfoProto{valueInfo("c"), valueInfo("h2")},
		Node:   []*onnxpb.NodeProto{node("Gemm", "step", []string{"h", "wl"}, []string{"h2"})}}
	g := &onnxpb.GraphProto{Name: proto.String("g"),
		Input:  []*onnxpb.ValueInfoProto{valueInfo("x", "N", 4)},
		Output: []*onnxpb.ValueInfoProto{valueInfo("y")},
		Initializer: []*onnxpb.TensorProto{FloatTensor("w0", []int64{4, 4}, seq(0, 16)), FloatTensor("wa", []int64{4, 4}, seq(0, 16)),
			FloatTensor("ba", []int64{4}, seq(0, 4)), FloatTensor("wb", []int64{4, 4}, seq(0, 16)), FloatTensor("wl", []int64{4, 4}, seq(0, 16))},
		Node: []*onnxpb.NodeProto{
			node("MatMul", "first", []string{"x", "w0"}, []string{"a"}),
			node("If", "if", []string{"cond"}, []string{"b"}, graphAttr("then_branch", then), graphAttr("else_branch", els)),
			node("Loop", "loop", []string{"", "cond", "b"}, []string{"y"}, graphAttr("body", body)),
		}}
	m := newModel(g)
	roles := m.ParamRoles()
	for name, want := range map[string]Role{"w0": RoleWeight, "wa": RoleWeight, "ba": RoleBias, "wb": RoleOther, "wl": RoleWeight} {
		if got := roles[name].Role; got != want {
			t.Errorf("%s: role %v, want %v", name, got, want)
		}
	}
	var order []string
	for _, u := range m.ParamReads() {
		order = append(order, u.Node.GetName()+":"+u.Node.GetInput()[u.Input])
	}
	if want := []string{"first:w0", "branch:wa", "branch_bias:ba", "step:wl"}; !slices.Equal(order, want) {
		t.Errorf("reads %v, want %v", order, want)
	}
}
