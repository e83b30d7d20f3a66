package binarize

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// AnalyzeGrids are the grids Analyze projects each weight onto unless told otherwise,
// from the smallest file to the largest.
func AnalyzeGrids() []network.Grid {
	return []network.Grid{network.Binary, network.BinaryChannel, network.Ternary, network.Int4, network.Int8}
}

// Metric names what a sensitivity is a loss of.
type Metric string

// The metrics.
const (
	// MetricAccuracy is the accuracy's drop below the full-precision model's (labels).
	MetricAccuracy Metric = "accuracy"
	// MetricAgreement is the share of positions whose top-1 class or decision differs
	// from the full-precision model's (no labels, a class or decision output).
	MetricAgreement Metric = "agreement"
	// MetricSQNR is the worst output's noise-to-signal power ratio 10^(−SQNR/10) (no
	// class or decision output): noise powers of independent errors add, so it sums
	// over layers as the other two do.
	MetricSQNR Metric = "sqnr"
)

// Score is a model's quality on the validation split, against the full-precision model.
type Score struct {
	// Labelled reports whether Accuracy (Correct of Positions) was measured.
	Labelled           bool
	Accuracy           float64
	Correct, Positions int
	// HasAgreement reports whether Agreement was measured: top-1 or decision agreement
	// with the full-precision model, the lowest over the outputs unless one is labelled.
	HasAgreement bool
	Agreement    float64
	// ExpectedDrop, with HasAgreement, is the accuracy expected lost against the
	// full-precision model from its own probabilities, without labels
	// (train.Metrics.ExpectedDrop), over AgreementPositions samples.
	ExpectedDrop       float64
	AgreementPositions int
	// SQNR is the worst output's, in dB (+Inf when equal to the full-precision model's).
	SQNR float64
}

func scoreOf(m train.Metrics) Score {
	s := Score{Labelled: m.Labelled, Accuracy: m.Accuracy, Correct: m.Correct, Positions: m.Positions,
		HasAgreement: m.HasAgreement, Agreement: m.Agreement, ExpectedDrop: m.ExpectedDrop,
		AgreementPositions: m.AgreementPositions, SQNR: math.Inf(1)}
	for _, f := range m.Outputs {
		s.SQNR = math.Min(s.SQNR, f.SQNR)
	}
	return s
}

// GridSensitivity is one projection's outcome.
type GridSensitivity struct {
	Grid network.Grid
	// Bytes is what the projected weights take in a packed file: codes and scales.
	Bytes int64
	Score Score
	// Loss is the Analysis's Metric lost against the full-precision model (a fraction:
	// 0.01 is one percentage point; for MetricSQNR a noise-to-signal ratio). It can be
	// negative: a projection can gain a few samples by chance.
	Loss float64
}

// LayerSensitivity is one target weight's sensitivity.
type LayerSensitivity struct {
	Name, Node string
	// Count is the weight's number of values, FloatBytes its size in the model, Share
	// that size over the model's parameter bytes.
	Count      int64
	FloatBytes int64
	Share      float64
	// Channels is the number of output channels (per-channel scales).
	Channels int64
	// Normalized reports a normalisation after the weight (the binary grid's scale is
	// absorbed there).
	Normalized bool
	// Grids holds the weight projected alone onto each grid, the others in full
	// precision, BatchNorm re-estimated; in AnalyzeOptions.Grids' order.
	Grids []GridSensitivity
}

// Analysis is the outcome of Analyze.
type Analysis struct {
	Model  string
	Metric Metric
	Grids  []network.Grid
	// TrainSamples re-estimate BatchNorm (AnalyzeOptions.BNSamples of the training
	// split); ValidationSamples measure every score.
	TrainSamples, ValidationSamples int
	// BNRecalib reports whether BatchNorm statistics were re-estimated after each
	// projection (the model has BatchNorm and Options.NoBNRecalib is off).
	BNRecalib bool
	// FullPrecision is the model as given; Recalibrated the model with its BatchNorm
	// statistics re-estimated on TrainSamples and no weight projected — what the
	// re-estimation alone costs, part of every projection's loss.
	FullPrecision, Recalibrated Score
	// ModelBytes is the model's parameter bytes.
	ModelBytes int64
	// Layers are the target weights in graph order.
	Layers []LayerSensitivity
	// All holds every target projected onto each grid at once.
	All []GridSensitivity
	// Seconds is the analysis's wall time, loading excluded.
	Seconds float64
}

