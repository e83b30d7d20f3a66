//go:build cgo

package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// ortCompare runs m in qtool and onnxruntime on x and compares the first output.
func ortCompare(t *testing.T, g *Graph, model []byte, x *Tensor, tol float64) *Tensor {
	t.Helper()
	shape := make([]int64, len(x.Shape))
	for i, d := range x.Shape {
		shape[i] = int64(d)
	}
	ref, err := ortref.Run(model, []ortref.Tensor{{Name: "x", Shape: shape, Data: x.F}})
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	got, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeTensors(got[0], NewFloat(slices.Clone(got[0].Shape), ref[0].Data), tol, tol); err != nil {
		t.Errorf("batch %d: %v", x.Shape[0], err)
	}
	return got[0]
}

// loadExported builds a model of testdata for a comparison with onnxruntime, which it
// needs, and returns its bytes for onnxruntime.
func loadExported(t *testing.T, path string) (*Graph, []byte) {
	t.Helper()
	ortref.Require(t)
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	recordPassed(t, opsCovered.ort, m.Proto)
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	return mustBuild(t, m), b
}

// TestControlFlowAgainstOnnxruntime compares the Go-built control-flow models (an If on
// the batch size, a Loop with a trip count from shapes, an If decided per run) with
// onnxruntime 1.30.
func TestControlFlowAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	c := controlGradCases()[2]
	runIf := gModel(13, c.nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3)}, []string{"z"},
		onnxio.FloatTensor("m1", nil, []float32{2}), onnxio.FloatTensor("w", []int64{3}, []float32{1, 2, 3}))
	for name, m := range map[string]*onnxio.Model{"shape-If+Loop": shapeIfModel(), "run-time-If": runIf} {
		t.Run(name, func(t *testing.T) {
			m.Proto.Graph.Output[0].Type = gInputAny("y", onnxpb.TensorProto_FLOAT).Type
			recordPassed(t, opsCovered.ort, m.Proto)
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			g := mustBuild(t, m)
			r := rand.New(rand.NewPCG(3, 4))
			for _, n := range []int{1, 2, 5, 1, 3} {
				ortCompare(t, g, b, NewFloat([]int{n, 3}, gFloats(r, 3*n)), 1e-6)
			}
		})
	}
}

// TestScriptedExportAgainstOnnxruntime runs testdata/control/control.onnx, which
// torch.onnx 1.13 exported from a torch.jit.script model (export.py): an If on the batch
// size, an If on the sign of a tensor's sum choosing between two layers, and a Loop over
// a layer. Outputs match onnxruntime within 1e-5 at batches that take every branch, and
// the gradients of a weight inside each branch and inside the loop body match finite
// differences.
func TestScriptedExportAgainstOnnxruntime(t *testing.T) {
	g, b := loadExported(t, "testdata/control/control.onnx")
	// Find inputs that take each branch of the sign test: the sum of tanh(inp(x)) > 0.
	r := rand.New(rand.NewPCG(8, 1))
	var pos, neg *Tensor
	for _, n := range []int{1, 2, 4, 1, 3, 2, 4, 1, 3, 2, 4, 3, 1, 1, 2, 2} {
		x := NewFloat([]int{n, 6}, gFloats(r, 6*n))
		for i := range x.F {
			x.F[i] = 3 * x.F[i]
		}
		ortCompare(t, g, b, x, 1e-5)
		taken := -1
		for _, st := range g.last.steps {
			if k, ok := st.node.k.(*guardKernel); ok {
				taken = slices.Index(k.flags[:], true)
			}
		}
		if taken == 0 && pos == nil {
			pos = x
		}
		if taken == 1 && neg == nil {
			neg = x
		}
	}
	if pos == nil || neg == nil {
		t.Fatal("the inputs did not take both branches of the run-time If")
	}

	// Gradients of L = Σ w·y with respect to a weight of each branch and of the loop
	// body, at inputs that take the branch.
	if err := g.SetTrainable("pos.weight", "neg.weight", "rep.weight"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		x      *Tensor
		params []string
	}{{pos, []string{"pos.weight", "rep.weight"}}, {neg, []string{"neg.weight", "rep.weight"}}} {
		g.ZeroGrad()
		outs, err := g.Forward(nil, c.x)
		if err != nil {
			t.Fatal(err)
		}
		w := NewFloat(slices.Clone(outs[0].Shape), gFloats(r, outs[0].Len()))
		loss := func() float64 {
			outs, err := g.Forward(&Context{NoGrad: true}, c.x)
			if err != nil {
				t.Fatal(err)
			}
			var l float64
			for j, v := range outs[0].F {
				l += float64(w.F[j]) * float64(v)
			}
			return l
		}
		if _, err := g.Forward(nil, c.x); err != nil {
			t.Fatal(err)
		}
		if err := g.Backward(nil, w); err != nil {
			t.Fatal(err)
		}
		for _, name := range c.params {
			p := g.Param(name)
			analytic := slices.Clone(p.Grad.F)
			fdCheck(t, name, p.Value.F, func(j int) float64 { return float64(analytic[j]) }, loss,
				fdSpec{step: fixedStep(1e-2), atol: 1e-3, rtol: 1e-2}, "If", "Loop")
		}
		// The weights of the branch not taken get no gradient.
		other := "neg.weight"
		if c.x == neg {
			other = "pos.weight"
		}
		if slices.ContainsFunc(g.Param(other).Grad.F, func(v float32) bool { return v != 0 }) {
			t.Errorf("%s has a gradient from the branch not taken", other)
		}
	}
}

