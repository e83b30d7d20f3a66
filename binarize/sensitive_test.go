package binarize

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// sensitiveOptions are chainOptions keeping only KeepSensitive, at share.
func sensitiveOptions(share float64) Options {
	o := chainOptions()
	o.Selection = network.Selection{Keep: []string{KeepSensitive}}
	o.SensitiveShare = share
	return o
}

// chainDrop is the accuracy the chain loses on the samples of valid when b alone is
// projected onto the binary-channel grid (what the automatic grid gives a MatMul weight
// with no normalisation after it: sign(b) times the mean |b| of each output column),
// computed here in float64 from the model's own values.
func chainDrop(t *testing.T, m *onnxio.Model, valid *memSet, idx []int) float64 {
	t.Helper()
	w := map[string][]float32{}
	for _, name := range []string{"a", "b", "c"} {
		p, _ := m.Param(name)
		v, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		w[name] = v.Float
	}
	const n = chainWidth
	pb := make([]float32, n*n)
	for j := range n {
		var s float64
		for k := range n {
			s += math.Abs(float64(w["b"][k*n+j]))
		}
		for k := range n {
			pb[k*n+j] = float32(math.Copysign(s/n, float64(w["b"][k*n+j])))
		}
	}
	mul := func(x []float64, m []float32) []float64 {
		y := make([]float64, n)
		for k := range n {
			for j := range n {
				y[j] += x[k] * float64(m[k*n+j])
			}
		}
		return y
	}
	wrong := 0
	for _, i := range idx {
		x := make([]float64, n)
		for k := range n {
			x[k] = float64(valid.x[i*n+k])
		}
		y := mul(mul(mul(x, w["a"]), pb), w["c"])
		best := 0
		for j := range y {
			if y[j] > y[best] {
				best = j
			}
		}
		if int64(best) != valid.y[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(len(idx))
}

// sensitiveGraphs builds what Run hands keepSensitive: the graph it trains (from a copy
// of m), the full-precision teacher and the outputs' specs.
func sensitiveGraphs(t *testing.T, m *onnxio.Model, d *memSet, o Options) (*onnxio.Model, *engine.Graph, *engine.Graph, []train.OutputSpec) {
	t.Helper()
	tm, g, err := trainedGraph(m, o)
	if err != nil {
		t.Fatal(err)
	}
	teacher, err := Build(m, o)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := o.outputs(context.Background(), m, teacher, d, true)
	if err != nil {
		t.Fatal(err)
	}
	return tm, g, teacher, specs
}

// TestKeepSensitive: on the chain whose b is sensitive by construction and whose ±1
// weights a and c lie on every grid, KeepSensitive measures b's drop as a float64
// evaluation of the projected chain does (to one validation sample), a's and c's as 0,
// and keeps b alone when the share allows a third of the values or more.
func TestKeepSensitive(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	o := sensitiveOptions(0.5).withDefaults()
	trainSet, valid, err := splitCalib(Data{Calib: d}, o)
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := Targets(m, o)
	if err != nil {
		t.Fatal(err)
	}
	tm, g, teacher, specs := sensitiveGraphs(t, m, d, o)
	before := map[string][]float32{}
	for _, p := range g.Params() {
		before[p.Name] = slices.Clone(p.Value.F)
	}
	left, s, err := keepSensitive(context.Background(), tm, g, teacher, specs, true, o, trainSet, valid, ts)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Measured || len(s.Layers) != 3 || s.FullPrecision.Accuracy != 1 {
		t.Fatalf("measured %v (%s), %d layers, full precision %v; want 3 layers at 1", s.Measured, s.Reason, len(s.Layers), s.FullPrecision.Accuracy)
	}
	// The validation split's samples, read back through the split itself, and their
	// indices in d for the reference.
	idx := make([]int, valid.Len())
	x := make([]float32, valid.Len()*chainWidth)
	y := make([]int64, valid.Len())
	for i := range idx {
		idx[i] = i
	}
	if err := valid.Read(idx, x, y); err != nil {
		t.Fatal(err)
	}
	want := chainDrop(t, m, &memSet{d: chainWidth, x: x, y: y}, idx)
	for _, l := range s.Layers {
		switch l.Name {
		case "b":
			if math.Abs(l.Drop-want) > 1.5/float64(valid.Len()) || l.Lower <= 0 || !l.Kept {
				t.Errorf("b: drop %v (lower bound %v, kept %v), want %v from the float64 chain, a positive bound, kept", l.Drop, l.Lower, l.Kept, want)
			}
		default:
			if l.Drop != 0 || l.Lower > 0 || l.Kept {
				t.Errorf("%s: drop %v, lower bound %v, kept %v; want 0, ≤ 0, not kept (a ±1 weight is on the grid)", l.Name, l.Drop, l.Lower, l.Kept)
			}
		}
	}
	for _, p := range g.Params() {
		if !slices.Equal(p.Value.F, before[p.Name]) {
			t.Errorf("%s changed: the measurement must leave the run's graph as it found it", p.Name)
		}
	}
	if want < 0.1 {
		t.Errorf("the reference drop of b is %v: the chain no longer has a sensitive weight", want)
	}
	if !slices.Equal(s.Kept, []string{"b"}) || len(left) != 2 || left[0].Name != "a" || left[1].Name != "c" {
		t.Errorf("kept %v, left %d targets; want b kept, a and c binarized", s.Kept, len(left))
	}
	// A share that would hold a or c too: only the significant drop is kept.
	o.SensitiveShare = 0.9
	if _, s, err = keepSensitive(context.Background(), tm, g, teacher, specs, true, o, trainSet, valid, ts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Kept, []string{"b"}) {
		t.Errorf("share 0.9: kept %v, want b alone (a's and c's drops are 0)", s.Kept)
	}
}

// TestKeepSensitiveBounds: b's drop is significant, but a third of the values is more
// than the default quarter, so nothing is kept; without labels nothing is measured; and a
// whole Run with the share allowing it binarizes a and c only and exports b off the grid.
func TestKeepSensitiveBounds(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	ctx := context.Background()
	res, err := Run(ctx, m, Data{Calib: d}, sensitiveOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Sensitivity
	if s == nil || !s.Measured || len(s.Kept) != 0 || len(res.Targets) != 3 {
		t.Fatalf("sensitivity %+v, %d targets; want measured, nothing kept under the default share, 3 targets", s, len(res.Targets))
	}
	for _, l := range s.Layers {
		if l.Name == "b" && l.Lower <= 0 {
			t.Errorf("b's lower bound %v: the share, not the test, must be what keeps it binarized", l.Lower)
		}
	}

	o := sensitiveOptions(0.5)
	res, err = Run(ctx, m, Data{Calib: &unlabelled{d}}, o)
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Sensitivity; s == nil || s.Measured || s.Reason == "" || len(res.Targets) != 3 {
		t.Errorf("without labels: sensitivity %+v, %d targets; want not measured, with a reason, 3 targets", s, len(res.Targets))
	}

	res, err = Run(ctx, m, Data{Calib: d}, o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, t := range res.Targets {
		names = append(names, t.Name)
	}
	if !slices.Equal(names, []string{"a", "c"}) || !slices.Equal(res.Sensitivity.Kept, []string{"b"}) {
		t.Fatalf("targets %v, kept %v; want a, c and b", names, res.Sensitivity.Kept)
	}
	p, _ := res.Model.Param("b")
	v, err := res.Model.Tensor(p.Tensor)
	if err != nil {
		t.Fatal(err)
	}
	levels := map[float32]bool{}
	for k := range chainWidth {
		levels[float32(math.Abs(float64(v.Float[k*chainWidth])))] = true
	}
	if len(levels) < 3 {
		t.Errorf("b's first column has %d magnitudes in the exported file: binarized, not kept", len(levels))
	}
}
