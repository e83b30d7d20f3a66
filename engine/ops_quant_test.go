package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestQuantConformance names the suite's QuantizeLinear and DequantizeLinear tests so
// that none can drop out of TestConformance unnoticed: each must pass, or be skipped for
// a data type qtool does not compute in (float8, float16, bfloat16).
func TestQuantConformance(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	var dirs []string
	for _, pat := range []string{"test_dequantizelinear*", "test_quantizelinear*"} {
		d, err := filepath.Glob(filepath.Join(conformanceDir, pat))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d...)
	}
	if len(dirs) < 4 {
		t.Fatalf("found %d quantization tests in %s, want at least the 4 of ONNX 1.12", len(dirs), conformanceDir)
	}
	for _, dir := range dirs {
		m, err := onnxio.Load(filepath.Join(dir, "model.onnx"))
		if err != nil {
			// onnxio refuses opsets beyond 21 and the float8 and 4-bit-float types.
			t.Logf("skip %s: %v", filepath.Base(dir), err)
			continue
		}
		c := conformanceCase{name: filepath.Base(dir), dir: dir, op: m.Proto.GetGraph().GetNode()[0].GetOpType(), model: m.Proto}
		reason, err := runConformance(c)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case reason != "" && !strings.Contains(reason, "float8") && !strings.Contains(reason, "float16") && !strings.Contains(reason, "bfloat16"):
			t.Errorf("%s skipped for %q; only unsupported data types may skip", c.name, reason)
		case reason != "":
			t.Logf("skip %s: %s", c.name, reason)
		}
	}
}

// quantModel is one QuantizeLinear or DequantizeLinear node over a float input x (or an
// int8 initializer w for DequantizeLinear), with the given parameters.
func quantModel(opset int64, op string, inputs []string, attrs []*onnxpb.AttributeProto, inits ...*onnxpb.TensorProto) *onnxio.Model {
	n := gNode(op, inputs, []string{"y"}, attrs...)
	n.Name = proto.String("q1")
	return gModel(opset, []*onnxpb.NodeProto{n}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 4)}, []string{"y"}, inits...)
}

// TestQuantErrors checks that every malformed or unsupported use is refused with an
// error that names the node and says what is wrong, at Build or at the first Forward.
func TestQuantErrors(t *testing.T) {
	i8, u8, i4 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT4
	w := intTensor("w", i8, []int64{2, 4}, []int64{1, 2, 3, 4, 5, 6, 7, 8})
	s1 := onnxio.FloatTensor("s", nil, []float32{0.5})
	s2 := onnxio.FloatTensor("s2", []int64{2}, []float32{0.5, 1})
	s4 := onnxio.FloatTensor("s4", []int64{4}, []float32{0.5, 1, 2, 4})
	blk := onnxio.FloatTensor("blk", []int64{2, 3}, []float32{1, 1, 1, 1, 1, 1})
	cases := []struct {
		name  string
		m     *onnxio.Model
		wants []string
	}{
		{"opset 9", quantModel(9, "DequantizeLinear", []string{"w", "s"}, nil, w, s1), []string{"needs opset 10"}},
		{"per-axis before opset 13", quantModel(10, "DequantizeLinear", []string{"w", "s4"}, nil, w, s4), []string{"before opset 13", "scalar"}},
		{"per-axis length", quantModel(13, "DequantizeLinear", []string{"w", "s2"}, nil, w, s2), []string{"1-D scale of 4 elements", "axis 1"}},
		{"axis out of range", quantModel(13, "DequantizeLinear", []string{"w", "s4"}, []*onnxpb.AttributeProto{attrI("axis", 2)}, w, s4), []string{"axis 2 is outside [-2, 1]"}},
		{"zero point shape", quantModel(13, "DequantizeLinear", []string{"w", "s4", "zp"}, nil, w, s4, intTensor("zp", i8, []int64{2}, []int64{0, 0})), []string{"zero point's shape [2] differs from the scale's [4]"}},
		{"float into DequantizeLinear", quantModel(13, "DequantizeLinear", []string{"x", "s"}, nil, s1), []string{"needs an integer tensor"}},
		{"block shape", quantModel(21, "DequantizeLinear", []string{"w", "blk"}, []*onnxpb.AttributeProto{attrI("block_size", 3)}, w, blk), []string{"block_size 3 needs shape [2 2]"}},
		{"negative block_size", quantModel(21, "QuantizeLinear", []string{"x", "blk"}, []*onnxpb.AttributeProto{attrI("block_size", -1)}, blk), []string{"block_size -1 is negative"}},
		{"int4 before opset 21", quantModel(19, "QuantizeLinear", []string{"x", "s", "zp"}, nil, s1, intTensor("zp", i4, nil, []int64{0})), []string{"quantizing to INT4 needs opset 21"}},
		{"int32 target", quantModel(21, "QuantizeLinear", []string{"x", "s", "zp"}, nil, s1, intTensor("zp", onnxpb.TensorProto_INT32, nil, []int64{0})), []string{"quantizing to INT32 is not supported"}},
		{"output_dtype against zero point", quantModel(21, "QuantizeLinear", []string{"x", "s", "zp"}, []*onnxpb.AttributeProto{attrI("output_dtype", int64(i8))}, s1, intTensor("zp", u8, nil, []int64{0})), []string{"output_dtype INT8 differs from the zero point's type UINT8"}},
	}
	// A zero point computed from an untyped value has no known width.
	untyped := gModel(13, []*onnxpb.NodeProto{
		gNode("Shape", []string{"x"}, []string{"sh"}),
		gNode("Gather", []string{"sh", "i0"}, []string{"zpv"}),
		{OpType: proto.String("QuantizeLinear"), Name: proto.String("q1"), Input: []string{"x", "s", "zpv"}, Output: []string{"y"}},
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 4)}, []string{"y"}, s1, onnxio.Int64Tensor("i0", nil, []int64{0}))
	untyped.Proto.GetGraph().GetNode()[1].Input[1] = "i0"
	cases = append(cases, struct {
		name  string
		m     *onnxio.Model
		wants []string
	}{"untyped zero point", untyped, []string{`type of zero point "zpv" is not stated`}})

	for _, c := range cases {
		g, err := Build(c.m, Options{})
		if err == nil {
			_, err = g.Forward(nil, NewFloat([]int{2, 4}, make([]float32, 8)))
		}
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, `node "q1"`) {
			t.Errorf("%s: error %q is not one line naming node q1", c.name, msg)
		}
		for _, want := range c.wants {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not say %q", c.name, msg, want)
			}
		}
	}
}

