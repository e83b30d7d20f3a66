//go:build cgo

package engine

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// logicOrtCase is a graph over float or int64 inputs a, b and c; bool operands are made
// inside it with Cast (onnxruntime's Go binding passes float32 and int64 only), and
// bool results are cast to int64 before they leave it.
type logicOrtCase struct {
	name   string
	nodes  []*onnxpb.NodeProto
	shapes [][]int64 // of a, b, c
	ints   bool      // int64 inputs instead of float
	outs   []string
}

// toBool and fromBool wrap the ops under test.
func toBool(in, out string) *onnxpb.NodeProto {
	return gNode("Cast", []string{in}, []string{out}, attrI("to", int64(onnxpb.TensorProto_BOOL)))
}

func fromBool(in, out string) *onnxpb.NodeProto {
	return gNode("Cast", []string{in}, []string{out}, attrI("to", int64(onnxpb.TensorProto_INT64)))
}

// logicOrtCases covers what the conformance data lacks: comparisons of int64 and of float
// with NaN, infinities and ties, every binary op broadcast both ways, Not on a computed
// bool, and Where on float and int64 broadcast across all three operands.
func logicOrtCases() []logicOrtCase {
	var cases []logicOrtCase
	bc := [][]int64{{2, 3, 4}, {3, 1}}
	for _, l := range logicOps {
		op := gNode(l.name, []string{"a", "b"}, []string{"r"})
		if l.op >= logicAnd {
			cases = append(cases, logicOrtCase{name: l.name + "/bool-broadcast", ints: true, shapes: [][]int64{{3, 1}, {2, 1, 4}},
				nodes: []*onnxpb.NodeProto{toBool("a", "ab"), toBool("b", "bb"), gNode(l.name, []string{"ab", "bb"}, []string{"rb"}), fromBool("rb", "r")},
				outs:  []string{"r"}})
			continue
		}
		cases = append(cases,
			logicOrtCase{name: l.name + "/float-broadcast", shapes: bc, nodes: []*onnxpb.NodeProto{op, fromBool("r", "ri")}, outs: []string{"ri"}},
			logicOrtCase{name: l.name + "/int64-broadcast", ints: true, shapes: [][]int64{{4}, {2, 3, 1}},
				nodes: []*onnxpb.NodeProto{op, fromBool("r", "ri")}, outs: []string{"ri"}},
			logicOrtCase{name: l.name + "/float-scalar", shapes: [][]int64{{}, {2, 5}}, nodes: []*onnxpb.NodeProto{op, fromBool("r", "ri")}, outs: []string{"ri"}})
	}
	cases = append(cases,
		logicOrtCase{name: "Not/computed", ints: true, shapes: [][]int64{{2, 3}, {3}},
			nodes: []*onnxpb.NodeProto{gNode("Less", []string{"a", "b"}, []string{"l"}), gNode("Not", []string{"l"}, []string{"n"}), fromBool("n", "r")},
			outs:  []string{"r"}},
		logicOrtCase{name: "Where/float-broadcast-all", shapes: [][]int64{{2, 1, 4}, {3, 1}, {1, 3, 4}},
			nodes: []*onnxpb.NodeProto{toBool("a", "cb"), gNode("Where", []string{"cb", "b", "c"}, []string{"r"})}, outs: []string{"r"}},
		logicOrtCase{name: "Where/int64-broadcast-all", ints: true, shapes: [][]int64{{3, 1}, {4}, {2, 1, 1}},
			nodes: []*onnxpb.NodeProto{toBool("a", "cb"), gNode("Where", []string{"cb", "b", "c"}, []string{"r"})}, outs: []string{"r"}},
		logicOrtCase{name: "Where/attention-mask", shapes: [][]int64{{2, 1, 1, 5}, {2, 3, 5, 5}, {}},
			nodes: []*onnxpb.NodeProto{toBool("a", "cb"), gNode("Where", []string{"cb", "b", "c"}, []string{"r"})}, outs: []string{"r"}},
		logicOrtCase{name: "Where/scalar-condition", shapes: [][]int64{{}, {2, 3}, {3}},
			nodes: []*onnxpb.NodeProto{toBool("a", "cb"), gNode("Where", []string{"cb", "b", "c"}, []string{"r"})}, outs: []string{"r"}},
	)
	return cases
}

// logicValues draws n values with many ties, zeros, and for floats NaN and ±Inf, so
// that every branch of every comparison is taken.
func logicValues(r *rand.Rand, n int, ints bool) ([]float32, []int64) {
	if ints {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(r.IntN(5)) - 2
		}
		return nil, v
	}
	special := []float32{0, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1}
	v := make([]float32, n)
	for i := range v {
		if r.IntN(3) == 0 {
			v[i] = special[r.IntN(len(special))]
		} else {
			v[i] = float32(r.IntN(7)-3) / 2
		}
	}
	return v, nil
}

