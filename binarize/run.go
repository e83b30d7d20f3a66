package binarize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// Data is what a run trains and measures on, all read for the model's input (see
// InputOf).
type Data struct {
	// Calib is the calibration set: the weights are trained on it, less the validation
	// split when that is carved from it.
	Calib calib.Dataset
	// Validation is what the run's automatic choices and its in-loop accuracy are
	// measured on (network.Data.Eval). Nil means a split of Calib set apart at random
	// by the seed (Options.Validation, ValidationSize), the rest of Calib being trained
	// on; the views are Run's and Calib stays the caller's to close.
	Validation calib.Dataset
	// Eval is the held-out set the result's accuracies are reported on, measured once
	// at the end and never used for a choice. Nil means the validation split (or the
	// training samples without one), which Result.ReportSplit then says.
	Eval calib.Dataset
}

// Split names a part of the data a figure is measured on.
type Split string

// The splits.
const (
	SplitTrain      Split = "train"      // the samples trained on
	SplitValidation Split = "validation" // the automatic choices' and the in-loop accuracy's
	SplitHeldOut    Split = "held-out"   // the report's, used for nothing else
)

// SmallSplit warns that a split measures accuracy on fewer than MinValidation samples:
// its accuracies have wide intervals and differences between runs or iterates below a
// few points are noise.
type SmallSplit struct {
	Split   Split
	Samples int
}

func (w SmallSplit) String() string {
	return fmt.Sprintf("the %s split has %d samples, fewer than %d: its accuracies' 95 %% intervals span several points", w.Split, w.Samples, MinValidation)
}

// Result is the outcome of Run.
type Result struct {
	// Method, Grid and Seed are the run's; Loss is the loss it trained with (LossAuto
	// resolved to LossCE, LossDistill or LossObjective), and Objective describes it per
	// output when it is LossObjective.
	Method    admmq.Method
	Grid      network.Grid
	Seed      uint64
	Loss      Loss
	Objective string
	// Outputs describes the model's outputs as the objective and the fidelity metrics
	// (Binarized.Outputs) read them.
	Outputs []train.OutputSpec
	// Labelled reports whether the calibration data have labels; without them the
	// accuracies below are agreements with the full-precision model.
	Labelled bool
	// Targets are the binarized weights' names and layouts, in graph order.
	Targets []network.Target
	// Sensitivity is what KeepSensitive measured, nil when the selection does not keep it.
	Sensitivity *Sensitivity
	// Warnings are what the caller should know about the run that did not stop it.
	Warnings []Warning
	// Weights are the trained weights, exactly on the grid, as exported.
	Weights []export.Weight
	// History holds one record per outer iteration; its accuracies are measured on the
	// validation split (absent without one), its losses on the training samples.
	History []network.IterStats
	// TrainSamples, ValidationSamples and HeldOutSamples count the samples of each split
	// (HeldOutSamples is 0 when Data.Eval was nil).
	TrainSamples, ValidationSamples, HeldOutSamples int
	// ReportSplit is the split FullPrecision and Binarized are measured on:
	// SplitHeldOut, or, when Data.Eval was nil, SplitValidation (SplitTrain without a
	// validation split), which the run's choices have seen.
	ReportSplit Split
	// Exported is the 1-based outer iteration whose state was exported: the one with the
	// best validation score unless Options.LastIterate, or the last; 0 when the projection
	// of the starting weights, scored before the first iteration (Start), beat every
	// fine-tuned iterate.
	Exported int
	// Start is the validation record of that projection (nil under Options.LastIterate or
	// without a validation split).
	Start *network.IterStats
	// RhoScales is each target's factor on Options.Rho (network.Run.RhoScales) and
	// RhoGrowths its factor per iteration (network.Run.Growths: UnnormalizedGrowth where no
	// normalisation follows, else 1): tensor t's ρ at iteration r is
	// Rho.Rho(r)·RhoScales[t]·RhoGrowths[t]^r (ADMM variants but ADMM-S).
	RhoScales  []float64
	RhoGrowths []float64
	// FullPrecision and Binarized are measured on ReportSplit: the model as given,
	// and the exported file as read back against the full-precision model, with the
	// fidelity of every output in Binarized.Outputs.
	FullPrecision, Binarized train.Metrics
	// Bytes is the exported file; Model is it parsed back. Output is the file written,
	// or "".
	Bytes  []byte
	Model  *onnxio.Model
	Output string
	// Seconds is the run's wall time, loading excluded.
	Seconds float64
}

