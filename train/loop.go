package train

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"

	"github.com/qtool/qtool/engine"
)

// Batcher iterates over a data set in mini-batches; *calib.Batches implements it. Shuffling
// and its seed belong to the Batcher.
type Batcher interface {
	// Next reads the next batch, returning false at the end of the epoch or on an error.
	Next() bool
	// X returns the current batch's samples in the model's input layout.
	X() []float32
	// Shape returns the shape of X, batch dimension first.
	Shape() []int64
	// Y returns the current batch's labels: nil, or -1 for each sample, without labels.
	Y() []int64
	// Reset starts the next epoch.
	Reset()
	// Err returns the error that stopped the iteration, if any.
	Err() error
}

// ErrStop is returned by an epoch callback to end training early without error.
var ErrStop = errors.New("train: stop")

// Options configures Fit.
type Options struct {
	// Epochs is the number of passes over the data.
	Epochs int
	// Loss is the training loss; nil means CrossEntropy.
	Loss Loss
	// Optimizer updates the trainable parameters; nil means Adam with PyTorch's defaults.
	Optimizer Optimizer
	// Schedule gives each step's learning rate; nil means Constant{LR: 1e-3}.
	Schedule Schedule
	// Teacher computes the teacher logits for losses that need them (Distillation, MSE) and is
	// the reference for agreement in evaluation. It must be a graph other than the one
	// trained; it runs in inference mode.
	Teacher *engine.Graph
	// Engine carries the BLAS implementation and worker count of every run; nil (or zero
	// fields) means the graphs' Options, and GOMAXPROCS workers for the optimizer. Fit runs the
	// graph in training mode whatever Engine.Training says.
	Engine *engine.Context
	// Seed seeds the random stream Dropout draws from when Engine has no Rand.
	Seed uint64
	// GradHook, when set, is called after each backward pass and before the optimizer step,
	// with the step number counted from StartStep. It may change the parameters' gradients
	// in place; this is where ADMM adds λ + ρ(x − y) to them. An error ends training before
	// the update, leaving the parameters as they were.
	GradHook func(step int) error
	// EpochEnd, when set, is called after each epoch (and its evaluation). It may change the
	// parameters (ADMM's y- and λ-updates run here). Returning ErrStop ends training early
	// without error; another error ends it with that error.
	EpochEnd func(r EpochReport) error
	// Eval, when set, is evaluated after each epoch and its metrics put into the report.
	Eval Batcher
	// StartEpoch and StartStep number the first epoch and step, for a run that continues an
	// earlier one (they feed the Schedule and the callbacks).
	StartEpoch, StartStep int
	// MicroBatch > 0 splits each batch larger than it into the fewest micro-batches of at
	// most MicroBatch samples, of equal size (MicroSize; the last up to a few samples
	// shorter), whose forward and backward passes run one after
	// the other, accumulating the gradients each weighted by its share of the batch: the
	// optimizer takes one step per batch with the gradient of the batch's mean loss, up to
	// float summation order, with the memory of a MicroBatch-sample pass. BatchNorm in
	// training mode normalises each micro-batch by its own statistics and updates its
	// running statistics once per micro-batch, as PyTorch's gradient accumulation does; so
	// with BatchNorm the step is that of the micro-batches' statistics, not the batch's.
	// Batches of at most MicroBatch samples run exactly as without it.
	MicroBatch int
}

// EpochReport describes one finished epoch.
type EpochReport struct {
	// Epoch is the epoch's number, from Options.StartEpoch.
	Epoch int
	// Steps is the number of steps taken so far, including Options.StartStep.
	Steps int
	// Loss is the mean training loss over the epoch's samples (measured during the epoch,
	// as the parameters changed).
	Loss float64
	// LR is the learning rate of the epoch's last step.
	LR float64
	// Eval holds the held-out metrics when Options.Eval is set.
	Eval *Metrics
}

// Result summarises a Fit call.
type Result struct {
	// Epochs is the number of epochs completed, Steps the number of optimizer steps taken
	// (both excluding the Start offsets).
	Epochs, Steps int
	// Last is the report of the last completed epoch; zero when none completed.
	Last EpochReport
	// Stopped reports that EpochEnd returned ErrStop.
	Stopped bool
}

