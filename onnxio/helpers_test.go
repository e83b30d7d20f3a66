package onnxio

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// node builds a default-domain node.
func node(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: in, Output: out, Attribute: attrs}
}

// constantNode builds a Constant node holding t in its value attribute.
func constantNode(out string, t *onnxpb.TensorProto) *onnxpb.NodeProto {
	return node("Constant", out+"/Constant", nil, []string{out}, &onnxpb.AttributeProto{
		Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t,
	})
}

// valueInfo declares a FLOAT tensor; string dims are symbolic.
func valueInfo(name string, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		switch d := d.(type) {
		case int:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
		case string:
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}})
		}
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: shape},
	}}}
}

// newModel wraps a graph in a model of IR version 8 importing default-domain opset 13.
func newModel(g *onnxpb.GraphProto) *Model {
	return &Model{Name: "test.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph:       g,
	}}
}

// seq returns n float32 values start, start+1, ...
func seq(start float32, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)
	}
	return v
}

// writeModel serializes mp into dir/name and returns the path.
func writeModel(t *testing.T, dir, name string, mp *onnxpb.ModelProto) string {
	t.Helper()
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustLoad loads a model or fails the test.
func mustLoad(t *testing.T, path string) *Model {
	t.Helper()
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkOneLine asserts that err is a single line naming file and containing want.
func checkOneLine(t *testing.T, err error, file, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %s: %q", file, want)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	if !strings.Contains(msg, file) {
		t.Errorf("error does not name %s: %q", file, msg)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error %q does not say %q", msg, want)
	}
}

// copyDir copies the regular files of src (one level) into a new temporary folder.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// listDir returns the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// decodeAll decodes every parameter of m by name.
func decodeAll(t *testing.T, m *Model) map[string]*Tensor {
	t.Helper()
	out := map[string]*Tensor{}
	for _, p := range m.Params() {
		v, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = v
	}
	return out
}

// sameBits reports whether two float32 slices hold identical bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