// TestLogicAgainstOnnxruntime runs every logicOrtCase in the engine and in onnxruntime 1.30;
// results must be identical (Where copies values, the rest are bools).
func TestLogicAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(14, 3))
	for _, c := range logicOrtCases() {
		t.Run(c.name, func(t *testing.T) {
			dt := onnxpb.TensorProto_FLOAT
			if c.ints {
				dt = onnxpb.TensorProto_INT64
			}
			var inputs []*onnxpb.ValueInfoProto
			var ref []ortref.Tensor
			var ours []*Tensor
			for i, s := range c.shapes {
				name := string(rune('a' + i))
				inputs = append(inputs, gInput(name, dt, s...))
				f, n := logicValues(r, numel64(s), c.ints)
				ref = append(ref, ortref.Tensor{Name: name, Shape: s, Data: f, Int64: n})
				shape := make([]int, len(s))
				for j, d := range s {
					shape[j] = int(d)
				}
				if c.ints {
					ours = append(ours, NewInt(shape, slices.Clone(n)))
				} else {
					ours = append(ours, NewFloat(shape, slices.Clone(f)))
				}
			}
			// Only the inputs the graph reads.
			used := map[string]bool{}
			for _, n := range c.nodes {
				for _, in := range n.GetInput() {
					used[in] = true
				}
			}
			for i := len(inputs) - 1; i >= 0; i-- {
				if !used[inputs[i].GetName()] {
					inputs, ref, ours = slices.Delete(inputs, i, i+1), slices.Delete(ref, i, i+1), slices.Delete(ours, i, i+1)
				}
			}
			m := gModel(16, c.nodes, inputs, c.outs)
			recordPassed(t, opsCovered.ort, m.Proto)
			compareWithOrt(t, m, ref, ours, 0)
		})
	}
}

// compareWithOrt runs m in onnxruntime and in the engine on the same inputs and compares
// every output within tol (absolute plus relative).
func compareWithOrt(t *testing.T, m *onnxio.Model, ref []ortref.Tensor, ours []*Tensor, tol float64) []*Tensor {
	t.Helper()
	return compareWithOrtTol(t, m, ref, ours, func([]float32) (float64, float64) { return tol, tol })
}

// compareWithOrtTol is compareWithOrt with each output's absolute and relative tolerances
// given by tols from onnxruntime's result.
func compareWithOrtTol(t *testing.T, m *onnxio.Model, ref []ortref.Tensor, ours []*Tensor, tols func(want []float32) (atol, rtol float64)) []*Tensor {
	t.Helper()
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ortref.Run(b, ref)
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	got, err := mustBuild(t, m).Forward(nil, ours...)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		shape := make([]int, len(w.Shape))
		for j, d := range w.Shape {
			shape[j] = int(d)
		}
		wt := NewFloat(shape, w.Data)
		if w.Int64 != nil {
			wt = NewInt(shape, w.Int64)
		}
		atol, rtol := tols(w.Data)
		if err := closeTensors(got[i], wt, atol, rtol); err != nil {
			t.Errorf("output %s: %v", w.Name, err)
		}
	}
	return got
}

// TestMaskedAttentionExport checks the PyTorch export of a padding-masked attention block
// (testdata/masked/make.py: masked_fill, torch.where, ==, !=, <, >=, & and a bool-to-float
// Cast) against onnxruntime, and the gradient of a loss through it with respect to the
// query projection's weight against central differences.
func TestMaskedAttentionExport(t *testing.T) {
	ortref.Require(t)
	path := filepath.Join("testdata", "masked", "masked-attention.onnx")
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	recordPassed(t, opsCovered.ort, m.Proto)
	r := rand.New(rand.NewPCG(14, 4))
	const n, tt, d = 3, 6, 8
	x := gFloats(r, n*tt*d)
	// Padded rows of different lengths, plus tokens the model's keep rule drops (>= 5).
	mask := []int64{1, 1, 1, 1, 0, 0, 1, 2, 7, 1, 1, 0, 3, 0, 1, 1, 1, 9}
	ref := []ortref.Tensor{{Name: "x", Shape: []int64{n, tt, d}, Data: x}, {Name: "mask", Shape: []int64{n, tt}, Int64: mask}}
	ours := []*Tensor{NewFloat([]int{n, tt, d}, slices.Clone(x)), NewInt([]int{n, tt}, slices.Clone(mask))}
	compareWithOrt(t, m, ref, ours, 1e-5)

	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The query projection: the first MatMul's weight, an 8×8 initializer.
	var wq string
	for _, nd := range m.Proto.GetGraph().GetNode() {
		if nd.GetOpType() == "MatMul" && g.Param(nd.GetInput()[1]) != nil {
			wq = nd.GetInput()[1]
			break
		}
	}
	if wq == "" {
		t.Fatal("no MatMul weight found")
	}
	if err := g.SetTrainable(wq); err != nil {
		t.Fatal(err)
	}
	weights := NewFloat([]int{n, 3}, gFloats(r, n*3))
	loss := func() float64 {
		out, err := g.Forward(&Context{Training: true}, ours...)
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for i, v := range out[0].F {
			l += float64(weights.F[i]) * float64(v)
		}
		return l
	}
	loss()
	if err := g.Backward(&Context{Training: true}, weights); err != nil {
		t.Fatal(err)
	}
	p := g.Param(wq)
	analytic := slices.Clone(p.Grad.F)
	fdCheck(t, "masked attention: d/d"+wq, p.Value.F, func(j int) float64 { return float64(analytic[j]) }, loss,
		fdSpec{step: fixedStep(1e-2), atol: 1e-3, rtol: 1e-2}, "Where")
}
