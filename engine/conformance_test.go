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

	"github.com/qtool/qtool/internal/testenv"
)

const conformanceDir = "/usr/share/libonnx-testdata/data/node"

// requireAsset skips when an optional external asset is missing, except under CI, where
// every asset must be installed.
func requireAsset(t testing.TB, path, install string) {
	t.Helper()
	testenv.RequireFile(t, path, install)
}

// skips lists every reason a conformance test of a supported op may be skipped: a data
// type or a feature that qtool states it does not support. A rule matches the test's
// folder name (name), its model (model), or both.
var skips = []struct {
	reason string
	name   *regexp.Regexp                // nil matches every name
	model  func(*onnxpb.ModelProto) bool // nil matches every model
}{
	{reason: "model outside the IR versions and opsets qtool reads (onnxio refuses it)", model: func(mp *onnxpb.ModelProto) bool {
		m := onnxio.Model{Proto: mp}
		op := m.Opset("")
		ir := mp.GetIrVersion()
		return op < onnxio.MinOpset || op > onnxio.MaxOpset || ir < onnxio.MinIRVersion || ir > onnxio.MaxIRVersion
	}},
	{reason: "double data: qtool computes in float32", model: usesType(onnxpb.TensorProto_DOUBLE)},
	{reason: "float16 data: qtool computes in float32", model: usesType(onnxpb.TensorProto_FLOAT16)},
	{reason: "bfloat16 data: qtool computes in float32", model: usesType(onnxpb.TensorProto_BFLOAT16)},
	{reason: "float8 data: qtool computes in float32", model: usesType(onnxpb.TensorProto_FLOAT8E4M3FN, onnxpb.TensorProto_FLOAT8E4M3FNUZ,
		onnxpb.TensorProto_FLOAT8E5M2, onnxpb.TensorProto_FLOAT8E5M2FNUZ)},
	{reason: "string data: qtool computes in float32 and int64", model: usesType(onnxpb.TensorProto_STRING)},
	{reason: "complex data: qtool computes in float32 and int64", model: usesType(onnxpb.TensorProto_COMPLEX64, onnxpb.TensorProto_COMPLEX128)},
	{reason: "uint64 data: qtool carries integers as int64", model: usesType(onnxpb.TensorProto_UINT64)},
	{reason: "sequence, map or optional values: qtool computes on tensors only", model: func(mp *onnxpb.ModelProto) bool {
		gp := mp.GetGraph()
		return slices.ContainsFunc(slices.Concat(gp.GetInput(), gp.GetOutput()), func(vi *onnxpb.ValueInfoProto) bool {
			return vi.GetType() != nil && vi.GetType().GetTensorType() == nil
		})
	}},
	{reason: "float Range over graph inputs: its length depends on values qtool knows only at run time; TestConformanceInputsAsConstants runs it with the inputs as initializers, as exporters emit it",
		name: regexp.MustCompile(`^test_range_float_type_positive_delta$`)},
	{reason: "Loop whose trip count is computed from float graph inputs and that has a scan output: the output's length depends on values qtool knows only at run time, and qtool plans every shape before running",
		name: regexp.MustCompile(`^test_range_float_type_positive_delta_expanded$`)},
	{reason: "Scan of opset 8, with a batch axis and sequence_lens: qtool runs Scan from opset 9",
		name: regexp.MustCompile(`^test_scan_sum$`)},
	{reason: "float scales as a graph input: Resize's and Upsample's output shape depends on values qtool knows only at run time; TestConformanceInputsAsConstants runs them with the scales as initializers, as exporters emit them",
		name: regexp.MustCompile(`^test_(resize_(up|down)sample_scales_.*|upsample_nearest)$`)},
	{reason: "training-mode dropout with ratio > 0: the reference masks come from numpy's generator, qtool draws from its own seeded stream",
		name: regexp.MustCompile(`^test_training_dropout(_default)?(_mask)?$`)},
}

// usesType returns a model predicate: some graph input or output has one of the types.
func usesType(types ...onnxpb.TensorProto_DataType) func(*onnxpb.ModelProto) bool {
	return func(mp *onnxpb.ModelProto) bool {
		gp := mp.GetGraph()
		for _, vi := range slices.Concat(gp.GetInput(), gp.GetOutput()) {
			if slices.Contains(types, onnxpb.TensorProto_DataType(vi.GetType().GetTensorType().GetElemType())) {
				return true
			}
		}
		return false
	}
}

// conformanceCase is one test folder of the suite.
type conformanceCase struct {
	name  string
	dir   string
	op    string // the op of a single-node model; "(multi-node)" otherwise
	model *onnxpb.ModelProto
	// noUnroll runs every Loop at run time instead of unrolling it when planning.
	noUnroll bool
}

// TestConformance runs every ONNX node test whose ops the engine supports through Build
// and Forward and compares each output within 1e-4 absolute plus 1e-4 relative.
func TestConformance(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	byOp := map[string][]conformanceCase{}
	for _, c := range conformanceCases(t) {
		byOp[c.op] = append(byOp[c.op], c)
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
					if c.op != "(multi-node)" {
						opsCovered.add(t, opsCovered.conf, c.op)
					}
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

// conformanceCases loads every node test whose ops the engine supports.
func conformanceCases(t *testing.T) []conformanceCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(conformanceDir, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	supported := registry()
	var cases []conformanceCase
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
			if _, known := supported[n.GetOpType()]; !known || (d != "" && d != "ai.onnx") {
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
		cases = append(cases, conformanceCase{name: filepath.Base(dir), dir: dir, op: op, model: mp})
	}
	return cases
}

// TestConformanceLoopsAtRunTime runs the node tests that hold a Loop with every Loop run
// at run time, the way qtool runs those whose trip count or condition is known only
// then, instead of unrolled.
func TestConformanceLoopsAtRunTime(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	n := 0
	for _, c := range conformanceCases(t) {
		if !slices.ContainsFunc(c.model.GetGraph().GetNode(), func(n *onnxpb.NodeProto) bool { return n.GetOpType() == "Loop" }) {
			continue
		}
		if c.name == "test_loop11" {
			// Unrolled (TestConformance) it passes; at run time the iteration number is a
			// run-time value, and Slice needs its starts and ends when planning.
			t.Logf("skip %s: the body slices at the iteration number", c.name)
			continue
		}
		c.noUnroll = true
		reason, err := runConformance(c)
		switch {
		case reason != "":
			t.Logf("skip %s: %s", c.name, reason)
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		default:
			n++
			t.Logf("pass %s", c.name)
		}
	}
	if n == 0 {
		t.Error("no Loop test passed")
	}
}

// runConformance runs every data set of one test. It returns a skip reason, or the first
// mismatch.
func runConformance(c conformanceCase) (skip string, err error) {
	for _, s := range skips {
		if (s.name == nil || s.name.MatchString(c.name)) && (s.model == nil || s.model(c.model)) {
			return s.reason, nil
		}
	}
	m, err := onnxio.Load(filepath.Join(c.dir, "model.onnx"))
	if err != nil {
		return "", err
	}
	gp := m.Proto.GetGraph()
	g, err := Build(m, Options{})
	if err != nil {
		return "", err
	}
	g.noUnroll = c.noUnroll
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