// Fit trains g on data for o.Epochs epochs: for each batch a training-mode forward pass, the
// loss on the first output (logits [batch, classes]), the backward pass, GradHook, and the
// optimizer step with the Schedule's learning rate.
//
// Cancelling ctx stops training between two steps, never during an update, so the
// parameters and the optimizer state are those after the last completed step; Fit then
// returns the partial Result and ctx's error. Any other error also leaves the trained
// parameters and the optimizer state after the last completed step (BatchNorm's running
// statistics may already include the failed step's batch, as its forward pass ran).
//
// With the same seed, data order, options and Engine.Workers, two runs give bit-identical
// parameters. A run resumed from a checkpoint continues bit for bit when the checkpoint
// holds the parameter values (BatchNorm's running statistics included), the optimizer's
// MarshalBinary and the Dropout stream (pass Engine.Rand over a *rand.PCG and marshal the
// PCG), and the resumed Fit gets the Batcher at the next epoch and StartEpoch/StartStep.
func Fit(ctx context.Context, g *engine.Graph, data Batcher, o Options) (Result, error) {
	var res Result
	if o.Loss == nil {
		o.Loss = CrossEntropy{}
	}
	if o.Optimizer == nil {
		o.Optimizer = NewAdam(AdamOptions{})
	}
	if o.Schedule == nil {
		o.Schedule = Constant{LR: 1e-3}
	}
	if NeedsTeacher(o.Loss) && o.Teacher == nil {
		return res, fmt.Errorf("train: the %T loss compares with a teacher model's outputs, but no teacher was given", o.Loss)
	}
	if o.Teacher == g {
		return res, fmt.Errorf("train: the teacher must be a separate graph from the one trained")
	}
	run := engine.Context{Training: true}
	if o.Engine != nil {
		run = *o.Engine
		run.Training, run.NoGrad = true, false
	}
	if run.Rand == nil {
		run.Rand = rand.New(rand.NewPCG(o.Seed, 0x747261696e)) // stream "train"
	}
	if run.Workers < 1 {
		// The graph fills its own copy of the context; the optimizer reads this one.
		run.Workers = runtime.GOMAXPROCS(0)
	}
	teach := run
	teach.Training, teach.NoGrad = false, true

	trainable := false
	for _, p := range g.Params() {
		trainable = trainable || p.Trainable
	}
	if !trainable {
		return res, fmt.Errorf("train: no parameter is trainable: call Graph.SetTrainable first")
	}

	var st stepper
	st.init(g)
	step := o.StartStep
	for e := range o.Epochs {
		epoch := o.StartEpoch + e
		var sum float64
		var samples int
		var lr float64
		for {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("train: epoch %d step %d: %w", epoch, step, err)
			}
			if !data.Next() {
				break
			}
			lr = o.Schedule.Rate(step, epoch)
			loss, n, err := st.step(&run, &teach, g, o, data, step, lr)
			if err != nil {
				return res, fmt.Errorf("train: epoch %d step %d: %w", epoch, step, err)
			}
			sum += loss * float64(n)
			samples += n
			step++
			res.Steps++
		}
		if err := data.Err(); err != nil {
			return res, fmt.Errorf("train: epoch %d: reading data: %w", epoch, err)
		}
		data.Reset()
		if samples == 0 {
			return res, fmt.Errorf("train: epoch %d: the data gave no batch", epoch)
		}
		rep := EpochReport{Epoch: epoch, Steps: step, Loss: sum / float64(samples), LR: lr}
		if o.Eval != nil {
			m, err := Evaluate(ctx, g, o.Eval, EvalOptions{Loss: o.Loss, Reference: o.Teacher, Engine: o.Engine})
			if err != nil {
				return res, fmt.Errorf("train: epoch %d: %w", epoch, err)
			}
			rep.Eval = &m
		}
		res.Epochs++
		res.Last = rep
		if o.EpochEnd != nil {
			if err := o.EpochEnd(rep); err != nil {
				if errors.Is(err, ErrStop) {
					res.Stopped = true
					return res, nil
				}
				return res, fmt.Errorf("train: epoch %d: %w", epoch, err)
			}
		}
	}
	return res, nil
}

// stepper holds the buffers one training step reuses.
type stepper struct {
	feed  Feed
	tfeed Feed // the teacher's inputs, which may be ordered differently
	grads Gradients
}

func (s *stepper) init(g *engine.Graph) {}

// input wraps the batcher's current batch as g's inputs without copying.
func (s *stepper) input(g *engine.Graph, data Batcher) (*Feed, int, error) {
	if err := s.feed.Load(g, data); err != nil {
		return nil, 0, err
	}
	return &s.feed, s.feed.N, nil
}

// logits checks the model's first output is [batch, classes] and returns the classes.
func logits(g *engine.Graph, outs []*engine.Tensor, n int) (*engine.Tensor, int, error) {
	if len(outs) == 0 {
		return nil, 0, fmt.Errorf("the model has no output")
	}
	y := outs[0]
	if y.DType != engine.Float32 || len(y.Shape) != 2 || y.Shape[0] != n {
		return nil, 0, fmt.Errorf("output %s has shape %v: training needs logits [batch=%d, classes]", g.Outputs()[0].Name, y.Shape, n)
	}
	return y, y.Shape[1], nil
}

