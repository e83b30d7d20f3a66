package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

const conformanceDir = "/usr/share/libonnx-testdata/data/node"

// requireAsset skips when an optional external asset is missing, except under CI, where
// every asset must be installed.
func requireAsset(t testing.TB, path, install string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; CI must install it: %s", path, install)
	}
	t.Skipf("%s is missing; install it with: %s", path, install)
}

// skipTypes are the element types qtool does not compute in. The engine carries every
// float type as float32, so a test built around another float type checks precision
// qtool does not offer; strings and complex numbers have no engine representation.
var skipTypes = map[onnxpb.TensorProto_DataType]string{
	onnxpb.TensorProto_DOUBLE:         "double data: qtool computes in float32",
	onnxpb.TensorProto_FLOAT16:        "float16 data: qtool computes in float32",
	onnxpb.TensorProto_BFLOAT16:       "bfloat16 data: qtool computes in float32",
	onnxpb.TensorProto_STRING:         "string data: qtool computes in float32 and int64",
	onnxpb.TensorProto_COMPLEX64:      "complex data: qtool computes in float32 and int64",
	onnxpb.TensorProto_COMPLEX128:     "complex data: qtool computes in float32 and int64",
	onnxpb.TensorProto_FLOAT8E4M3FN:   "float8 data: qtool computes in float32",
	onnxpb.TensorProto_FLOAT8E4M3FNUZ: "float8 data: qtool computes in float32",
	onnxpb.TensorProto_FLOAT8E5M2:     "float8 data: qtool computes in float32",
	onnxpb.TensorProto_FLOAT8E5M2FNUZ: "float8 data: qtool computes in float32",
	onnxpb.TensorProto_UINT64:         "uint64 data: qtool carries integers as int64",
}

// skipTests are individual tests of supported ops that exercise a feature qtool states it
// does not support, matched against the test's folder name.
var skipTests = []struct {
	pattern *regexp.Regexp
	reason  string
}{
	{regexp.MustCompile(`^test_training_dropout(_default)?(_mask)?$`),
		"training-mode dropout with ratio > 0: the reference masks come from numpy's generator, qtool draws from its own seeded stream"},
}

// conformanceCase is one test folder of the suite.
type conformanceCase struct {
	name string
	dir  string
	op   string // the op of a single-node model; "(multi-node)" otherwise
}

