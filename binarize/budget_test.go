package binarize

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
	"github.com/qtool/qtool/train"
)

// memSet is an in-memory labelled data set of [N, D] samples.
type memSet struct {
	d int
	x []float32
	y []int64
}

func (s *memSet) Len() int             { return len(s.y) }
func (s *memSet) HasLabels() bool      { return true }
func (s *memSet) SampleShape() []int64 { return []int64{int64(s.d)} }
func (s *memSet) Close() error         { return nil }
func (s *memSet) Read(idx []int, x []float32, y []int64) error {
	for k, i := range idx {
		copy(x[k*s.d:(k+1)*s.d], s.x[i*s.d:(i+1)*s.d])
		if y != nil {
			y[k] = s.y[i]
		}
	}
	return nil
}

const chainWidth = 16

// chainModel is x[N,16] → MatMul(a) → MatMul(b) → MatMul(c) → logits[N,16]. a and c are
// random ±1 matrices: every grid holds them exactly, so projecting either alone changes
// nothing. b is the sensitive layer by construction: a diagonal of magnitudes from 1 to
// 2^-7 with off-diagonal entries of 10^-3: a 1-bit grid (one magnitude per output column
// at most) turns it into a dense sign matrix and scrambles the classes.
func chainModel(seed uint64) *onnxio.Model {
	rng := rand.New(rand.NewPCG(seed, 7))
	sign := func() []float32 {
		v := make([]float32, chainWidth*chainWidth)
		for i := range v {
			v[i] = 1
			if rng.IntN(2) == 0 {
				v[i] = -1
			}
		}
		return v
	}
	b := make([]float32, chainWidth*chainWidth)
	for i := range chainWidth {
		for j := range chainWidth {
			b[i*chainWidth+j] = float32(1e-3 * rng.NormFloat64())
		}
		b[i*chainWidth+i] = float32(math.Pow(2, -float64(i%8)))
	}
	dims := []int64{chainWidth, chainWidth}
	info := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}},
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: chainWidth}}}}}}}}
	}
	mm := func(name, in, w, out string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("MatMul"), Name: proto.String(name), Input: []string{in, w}, Output: []string{out}}
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("chain"),
		Node: []*onnxpb.NodeProto{mm("ma", "x", "a", "h1"), mm("mb", "h1", "b", "h2"), mm("mc", "h2", "c", "logits")},
		Initializer: []*onnxpb.TensorProto{onnxio.FloatTensor("a", dims, sign()), onnxio.FloatTensor("b", dims, b),
			onnxio.FloatTensor("c", dims, sign())},
		Input:  []*onnxpb.ValueInfoProto{info("x")},
		Output: []*onnxpb.ValueInfoProto{info("logits")},
	}
	return &onnxio.Model{Name: "chain.onnx", Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}}}
}

// chainData labels n Gaussian inputs with the model's own top-1 class, so that the
// full-precision accuracy is 100 % and every drop is the quantization's.
func chainData(t *testing.T, m *onnxio.Model, n int) *memSet {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	s := &memSet{d: chainWidth, x: make([]float32, n*chainWidth), y: make([]int64, n)}
	for i := range s.x {
		s.x[i] = float32(rng.NormFloat64())
	}
	pred, _, err := Predictions(context.Background(), m, &memSet{d: chainWidth, x: s.x, y: make([]int64, n)}, Options{Workers: 1}, chainSpecs(t, m))
	if err != nil {
		t.Fatal(err)
	}
	copy(s.y, pred)
	return s
}