func (s *stepper) step(run, teach *engine.Context, g *engine.Graph, o Options, data Batcher, step int, lr float64) (float64, int, error) {
	f, n, err := s.input(g, data)
	if err != nil {
		return 0, 0, err
	}
	labels := data.Y()
	per := LabelsPer(labels, n)
	if o.Loss.NeedsLabels() {
		if per == 0 || !labelled(labels) {
			return 0, 0, fmt.Errorf("the %T loss needs labels, but the data has none: use a distillation loss with the full-precision model as teacher", o.Loss)
		}
	}
	if NeedsTeacher(o.Loss) {
		if err := s.tfeed.Load(o.Teacher, data); err != nil {
			return 0, 0, fmt.Errorf("teacher: %w", err)
		}
	}
	// A model declaring a fixed batch B runs on chunks of B samples whose gradients add up
	// before the one optimizer step, so that the step sees the whole batch. The samples of
	// a last chunk shorter than B > 1 are left out of the step: padding would weigh the
	// repeated sample twice in BatchNorm's batch statistics.
	// Without a declared batch, a MicroBatch smaller than the batch splits it the same way
	// (gradient accumulation); every chunk then counts, the last one shorter.
	size, fixed := DeclaredBatch(g), true
	if size == 0 {
		size, fixed = n, false
		if o.MicroBatch > 0 && o.MicroBatch < n {
			size = MicroSize(n, o.MicroBatch)
		}
	}
	counts := func(nc int) bool { return !fixed || nc == n || nc == size }
	chunks := f.ChunksOf(size)
	used := 0
	for _, c := range chunks {
		if counts(c[1] - c[0]) {
			used += c[1] - c[0]
		}
	}
	if used == 0 {
		return 0, 0, fmt.Errorf("the batch of %d samples is smaller than the batch of %d the model declares", n, DeclaredBatch(g))
	}
	// The chunks counted are the batch's first used samples.
	totals := BatchTotals{Samples: used}
	if per > 0 {
		totals.Labelled = countLabelled(labels[:used*per])
	}
	if len(chunks) > 1 && HasNMSE(o.Loss) {
		// A normalised MSE term needs the teacher's Σt² over the whole batch first.
		for _, c := range chunks {
			if nc := c[1] - c[0]; counts(nc) {
				touts, err := o.Teacher.Forward(teach, s.tfeed.Slice(c[0], c[1], nc)...)
				if err != nil {
					return 0, 0, fmt.Errorf("teacher: %w", err)
				}
				totals.TeacherSquares = AddTeacherSquares(o.Loss, touts, totals.TeacherSquares)
			}
		}
	}
	g.ZeroGrad()
	var sum float64
	for _, c := range chunks {
		nc := c[1] - c[0]
		if !counts(nc) {
			continue
		}
		var ys []int64
		if per > 0 {
			ys = labels[c[0]*per : c[1]*per]
		}
		var touts []*engine.Tensor
		if NeedsTeacher(o.Loss) {
			var err error
			if touts, err = o.Teacher.Forward(teach, s.tfeed.Slice(c[0], c[1], nc)...); err != nil {
				return 0, 0, fmt.Errorf("teacher: %w", err)
			}
		}
		outs, err := g.Forward(run, f.Slice(c[0], c[1], nc)...)
		if err != nil {
			return 0, 0, err
		}
		loss, err := ChunkLoss(o.Loss, g, outs, touts, ys, nc, totals, &s.grads)
		if err != nil {
			return 0, 0, err
		}
		sum += loss
		if err := g.Backward(run, s.grads.Outputs()...); err != nil {
			return 0, 0, err
		}
	}
	if o.GradHook != nil {
		if err := o.GradHook(step); err != nil {
			return 0, 0, fmt.Errorf("gradient hook: %w", err)
		}
	}
	if err := o.Optimizer.Step(run, g.Params(), lr); err != nil {
		return 0, 0, err
	}
	return sum, used, nil
}

// labelled reports whether every sample carries a label.
func labelled(y []int64) bool {
	for _, v := range y {
		if v < 0 && v != IgnoreLabel {
			return false
		}
	}
	return len(y) > 0
}

// LabelsPer returns the labels per sample of a batch of n samples: 1 for one label per
// sample, T for [N, T] sequence labels (one per position), 0 when labels do not split
// evenly into n samples (or there are none).
func LabelsPer(labels []int64, n int) int {
	if n <= 0 || len(labels) == 0 || len(labels)%n != 0 {
		return 0
	}
	return len(labels) / n
}

// MicroSize returns the size of the micro-batches a batch of n samples is split into when
// no micro-batch may exceed micro: the fewest pieces, of equal size (the last one up to
// a few samples shorter). Equal pieces keep the number of distinct batch sizes, and so of
// the engine plans a run caches, at one per batch size, and give BatchNorm's training
// statistics no tiny remainder micro-batch.
func MicroSize(n, micro int) int {
	if micro < 1 || micro >= n {
		return n
	}
	k := (n + micro - 1) / micro
	return (n + k - 1) / k
}