// Accuracy returns the held-out accuracy of the exported model, or nil without labels.
func (r *Result) Accuracy() *float64 {
	if !r.Binarized.Labelled {
		return nil
	}
	a := r.Binarized.Accuracy
	return &a
}

// Warning is something about a run that the caller should know and that did not stop it.
type Warning interface {
	String() string
}

// UnnormalizedWeight warns that a weight on the unscaled binary grid has no
// normalisation after it to absorb the missing scale.
type UnnormalizedWeight struct {
	Weight, Node string
}

func (w UnnormalizedWeight) String() string {
	return fmt.Sprintf("%s (%s) has no normalisation after it: on the binary grid its weights become ±1 with no scale and accuracy will suffer; the binary-channel grid learns a scale per output channel", w.Weight, w.Node)
}

// LabelsError reports a loss that needs labels on calibration data that have none.
type LabelsError struct {
	Loss Loss
}

func (e *LabelsError) Error() string {
	return fmt.Sprintf("loss %s needs labels, but the data have none: use %s (the default without labels)", e.Loss, LossDistill)
}

// OpsetError reports an Options.Opset below the model's: export never lowers an opset.
type OpsetError struct {
	Model     string
	Want, Has int64
}

func (e *OpsetError) Error() string {
	return fmt.Sprintf("%s: opset %d is below the model's opset %d; export never lowers an opset", e.Model, e.Want, e.Has)
}

// ResumeError reports an Options.Resume state that does not fit the run.
type ResumeError struct {
	Err error
}

func (e *ResumeError) Error() string { return "resuming: " + e.Err.Error() }
func (e *ResumeError) Unwrap() error { return e.Err }

// InputOf describes g's data input (its first) for calib: its declared shape with a free
// batch dimension, the batch it declares when fixed and, from the first output when it is
// [N, C], the number of classes that labels must stay below (0, unknown, otherwise).
func InputOf(g *engine.Graph) calib.Input {
	in := g.Inputs()[0]
	shape := make([]int64, len(in.Shape))
	for i, d := range in.Shape {
		shape[i] = int64(d)
	}
	var batch int64
	if len(shape) > 0 {
		// The data may hold any number of samples: a model that declares a fixed batch
		// runs in chunks of it (train.Feed).
		batch = max(shape[0], 0)
		shape[0] = -1
	}
	classes := 0
	// Only an [N, C] output says its classes by its shape: a sequence output may be
	// [N, T, C] or [N, C, T], its class axis detected later (DetectOutputs, --class-axis),
	// and the objective checks the labels against that axis.
	if out := g.Outputs()[0].Shape; len(out) == 2 && out[1] > 0 {
		classes = out[1]
	}
	if classes == 1 {
		classes = 2 // a single-output binary head takes labels 0 and 1
	}
	return calib.Input{Name: in.Name, Shape: shape, Classes: classes, Batch: batch}
}

// InputsOf describes g's inputs after the first, for calib.Options.Inputs: their declared
// shapes (nil when undeclared) and types. It is nil for a model with one input.
func InputsOf(g *engine.Graph) []calib.Input {
	var r []calib.Input
	for _, in := range g.Inputs()[1:] {
		var shape []int64
		if in.Shape != nil {
			shape = make([]int64, len(in.Shape))
			for i, d := range in.Shape {
				shape[i] = int64(d)
			}
		}
		r = append(r, calib.Input{Name: in.Name, Shape: shape, Int64: in.DType == engine.Int64})
	}
	return r
}

// Build builds m's graph with o's engine options and checks that qtool can feed it: float
// inputs for the data, float or int64 for the others (see InputsOf), and at least one
// output.
func Build(m *onnxio.Model, o Options) (*engine.Graph, error) {
	o = o.withDefaults()
	g, err := engine.Build(m, o.engine())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	ins := g.Inputs()
	if len(ins) < 1 {
		return nil, fmt.Errorf("%s: the model has no inputs", m.Name)
	}
	if ins[0].DType != engine.Float32 {
		return nil, fmt.Errorf("%s: the model's first input %q takes %s values; qtool feeds float data to it", m.Name, ins[0].Name, ins[0].DType)
	}
	for _, in := range ins[1:] {
		if in.DType != engine.Float32 && in.DType != engine.Int64 {
			return nil, fmt.Errorf("%s: input %q takes %s values; qtool feeds float32 or int64 inputs", m.Name, in.Name, in.DType)
		}
	}
	if len(g.Outputs()) < 1 {
		return nil, fmt.Errorf("%s: the model has no outputs", m.Name)
	}
	return g, nil
}