func chainSpecs(t *testing.T, m *onnxio.Model) []train.OutputSpec {
	t.Helper()
	o := Options{Workers: 1}.withDefaults()
	teacher, err := Build(m, o)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := o.outputs(context.Background(), m, teacher, &memSet{d: chainWidth, x: make([]float32, 4*chainWidth), y: make([]int64, 4)}, true)
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

func chainOptions() Options {
	o := Defaults()
	o.Iters, o.InnerEpochs, o.BatchSize, o.Workers, o.Validation = 1, 1, 100, 1, 0.25
	return o
}

// TestAnalyzeFindsSensitiveLayer: on the chain built with one sensitive weight, Analyze
// measures no loss for the ±1 weights on any grid and a large one for b on the 1-bit
// grids, and the loss of all weights projected at once is at least b's.
func TestAnalyzeFindsSensitiveLayer(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	a, err := Analyze(context.Background(), m, Data{Calib: d}, chainOptions(), AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Metric != MetricAccuracy || a.FullPrecision.Accuracy != 1 || a.ValidationSamples != 200 {
		t.Fatalf("metric %s, full-precision accuracy %v on %d samples; want accuracy, 1 on 200", a.Metric, a.FullPrecision.Accuracy, a.ValidationSamples)
	}
	if a.BNRecalib {
		t.Error("BatchNorm re-estimation reported on a model without BatchNorm")
	}
	for _, l := range a.Layers {
		for _, g := range l.Grids {
			if l.Name != "b" && g.Loss != 0 {
				t.Errorf("%s on %s: loss %v, want 0 (a ±1 matrix is on every grid)", l.Name, g.Grid, g.Loss)
			}
			if l.Name == "b" && (g.Grid == network.Binary || g.Grid == network.BinaryChannel) && g.Loss < 0.3 {
				t.Errorf("b on %s: loss %v, want a large drop", g.Grid, g.Loss)
			}
		}
		if want := int64(chainWidth * chainWidth); l.Count != want || l.FloatBytes != 4*want {
			t.Errorf("%s: %d values, %d bytes; want %d, %d", l.Name, l.Count, l.FloatBytes, want, 4*want)
		}
		bin, _ := l.On(network.Binary)
		if bin.Bytes != chainWidth*chainWidth/8 {
			t.Errorf("%s: %d packed bytes on the binary grid, want %d", l.Name, bin.Bytes, chainWidth*chainWidth/8)
		}
	}
	b, _ := a.Layer("b")
	for k, g := range a.All {
		if g.Loss < b.Grids[k].Loss {
			t.Errorf("all on %s: loss %v below b's alone %v", g.Grid, g.Loss, b.Grids[k].Loss)
		}
	}
}

// TestBudgetKeepsSensitiveLayer: under a 1 pp budget the selection puts the ±1 weights on
// the binary grid (the smallest, and free) and b on a grid of more than one bit (or full
// precision), the first trial meets the budget on the validation split, and the report
// says why each grid was chosen.
func TestBudgetKeepsSensitiveLayer(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	// 2 pp: on the 200 validation samples a file that loses one of them (0.5 pp) has an
	// upper 95 % bound of 1.3 pp, so 1 pp is out of what this split can confirm.
	drop := 0.02
	res, err := Budget(context.Background(), m, Data{Calib: d}, chainOptions(), BudgetOptions{Constraint: Constraint{MaxDrop: &drop}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) != 1 || res.Chosen != 0 || !res.Trials[0].Met {
		t.Fatalf("trials %+v, chosen %d; want one trial that met the budget", res.Trials, res.Chosen)
	}
	for _, ch := range res.Trials[0].Choices {
		switch {
		case ch.Weight != "b" && ch.Grid != network.Binary:
			t.Errorf("%s on %q, want binary", ch.Weight, ch.Grid)
		case ch.Weight == "b" && (ch.Grid == network.Binary || ch.Grid == network.BinaryChannel):
			t.Errorf("b on %s: the sensitive weight on a 1-bit grid", ch.Grid)
		}
		if ch.Reason == "" {
			t.Errorf("%s: no reason", ch.Weight)
		}
	}
	if res.Grid != MixedGrid {
		t.Errorf("result grid %q, want %q", res.Grid, MixedGrid)
	}
	if got := res.FullPrecision.Accuracy - res.Binarized.Accuracy; got > drop {
		t.Errorf("chosen file drops %v on validation, over the budget", got)
	}
}

// TestBudgetRetries: given sensitivities that call b cheap on the binary grid (a lie), the
// first trial puts it there and misses on the validation split; each retry relaxes b,
// the most sensitive by the prediction, one grid up, the files growing, until a trial
// meets the budget; the chosen file is the smallest that met.
func TestBudgetRetries(t *testing.T) {
	m, d, o, a := chainWithLies(t, "b")
	drop := 0.02 // what 200 validation samples can confirm (TestBudgetKeepsSensitiveLayer)
	res, err := Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, Analysis: a, MaxTrials: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) < 2 || res.Trials[0].Met {
		t.Fatalf("%d trials, first met %v; want a miss then a retry", len(res.Trials), len(res.Trials) > 0 && res.Trials[0].Met)
	}
	first := res.Trials[0]
	if g := first.Choices[1].Grid; g != network.Binary {
		t.Fatalf("first trial put b on %s, want binary (the lie)", g)
	}
	met := slices.IndexFunc(res.Trials, func(tr Trial) bool { return tr.Met })
	if met < 1 {
		t.Fatalf("no trial met the budget after a miss: %+v", res.Trials)
	}
	for i, tr := range res.Trials[:met] {
		if tr.Relaxed != "b" || len(tr.Missed) != 1 || tr.Missed[0] != "max-drop" {
			t.Errorf("trial %d: relaxed %q, missed %v; want a max-drop miss relaxing b", i+1, tr.Relaxed, tr.Missed)
		}
		if next := res.Trials[i+1]; next.FileBytes < tr.FileBytes {
			t.Errorf("trial %d's file (%d B) is smaller than trial %d's (%d B)", i+2, next.FileBytes, i+1, tr.FileBytes)
		}
	}
	chosen := res.Trials[res.Chosen]
	for i, tr := range res.Trials {
		if tr.Met && tr.FileBytes < chosen.FileBytes {
			t.Errorf("trial %d met with %d B, smaller than the chosen trial %d's %d B", i+1, tr.FileBytes, res.Chosen+1, chosen.FileBytes)
		}
	}
	if !chosen.Met || chosen.Choices[1].Grid == network.Binary || chosen.Choices[1].Grid == network.BinaryChannel {
		t.Errorf("chosen trial %d: met %v, b on %s", res.Chosen+1, chosen.Met, chosen.Choices[1].Grid)
	}
	// One trial only: the miss is an error with the trial in it.
	_, err = Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, Analysis: a, MaxTrials: 1})
	if me, ok := err.(*BudgetMissedError); !ok || len(me.Trials) != 1 {
		t.Errorf("one trial: error %v, want a *BudgetMissedError with one trial", err)
	}
}