// Loss is s's loss of a's metric against the full-precision model (see GridSensitivity).
func (a *Analysis) Loss(s Score) float64 {
	switch a.Metric {
	case MetricAccuracy:
		return a.FullPrecision.Accuracy - s.Accuracy
	case MetricAgreement:
		return 1 - s.Agreement
	}
	return math.Pow(10, -s.SQNR/10)
}

// Layer returns the sensitivity of the weight named name.
func (a *Analysis) Layer(name string) (*LayerSensitivity, bool) {
	for i := range a.Layers {
		if a.Layers[i].Name == name {
			return &a.Layers[i], true
		}
	}
	return nil, false
}

// On returns the layer's sensitivity on grid g.
func (l *LayerSensitivity) On(g network.Grid) (GridSensitivity, bool) {
	for _, s := range l.Grids {
		if s.Grid == g {
			return s, true
		}
	}
	return GridSensitivity{}, false
}

// AnalyzeOptions configures Analyze beyond the run's Options.
type AnalyzeOptions struct {
	// Grids are the grids every target is projected onto; nil means AnalyzeGrids.
	Grids []network.Grid
	// BNSamples caps the training samples BatchNorm is re-estimated on after each
	// projection (zero: DefaultBNSamples; negative: all). The cost of an analysis is
	// (weights × grids) passes over them, and a few hundred samples already fix the
	// statistics far below the validation split's own noise.
	BNSamples int
	// Progress, when set, is called after each measurement with how many are done.
	Progress func(done, total int)
}

// DefaultBNSamples is AnalyzeOptions.BNSamples's default.
const DefaultBNSamples = 512

// Analyze measures how sensitive model is to each target weight's quantization: for
// every target of o.Selection and every grid, the weight alone is projected onto the grid
// (nearest point, no fine-tuning), BatchNorm statistics are re-estimated on the training
// part of the calibration data, and the model is scored on the validation split that Run
// would carve with the same o (Options.Validation, Seed): the split budget choices are
// made on, never the held-out set. It also scores every target projected at once.
// model is never modified.
//
// Projection plus re-estimation is what Run's first iterate is; fine-tuning recovers part
// of the loss, so the figures rank layers rather than predict a trained file's accuracy.
func Analyze(ctx context.Context, model *onnxio.Model, data Data, o Options, ao AnalyzeOptions) (*Analysis, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	grids := ao.Grids
	if len(grids) == 0 {
		grids = AnalyzeGrids()
	}
	for _, g := range grids {
		if !slices.Contains(network.Grids(), g) {
			return nil, &OptionError{Field: "Grids", Value: g, Reason: "want one of " + gridList()}
		}
	}
	if data.Calib == nil {
		return nil, errors.New("binarize: no calibration data")
	}
	trainSet, valid, err := splitCalib(data, o)
	if err != nil {
		return nil, err
	}
	if valid == nil {
		return nil, &OptionError{Field: "Validation", Value: o.Validation, Reason: "the analysis needs a validation split to measure on"}
	}
	start := time.Now()
	pr, err := newProber(ctx, model, data, o, trainSet, valid, ao.BNSamples)
	if err != nil {
		return nil, err
	}
	teacher, specs, m := pr.teacher, pr.specs, pr.m
	targets := make(map[network.Grid][]network.Target, len(grids))
	for _, gr := range grids {
		if targets[gr], err = network.Targets(m, gr, withoutSensitive(o.Selection)); err != nil {
			return nil, err
		}
	}
	base := targets[grids[0]]
	if err := pr.precondition(targets[network.Binary]); err != nil {
		return nil, err
	}
	a := &Analysis{Model: model.Name, Grids: grids, TrainSamples: pr.train.Len(), ValidationSamples: valid.Len(),
		BNRecalib: pr.recalib}
	for _, p := range model.Params() {
		a.ModelBytes += onnxio.TensorBytes(p.Tensor)
	}
	fp, err := evaluate(ctx, teacher, nil, valid, o, specs)
	if err != nil {
		return nil, fmt.Errorf("%s: evaluating the full-precision model: %w", model.Name, err)
	}
	a.FullPrecision = scoreOf(fp)
	// Measured against itself: agreement 1 wherever there are classes or decisions.
	a.FullPrecision.HasAgreement, a.FullPrecision.Agreement = train.LabelOutput(specs) >= 0, 1
	switch {
	case fp.Labelled:
		a.Metric = MetricAccuracy
	case train.LabelOutput(specs) >= 0:
		a.Metric = MetricAgreement
	default:
		a.Metric = MetricSQNR
	}
	total := 1 + len(base)*len(grids) + len(grids)
	done := 0
	step := func() {
		done++
		if ao.Progress != nil {
			ao.Progress(done, total)
		}
	}
	rec, err := pr.score(nil)
	if err != nil {
		return nil, err
	}
	a.Recalibrated = rec
	step()
	for i, t := range base {
		l := LayerSensitivity{Name: t.Name, Node: t.Node, Normalized: t.Normalized, Count: count(t.Dims), Channels: channels(t)}
		l.FloatBytes = 4 * l.Count
		if p, ok := model.Param(t.Name); ok {
			l.FloatBytes = onnxio.TensorBytes(p.Tensor)
		}
		l.Share = float64(l.FloatBytes) / float64(max(a.ModelBytes, 1))
		for _, gr := range grids {
			gt := targets[gr][i]
			s, err := pr.score([]network.Target{gt})
			if err != nil {
				return nil, err
			}
			l.Grids = append(l.Grids, GridSensitivity{Grid: gr, Bytes: packedBytes(gr, l.Count, l.Channels), Score: s, Loss: a.Loss(s)})
			step()
		}
		a.Layers = append(a.Layers, l)
	}
	for _, gr := range grids {
		s, err := pr.score(targets[gr])
		if err != nil {
			return nil, err
		}
		var bytes int64
		for _, l := range a.Layers {
			bytes += packedBytes(gr, l.Count, l.Channels)
		}
		a.All = append(a.All, GridSensitivity{Grid: gr, Bytes: bytes, Score: s, Loss: a.Loss(s)})
		step()
	}
	// Leave the graph as built: nothing else reads it, but a caller's cancellation should
	// not see a half-projected state in a later error.
	pr.restore()
	a.Seconds = time.Since(start).Seconds()
	return a, nil
}