func (o Options) engine() engine.Options {
	return engine.Options{BLAS: o.BLAS, Workers: o.Workers, Seed: o.Seed, MaxBytes: o.MaxMemory}
}

// Targets returns the weights of m that o binarizes, in graph order, and the warnings
// about them. A Selection that does not fit m is a *network.SelectionError.
func Targets(m *onnxio.Model, o Options) ([]network.Target, []Warning, error) {
	ts, ws, _, err := targets(m, o)
	return ts, ws, err
}

// targets is Targets, also reporting whether the default keep left no weight and so
// kept none (KeepSensitive then keeps none either).
func targets(m *onnxio.Model, o Options) ([]network.Target, []Warning, bool, error) {
	o = o.withDefaults()
	ts, err := network.Targets(m, o.Grid, o.selection())
	var se *network.SelectionError
	none := false
	if errors.As(err, &se) && se.Name == "" && o.Selection.Keep == nil && o.Selection.Only == nil {
		// A model of one or two weights: the default keeps none of them rather than all.
		ts, err = network.Targets(m, o.Grid, network.Selection{})
		none = true
	}
	if err != nil {
		return nil, nil, false, err
	}
	if ts, err = withGrids(m, ts, o); err != nil {
		return nil, nil, false, err
	}
	var ws []Warning
	for _, t := range ts {
		if t.Grid == network.Binary && !t.Normalized {
			ws = append(ws, UnnormalizedWeight{Weight: t.Name, Node: t.Node})
		}
	}
	return ts, ws, none, nil
}

// selection is o.Selection as network reads it: zero keeps DefaultKeep, Keep {KeepNone}
// nothing; KeepSensitive, which needs data, is left to Run.
func (o Options) selection() network.Selection { return withoutSensitive(o.keeps()) }

// keeps is o.Selection with its defaults: zero keeps DefaultKeep, Keep {KeepNone}
// nothing.
func (o Options) keeps() network.Selection {
	switch k := o.Selection.Keep; {
	case len(k) == 1 && k[0] == KeepNone:
		return network.Selection{}
	case k == nil && o.Selection.Only == nil:
		return network.Selection{Keep: DefaultKeep}
	}
	return o.Selection
}