// TestScriptedWhileAgainstOnnxruntime runs testdata/control/while.onnx, a torch.jit.script
// `while` loop whose condition compares the mean activation with a threshold (export.py):
// a Loop that runs at run time, for as many iterations as the data ask, with an If in its
// body. Outputs match onnxruntime within 1e-5 on inputs that run different trip counts
// through one plan, and the gradients of the weights before, inside and after the loop
// match finite differences.
func TestScriptedWhileAgainstOnnxruntime(t *testing.T) {
	g, b := loadExported(t, "testdata/control/while.onnx")
	iters := func() int {
		for _, st := range g.last.steps {
			if k, ok := st.node.k.(*runLoopKernel); ok {
				return k.iters
			}
		}
		t.Fatal("the Loop is not run at run time")
		return 0
	}
	r := rand.New(rand.NewPCG(5, 9))
	counts := map[int]*Tensor{}
	for _, scale := range []float32{0.05, 0.2, 0.5, 1, 3, 0.1, 2} {
		for _, n := range []int{1, 4} {
			x := NewFloat([]int{n, 6}, gFloats(r, 6*n))
			for i := range x.F {
				x.F[i] *= scale
			}
			ortCompare(t, g, b, x, 1e-5)
			counts[iters()] = x
		}
	}
	if len(counts) < 3 {
		t.Fatalf("the inputs ran %d distinct trip counts, want at least 3", len(counts))
	}

	params := []string{"inp.weight", "step.weight", "step.bias", "out.weight"}
	if err := g.SetTrainable(params...); err != nil {
		t.Fatal(err)
	}
	for n, x := range counts {
		if n == 0 {
			continue
		}
		g.ZeroGrad()
		outs, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		w := NewFloat(slices.Clone(outs[0].Shape), gFloats(r, outs[0].Len()))
		if err := g.Backward(nil, w); err != nil {
			t.Fatal(err)
		}
		loss := func() float64 {
			outs, err := g.Forward(&Context{NoGrad: true}, x)
			if err != nil {
				t.Fatal(err)
			}
			if got := iters(); got != n {
				t.Fatalf("a finite-difference step changed the trip count from %d to %d", n, got)
			}
			var l float64
			for j, v := range outs[0].F {
				l += float64(w.F[j]) * float64(v)
			}
			return l
		}
		for _, name := range params {
			p := g.Param(name)
			analytic := slices.Clone(p.Grad.F)
			fdCheck(t, fmt.Sprintf("%d iterations: %s", n, name), p.Value.F, func(j int) float64 { return float64(analytic[j]) }, loss,
				fdSpec{step: fixedStep(1e-2), atol: 1e-3, rtol: 1e-2}, "Loop", "If")
		}
	}
}

// TestScanAgainstOnnxruntime compares scanCase (scan axes and directions of every kind)
// with onnxruntime 1.30, every output.
func TestScanAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	c := scanCase()
	r := rand.New(rand.NewPCG(1, 2))
	m := c.model(r)
	for _, o := range m.Proto.Graph.Output {
		o.Type = gInputAny(o.GetName(), onnxpb.TensorProto_FLOAT).Type
	}
	// onnxruntime runs no graph without inputs: the scan input a becomes one.
	gp := m.Proto.Graph
	i := slices.IndexFunc(gp.Initializer, func(tp *onnxpb.TensorProto) bool { return tp.GetName() == "a" })
	a := NewFloat([]int{2, 4, 3}, gFloats(r, 24))
	gp.Initializer = slices.Delete(gp.Initializer, i, i+1)
	gp.Input = []*onnxpb.ValueInfoProto{gInput("a", onnxpb.TensorProto_FLOAT, 2, 4, 3)}
	recordPassed(t, opsCovered.ort, m.Proto)
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ortref.Run(b, []ortref.Tensor{{Name: "a", Shape: []int64{2, 4, 3}, Data: a.F}})
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	got, err := mustBuild(t, m).Forward(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range got {
		if err := closeTensors(o, NewFloat(slices.Clone(o.Shape), ref[i].Data), 1e-6, 1e-6); err != nil {
			t.Errorf("output %s: %v", c.out[i], err)
		}
		if fmt.Sprint(ref[i].Shape) != fmt.Sprint(o.Shape) {
			t.Errorf("output %s: shape %v, onnxruntime %v", c.out[i], o.Shape, ref[i].Shape)
		}
	}
}