// TestConformance runs every ONNX node test whose ops the engine supports through Build
// and Forward and compares each output within 1e-4 absolute plus 1e-4 relative.
func TestConformance(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	dirs, err := filepath.Glob(filepath.Join(conformanceDir, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	supported := builders()
	byOp := map[string][]conformanceCase{}
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		mp := &onnxpb.ModelProto{}
		if err := proto.Unmarshal(raw, mp); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		nodes := mp.GetGraph().GetNode()
		ok := len(nodes) > 0
		for _, n := range nodes {
			d := n.GetDomain()
			if supported[n.GetOpType()] == nil || (d != "" && d != "ai.onnx") {
				ok = false
			}
		}
		if !ok {
			continue
		}
		op := "(multi-node)"
		if len(nodes) == 1 {
			op = nodes[0].GetOpType()
		}
		byOp[op] = append(byOp[op], conformanceCase{name: filepath.Base(dir), dir: dir, op: op})
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)

	var passed, failed, skipped int
	var failedOps []string
	for _, op := range ops {
		t.Run(op, func(t *testing.T) {
			var p, f, s int
			for _, c := range byOp[op] {
				reason, err := runConformance(c)
				switch {
				case reason != "":
					s++
					t.Logf("skip %s: %s", c.name, reason)
				case err != nil:
					f++
					t.Errorf("%s: %v", c.name, err)
				default:
					p++
				}
			}
			t.Logf("%s: %d passed, %d failed, %d skipped", op, p, f, s)
			passed, failed, skipped = passed+p, failed+f, skipped+s
			if f > 0 {
				failedOps = append(failedOps, fmt.Sprintf("%s(%d)", op, f))
			}
		})
	}
	t.Logf("conformance: %d passed, %d failed, %d skipped of %d", passed, failed, skipped, passed+failed+skipped)
	if failed > 0 {
		t.Errorf("conformance: %d failed in %s", failed, strings.Join(failedOps, " "))
	}
}

// runConformance runs every data set of one test. It returns a skip reason, or the first
// mismatch.
func runConformance(c conformanceCase) (skip string, err error) {
	for _, s := range skipTests {
		if s.pattern.MatchString(c.name) {
			return s.reason, nil
		}
	}
	m, err := onnxio.Load(filepath.Join(c.dir, "model.onnx"))
	if err != nil {
		// onnxio refuses IR versions and opsets outside the range qtool reads.
		if strings.Contains(err.Error(), "outside the supported range") {
			return "model outside the IR/opset range qtool reads: " + err.Error(), nil
		}
		return "", err
	}
	gp := m.Proto.GetGraph()
	for _, vi := range slices.Concat(gp.GetInput(), gp.GetOutput()) {
		if vi.GetType() != nil && vi.GetType().GetTensorType() == nil {
			return "sequence, map or optional values: qtool computes on tensors only", nil
		}
		dt := onnxpb.TensorProto_DataType(vi.GetType().GetTensorType().GetElemType())
		if r, ok := skipTypes[dt]; ok {
			return r, nil
		}
	}
	g, err := Build(m, Options{})
	if err != nil {
		return "", err
	}
	sets, err := filepath.Glob(filepath.Join(c.dir, "test_data_set_*"))
	if err != nil || len(sets) == 0 {
		return "", fmt.Errorf("no test data sets (%v)", err)
	}
	for _, set := range sets {
		var inputs []*Tensor
		for i := range gp.GetInput() {
			// Inputs that are initializers are not fed; the rest are, in order. Optional
			// inputs the test leaves out have no file.
			path := filepath.Join(set, fmt.Sprintf("input_%d.pb", i))
			if _, err := os.Stat(path); err != nil {
				break
			}
			ot, err := onnxio.ReadTensorFile(path)
			if err != nil {
				return "", err
			}
			inputs = append(inputs, fromONNX(ot))
		}
		if len(inputs) > len(g.Inputs()) {
			inputs = inputs[:len(g.Inputs())]
		}
		outs, err := g.Forward(nil, inputs...)
		if err != nil {
			return "", fmt.Errorf("%s: %w", filepath.Base(set), err)
		}
		for i := range outs {
			ot, err := onnxio.ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				return "", err
			}
			if err := closeTensors(outs[i], fromONNX(ot), 1e-4, 1e-4); err != nil {
				return "", fmt.Errorf("%s: output %d (%s): %w", filepath.Base(set), i, g.Outputs()[i].Name, err)
			}
		}
	}
	return "", nil
}

// closeTensors checks got against want element by element within atol + rtol*|want|.
// NaN matches NaN, and infinities must match exactly.
func closeTensors(got, want *Tensor, atol, rtol float64) error {
	if !slices.Equal(got.Shape, want.Shape) {
		return fmt.Errorf("shape %v, want %v", got.Shape, want.Shape)
	}
	if got.DType != want.DType {
		return fmt.Errorf("type %s, want %s", got.DType, want.DType)
	}
	if got.DType == Int64 {
		for i, w := range want.I {
			if got.I[i] != w {
				return fmt.Errorf("element %d is %d, want %d", i, got.I[i], w)
			}
		}
		return nil
	}
	worst, at := 0.0, -1
	for i, w := range want.F {
		a, b := float64(got.F[i]), float64(w)
		switch {
		case math.IsNaN(b):
			if !math.IsNaN(a) {
				return fmt.Errorf("element %d is %g, want NaN", i, a)
			}
			continue
		case math.IsInf(b, 0):
			if a != b {
				return fmt.Errorf("element %d is %g, want %g", i, a, b)
			}
			continue
		}
		if d := math.Abs(a-b) - (atol + rtol*math.Abs(b)); d > worst || math.IsNaN(d) {
			worst, at = d, i
			if math.IsNaN(d) {
				break
			}
		}
	}
	if at >= 0 {
		return fmt.Errorf("element %d is %g, want %g (|diff| %.3g exceeds %g + %g·|want|)", at, got.F[at], want.F[at], math.Abs(float64(got.F[at]-want.F[at])), atol, rtol)
	}
	return nil
}
