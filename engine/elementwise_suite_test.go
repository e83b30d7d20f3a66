package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"

	"github.com/qtool/qtool/internal/testenv"
)

// onnxNodeData is where Debian's libonnx-testdata puts the ONNX node tests.
const onnxNodeData = "/usr/share/libonnx-testdata/data/node"

// elementwiseSuiteSkips lists node tests of this file's ops that the kernels cannot pass
// by design, with the reason.
var elementwiseSuiteSkips = map[string]string{}

// fromOnnx converts a decoded tensor to the engine's representation.
func fromOnnx(t *onnxio.Tensor) *Tensor {
	shape := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		shape[i] = int(d)
	}
	if onnxio.IsFloat(t.Type) {
		f := t.Float
		if f == nil {
			f = []float32{}
		}
		return NewFloat(shape, f)
	}
	i := t.Int
	if i == nil {
		i = []int64{}
	}
	return NewInt(shape, i)
}

// TestElementwiseNodeSuite runs the ONNX node tests whose graphs use only this file's
// ops (and Constant) straight through the kernels, in node order, without the graph
// executor, so that the kernels are checked against the conformance data on their own.
// The engine's conformance runner checks the same tests through the executor.
func TestElementwiseNodeSuite(t *testing.T) {
	testenv.RequireFile(t, onnxNodeData, "apt-get install libonnx-testdata")
	dirs, err := filepath.Glob(filepath.Join(onnxNodeData, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	ops := builderMap(elementwiseOpDefs())
	var passed, failed, skipped int
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
		if err != nil {
			continue
		}
		m, err := onnxio.Decode(data, dir, dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		ours := true
		for _, n := range m.Proto.GetGraph().GetNode() {
			if _, ok := ops[n.GetOpType()]; !ok && n.GetOpType() != "Constant" {
				ours = false
			}
		}
		if !ours {
			continue
		}
		name := filepath.Base(dir)
		if why, ok := elementwiseSuiteSkips[name]; ok {
			t.Logf("skip %s: %s", name, why)
			skipped++
			continue
		}
		if runSuiteCase(t, m, dir) {
			passed++
		} else {
			failed++
		}
	}
	t.Logf("elementwise node suite: %d passed, %d failed, %d skipped of %d", passed, failed, skipped, passed+failed+skipped)
	if passed == 0 {
		t.Errorf("no node test ran")
	}
}

// runSuiteCase runs every test_data_set of one model and reports whether all matched.
func runSuiteCase(t *testing.T, m *onnxio.Model, dir string) bool {
	t.Helper()
	name := filepath.Base(dir)
	g := m.Proto.GetGraph()
	opset := m.Opset("")
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	ok := true
	for _, set := range sets {
		vals := map[string]*Tensor{}
		for i, vi := range g.GetInput() {
			tt, err := onnxio.ReadTensorFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return false
			}
			vals[vi.GetName()] = fromOnnx(tt)
		}
		for _, np := range g.GetNode() {
			if np.GetOpType() == "Constant" {
				tt, err := onnxio.DecodeTensor(constantAttr(np), dir)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return false
				}
				vals[np.GetOutput()[0]] = fromOnnx(tt)
				continue
			}
			n := &Node{Proto: np, Opset: opset}
			k, err := opBuilder(np.GetOpType())(n)
			if err != nil {
				t.Errorf("%s: build: %v", name, err)
				return false
			}
			in := make([]*Tensor, n.NumInputs())
			for i := range in {
				if n.HasInput(i) {
					in[i] = vals[np.GetInput()[i]]
				}
			}
			outs, err := k.Infer(in)
			if err != nil {
				t.Errorf("%s: infer: %v", name, err)
				return false
			}
			for _, o := range outs {
				if o.DType == Float32 {
					o.F = make([]float32, o.Len())
				} else {
					o.I = make([]int64, o.Len())
				}
			}
			if err := k.Forward(&Context{Workers: 2}, in, outs); err != nil {
				t.Errorf("%s: forward: %v", name, err)
				return false
			}
			for i, o := range outs {
				vals[np.GetOutput()[i]] = o
			}
		}
		for i, vo := range g.GetOutput() {
			want, err := onnxio.ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return false
			}
			if msg := compareTensor(vals[vo.GetName()], fromOnnx(want)); msg != "" {
				t.Errorf("%s %s output %d: %s", name, filepath.Base(set), i, msg)
				ok = false
			}
		}
	}
	return ok
}

func constantAttr(n *onnxpb.NodeProto) *onnxpb.TensorProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == "value" {
			return a.GetT()
		}
	}
	return nil
}

// compareTensor returns "" when got matches want within 1e-4 absolute plus relative, or
// a description of the first mismatch.
func compareTensor(got, want *Tensor) string {
	if got == nil {
		return "missing"
	}
	if !sameShape(got.Shape, want.Shape) {
		return fmt.Sprintf("shape %v, want %v", got.Shape, want.Shape)
	}
	if want.DType == Int64 {
		if got.DType != Int64 {
			return fmt.Sprintf("type %s, want int64", got.DType)
		}
		for i := range want.I {
			if got.I[i] != want.I[i] {
				return fmt.Sprintf("element %d = %d, want %d", i, got.I[i], want.I[i])
			}
		}
		return ""
	}
	if got.DType != Float32 {
		return fmt.Sprintf("type %s, want float32", got.DType)
	}
	for i, w := range want.F {
		if !closeTo(float64(got.F[i]), float64(w), 1e-4, 1e-4) {
			return fmt.Sprintf("element %d = %v, want %v", i, got.F[i], w)
		}
	}
	return ""
}