// prober scores the model with some targets projected.
type prober struct {
	ctx          context.Context
	g            *engine.Graph
	m            *onnxio.Model
	teacher      *engine.Graph
	train, valid calib.Dataset
	o            Options
	specs        []train.OutputSpec
	recalib      bool
	saved        map[string][]float32
}

// newProber builds the graphs a prober scores on: the full-precision teacher, a copy of
// model to project, and the samples BatchNorm is re-estimated on (bnSamples of trainSet,
// zero meaning DefaultBNSamples, negative all). Call precondition before scoring.
func newProber(ctx context.Context, model *onnxio.Model, data Data, o Options, trainSet, valid calib.Dataset, bnSamples int) (*prober, error) {
	teacher, err := Build(model, o)
	if err != nil {
		return nil, err
	}
	specs, err := o.outputs(ctx, model, teacher, data.Calib, data.Calib.HasLabels())
	if err != nil {
		return nil, err
	}
	m, g, err := trainedGraph(model, o)
	if err != nil {
		return nil, err
	}
	bnSet, err := bnSubset(trainSet, bnSamples, o.Seed)
	if err != nil {
		return nil, err
	}
	return &prober{ctx: ctx, g: g, m: m, teacher: teacher, train: bnSet, valid: valid, o: o, specs: specs,
		recalib: !o.NoBNRecalib && hasBatchNorm(m)}, nil
}

// bnSubset is the part of trainSet BatchNorm is re-estimated on after each projection:
// n samples (zero meaning DefaultBNSamples, negative all), a random subset seeded as the
// split is, so that it spans the classes.
func bnSubset(trainSet calib.Dataset, n int, seed uint64) (calib.Dataset, error) {
	if n == 0 {
		n = DefaultBNSamples
	}
	if n < 0 || n >= trainSet.Len() {
		return trainSet, nil
	}
	_, sub, err := calib.Hold(trainSet, n, seed)
	return sub, err
}

