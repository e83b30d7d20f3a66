package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"

	"github.com/qtool/qtool/internal/testenv"
)

// runQtool runs qtool in-process and returns stdout, the exit code, and the error main
// would print.
func runQtool(t *testing.T, args ...string) (stdout string, code int, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err = app.Run(append([]string{"qtool"}, args...))
	return out.String(), exitCode(err), err
}

func attrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func dimsInfo(name string, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: shape},
	}}}
}

func zeros(n int) []float32 { return make([]float32, n) }

// writeCNN writes x[batch,1,4,4] → Conv(2 filters 3×3, bias) → BatchNormalization →
// Relu → Flatten → Gemm(W as a Constant node, 10 × 8, bias) → y[batch,10], with a second
// opset domain, and returns the path. Its parameter sizes are known by construction:
// conv.w 18 elements, conv.b 2, four BN vectors of 2, fc.w 80, fc.b 10.
func writeCNN(t *testing.T) string {
	t.Helper()
	n := func(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: in, Output: out, Attribute: attrs}
	}
	fcw := onnxio.FloatTensor("", []int64{10, 8}, zeros(80))
	g := &onnxpb.GraphProto{
		Name: proto.String("cnn"),
		Node: []*onnxpb.NodeProto{
			n("Conv", "conv", []string{"x", "conv.w", "conv.b"}, []string{"c"}),
			n("BatchNormalization", "bn", []string{"c", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, []string{"b"}),
			n("Relu", "relu", []string{"b"}, []string{"r"}),
			n("Flatten", "flat", []string{"r"}, []string{"f"}, attrInt("axis", 1)),
			n("Constant", "fc.w/Constant", nil, []string{"fc.w"}, &onnxpb.AttributeProto{
				Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: fcw}),
			n("Gemm", "fc", []string{"f", "fc.w", "fc.b"}, []string{"y"}, attrInt("transB", 1)),
		},
		Initializer: []*onnxpb.TensorProto{
			onnxio.FloatTensor("conv.w", []int64{2, 1, 3, 3}, zeros(18)),
			onnxio.FloatTensor("conv.b", []int64{2}, zeros(2)),
			onnxio.FloatTensor("bn.scale", []int64{2}, []float32{1, 1}),
			onnxio.FloatTensor("bn.bias", []int64{2}, zeros(2)),
			onnxio.FloatTensor("bn.mean", []int64{2}, zeros(2)),
			onnxio.FloatTensor("bn.var", []int64{2}, []float32{1, 1}),
			onnxio.FloatTensor("fc.b", []int64{10}, zeros(10)),
		},
		Input:  []*onnxpb.ValueInfoProto{dimsInfo("x", "batch", 1, 4, 4)},
		Output: []*onnxpb.ValueInfoProto{dimsInfo("y", "batch", 10)},
	}
	mp := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(8),
		ProducerName:    proto.String("inspect-test"),
		ProducerVersion: proto.String("2.5"),
		OpsetImport: []*onnxpb.OperatorSetIdProto{
			{Domain: proto.String(""), Version: proto.Int64(13)},
			{Domain: proto.String("com.microsoft"), Version: proto.Int64(1)},
		},
		Graph: g,
	}
	p := filepath.Join(t.TempDir(), "cnn.onnx")
	if err := (&onnxio.Model{Proto: mp, Name: p}).Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInspectJSON(t *testing.T) {
	p := writeCNN(t)
	out, code, err := runQtool(t, "inspect", "--json", p)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	// Field names are checked on the raw JSON, so that a renamed struct tag fails here.
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"file", "ir_version", "opsets", "producer", "inputs", "outputs", "ops", "parameters", "totals"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON has no %q field", k)
		}
	}
	param := raw["parameters"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "type", "shape", "elements", "bytes", "storage", "external", "target", "role", "reason"} {
		if _, ok := param[k]; !ok {
			t.Errorf("parameter JSON has no %q field", k)
		}
	}
	totals := raw["totals"].(map[string]any)
	for _, k := range []string{"parameters", "elements", "bytes", "target_parameters", "target_elements", "target_bytes"} {
		if _, ok := totals[k]; !ok {
			t.Errorf("totals JSON has no %q field", k)
		}
	}
	if s := raw["inputs"].([]any)[0].(map[string]any)["shape"].([]any); len(s) != 4 || s[0] != "batch" || s[1] != float64(1) {
		t.Errorf("input shape %v, want [batch 1 4 4]", s)
	}

	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.File != p || rep.IRVersion != 8 || rep.Producer.Name != "inspect-test" || rep.Producer.Version != "2.5" {
		t.Errorf("header: %+v", rep)
	}
	if len(rep.Opsets) != 2 || rep.Opsets[0] != (inspectOpset{"ai.onnx", 13}) || rep.Opsets[1] != (inspectOpset{"com.microsoft", 1}) {
		t.Errorf("opsets %v", rep.Opsets)
	}
	ops := map[string]int{}
	for _, o := range rep.Ops {
		ops[o.Op] = o.Count
	}
	if len(ops) != 6 || ops["Conv"] != 1 || ops["Constant"] != 1 || ops["Gemm"] != 1 {
		t.Errorf("ops %v", rep.Ops)
	}
	type want struct {
		role     string
		target   bool
		elements int64
		storage  string
	}
	wants := map[string]want{
		"conv.w": {"weight", true, 18, "initializer"}, "conv.b": {"bias", false, 2, "initializer"},
		"bn.scale": {"normalization", false, 2, "initializer"}, "bn.bias": {"normalization", false, 2, "initializer"},
		"bn.mean": {"normalization", false, 2, "initializer"}, "bn.var": {"normalization", false, 2, "initializer"},
		"fc.b": {"bias", false, 10, "initializer"}, "fc.w": {"weight", true, 80, "constant"},
	}
	if len(rep.Params) != len(wants) {
		t.Fatalf("%d parameters, want %d", len(rep.Params), len(wants))
	}
	for _, ip := range rep.Params {
		w, ok := wants[ip.Name]
		if !ok {
			t.Errorf("unexpected parameter %s", ip.Name)
			continue
		}
		if ip.Role != w.role || ip.Target != w.target || ip.Elements != w.elements || ip.Bytes != 4*w.elements || ip.Storage != w.storage || ip.Type != "FLOAT" {
			t.Errorf("%s: %+v, want %+v", ip.Name, ip, w)
		}
	}
	if got := rep.Params[0].Reason; got != `input 1 of Conv "conv"` {
		t.Errorf("conv.w reason %q", got)
	}
	wantTotals := inspectTotals{Params: 8, Elements: 118, Bytes: 472, TargetParams: 2, TargetElements: 98, TargetBytes: 392}
	if rep.Totals != wantTotals {
		t.Errorf("totals %+v, want %+v", rep.Totals, wantTotals)
	}
}

