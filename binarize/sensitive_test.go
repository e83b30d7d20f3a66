package binarize

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
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
// computed here in float64 from the model's own values; expected is the drop the
// full-precision chain's softmax expects instead, without the labels: the mean over the
// samples of p(its top-1 class) − p(the projected chain's top-1 class).
func chainDrop(t *testing.T, m *onnxio.Model, valid *memSet, idx []int) (drop, expected float64) {
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
	top := func(y []float64) int {
		best := 0
		for j := range y {
			if y[j] > y[best] {
				best = j
			}
		}
		return best
	}
	wrong := 0
	for _, i := range idx {
		x := make([]float64, n)
		for k := range n {
			x[k] = float64(valid.x[i*n+k])
		}
		h := mul(x, w["a"])
		y, fp := mul(mul(h, pb), w["c"]), mul(mul(h, w["b"]), w["c"])
		best := top(y)
		if int64(best) != valid.y[i] {
			wrong++
		}
		// The softmax as written, exp of each logit over the sum: these logits are small.
		var z float64
		for _, v := range fp {
			z += math.Exp(v)
		}
		expected += (math.Exp(fp[top(fp)]) - math.Exp(fp[best])) / z
	}
	return float64(wrong) / float64(len(idx)), expected / float64(len(idx))
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

// sensitiveCase is what keepSensitive is called with on the chain (chainModel(1), 800
// samples labelled by its own top-1) at a share: the run's splits, targets and graphs.
type sensitiveCase struct {
	m, tm           *onnxio.Model
	o               Options
	trainSet, valid calib.Dataset
	ts              []network.Target
	g, teacher      *engine.Graph
	specs           []train.OutputSpec
}

func newSensitiveCase(t *testing.T, share float64) *sensitiveCase {
	t.Helper()
	c := &sensitiveCase{m: chainModel(1), o: sensitiveOptions(share).withDefaults()}
	d := chainData(t, c.m, 800)
	var err error
	if c.trainSet, c.valid, err = splitCalib(Data{Calib: d}, c.o); err != nil {
		t.Fatal(err)
	}
	if c.ts, _, err = Targets(c.m, c.o); err != nil {
		t.Fatal(err)
	}
	c.tm, c.g, c.teacher, c.specs = sensitiveGraphs(t, c.m, d, c.o)
	return c
}

// chainDrops reads the validation split back through the split itself and returns
// chainDrop's drop and expected drop over it.
func (c *sensitiveCase) chainDrops(t *testing.T) (drop, expected float64) {
	t.Helper()
	n := c.valid.Len()
	idx := make([]int, n)
	x := make([]float32, n*chainWidth)
	y := make([]int64, n)
	for i := range idx {
		idx[i] = i
	}
	if err := c.valid.Read(idx, x, y); err != nil {
		t.Fatal(err)
	}
	return chainDrop(t, c.m, &memSet{d: chainWidth, x: x, y: y}, idx)
}

// TestKeepSensitive: on the chain whose b is sensitive by construction and whose ±1
// weights a and c lie on every grid, KeepSensitive measures b's drop as a float64
// evaluation of the projected chain does (to one validation sample), a's and c's as 0,
// and keeps b alone when the share allows a third of the values or more.
func TestKeepSensitive(t *testing.T) {
	c := newSensitiveCase(t, 0.5)
	tm, g, teacher, specs, o, trainSet, valid, ts := c.tm, c.g, c.teacher, c.specs, c.o, c.trainSet, c.valid, c.ts
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
	want, expected := c.chainDrops(t)
	for _, l := range s.Layers {
		switch l.Name {
		case "b":
			if math.Abs(l.Drop-want) > 1.5/float64(valid.Len()) || l.Lower <= 0 || !l.Kept {
				t.Errorf("b: drop %v (lower bound %v, kept %v), want %v from the float64 chain, a positive bound, kept", l.Drop, l.Lower, l.Kept, want)
			}
			if math.Abs(l.Expected-expected) > 1.5/float64(valid.Len()) {
				t.Errorf("b: expected drop %v, want %v from the float64 chain's softmax", l.Expected, expected)
			}
		default:
			if l.Drop != 0 || l.Expected != 0 || l.Lower > 0 || l.Kept {
				t.Errorf("%s: drop %v (expected %v), lower bound %v, kept %v; want 0, 0, ≤ 0, not kept (a ±1 weight is on the grid)", l.Name, l.Drop, l.Expected, l.Lower, l.Kept)
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

// TestKeepSensitiveUnlabelled: without labels the drops are those the full-precision
// chain's softmax expects, as a float64 evaluation of the chain computes them; b's is
// significant and kept, a's and c's are 0 (the negative control: ±1 weights are on the
// grid) and not kept, whatever the share.
func TestKeepSensitiveUnlabelled(t *testing.T) {
	c := newSensitiveCase(t, 0.9)
	tm, g, teacher, specs, o, trainSet, valid, ts := c.tm, c.g, c.teacher, c.specs, c.o, c.trainSet, c.valid, c.ts
	left, s, err := keepSensitive(context.Background(), tm, g, teacher, specs, false, o, trainSet, valid, ts)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Measured || s.Labels || len(s.Layers) != 3 {
		t.Fatalf("measured %v (%s), labels %v, %d layers; want measured from expected drops, 3 layers", s.Measured, s.Reason, s.Labels, len(s.Layers))
	}
	_, expected := c.chainDrops(t)
	if expected < 0.05 {
		t.Fatalf("the chain's expected drop for b is %v: it no longer has a sensitive weight", expected)
	}
	for _, l := range s.Layers {
		switch l.Name {
		case "b":
			if math.Abs(l.Drop-expected) > 1.5/float64(valid.Len()) || l.Drop != l.Expected || l.Lower <= 0 || !l.Kept {
				t.Errorf("b: drop %v (expected %v, lower bound %v, kept %v), want %v from the float64 chain's softmax, a positive bound, kept", l.Drop, l.Expected, l.Lower, l.Kept, expected)
			}
		default:
			if l.Drop != 0 || l.Lower > 0 || l.Kept {
				t.Errorf("%s: drop %v, lower bound %v, kept %v; want 0, ≤ 0, not kept", l.Name, l.Drop, l.Lower, l.Kept)
			}
		}
	}
	if !slices.Equal(s.Kept, []string{"b"}) || len(left) != 2 {
		t.Errorf("kept %v, %d targets left; want b kept, a and c binarized", s.Kept, len(left))
	}
}

// TestKeepSensitiveBounds: b's drop is significant, but a third of the values is more
// than the default quarter, so nothing is kept; without labels the expected drops keep b too; and a
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
	if s := res.Sensitivity; s == nil || !s.Measured || s.Labels || !slices.Equal(s.Kept, []string{"b"}) || len(res.Targets) != 2 {
		t.Errorf("without labels: sensitivity %+v, %d targets; want measured from expected drops, b kept, 2 targets", s, len(res.Targets))
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