// precondition rescales the normalised weights of ts on the unscaled binary grid as Run
// does (unless Options.NoRescale), so that a projection sees what Run's first iterate
// sees; it does not change the function. It then records the weights every score
// starts from.
func (p *prober) precondition(ts []network.Target) error {
	if !p.o.NoRescale {
		var bin []network.Target
		for _, t := range ts {
			if t.Grid == network.Binary && t.Normalized {
				bin = append(bin, t)
			}
		}
		if len(bin) > 0 {
			if _, err := network.Precondition(p.g, bin); err != nil {
				return fmt.Errorf("%s: %w", p.m.Name, err)
			}
		}
	}
	p.snapshot()
	return nil
}

// snapshot records the weights every score starts from and restore returns to.
func (p *prober) snapshot() {
	p.saved = map[string][]float32{}
	for _, q := range p.g.Params() {
		if q.Value.F != nil {
			p.saved[q.Name] = slices.Clone(q.Value.F)
		}
	}
}

func (p *prober) restore() {
	for _, q := range p.g.Params() {
		if v, ok := p.saved[q.Name]; ok {
			copy(q.Value.F, v)
			q.Changed()
		}
	}
}

// score restores the model, projects ts onto their grids, re-estimates BatchNorm and
// scores the result on the validation split. Every call starts from the same state and
// the same random stream, so a score does not depend on the order of the calls.
func (p *prober) score(ts []network.Target) (Score, error) {
	if err := p.ctx.Err(); err != nil {
		return Score{}, err
	}
	p.restore()
	for _, t := range ts {
		w := p.g.Param(t.Name)
		if w == nil {
			return Score{}, fmt.Errorf("%s: weight %s is not a parameter of the graph", p.m.Name, t.Name)
		}
		src := slices.Clone(w.Value.F)
		if err := t.Set.Project32(w.Value.F, src, t.Layout); err != nil {
			return Score{}, fmt.Errorf("%s: projecting %s: %w", p.m.Name, t.Name, err)
		}
		w.Changed()
	}
	if p.recalib {
		size := p.o.BatchSize
		if p.o.MicroBatch > 0 {
			size = min(size, p.o.MicroBatch)
		}
		b, err := calib.NewBatches(p.train, calib.BatchOptions{Size: size})
		if err != nil {
			return Score{}, err
		}
		eng := engine.Context{BLAS: p.o.BLAS, Workers: p.o.Workers, Rand: rand.New(rand.NewPCG(p.o.Seed, 0x626e))}
		if err := train.RecalibrateBN(p.ctx, p.g, p.m, b, &eng); err != nil {
			return Score{}, fmt.Errorf("%s: re-estimating BatchNorm statistics: %w", p.m.Name, err)
		}
	}
	mt, err := evaluate(p.ctx, p.g, p.teacher, p.valid, p.o, p.specs)
	if err != nil {
		return Score{}, fmt.Errorf("%s: %w", p.m.Name, err)
	}
	return scoreOf(mt), nil
}

// splitCalib is Run's split of the calibration data: the samples trained on (and
// BatchNorm re-estimated on) and the validation split, nil without one.
func splitCalib(data Data, o Options) (trainSet, valid calib.Dataset, err error) {
	trainSet, valid = data.Calib, data.Validation
	if valid == nil {
		if n := ValidationSize(data.Calib.Len(), o.Validation); n > 0 {
			if trainSet, valid, err = calib.Hold(data.Calib, n, o.Seed); err != nil {
				return nil, nil, err
			}
		}
	}
	return trainSet, valid, nil
}

// trainedGraph is a copy of model whose weights a run changes, and its graph.
func trainedGraph(model *onnxio.Model, o Options) (*onnxio.Model, *engine.Graph, error) {
	m := model.Clone()
	// Merged initializers reach BatchNorm's running statistics through Identity nodes;
	// give each node its own so that training and re-estimation can write them.
	if _, err := train.SeparateBNStats(m); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", model.Name, err)
	}
	g, err := engine.Build(m, o.engine())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", model.Name, err)
	}
	return m, g, nil
}

func hasBatchNorm(m *onnxio.Model) bool {
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" {
			return true
		}
	}
	return false
}

func count(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// channels is the number of scales a per-channel grid gives t.
func channels(t network.Target) int64 {
	if len(t.Layout.Shape) == 0 {
		return 1
	}
	return int64(t.Layout.Shape[t.Layout.Axis])
}