// TestInspectText checks the key lines of the human report without a golden file.
func TestInspectText(t *testing.T) {
	p := writeCNN(t)
	out, code, err := runQtool(t, "inspect", p)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, re := range []string{
		`(?m)^model\s+` + regexp.QuoteMeta(p) + `$`,
		`(?m)^IR version\s+8$`,
		`(?m)^opsets\s+ai\.onnx 13, com\.microsoft 1$`,
		`(?m)^producer\s+inspect-test 2\.5$`,
		`(?m)^  x\s+FLOAT\s+\[batch 1 4 4\]$`,
		`(?m)^  y\s+FLOAT\s+\[batch 10\]$`,
		`(?m)^operators \(6 nodes, 6 types\)$`,
		`(?m)^  Conv\s+1$`,
		`(?m)^  conv\.w\s+FLOAT\s+\[2 1 3 3\]\s+18\s+72 B\s+TARGET\s+weight: input 1 of Conv "conv", channels on axis 0$`,
		`(?m)^  fc\.w \(Constant\)\s+FLOAT\s+\[10 8\]\s+80\s+320 B\s+TARGET\s+weight: input 1 of Gemm "fc", channels on axis 0$`,
		`(?m)^  conv\.b\s+FLOAT\s+\[2\]\s+2\s+8 B\s+keep\s+bias: input 2 of Conv "conv"$`,
		`(?m)^  bn\.var\s+FLOAT\s+\[2\]\s+2\s+8 B\s+keep\s+normalization: input 4 of BatchNormalization "bn"$`,
		`(?m)^  parameters\s+8\s+118 elements\s+472 B$`,
		`(?m)^  binarization targets\s+2\s+98 elements\s+392 B \(83\.1% of parameter bytes\)$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks a line matching %s:\n%s", re, out)
		}
	}
	if n := strings.Count(out, "TARGET"); n != 2 {
		t.Errorf("%d TARGET marks, want 2", n)
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.onnx")
	good, err := os.ReadFile(writeCNN(t))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.onnx")
	if err := os.WriteFile(cut, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.onnx")
	if err := os.WriteFile(text, []byte("this is not a model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect", missing}, exitInput, missing},
		{[]string{"inspect", cut}, exitInput, "truncated"},
		{[]string{"inspect", "--json", text}, exitInput, "not an ONNX model"},
		{[]string{"inspect"}, exitUsage, "inspect takes one model file, got 0"},
		{[]string{"inspect", cut, text}, exitUsage, "got 2 arguments"},
	} {
		out, code, err := runQtool(t, c.args...)
		if code != c.code || err == nil {
			t.Errorf("%v: exit %d (%v), want %d", c.args, code, err, c.code)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%v: error %q, want one line containing %q", c.args, msg, c.want)
		}
		if c.code == exitInput && !strings.Contains(msg, c.args[len(c.args)-1]) {
			t.Errorf("%v: error %q does not name the file", c.args, msg)
		}
		if out != "" {
			t.Errorf("%v: printed %q on stdout before failing", c.args, out)
		}
	}
}

// TestInspectTestModels runs inspect on every committed model and checks the report
// against the model itself: totals are the sums of the listed parameters, and every
// targeted parameter is read as a weight by Conv, ConvTranspose, Gemm or MatMul.
func TestInspectTestModels(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testmodels", "*.onnx"))
	if len(paths) == 0 {
		testenv.Missing(t, "testmodels/ holds no .onnx file; they are made by testmodels/make.py")
	}
	for _, p := range paths {
		out, code, err := runQtool(t, "inspect", "--json", p)
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d: %v", p, code, err)
		}
		var rep inspectReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		m, err := onnxio.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		var sum inspectTotals
		for _, ip := range rep.Params {
			sum.Params++
			sum.Elements += ip.Elements
			sum.Bytes += ip.Bytes
			if !ip.Target {
				continue
			}
			sum.TargetParams++
			sum.TargetElements += ip.Elements
			sum.TargetBytes += ip.Bytes
			weight := false
			for _, u := range m.Consumers(ip.Name) {
				switch op := u.Node.GetOpType(); {
				case (op == "Conv" || op == "ConvTranspose") && u.Input == 1, op == "Gemm" && u.Input <= 1, op == "MatMul":
					weight = true
				}
			}
			if !weight {
				t.Errorf("%s: %s is targeted but no linear operator reads it as a weight", p, ip.Name)
			}
		}
		if sum != rep.Totals {
			t.Errorf("%s: totals %+v, sums of the listed parameters %+v", p, rep.Totals, sum)
		}
		if len(rep.Params) != len(m.Params()) || rep.Totals.TargetParams == 0 {
			t.Errorf("%s: %d parameters listed (model has %d), %d targeted", p, len(rep.Params), len(m.Params()), rep.Totals.TargetParams)
		}
		if _, code, err := runQtool(t, "inspect", p); err != nil || code != 0 {
			t.Errorf("%s: text report: exit %d: %v", p, code, err)
		}
		t.Logf("%s: %d parameters, %d targeted (%d of %d bytes)", filepath.Base(p), rep.Totals.Params, rep.Totals.TargetParams, rep.Totals.TargetBytes, rep.Totals.Bytes)
	}
}

// TestInspectConformance inspects every ONNX conformance model qtool loads: the report
// must build, encode as JSON and print; its totals must be the sums of its parameters,
// and each parameter's element count the number of values it decodes to.
func TestInspectConformance(t *testing.T) {
	const dir = "/usr/share/libonnx-testdata/data"
	testenv.RequireFile(t, dir, "apt-get install libonnx-testdata")
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*", "model.onnx"))
	n, params := 0, 0
	for _, p := range paths {
		m, err := onnxio.Load(p)
		if err != nil {
			continue // out of qtool's range; onnxio's tests check the refusal
		}
		rep := inspectModel(m)
		if _, err := json.Marshal(rep); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var bytes int64
		for _, ip := range rep.Params {
			bytes += ip.Bytes
			pm, _ := m.Param(ip.Name)
			if v, err := m.Tensor(pm.Tensor); err == nil && int64(len(v.Float)+len(v.Int)) != ip.Elements {
				t.Errorf("%s: %s reports %d elements, holds %d", p, ip.Name, ip.Elements, len(v.Float)+len(v.Int))
			}
		}
		if bytes != rep.Totals.Bytes || len(rep.Params) != rep.Totals.Params {
			t.Errorf("%s: totals %+v do not add up", p, rep.Totals)
		}
		if err := rep.print(io.Discard); err != nil {
			t.Fatal(err)
		}
		n++
		params += len(rep.Params)
	}
	t.Logf("inspected %d conformance models, %d parameters", n, params)
	if n == 0 {
		t.Fatal("no conformance model inspected")
	}
}

// TestInspectExternalAndConstants inspects onnxio's python-made files: tensors in an
// external file are reported as such (and not read), Constant-node weights as constants.
func TestInspectExternalAndConstants(t *testing.T) {
	for _, c := range []struct {
		file              string
		external          bool
		storage           string
		opset             int64
		targets, elements int64
	}{
		{filepath.Join("..", "..", "onnxio", "testdata", "external", "model.onnx"), true, "initializer", 13, 2, 36},
		{filepath.Join("..", "..", "onnxio", "testdata", "constants.onnx"), false, "constant", 9, 2, 36},
	} {
		out, code, err := runQtool(t, "inspect", "--json", c.file)
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d: %v", c.file, code, err)
		}
		var rep inspectReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, ip := range rep.Params {
			if ip.External != c.external || ip.Storage != c.storage {
				t.Errorf("%s: %s external=%v storage=%s", c.file, ip.Name, ip.External, ip.Storage)
			}
		}
		if rep.Opsets[0].Version != c.opset || int64(rep.Totals.TargetParams) != c.targets || rep.Totals.TargetElements != c.elements {
			t.Errorf("%s: opset %d, totals %+v", c.file, rep.Opsets[0].Version, rep.Totals)
		}
		if s := rep.Inputs[0].shapeString(); s != "[batch 6]" {
			t.Errorf("%s: input shape %s", c.file, s)
		}
	}
}
