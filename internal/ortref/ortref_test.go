//go:build cgo

package ortref

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

func valueInfo(name string, elem onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		var dim onnxpb.TensorShapeProto_Dimension
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, &dim)
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(elem)),
			Shape:    shape,
		}}},
	}
}

// gemmModel computes Y = 0.5 * X · Wᵀ + B (Gemm with alpha 0.5, transB 1)
// with X of shape [N, 3], W of shape [2, 3] and B of shape [2] as graph
// inputs, and S = Shape(X) as a second, int64, output.
func gemmModel(t *testing.T) []byte {
	t.Helper()
	f := onnxpb.TensorProto_FLOAT
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("gemm"),
			Node: []*onnxpb.NodeProto{
				{
					OpType: proto.String("Gemm"), Name: proto.String("gemm"),
					Input: []string{"X", "W", "B"}, Output: []string{"Y"},
					Attribute: []*onnxpb.AttributeProto{
						{Name: proto.String("alpha"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(0.5)},
						{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)},
					},
				},
				{OpType: proto.String("Shape"), Name: proto.String("shape"), Input: []string{"X"}, Output: []string{"S"}},
			},
			Input:  []*onnxpb.ValueInfoProto{valueInfo("X", f, "N", 3), valueInfo("W", f, 2, 3), valueInfo("B", f, 2)},
			Output: []*onnxpb.ValueInfoProto{valueInfo("Y", f, "N", 2), valueInfo("S", onnxpb.TensorProto_INT64, 2)},
		},
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gatherModel is Y = Gather(T, I) along axis 0 with the table T an input, to
// exercise int64 inputs.
func gatherModel(t *testing.T) []byte {
	t.Helper()
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{
			Name:   proto.String("gather"),
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Gather"), Input: []string{"T", "I"}, Output: []string{"Y"}}},
			Input:  []*onnxpb.ValueInfoProto{valueInfo("T", onnxpb.TensorProto_FLOAT, 4, 2), valueInfo("I", onnxpb.TensorProto_INT64, 3)},
			Output: []*onnxpb.ValueInfoProto{valueInfo("Y", onnxpb.TensorProto_FLOAT, 3, 2)},
		},
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunGemm(t *testing.T) {
	Require(t)
	x := []float32{1, 2, 3, -1, 0.5, 4}
	w := []float32{1, 0, -1, 2, 1, 0.25}
	b := []float32{10, -10}
	// Hand computation: Y[i][j] = 0.5 * Σ_k X[i][k] W[j][k] + B[j].
	want := []float32{
		0.5*(1*1+2*0+3*-1) + 10, 0.5*(1*2+2*1+3*0.25) - 10,
		0.5*(-1*1+0.5*0+4*-1) + 10, 0.5*(-1*2+0.5*1+4*0.25) - 10,
	}
	// Inputs in a different order from the model's, to check matching by name.
	out, err := Run(gemmModel(t), []Tensor{
		{Name: "B", Shape: []int64{2}, Data: b},
		{Name: "X", Shape: []int64{2, 3}, Data: x},
		{Name: "W", Shape: []int64{2, 3}, Data: w},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Name != "Y" || out[1].Name != "S" {
		t.Fatalf("outputs %+v, want Y then S", out)
	}
	y := out[0]
	if !slices.Equal(y.Shape, []int64{2, 2}) || len(y.Data) != 4 {
		t.Fatalf("Y has shape %v and %d elements, want [2 2] and 4", y.Shape, len(y.Data))
	}
	for i := range want {
		// Three products and two sums in float32.
		if math.Abs(float64(y.Data[i]-want[i])) > 1e-5 {
			t.Errorf("Y[%d] = %v, want %v", i, y.Data[i], want[i])
		}
	}
	if s := out[1]; !slices.Equal(s.Int64, []int64{2, 3}) || s.Data != nil {
		t.Errorf("S = %+v, want Int64 [2 3]", s)
	}
}

func TestSessionReuseAndInt64Input(t *testing.T) {
	Require(t)
	s, err := NewSession(gatherModel(t), Options{IntraOpThreads: 2, NoSpinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := strings.Join(s.InputNames(), ","); got != "T,I" {
		t.Errorf("InputNames = %s, want T,I", got)
	}
	if got := strings.Join(s.OutputNames(), ","); got != "Y" {
		t.Errorf("OutputNames = %s, want Y", got)
	}
	table := []float32{0, 1, 10, 11, 20, 21, 30, 31}
	for _, idx := range [][]int64{{3, 0, 2}, {1, 1, -1}} {
		out, err := s.Run([]Tensor{
			{Name: "T", Shape: []int64{4, 2}, Data: table},
			{Name: "I", Shape: []int64{3}, Int64: idx},
		})
		if err != nil {
			t.Fatal(err)
		}
		for r, i := range idx {
			if i < 0 {
				i += 4 // Gather accepts negative indices from the end.
			}
			for c := range 2 {
				if got, want := out[0].Data[r*2+c], table[int(i)*2+c]; got != want {
					t.Errorf("indices %v: Y[%d][%d] = %v, want %v", idx, r, c, got, want)
				}
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	Require(t)
	model := gemmModel(t)
	ok := []Tensor{
		{Name: "X", Shape: []int64{1, 3}, Data: []float32{1, 2, 3}},
		{Name: "W", Shape: []int64{2, 3}, Data: make([]float32, 6)},
		{Name: "B", Shape: []int64{2}, Data: make([]float32, 2)},
	}
	cases := []struct {
		name   string
		inputs []Tensor
		want   string
	}{
		{"missing", ok[:2], "2 inputs given"},
		{"unknown", []Tensor{ok[0], ok[1], {Name: "Q", Shape: []int64{2}, Data: make([]float32, 2)}}, `"Q" is not a model input`},
		{"twice", []Tensor{ok[0], ok[1], ok[1]}, "given twice"},
		{"short", []Tensor{{Name: "X", Shape: []int64{2, 3}, Data: []float32{1, 2, 3}}, ok[1], ok[2]}, "holds 6 elements but Data has 3"},
		{"negative", []Tensor{{Name: "X", Shape: []int64{-1, 3}, Data: []float32{1, 2, 3}}, ok[1], ok[2]}, "negative dimension"},
		{"wrong width", []Tensor{{Name: "X", Shape: []int64{1, 2}, Data: []float32{1, 2}}, ok[1], ok[2]}, "run:"},
	}
	for _, c := range cases {
		_, err := Run(model, c.inputs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := Run([]byte("not a model"), ok); err == nil {
		t.Error("garbage model bytes accepted")
	}
	missing := filepath.Join(t.TempDir(), "none.onnx")
	if _, err := RunFile(missing, ok); err == nil || !strings.Contains(err.Error(), "none.onnx") {
		t.Errorf("missing file: error %v, want one naming the file", err)
	}
}

func TestRunFile(t *testing.T) {
	Require(t)
	path := filepath.Join(t.TempDir(), "gather.onnx")
	if err := os.WriteFile(path, gatherModel(t), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := RunFile(path, []Tensor{
		{Name: "I", Shape: []int64{3}, Int64: []int64{0, 0, 1}},
		{Name: "T", Shape: []int64{4, 2}, Data: []float32{1, 2, 3, 4, 5, 6, 7, 8}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 2, 1, 2, 3, 4}; !slices.Equal(out[0].Data, want) {
		t.Errorf("Y = %v, want %v", out[0].Data, want)
	}
}

func TestVersion(t *testing.T) {
	lib := Require(t)
	v, path, err := Version()
	if err != nil || path != lib {
		t.Fatalf("Version() = %q, %q, %v; want the library %s", v, path, err, lib)
	}
	// The library CI fetches is onnxruntime-node 1.30.0's.
	if os.Getenv(EnvLib) == "" && v != "1.30.0" {
		t.Errorf("onnxruntime version %q at %s, want 1.30.0", v, path)
	}
}

func TestLibraryPath(t *testing.T) {
	want := Require(t)
	t.Setenv(EnvLib, filepath.Join(t.TempDir(), "libonnxruntime.so.1"))
	if _, err := LibraryPath(); err == nil || !strings.Contains(err.Error(), EnvLib) {
		t.Errorf("missing %s file: error %v, want one naming the variable", EnvLib, err)
	}
	t.Setenv(EnvLib, want)
	if got, err := LibraryPath(); err != nil || got != want {
		t.Errorf("LibraryPath with %s=%s = %q, %v", EnvLib, want, got, err)
	}
}

// TestProfilePrefix checks that a session with ProfilePrefix writes, when closed, a
// JSON trace under that prefix holding the kernel time of the model's node, and that
// one without writes none.
func TestProfilePrefix(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	for _, profile := range []bool{false, true} {
		opts := Options{IntraOpThreads: 1}
		if profile {
			opts.ProfilePrefix = filepath.Join(dir, "trace")
		}
		s, err := NewSession(gatherModel(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Run([]Tensor{
			{Name: "T", Shape: []int64{4, 2}, Data: []float32{0, 1, 2, 3, 4, 5, 6, 7}},
			{Name: "I", Shape: []int64{3}, Int64: []int64{1, 0, 3}},
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(dir, "trace*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !profile {
			if len(files) != 0 {
				t.Fatalf("no profiler asked for, but %v written", files)
			}
			continue
		}
		if len(files) != 1 {
			t.Fatalf("profiler: %d trace files %v, want 1", len(files), files)
		}
		raw, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		var events []struct {
			Cat, Name string
			Args      map[string]any
		}
		if err := json.Unmarshal(raw, &events); err != nil {
			t.Fatalf("trace %s: %v", files[0], err)
		}
		found := false
		for _, e := range events {
			if e.Cat == "Node" && strings.HasSuffix(e.Name, "_kernel_time") && e.Args["op_name"] == "Gather" {
				found = true
			}
		}
		if !found {
			t.Errorf("trace %s has no Gather kernel time among its %d events", files[0], len(events))
		}
	}
}

// TestProfile checks Profile: at least one run, one trace in the folder given, and the
// model's Gather among its node events.
func TestProfile(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	trace, runs, err := Profile(gatherModel(t), Options{IntraOpThreads: 1}, []Tensor{
		{Name: "T", Shape: []int64{4, 2}, Data: []float32{0, 1, 2, 3, 4, 5, 6, 7}},
		{Name: "I", Shape: []int64{3}, Int64: []int64{1, 0, 3}},
	}, 0.05, dir)
	if err != nil {
		t.Fatal(err)
	}
	if runs < 1 || filepath.Dir(trace) != dir {
		t.Fatalf("%d runs, trace %s, want ≥ 1 run and a trace in %s", runs, trace, dir)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"op_name" : "Gather"`) && !strings.Contains(string(raw), `"op_name":"Gather"`) {
		t.Errorf("trace %s names no Gather node", trace)
	}
}