// Run binarizes model on data with o and returns the result. model is never modified.
// Cancelling ctx stops the run between two optimizer steps with ctx's error.
func Run(ctx context.Context, model *onnxio.Model, data Data, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if data.Calib == nil {
		return nil, errors.New("binarize: no calibration data")
	}
	// trainSet is what the weights are trained on: Calib less the validation split when
	// the split is carved from it. The carved views need no closing (calib.Hold).
	trainSet, valid, err := splitCalib(data, o)
	if err != nil {
		return nil, err
	}
	report := SplitHeldOut
	if data.Eval == nil {
		data.Eval, report = valid, SplitValidation
		if valid == nil {
			data.Eval, report = trainSet, SplitTrain
		}
	}
	if o.Opset != 0 && o.Opset < model.Opset("") {
		return nil, &OpsetError{Model: model.Name, Want: o.Opset, Has: model.Opset("")}
	}
	// A format or opset the export cannot write is refused now, not after the training.
	if err := export.Check(model, o.exportOptions()); err != nil {
		return nil, err
	}
	start := time.Now()
	teacher, err := Build(model, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Method: o.Method, Grid: network.Grid(o.gridName()), Seed: o.Seed, Labelled: data.Calib.HasLabels(),
		TrainSamples: trainSet.Len(), ReportSplit: report}
	keptNone := false
	if res.Targets, res.Warnings, keptNone, err = targets(model, o); err != nil {
		return nil, err
	}
	if valid != nil {
		res.ValidationSamples = valid.Len()
		if res.ValidationSamples < MinValidation {
			res.Warnings = append(res.Warnings, SmallSplit{Split: SplitValidation, Samples: res.ValidationSamples})
		}
	}
	if report == SplitHeldOut {
		res.HeldOutSamples = data.Eval.Len()
		if res.HeldOutSamples < MinValidation {
			res.Warnings = append(res.Warnings, SmallSplit{Split: SplitHeldOut, Samples: res.HeldOutSamples})
		}
	}
	if res.Outputs, err = o.outputs(ctx, model, teacher, data.Calib, res.Labelled); err != nil {
		return nil, err
	}
	var shapes [][]int
	for _, v := range teacher.Outputs() {
		shapes = append(shapes, v.Shape)
	}
	loss, lossName, err := o.objective(res.Outputs, shapes, res.Labelled)
	if err != nil {
		return nil, err
	}
	res.Loss = lossName
	if obj, ok := loss.(*train.Objective); ok {
		res.Objective = obj.String()
	}
	if loss.NeedsLabels() && !res.Labelled {
		return nil, &LabelsError{Loss: lossName}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := o.config(loss)
	if err != nil {
		return nil, err
	}
	cfg.Outputs = res.Outputs

	m, g, err := trainedGraph(model, o)
	if err != nil {
		return nil, err
	}
	// MicroBatchFor plans the single data input at a free batch; a model with other inputs
	// or a fixed batch runs in train.Feed's chunks of its declared batch instead, each plan
	// bounded by the engine's memory limit.
	if len(teacher.Inputs()) == 1 && train.DeclaredBatch(teacher) == 0 {
		// The validation split carved from Calib is resident with it: counted once.
		mem := data
		if report != SplitHeldOut {
			mem.Eval = nil
		}
		restore, err := o.fitMemory(model.Name, g, teacher, mem, trainSet.Len(), &cfg)
		if err != nil {
			return nil, err
		}
		defer restore()
	} else if o.MicroBatch < o.BatchSize {
		cfg.MicroBatch = o.MicroBatch
	}
	if hasSensitive(o.keeps()) && !keptNone {
		// After fitMemory, on the run's own graphs and in its micro-batches: the
		// measurement holds no model or plan of its own.
		po := o
		if cfg.MicroBatch > 0 {
			po.MicroBatch = cfg.MicroBatch
		}
		if res.Targets, res.Sensitivity, err = keepSensitive(ctx, m, g, teacher, res.Outputs, res.Labelled, po, trainSet, valid, res.Targets); err != nil {
			return nil, err
		}
		res.Warnings = slices.DeleteFunc(res.Warnings, func(w Warning) bool {
			u, ok := w.(UnnormalizedWeight)
			return ok && slices.Contains(res.Sensitivity.Kept, u.Weight)
		})
	}
	if !o.NoRescale {
		// The weights on the unscaled binary grid (all with --grid binary, the normalised
		// ones with auto); a scaled grid fits its own scale.
		var bin []network.Target
		for _, t := range res.Targets {
			if t.Grid == network.Binary {
				bin = append(bin, t)
			}
		}
		if len(bin) > 0 {
			if _, err := network.Precondition(g, bin); err != nil {
				return nil, fmt.Errorf("%s: %w", model.Name, err)
			}
		}
	}
	// After fitMemory: the full-precision model is evaluated in the pieces training uses,
	// within the teacher's share of the memory.
	if res.FullPrecision, err = evaluate(ctx, teacher, nil, data.Eval, o, res.Outputs); err != nil {
		return nil, fmt.Errorf("%s: evaluating the full-precision model: %w", model.Name, err)
	}
	if !o.AbsoluteLR {
		f, err := gridMagnitudes(g, res.Targets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", model.Name, err)
		}
		keptMagnitudes(g, m, res.Targets, f)
		cfg.Optimizer = &gridLR{Optimizer: cfg.Optimizer, factor: f}
	}
	nd, err := networkData(trainSet, valid, o, teacher)
	if err != nil {
		return nil, err
	}
	run, err := network.New(m, g, res.Targets, cfg, nd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.Name, err)
	}
	if o.Resume != nil {
		if err := run.Restore(o.Resume); err != nil {
			return nil, &ResumeError{Err: err}
		}
	}
	if err := run.Run(ctx); err != nil {
		return nil, err
	}
	res.History = run.History()
	res.Start = run.Start()
	res.RhoScales = run.RhoScales()
	res.RhoGrowths = run.Growths()
	ws, err := run.Finish(ctx, m, o.Grid, !o.NoBNRecalib)
	res.Exported = run.Exported()
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		res.Weights = append(res.Weights, export.Weight{Name: w.Name, Values: w.Values,
			Grid: export.Grid{Levels: w.Levels, Scales: w.Scales, Axis: w.Axis}})
	}
	if err := g.WriteParams(m); err != nil {
		return nil, fmt.Errorf("%s: %w", model.Name, err)
	}
	eo := o.exportOptions()
	eo.Metadata = export.Metadata{Version: o.Version, Algorithm: fileName(o.Method), Grid: o.gridName(), Seed: o.Seed}
	xm, err := export.Export(m, res.Weights, eo)
	if err != nil {
		return nil, err // export's errors name the model
	}
	if res.Bytes, err = xm.Marshal(); err != nil {
		return nil, fmt.Errorf("%s: export: %w", model.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Output == "" {
		if res.Model, res.Binarized, err = check(ctx, res.Bytes, model.Name+" (binarized)", model.Dir, teacher, data.Eval, o, res.Outputs); err != nil {
			return nil, err
		}
	} else if err := writeChecked(ctx, res, teacher, data.Eval, o); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// fitMemory chooses the micro-batch of a run on g and its teacher (o.MicroBatch when the
// caller chose it, else MicroBatchFor's) and holds the run to o.MaxMemory: each graph's
// plan cache is bounded by its share (engine.Graph.SetMaxBytes), so that the plans of
// the statistics and of the last, shorter batch replace the training plans instead of
// adding to them, and the Go runtime's soft memory limit is set for the run's duration
// (unless GOMEMLIMIT is set), so that the plans dropped are collected before the heap
// grows past the limit rather than at twice the live heap. restore undoes the latter.
// trained is the number of samples trained on.
func (o *Options) fitMemory(name string, g, teacher *engine.Graph, data Data, trained int, cfg *network.Config) (restore func(), err error) {
	// With every float parameter trainable, as the training plan will at most have.
	var names []string
	for _, p := range g.Params() {
		if p.Value.DType == engine.Float32 {
			names = append(names, p.Name)
		}
	}
	if err := g.SetTrainable(names...); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var sample []int
	for _, d := range data.Calib.SampleShape() {
		sample = append(sample, int(d))
	}
	samples := max(trained, 1)
	bs := min(o.BatchSize, samples)
	resident := ResidentBytes(data.Calib, data.Eval, o.MaxMemory)
	var sh Shape
	var need Need
	if o.MicroBatch == 0 {
		if sh, need, err = MicroBatchFor(g, teacher, sample, bs, samples, resident, o.MaxMemory, name); err != nil {
			return nil, err
		}
	} else {
		sh = split(bs, samples, o.MicroBatch)
		if need, err = TrainNeed(g, teacher, sample, sh, resident); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if sh.Micro < bs {
		cfg.MicroBatch, o.MicroBatch = sh.Micro, sh.Micro
	}
	// Evaluation runs in batches of evaluate's size, which an evaluation set larger than
	// the samples trained on fills beyond the training batch.
	evalSize := o.BatchSize
	if o.MicroBatch > 0 && o.MicroBatch < evalSize {
		evalSize = o.MicroBatch
	}
	largest := data.Calib.Len()
	for _, d := range []calib.Dataset{data.Validation, data.Eval} {
		if d != nil {
			largest = max(largest, d.Len())
		}
	}
	if e := min(evalSize, largest); e > max(sh.Micro, sh.Last) {
		sh.Eval = e
		if need, err = TrainNeed(g, teacher, sample, sh, resident); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	sl, tl := need.limits(int64(accountShare * float64(o.MaxMemory)))
	g.SetMaxBytes(sl)
	teacher.SetMaxBytes(tl)
	restore = func() { teacher.SetMaxBytes(o.MaxMemory) }
	if os.Getenv("GOMEMLIMIT") == "" {
		old := debug.SetMemoryLimit(int64(gcShare * float64(o.MaxMemory)))
		restore = func() {
			debug.SetMemoryLimit(old)
			teacher.SetMaxBytes(o.MaxMemory)
		}
	}
	return restore, nil
}

// gcShare is the part of the memory limit the Go runtime's soft limit is set to during a
// run: the rest is for what the runtime does not manage (the binary, the BLAS's buffers).
const gcShare = 0.9

// fileName is the algorithm's name in the exported file's metadata (qtool.algorithm).
// It stays the command-line name files were written with before the names were unified,
// so that the same run still writes the same bytes.
func fileName(m admmq.Method) string {
	switch m {
	case admmq.IADMMQ:
		return "admm-q"
	case admmq.GDProj:
		return "gd-proj"
	}
	return string(m)
}

// networkData batches data for network: the training samples shuffled by the seed for
// training and in order for the statistics, the validation split (if any) in order as
// network's Eval — what its in-loop accuracy and its choices see. The held-out set never
// reaches network.
func networkData(trainSet, valid calib.Dataset, o Options, teacher *engine.Graph) (network.Data, error) {
	train, err := calib.NewBatches(trainSet, calib.BatchOptions{Size: o.BatchSize, Shuffle: true, Seed: o.Seed, Augment: o.Augment})
	if err != nil {
		return network.Data{}, err
	}
	ordered, err := calib.NewBatches(trainSet, calib.BatchOptions{Size: o.BatchSize})
	if err != nil {
		return network.Data{}, err
	}
	nd := network.Data{Train: train, Calib: ordered, Samples: trainSet.Len(),
		BatchSize: o.BatchSize, Labelled: trainSet.HasLabels(), Teacher: teacher}
	if valid != nil {
		eval, err := calib.NewBatches(valid, calib.BatchOptions{Size: o.BatchSize})
		if err != nil {
			return network.Data{}, err
		}
		nd.Eval = eval
	}
	return nd, nil
}

// evaluate runs g over d in inference mode, against ref when given.
func evaluate(ctx context.Context, g, ref *engine.Graph, d calib.Dataset, o Options, specs []train.OutputSpec) (train.Metrics, error) {
	size := o.BatchSize
	if o.MicroBatch > 0 && o.MicroBatch < size {
		// The batch trained in micro-batches does not fit in memory in one pass either;
		// inference results do not depend on the batch.
		size = o.MicroBatch
	}
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: size})
	if err != nil {
		return train.Metrics{}, err
	}
	return train.Evaluate(ctx, g, b, train.EvalOptions{Reference: ref, Outputs: specs, Engine: &engine.Context{BLAS: o.BLAS, Workers: o.Workers}})
}

// check parses the exported bytes as a file named name, builds them and evaluates them
// against the full-precision teacher: what is reported is the exported model itself.
func check(ctx context.Context, b []byte, name, dir string, teacher *engine.Graph, eval calib.Dataset, o Options, specs []train.OutputSpec) (*onnxio.Model, train.Metrics, error) {
	pm, err := onnxio.Parse(b, name, dir)
	if err != nil {
		return nil, train.Metrics{}, err
	}
	g, err := Build(pm, o)
	if err != nil {
		return nil, train.Metrics{}, err
	}
	mt, err := evaluate(ctx, g, teacher, eval, o, specs)
	if err != nil {
		return nil, train.Metrics{}, fmt.Errorf("%s: evaluating the binarized model: %w", name, err)
	}
	return pm, mt, nil
}

// writeChecked writes res.Bytes to o.Output through a temporary file next to it, reads
// that file back from disk, builds and evaluates it, and only then renames it over
// o.Output: a failure or a cancellation at any point leaves the old file or the new
// one, never neither.
func writeChecked(ctx context.Context, res *Result, teacher *engine.Graph, eval calib.Dataset, o Options) error {
	out := o.Output
	pending, err := atomicfile.Create(out, func(w io.Writer) error { _, err := w.Write(res.Bytes); return err })
	if err != nil {
		return err
	}
	defer pending.Abort()
	if o.Verify != nil {
		if err := o.Verify(pending.TempPath()); err != nil {
			return fmt.Errorf("%s: %w (the previous %s, if any, is unchanged)", out, err, out)
		}
	}
	// Read back what is on disk, not res.Bytes: the check is of the file the user gets.
	written, err := os.ReadFile(pending.TempPath())
	if err != nil {
		return fmt.Errorf("%s: reading back the new file: %w (the previous %s, if any, is unchanged)", out, err, out)
	}
	pm, err := onnxio.Parse(written, out, filepath.Dir(out))
	if err != nil {
		return fmt.Errorf("reading back the new file: %w (the previous %s, if any, is unchanged)", err, out)
	}
	g, err := Build(pm, o)
	if err != nil {
		return fmt.Errorf("%w (the previous %s, if any, is unchanged)", err, out)
	}
	if res.Binarized, err = evaluate(ctx, g, teacher, eval, o, res.Outputs); err != nil {
		return fmt.Errorf("%s: evaluating the binarized model: %w", out, err)
	}
	// A cancellation during the checks above keeps the old file; past this point the
	// new one is complete and checked, and is kept.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := pending.Commit(); err != nil {
		return err
	}
	res.Model, res.Output = pm, out
	return nil
}