// TestAnalyzeAgainstOnnxruntime: the analysis's score of b projected alone onto
// binary-channel is what onnxruntime counts on the validation split for the chain with b
// replaced by its projection computed here from the definition (column c: sign(b)·mean|b|
// over the column, MatMul's output channels being its columns).
func TestAnalyzeAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	m := chainModel(1)
	d := chainData(t, m, 800)
	o := chainOptions()
	a, err := Analyze(context.Background(), m, Data{Calib: d}, o, AnalyzeOptions{Grids: []network.Grid{network.BinaryChannel}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := a.Layer("b")
	got := b.Grids[0].Score
	p, _ := m.Param("b")
	w, err := m.Tensor(p.Tensor)
	if err != nil {
		t.Fatal(err)
	}
	proj := make([]float32, len(w.Float))
	for c := range chainWidth {
		var s float64
		for r := range chainWidth {
			s += math.Abs(float64(w.Float[r*chainWidth+c]))
		}
		alpha := float32(s / chainWidth)
		for r := range chainWidth {
			proj[r*chainWidth+c] = alpha
			if w.Float[r*chainWidth+c] < 0 {
				proj[r*chainWidth+c] = -alpha
			}
		}
	}
	q := m.Clone()
	if err := q.SetParam("b", onnxio.FloatTensor("b", []int64{chainWidth, chainWidth}, proj)); err != nil {
		t.Fatal(err)
	}
	bytes, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	_, valid, err := calib.Hold(d, ValidationSize(d.Len(), o.Validation), o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	n := valid.Len()
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	x, y := make([]float32, n*chainWidth), make([]int64, n)
	if err := valid.Read(idx, x, y); err != nil {
		t.Fatal(err)
	}
	outs, err := ortref.Run(bytes, []ortref.Tensor{{Name: "x", Shape: []int64{int64(n), chainWidth}, Data: x}})
	if err != nil {
		t.Fatal(err)
	}
	correct := 0
	for i := range n {
		row := outs[0].Data[i*chainWidth : (i+1)*chainWidth]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int64(best) == y[i] {
			correct++
		}
	}
	if got.Positions != n || got.Correct != correct {
		t.Errorf("analysis: %d of %d right; onnxruntime: %d of %d", got.Correct, got.Positions, correct, n)
	}
}

// TestAnalyzeWorkers: the analysis of the CNN (BatchNorm re-estimated after every
// projection) is the same with one worker and with three.
func TestAnalyzeWorkers(t *testing.T) {
	m, err := onnxio.Load(filepath.Join("..", "testmodels", "fmnist-cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	_, data, o := small(t)
	d, err := calib.Open(filepath.Join("..", "testmodels", "fmnist-calib.npz"), calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 1, 28, 28}, Classes: 10}, Limit: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	data.Calib = d
	ao := AnalyzeOptions{Grids: []network.Grid{network.Binary, network.Int4}, BNSamples: 100}
	var runs []*Analysis
	for _, w := range []int{1, 3} {
		o.Workers = w
		a, err := Analyze(context.Background(), m, data, o, ao)
		if err != nil {
			t.Fatal(err)
		}
		if !a.BNRecalib || a.TrainSamples != 100 {
			t.Fatalf("BatchNorm re-estimated %v on %d samples, want on 100", a.BNRecalib, a.TrainSamples)
		}
		a.Seconds = 0
		runs = append(runs, a)
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Errorf("1 worker: %+v\n3 workers: %+v", runs[0], runs[1])
	}
}

// TestBudgetTargetSize: with a target size that one weight on the binary grid reaches, the
// selection stops there and leaves the others in full precision. (Whether the trained file
// then meets the drop is not the point: b, kept in full precision with entries down to
// 2^-7, loses a few points to fine-tuning even at its scaled rate.)
func TestBudgetTargetSize(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	drop := 0.01
	file := int64(proto.Size(m.Proto))
	one := int64(4*chainWidth*chainWidth - chainWidth*chainWidth/8) // a weight's float bytes less its packed ones
	res, err := Budget(context.Background(), m, Data{Calib: d}, chainOptions(), BudgetOptions{Constraint: Constraint{MaxDrop: &drop},
		TargetSize: file - one, MaxTrials: 1})
	var trials []Trial
	if me, ok := err.(*BudgetMissedError); ok {
		trials = me.Trials
	} else if err != nil {
		t.Fatal(err)
	} else {
		trials = res.Trials
	}
	var quantized []string
	for _, ch := range trials[0].Choices {
		if ch.Grid != "" {
			quantized = append(quantized, ch.Weight+"="+string(ch.Grid))
		}
	}
	if len(quantized) != 1 || quantized[0] != "a=binary" {
		t.Errorf("quantized %v, want only a on binary (the first free move that reaches the target)", quantized)
	}
}

// TestBudgetSQNR: declared without a class axis, the chain's output is a feature map: the
// analysis measures SQNR (noise-to-signal ratios as losses, +Inf dB for the exact ±1
// weights) and a budget of 20 dB keeps b off the 1-bit grids, the trained file meeting it
// on validation.
func TestBudgetSQNR(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	o := chainOptions()
	o.ClassAxis = map[string]int{"logits": train.NoClassAxis}
	a, err := Analyze(context.Background(), m, Data{Calib: &unlabelled{d}}, o, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Metric != MetricSQNR {
		t.Fatalf("metric %s, want sqnr", a.Metric)
	}
	for _, l := range a.Layers {
		for _, g := range l.Grids {
			if want := math.Pow(10, -g.Score.SQNR/10); g.Loss != want {
				t.Errorf("%s on %s: loss %v, want the noise-to-signal ratio %v", l.Name, g.Grid, g.Loss, want)
			}
			if l.Name != "b" && !math.IsInf(g.Score.SQNR, 1) {
				t.Errorf("%s on %s: SQNR %v dB, want +Inf (exact)", l.Name, g.Grid, g.Score.SQNR)
			}
		}
	}
	sqnr := 20.0
	res, err := Budget(context.Background(), m, Data{Calib: &unlabelled{d}}, o, BudgetOptions{Constraint: Constraint{MinSQNR: &sqnr}, Analysis: a})
	if err != nil {
		t.Fatal(err)
	}
	chosen := res.Trials[res.Chosen]
	if g := chosen.Choices[1].Grid; g == network.Binary || g == network.BinaryChannel {
		t.Errorf("b on %s under a 20 dB budget", g)
	}
	if !chosen.Met || chosen.Validation.SQNR < sqnr {
		t.Errorf("chosen trial: met %v at %v dB", chosen.Met, chosen.Validation.SQNR)
	}
}

// unlabelled hides a set's labels.
type unlabelled struct{ *memSet }

func (u *unlabelled) HasLabels() bool { return false }
func (u *unlabelled) Read(idx []int, x []float32, y []int64) error {
	if err := u.memSet.Read(idx, x, nil); err != nil {
		return err
	}
	for i := range y {
		y[i] = -1
	}
	return nil
}

// TestBudgetMargin: on the chain, the first configuration loses one of the 200 validation
// samples (0.5 pp). Within a 1 pp allowance by the measured drop alone (Confidence < 0),
// it passes; at the default 95 % its upper bound (1.3 pp) does not, and the trial is a
// miss that records the bound.
func TestBudgetMargin(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	drop := 0.01
	res, err := Budget(context.Background(), m, Data{Calib: d}, chainOptions(), BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, MaxTrials: 1, Confidence: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trials[0]
	measured := res.FullPrecision.Accuracy - tr.Validation.Accuracy
	if measured <= 0 || measured > drop || tr.DropBound != measured {
		t.Fatalf("without the margin: drop %v, bound %v; want a loss within 1 pp recorded as its own bound", measured, tr.DropBound)
	}
	_, err = Budget(context.Background(), m, Data{Calib: d}, chainOptions(), BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, MaxTrials: 1})
	me, ok := err.(*BudgetMissedError)
	if !ok {
		t.Fatalf("at 95 %%: %v, want a *BudgetMissedError", err)
	}
	if b := me.Trials[0].DropBound; b <= drop || me.Trials[0].Met {
		t.Errorf("at 95 %%: bound %v, met %v; want a bound over 1 pp and a miss", b, me.Trials[0].Met)
	}
}

// TestBudgetWidens: when relaxing the weight at fault after a miss would predict a file at
// least as large as every weight on its widest grid, the next trial is that uniform
// configuration instead. Sensitivities that keep a in float (a lie: it is ±1) and call b
// cheap on the binary grid (a lie) make trial 1 miss with a in float; relaxing b would keep
// a's float bytes, more than a, b and c at int8 together, so trial 2 is all int8 and meets.
// TestBudgetRetries is the control: there no weight is in float and relaxing wins.
func TestBudgetWidens(t *testing.T) {
	m, d, o, a := chainWithLies(t, "b")
	la, _ := a.Layer("a")
	for k := range la.Grids {
		la.Grids[k].Loss, la.Grids[k].Score.Accuracy = 0.5, 0.5
	}
	drop := 0.02
	res, err := Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, Analysis: a, MaxTrials: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) < 2 {
		t.Fatalf("%d trial(s), want a miss and a widened retry", len(res.Trials))
	}
	first, second := res.Trials[0], res.Trials[1]
	if first.Met || first.Choices[0].Grid != "" || first.Choices[1].Grid != network.Binary || !first.Widened || first.Relaxed != "" {
		t.Fatalf("trial 1: met %v, a on %q, b on %q, widened %v, relaxed %q; want a miss with a in float and b binary, then widening",
			first.Met, first.Choices[0].Grid, first.Choices[1].Grid, first.Widened, first.Relaxed)
	}
	for _, ch := range second.Choices {
		if ch.Grid != network.Int8 {
			t.Errorf("trial 2: %s on %q, want every weight on int8 (the widest grid)", ch.Weight, ch.Grid)
		}
	}
	if !second.Met || res.Chosen != 1 {
		t.Errorf("trial 2 met %v, chosen trial %d; want the all-int8 trial chosen", second.Met, res.Chosen+1)
	}
}

// chainWithLies returns the chain, its data, options and analysis, with the named layer's
// sensitivities replaced by a lie: cheap (0.5 pp) on every grid.
func chainWithLies(t *testing.T, cheap string) (*onnxio.Model, *memSet, Options, *Analysis) {
	t.Helper()
	m := chainModel(1)
	d := chainData(t, m, 800)
	o := chainOptions()
	a, err := Analyze(context.Background(), m, Data{Calib: d}, o, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := a.Layer(cheap)
	for k := range l.Grids {
		l.Grids[k].Loss, l.Grids[k].Score.Accuracy = 0.005, 0.995
	}
	return m, d, o, a
}

// TestBudgetUnrefined: with a learning rate that wrecks fine-tuning, a trial keeps the
// configuration's bare projection, which the sensitivities measured and which meets the
// budget, and says so (Trial.Unrefined). Three iterations, since ADMM-Q's first y is that
// projection itself. The control: the same trial exporting its last iterate (LastIterate,
// so no start is scored) misses.
func TestBudgetUnrefined(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 800)
	drop := 0.02
	for _, last := range []bool{false, true} {
		o := chainOptions()
		o.LR, o.LastIterate, o.Iters = 50, last, 3
		res, err := Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, MaxTrials: 1})
		var missed *BudgetMissedError
		switch {
		case !last && err != nil:
			t.Fatalf("scoring the projection: %v", err)
		case !last && (!res.Trials[0].Unrefined || !res.Trials[0].Met):
			t.Fatalf("trial %+v: want the unrefined projection, meeting the budget", res.Trials[0])
		case last && !errors.As(err, &missed):
			t.Fatalf("last iterate at a wrecking rate: err %v, want a missed budget (the control)", err)
		case last && missed.Trials[0].Unrefined:
			t.Fatal("a trial without a scored start reports the unrefined projection")
		}
	}
}

// TestBudgetGrossMiss: with the sensitivities lying about b (cheap on every grid), trial
// 1 puts every weight on the 1-bit grid and misses by more than twice the allowance.
// With three trials, too few to relax its three weights one at a time, trial 2 takes the
// widest grids (int8) and meets, and trial 3 bisects: the first of trial 1's selection
// moves on top of int8, one weight on trial 1's grid and the others on int8. The control:
// with four trials the old rule relaxes b.
func TestBudgetGrossMiss(t *testing.T) {
	m, d, o, a := chainWithLies(t, "b")
	drop := 0.02
	res, err := Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, Analysis: a, MaxTrials: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Trials) != 3 {
		t.Fatalf("%d trials, want 3: a gross miss, the widest grids, a bisection", len(res.Trials))
	}
	first, second, third := res.Trials[0], res.Trials[1], res.Trials[2]
	if first.Met || first.DropBound <= grossMiss*drop || !first.Widened || first.Relaxed != "" {
		t.Fatalf("trial 1: met %v, bound %.3f, widened %v, relaxed %q; want a miss over %g× the allowance, then the widest grids",
			first.Met, first.DropBound, first.Widened, first.Relaxed, grossMiss)
	}
	for _, ch := range second.Choices {
		if ch.Grid != network.Int8 {
			t.Errorf("trial 2: %s on %q, want int8 (the widest grid)", ch.Weight, ch.Grid)
		}
	}
	if !second.Met || second.Bisect != 1 {
		t.Fatalf("trial 2: met %v, bisect %d; want the int8 trial to meet and the next to take 1 of trial 1's 3 moves", second.Met, second.Bisect)
	}
	moved := 0
	for i, ch := range third.Choices {
		if ch.Grid != network.Int8 {
			moved++
			if ch.Grid != first.Choices[i].Grid {
				t.Errorf("trial 3: %s on %q, want int8 or trial 1's %q", ch.Weight, ch.Grid, first.Choices[i].Grid)
			}
		}
	}
	if third.Bisect != 0 || third.Relaxed != "" || third.Widened || third.Tightened {
		t.Errorf("trial 3, the last: %+v names a next step that no trial took", third)
	}
	// Weights' bytes, not the file's: on matrices this small the packed format's unpacking
	// nodes outweigh what they save.
	if moved != 1 || third.PredictedBytes >= second.PredictedBytes {
		t.Errorf("trial 3: %d weights off int8, %d B of weights against the int8 trial's %d B; want one, and fewer bytes", moved, third.PredictedBytes, second.PredictedBytes)
	}
	for i, tr := range res.Trials {
		if c := res.Trials[res.Chosen]; !c.Met || tr.Met && tr.FileBytes < c.FileBytes {
			t.Errorf("chosen trial %d (met %v, %d B), trial %d met with %d B; want the smallest file that met", res.Chosen+1, c.Met, c.FileBytes, i+1, tr.FileBytes)
		}
	}

	// Control: trials enough to relax every weight below int8 once keep the old rule.
	res, err = Budget(context.Background(), m, Data{Calib: d}, o, BudgetOptions{Constraint: Constraint{MaxDrop: &drop}, Analysis: a, MaxTrials: 4})
	if err != nil {
		t.Fatal(err)
	}
	if tr := res.Trials[0]; tr.Widened || tr.Relaxed != "b" {
		t.Errorf("four trials: trial 1 widened %v, relaxed %q; want b relaxed", tr.Widened, tr.Relaxed)
	}
}