// TestQuantizeLinearTypeFromProducers: the zero point's width reaches QuantizeLinear
// through a Cast's target and through ops that keep their input's type, so a uint8 zero
// point saturates at 0..255 and an int8 one at −128..127.
func TestQuantizeLinearTypeFromProducers(t *testing.T) {
	for _, tc := range []struct {
		to     onnxpb.TensorProto_DataType
		lo, hi int64
	}{{onnxpb.TensorProto_UINT8, 0, 255}, {onnxpb.TensorProto_INT8, -128, 127}} {
		m := gModel(13, []*onnxpb.NodeProto{
			gNode("Cast", []string{"z64"}, []string{"zc"}, attrI("to", int64(tc.to))),
			gNode("Reshape", []string{"zc", "scalar"}, []string{"zr"}),
			gNode("QuantizeLinear", []string{"x", "s", "zr"}, []string{"y"}),
		}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 4)}, []string{"y"},
			onnxio.FloatTensor("s", nil, []float32{1}), onnxio.Int64Tensor("z64", []int64{1}, []int64{0}), onnxio.Int64Tensor("scalar", []int64{0}, nil))
		g := mustBuild(t, m)
		out, err := g.Forward(nil, NewFloat([]int{4}, []float32{-1000, -2.5, 3.5, 1000}))
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{max(tc.lo, -1000), max(tc.lo, -2), 4, tc.hi}
		for i, v := range out[0].I {
			if v != want[i] {
				t.Errorf("%s: y = %v, want %v", tc.to, out[0].I, want)
				break
			}
		}
	}
}

// TestQuantNoGradient: a qdq graph runs in inference, but training a parameter whose
// gradient would have to cross DequantizeLinear (its scale) is refused with an error
// naming the node, and its integer weight cannot be made trainable at all.
func TestQuantNoGradient(t *testing.T) {
	w := intTensor("w", onnxpb.TensorProto_INT8, []int64{4, 3}, []int64{1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6})
	m := gModel(13, []*onnxpb.NodeProto{
		{OpType: proto.String("DequantizeLinear"), Name: proto.String("dq"), Input: []string{"w", "s"}, Output: []string{"wf"},
			Attribute: []*onnxpb.AttributeProto{attrI("axis", 1)}},
		gNode("MatMul", []string{"x", "wf"}, []string{"y"}),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 4)}, []string{"y"},
		w, onnxio.FloatTensor("s", []int64{3}, []float32{0.5, 1, 2}), onnxio.FloatTensor("unused", []int64{1}, []float32{0}))
	g := mustBuild(t, m)
	x := NewFloat([]int{2, 4}, []float32{1, 0, 0, 0, 0, 1, 1, 1})
	out, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	// Row 0 of x picks row 0 of w·s; row 1 sums rows 1..3.
	want := []float32{0.5, -1, 4, (-2 + 4 - 5) * 0.5, (3 - 4 + 6) * 1, (-3 + 5 - 6) * 2}
	for i, v := range out[0].F {
		if v != want[i] {
			t.Fatalf("y = %v, want %v", out[0].F, want)
		}
	}
	if err := g.SetTrainable("w"); err == nil || !strings.Contains(err.Error(), "only float tensors can be trained") {
		t.Errorf("SetTrainable(int8 weight): %v", err)
	}
	if err := g.SetTrainable("s"); err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(&Context{Training: true}, x)
	if err == nil || !strings.Contains(err.Error(), `node "dq" (DequantizeLinear): has no backward pass`) {
		t.Errorf("training through DequantizeLinear: %v", err)
	}
}
