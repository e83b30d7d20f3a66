package network

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
	gblas "gonum.org/v1/gonum/blas"
)

// Methods lists the algorithms a network runs, in admmq's names. admmq.ADMMQ is not
// among them: its x-update is an exact minimisation, which no network has, so what users
// call ADMM-Q on a network is admmq.IADMMQ (Alg. 2) with K inner epochs of the optimizer.
func Methods() []admmq.Method {
	return []admmq.Method{admmq.GDProj, admmq.PGD, admmq.STE, admmq.IADMMQ, admmq.ADMMR, admmq.ADMMS}
}

// IsADMM reports whether m is one of the ADMM variants, which keep y and λ between
// x-updates, rather than a projected-gradient baseline.
func IsADMM(m admmq.Method) bool {
	return m == admmq.IADMMQ || m == admmq.ADMMR || m == admmq.ADMMS
}

// MethodError reports a method that New cannot run on a network.
type MethodError struct {
	Method admmq.Method
}

func (e *MethodError) Error() string {
	if e.Method == admmq.ADMMQ {
		return fmt.Sprintf("network: %s needs an exact x-update, which a network has none of: run %s (K epochs of the optimizer per x-update)", e.Method, admmq.IADMMQ)
	}
	return fmt.Sprintf("network: unknown algorithm %q", string(e.Method))
}

// Config configures a run.
type Config struct {
	Method admmq.Method
	// Rho is the penalty schedule ρ_r = Rho0·Growth^⌊r/Every⌋.
	Rho admmq.Schedule
	// ScaleFree makes ρ_r a scale-free ρ̄: tensor t's penalty is ρ̄·ScaleFreeRho(y⁰_t) =
	// ρ̄/mean(y⁰_t²), distances counted in units of the tensor's grid scale, so that one ρ̄
	// means the same on the ±1 grid (where it is the absolute ρ, bit for bit) and on a
	// scaled grid whatever the weights' scale. ADMM-S keeps the absolute ρ: its y-update
	// takes one ρ for the whole variable.
	ScaleFree bool
	// GradientRho makes ρ_r relative to the loss's gradient at the start: tensor t's
	// penalty is ρ̄·‖∇_t f(y⁰)‖/‖y⁰_t‖ (the gradient over the StatSamples subset, in
	// inference mode, measured once before the first y-update). An exact x-update from
	// x = y⁰ then moves t by about ‖y⁰_t‖/ρ̄ whatever the network, the layer's width or the
	// grid's scale, so one ρ̄ lets signs flip on an MLP whose per-weight gradients are 1e-5
	// and on a CNN whose gradients are 1e-2 (issue 15: an absolute ρ = 1 pinned x to y on
	// fmnist-mlp, ρ = 1e-5 wrecked fmnist-cnn). It replaces ScaleFree's factor, to which a
	// tensor without gradient falls back; ADMM-S keeps the absolute ρ.
	GradientRho bool
	// RemeasureRho, with GradientRho, measures the factors again before every
	// iteration's y-update, at the current y: ρ_t^k = ρ̄·‖∇_t f(y^k)‖/‖y^k_t‖. The
	// gradient shrinks as the float parameters re-train around y, and factors measured at
	// y⁰ then hold x at y (issue 15: no sign flipped on fmnist-cnn and fmnist-resnet).
	RemeasureRho bool
	// UnnormalizedGrowth, when above 1, multiplies the ρ of every target that no
	// normalisation follows (Target.Normalized false) by UnnormalizedGrowth^r at iteration
	// r (0-based), on top of Rho's schedule (ADMM variants but ADMM-S, whose y-update takes
	// one ρ for the whole variable). A normalisation re-centres and re-scales what the
	// binary y makes, and BatchNorm is re-estimated for y at export, so x may stay apart
	// from y; where none follows, the float parameters around the weight train to x's
	// outputs, and the y exported lands far from them unless ρ grows until x sits on y
	// (torchvision ResNet-18 exported in eval mode, its BatchNorm folded into the
	// convolutions: 60.8 % validation against PGD's 82.0 % at a constant ρ; README,
	// "Weights no normalisation follows").
	UnnormalizedGrowth float64
	// Balance, when set, adapts ρ after every iteration by residual balancing (a factor
	// on the schedule, common to all tensors: the residuals are summed over the tensors,
	// since one tensor's inexact x-update is too noisy to steer its own ρ). λ is unscaled
	// and kept as it is.
	Balance *admmq.Balancing
	// P is ADMM-R's mask probability, Beta ADMM-S's β.
	P, Beta float64
	// Iters is the number of outer iterations.
	Iters int
	// InnerEpochs is K, the epochs of each x-update (default 5, the paper's); with
	// InnerSteps > 0 each x-update is InnerSteps optimizer steps instead. With Gamma > 0 the
	// x-update stops earlier once the criterion holds (tested after each epoch).
	InnerEpochs, InnerSteps int
	Gamma                   float64
	// Epochs is GD+Proj's fine-tuning length; 0 means Iters·InnerEpochs.
	Epochs int
	// Optimizer updates every trainable parameter; its state is checkpointed.
	Optimizer train.Optimizer
	// Schedule gives the learning rate of each step.
	Schedule train.Schedule
	// Loss is the training loss (CrossEntropy, SquaredHinge, Distillation, MSE, or a
	// train.GraphLoss such as train.Objective over every output).
	Loss train.Loss
	// Outputs describes the graph's outputs for evaluation (train.DetectOutputs); nil
	// means train.Evaluate's detection from the shapes.
	Outputs []train.OutputSpec
	// Seed drives the data order, Dropout and ADMM-R's masks.
	Seed uint64
	// StartOnGrid starts x at y⁰ = P_A(x⁰), as the paper's analysis does (x⁰ = y⁰ ∈ A),
	// instead of at the pretrained weights as its code does. With a small budget of
	// optimizer steps x cannot travel from the pretrained weights to the grid, the dual
	// accumulates that distance and y oscillates; starting on the grid avoids it.
	StartOnGrid bool
	// StatSamples is how many calibration samples (rounded up to whole batches, in the
	// data's order) f(x), f(y) and the criterion's gradient are measured over; 0 means 2048.
	StatSamples int
	// STEClip clips STE's latent weights to the grid's range, as BinaryConnect clips to
	// [−1, 1] (see ste.go; grids with a fitted scale have no range and are not clipped).
	STEClip bool
	// MicroBatch > 0 runs each training batch in micro-batches of that many samples with
	// gradient accumulation (train.Options.MicroBatch), to bound the training plan's memory.
	MicroBatch int
	// BLAS and Workers are the engine's.
	BLAS    gblas.Float32
	Workers int
	// Progress, when set, is called after each inner epoch and each outer iteration.
	Progress func(Progress)
	// Checkpoint, when set, is called at the end of each outer iteration with the run's
	// serialized state (see Run.Checkpoint).
	Checkpoint func(state []byte) error
	// Export chooses the iterate Finish exports: IterateLast (the zero value, the
	// paper's) or IterateBest, the one with the best score on Data.Eval (binarize gives it the validation split).
	Export Iterate
	// ScoreRecalibrated measures each iteration's accuracy of y (IterStats.Accuracy, the
	// score IterateBest ranks by) after re-estimating the BatchNorm statistics over the
	// calibration data, as Finish(…, recalib = true) does, so that the score is the
	// exported model's own: with the statistics as training left them, the iterates'
	// ranking can differ from the exported files' (issue 15: chosen at 82.5 %, exported
	// 79.5 %, the last iterate 80.5 %). The statistics are restored afterwards; it costs one
	// forward pass over the calibration data per iteration.
	ScoreRecalibrated bool
	// ScoreStart also scores y⁰, the projection of the starting weights, before the first
	// iteration under IterateBest: "iteration 0", exported when no fine-tuned iterate beats
	// it on Data.Eval. Fine-tuning on a small calibration set can lose more than it
	// recovers (torchvision ResNet-18 on Fashion-MNIST, int4/int8 mixes: 88.6 % on
	// validation before, 77.4 % after two iterations), and the bare projection is then the
	// better file.
	ScoreStart bool
	// ProjectX makes an ADMM run score and export P(x), the projection of the trained
	// weights, instead of its auxiliary y: what the paper's reference code reports (its
	// test() measures the model with every weight replaced by sign(x)). From a random
	// start at a small ρ the scaled dual accumulates x − y ≈ −y while |x| ≪ 1, so y
	// alternates between the signs of x and their opposites from one iteration to the
	// next; P(x) does not. Other methods' y already is P(x) at the end of an iteration.
	ProjectX bool
}

// Iterate says which outer iteration's state Finish exports.
type Iterate int

const (
	// IterateLast exports the state after the last outer iteration, as the paper does.
	IterateLast Iterate = iota
	// IterateBest exports the state after the outer iteration whose y scored best on
	// Data.Eval (accuracy, or agreement with the teacher without labels); the earliest on
	// ties. On scaled grids ADMM oscillates (issue 15: 81.5 → 91.0 → 76.5 → 70.0 → 89.5 %
	// held out), and the last iterate is then an accident of the budget. Without Data.Eval
	// there is no score and the last iterate is exported.
	IterateBest
)

// Data is what a run trains and measures on: batches of the calibration set in two
// orders and of the held-out set, so that this package stays independent of how data are
// read.
type Data struct {
	// Train is the calibration set in the order the x-updates train on, seeded by
	// Config.Seed. It must be at its first epoch, and epoch e's order must depend on e
	// alone (as *calib.Batches' seeded shuffle does): Restore replays the order by
	// resetting Train as often as the checkpointed run had.
	Train train.Batcher
	// Calib is the calibration set in a fixed order: f(x), f(y) and the criterion's
	// gradient are measured on its first batches, and BatchNorm statistics re-estimated
	// over all of it.
	Calib train.Batcher
	// Eval is the held-out set, in a fixed order, accuracy is measured on (nil: none).
	Eval train.Batcher
	// Samples is the number of calibration samples, BatchSize the samples per batch of
	// Train and Calib (the last batch may be smaller).
	Samples, BatchSize int
	// Labelled reports whether the calibration batches carry labels.
	Labelled bool
	// Teacher is the full-precision graph: the teacher of a distillation loss and the
	// reference of agreement when the data have no labels. It must not be the graph trained.
	Teacher *engine.Graph
}

// Progress reports where a run is.
type Progress struct {
	Iter, Iters int // outer iteration (1-based) and total
	Epoch, Of   int // inner epoch within the iteration (1-based) and its budget
	Loss        float64
	// Done marks the end of an outer iteration; Stats is then set.
	Done  bool
	Stats *IterStats
}

// IterStats records one outer iteration.
type IterStats struct {
	Iter int `json:"iter"`
	// Rho is the iteration's ρ: the schedule's times the balancing factor; under
	// Config.ScaleFree tensor t's ρ is Rho·ScaleFreeRho(y⁰_t).
	Rho float64 `json:"rho"`
	// TrainLoss is the mean minibatch loss of the iteration's last inner epoch (training
	// mode, the weights moving).
	TrainLoss float64 `json:"train_loss"`
	// FX and FY are the loss of the network with weights x and with weights y (the grid
	// point; P_A(y) for ADMM-S; P(x) under Config.ProjectX) over the fixed calibration
	// subset, in inference mode.
	FX float64 `json:"f_x"`
	FY float64 `json:"f_y"`
	// Lagrangian is L(x, y, λ) = f(x) + ⟨λ, x − y⟩ + ρ/2‖x − y‖² (ADMM variants; f(x) otherwise).
	Lagrangian float64 `json:"lagrangian"`
	// Residual is ‖x − y‖ over the targeted weights at the iteration's end: ADMM's primal
	// residual. DualResidual is ‖ρ(y − y_prev)‖, the change of this iteration's y-update
	// weighted by each tensor's ρ (Boyd et al. 2011, §3.3): how far the x-update's
	// optimality moved (ADMM variants; 0 otherwise). Their ratio is what residual
	// balancing steers.
	Residual     float64 `json:"residual"`
	DualResidual float64 `json:"dual_residual"`
	// Changed is the fraction of y's elements changed by this iteration's y-update (for PGD
	// and GD+Proj: of the projection of x since the previous iteration). On a scaled grid
	// a change of a channel's scale changes every element of the channel, so Changed is
	// near 100 % even when no sign flips: Flipped and ScalesChanged separate the two.
	Changed float64 `json:"changed"`
	// Flipped is the fraction of elements whose grid level (the sign, on binary grids)
	// differs from the previous iteration's grid point.
	Flipped float64 `json:"flipped"`
	// ScalesChanged is the fraction of channels (of scaled grids) whose scale changed,
	// ScaleChange the mean relative change |α − α_prev|/α_prev over the channels.
	ScalesChanged float64 `json:"scales_changed"`
	ScaleChange   float64 `json:"scale_change"`
	// Best marks the iteration whose state Finish exports under IterateBest, as far as
	// the run has got: it is set on the best iteration so far and cleared on the others.
	Best bool `json:"best,omitempty"`
	// Accuracy is the held-out top-1 accuracy of y, or of P(x) under Config.ProjectX
	// (agreement with the teacher without labels).
	Accuracy    float64 `json:"accuracy"`
	HasAccuracy bool    `json:"has_accuracy"`
	Agreement   float64 `json:"agreement"`
	// InnerEpochs is the number of epochs the x-update took, GradNorm ‖∇ₓL‖ at its end
	// when the criterion was tested.
	InnerEpochs int     `json:"inner_epochs"`
	GradNorm    float64 `json:"grad_norm,omitempty"`
	Seconds     float64 `json:"seconds"`
	// TrainSeconds is the wall time of the iteration's inner epochs (optimizer steps),
	// StatSeconds that of the statistics around them: f(x), f(y), the held-out accuracy
	// and the criterion's gradient. The statistics are meant to cost less than one epoch.
	TrainSeconds float64 `json:"train_seconds"`
	StatSeconds  float64 `json:"stat_seconds"`
}

// Run is one algorithm run on a graph. It is not safe for concurrent use.
type Run struct {
	m       *onnxio.Model
	g       *engine.Graph
	targets []Target
	params  []*engine.Param // targets' params, in order
	cfg     Config
	data    Data

	y, lambda [][]float32
	scratch   [][]float32
	zt        [][]float32

	iter, epoch, step int
	history           []IterStats

	pcg    *rand.PCG
	eng    engine.Context
	feed   *feed
	stepsN int // batches in the stat subset
	lastY  [][]float32
	// STE: the latent x while the parameters hold P_A(x), and each target's clip range.
	latent         [][]float32
	clipLo, clipHi []float32
	swapped        bool
	// The teacher's outputs on the stat subset and on the held-out set: it is frozen,
	// so each iteration's statistics need only the trained graph's forward passes.
	subRef, evalRef train.RefCache
	// point is the grid point of y at the end of the last iteration (at New: y⁰), the
	// reference of the next iteration's flips and scale changes. It is a function of y,
	// so Restore recomputes it instead of checkpointing it.
	point []gridPoint
	// best is the state after the best iteration so far under IterateBest (nil before
	// the first iteration with a score).
	best *snapshot
	// start is iteration 0's record under Config.ScoreStart (nil: not scored).
	start *IterStats
	// rhoScale is each tensor's factor on ρ (1, or ScaleFreeRho(y⁰) under ScaleFree: a
	// function of the model, so not checkpointed); rhoFactor is residual balancing's.
	rhoScale  []float64
	rhoFactor float64
	// gradRho is set while GradientRho's factors are still to be measured (at the first
	// iteration: they are then checkpointed, since y⁰ is gone by a resume).
	gradRho bool
}

// snapshot is the state Finish needs to export an iterate: every float parameter of the
// graph (x, the trained biases and normalisation parameters, the BatchNorm running
// statistics, which the export keeps when it does not re-estimate them) and y.
type snapshot struct {
	Iter   int // 1-based
	Score  float64
	Params []namedParam
	Y      [][]float32
}

// refCacheBytes bounds each of a run's caches of teacher outputs: classifier outputs of
// thousands of samples fit many times over; large feature maps are recomputed instead.
const refCacheBytes = 32 << 20

// New prepares a run of cfg on g: targets become trainable (with every bias and
// normalisation scale and shift), y⁰ = P_A(x⁰) and λ⁰ = 0.
func New(m *onnxio.Model, g *engine.Graph, targets []Target, cfg Config, data Data) (*Run, error) {
	if len(targets) == 0 {
		return nil, errors.New("network: no target weights")
	}
	if !slices.Contains(Methods(), cfg.Method) {
		return nil, &MethodError{Method: cfg.Method}
	}
	if cfg.Iters < 1 && cfg.Method != admmq.GDProj {
		return nil, fmt.Errorf("network: %d outer iterations: want at least 1", cfg.Iters)
	}
	if cfg.InnerEpochs < 1 {
		cfg.InnerEpochs = 5
	}
	if cfg.Method == admmq.GDProj {
		if cfg.Epochs < 1 {
			cfg.Epochs = max(cfg.Iters, 1) * cfg.InnerEpochs
		}
		cfg.InnerSteps, cfg.Gamma = 0, 0
		cfg.Iters = (cfg.Epochs + cfg.InnerEpochs - 1) / cfg.InnerEpochs
	}
	if IsADMM(cfg.Method) {
		if err := cfg.Rho.Validate(); err != nil {
			return nil, fmt.Errorf("network: %w", err)
		}
		if g := cfg.UnnormalizedGrowth; g < 0 || math.IsNaN(g) || math.IsInf(g, 0) {
			return nil, fmt.Errorf("network: growth of ρ where no normalisation follows = %g: want a finite factor ≥ 0 (≤ 1: none)", g)
		}
	}
	if cfg.Method == admmq.ADMMR && (cfg.P <= 0 || cfg.P > 1) {
		return nil, fmt.Errorf("network: ADMM-R mask probability p = %g: want 0 < p ≤ 1", cfg.P)
	}
	if cfg.Method == admmq.ADMMS && !(cfg.Beta > 0) {
		return nil, fmt.Errorf("network: ADMM-S β = %g: want β > 0", cfg.Beta)
	}
	if cfg.Loss == nil {
		cfg.Loss = train.CrossEntropy{}
	}
	if cfg.Optimizer == nil {
		cfg.Optimizer = train.NewAdam(train.AdamOptions{})
	}
	if cfg.Schedule == nil {
		cfg.Schedule = train.Constant{LR: 1e-3}
	}
	if cfg.StatSamples <= 0 {
		cfg.StatSamples = 2048
	}
	if data.BatchSize < 1 {
		return nil, fmt.Errorf("network: batch size %d", data.BatchSize)
	}
	if data.Train == nil || data.Calib == nil {
		return nil, errors.New("network: Data needs the Train and Calib batches")
	}
	if train.NeedsTeacher(cfg.Loss) && data.Teacher == nil {
		return nil, errors.New("network: the loss needs a teacher (the full-precision graph)")
	}
	if cfg.Loss.NeedsLabels() && !data.Labelled {
		return nil, errors.New("network: the loss needs labels but the calibration data have none: use distillation")
	}
	r := &Run{m: m, g: g, targets: targets, cfg: cfg, data: data}
	var names []string
	roles := m.ParamRoles()
	for _, p := range g.Params() {
		if p.Value.DType == engine.Float32 && trainable(roles[p.Name]) {
			names = append(names, p.Name)
		}
	}
	for _, t := range targets {
		p := g.Param(t.Name)
		if p == nil || p.Value.DType != engine.Float32 {
			return nil, fmt.Errorf("network: weight %s is not a float parameter of the graph", t.Name)
		}
		r.params = append(r.params, p)
	}
	if err := g.SetTrainable(names...); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	for i, t := range targets {
		x := r.params[i].Value.F
		y := make([]float32, len(x))
		if err := t.Set.Project32(y, x, t.Layout); err != nil {
			return nil, fmt.Errorf("network: projecting %s: %w", t.Name, err)
		}
		if cfg.StartOnGrid && IsADMM(cfg.Method) {
			copy(x, y)
			r.params[i].Changed()
		}
		r.y = append(r.y, y)
		r.lambda = append(r.lambda, make([]float32, len(x)))
		r.scratch = append(r.scratch, make([]float32, len(x)))
		r.lastY = append(r.lastY, append([]float32(nil), y...))
		r.point = append(r.point, gridPoint{})
		k := 1.0
		if cfg.ScaleFree && cfg.Method != admmq.ADMMS {
			k = admmq.ScaleFreeRho(y)
		}
		r.rhoScale = append(r.rhoScale, k)
		if cfg.Method == admmq.ADMMS {
			r.zt = append(r.zt, make([]float32, len(x)))
		}
	}
	r.rhoFactor = 1
	r.gradRho = cfg.GradientRho && IsADMM(cfg.Method) && cfg.Method != admmq.ADMMS
	r.pcg = rand.NewPCG(cfg.Seed, 0x6e6574776f726b) // stream "network"
	r.eng = engine.Context{BLAS: cfg.BLAS, Workers: cfg.Workers, Rand: rand.New(r.pcg)}
	r.feed = &feed{b: data.Train, limit: cfg.InnerSteps}
	if cfg.Method == admmq.PGD {
		r.feed.before = r.projectX
	}
	if cfg.Method == admmq.STE {
		r.steInit()
	}
	r.stepsN = (min(cfg.StatSamples, data.Samples) + data.BatchSize - 1) / data.BatchSize
	r.subRef.Max, r.evalRef.Max = refCacheBytes, refCacheBytes
	if err := r.resetPoints(); err != nil {
		return nil, err
	}
	return r, nil
}

// resetPoints sets the reference grid points to those of the current y.
func (r *Run) resetPoints() error {
	for i := range r.targets {
		y, err := r.gridY(i)
		if err != nil {
			return err
		}
		r.point[i] = pointOf(r.targets[i], y)
	}
	return nil
}

// splitChanges fills the level and scale changes of y since the previous iteration and
// moves the reference to the current grid point.
func (r *Run) splitChanges(st *IterStats) error {
	var flips, scales, n, channels int
	var rel float64
	for i := range r.targets {
		y, err := r.gridY(i)
		if err != nil {
			return err
		}
		p := pointOf(r.targets[i], y)
		f, c, d := r.point[i].changes(p)
		flips, scales, rel = flips+f, scales+c, rel+d
		n += len(y)
		channels += len(p.scales)
		r.point[i] = p
	}
	st.Flipped = float64(flips) / float64(n)
	if channels > 0 {
		st.ScalesChanged = float64(scales) / float64(channels)
		st.ScaleChange = rel / float64(channels)
	}
	return nil
}

// keepBest records the state after this iteration when its score on Data.Eval beats the
// best so far (strictly: the earliest best wins ties, so that a run whose y stops moving
// exports the first iterate that reached it).
func (r *Run) keepBest(st *IterStats) error {
	if r.cfg.Export != IterateBest || !st.HasAccuracy {
		return nil
	}
	if r.best != nil && !(st.Accuracy > r.best.Score) {
		return nil
	}
	// y, or under ProjectX the P(x) scored (a grid point, which Finish's gridY keeps),
	// before anything is overwritten.
	px := r.cfg.ProjectX && IsADMM(r.cfg.Method)
	ys := make([][]float32, len(r.y))
	for i, y := range r.y {
		if !px {
			ys[i] = slices.Clone(y)
			continue
		}
		var err error
		if ys[i], err = r.iterateY(i); err != nil {
			return err
		}
	}
	if r.best == nil {
		r.best = &snapshot{}
	}
	b := r.best
	b.Iter, b.Score = st.Iter, st.Accuracy
	b.Params = b.Params[:0]
	for _, p := range r.g.Params() {
		if p.Value.F != nil {
			b.Params = append(b.Params, namedParam{p.Name, slices.Clone(p.Value.F)})
		}
	}
	slices.SortFunc(b.Params, func(a, b namedParam) int { return strings.Compare(a.Name, b.Name) })
	b.Y = ys
	for i := range r.history {
		r.history[i].Best = false
	}
	if r.start != nil {
		r.start.Best = false
	}
	st.Best = true
	return nil
}

// Exported returns the 1-based outer iteration whose state Finish exports: the best
// one under IterateBest when any iteration was scored, else the last.
func (r *Run) Exported() int {
	if r.best != nil {
		return r.best.Iter
	}
	return r.iter
}

// trainable reports whether a parameter is trained: weights, biases and normalisation
// scales and shifts, as the paper's code trains every parameter; not the BatchNorm running
// statistics (inputs 3 and 4), which training-mode forward passes maintain, nor other
// constants (shapes, clip bounds).
func trainable(c onnxio.Classification) bool {
	switch c.Role {
	case onnxio.RoleWeight, onnxio.RoleBias:
		return true
	case onnxio.RoleNorm:
		return !(c.Use.Node.GetOpType() == "BatchNormalization" && c.Use.Input >= 3)
	}
	return false
}

// tensorRho is target i's ρ when the iteration's is rho: during an iteration r.iter is
// its index, so the growth is that iteration's.
func (r *Run) tensorRho(i int, rho float64) float64 {
	return rho * r.rhoScale[i] * r.growth(i, r.iter)
}

// growth is target i's factor from Config.UnnormalizedGrowth at iteration it.
func (r *Run) growth(i, it int) float64 {
	g := r.cfg.UnnormalizedGrowth
	if g > 1 && IsADMM(r.cfg.Method) && r.cfg.Method != admmq.ADMMS && !r.targets[i].Normalized {
		return math.Pow(g, float64(it))
	}
	return 1
}

// Growths returns each target's factor on its ρ per iteration (Config.UnnormalizedGrowth
// where it applies, 1 elsewhere), in target order.
func (r *Run) Growths() []float64 {
	out := make([]float64, len(r.rhoScale))
	for i := range out {
		out[i] = r.growth(i, 1)
	}
	return out
}

// tensorRhos returns each target's ρ at the last iteration run (before the first, at the
// first), in target order: the schedule's ρ times RhoScales and the
// Config.UnnormalizedGrowth factor.
func (r *Run) tensorRhos() []float64 {
	it := max(r.iter-1, 0)
	out := make([]float64, len(r.rhoScale))
	for i := range out {
		out[i] = r.cfg.Rho.Rho(it) * r.rhoFactor * r.rhoScale[i] * r.growth(i, it)
	}
	return out
}

// RhoScales returns each target's factor on the schedule's ρ, in target order: 1, the
// scale-free 1/mean(y⁰²) or GradientRho's ‖∇f(y⁰)‖/‖y⁰‖ (measured in the first iteration;
// before it, the scale-free factor).
func (r *Run) RhoScales() []float64 { return slices.Clone(r.rhoScale) }

// Iter returns the number of outer iterations completed.
func (r *Run) Iter() int { return r.iter }

// History returns the records of the completed iterations.
func (r *Run) History() []IterStats { return r.history }

// Start returns the record of y⁰ scored before the first iteration (Config.ScoreStart),
// or nil; its Best is set when Finish exports it.
func (r *Run) Start() *IterStats { return r.start }

// Run performs the remaining outer iterations. Cancelling ctx stops it between two
// optimizer steps with ctx's error; the last checkpoint written stays consistent.
func (r *Run) Run(ctx context.Context) error {
	// A resumed run has iterated already: its start was scored, or never is.
	if r.iter == 0 && r.best == nil && r.cfg.ScoreStart && r.cfg.Export == IterateBest && r.data.Eval != nil {
		st := IterStats{Iter: 0, Rho: r.cfg.Rho.Rho(0) * r.rhoFactor}
		if err := r.measure(ctx, &st, st.Rho); err != nil {
			return err
		}
		if err := r.keepBest(&st); err != nil {
			return err
		}
		r.start = &st
	}
	for r.iter < r.cfg.Iters {
		if err := r.iteration(ctx); err != nil {
			return err
		}
		if r.cfg.Checkpoint != nil {
			state, err := r.Checkpoint()
			if err != nil {
				return err
			}
			if err := r.cfg.Checkpoint(state); err != nil {
				return fmt.Errorf("network: writing checkpoint: %w", err)
			}
		}
	}
	return nil
}

func (r *Run) iteration(ctx context.Context) error {
	start := time.Now()
	it := r.iter
	rho := r.cfg.Rho.Rho(it) * r.rhoFactor
	st := IterStats{Iter: it + 1, Rho: rho}
	admm := IsADMM(r.cfg.Method)
	if r.gradRho || (admm && it > 0 && r.cfg.GradientRho && r.cfg.RemeasureRho && r.cfg.Method != admmq.ADMMS) {
		if err := r.measureGradientRho(ctx); err != nil {
			return err
		}
	}
	if admm {
		changed, err := r.updateY(rho, it)
		if err != nil {
			return err
		}
		st.Changed = changed
	}
	var xprev [][]float32
	if r.cfg.Gamma > 0 {
		for _, p := range r.params {
			xprev = append(xprev, append([]float32(nil), p.Value.F...))
		}
	}
	epochs := r.cfg.InnerEpochs
	if r.cfg.Method == admmq.GDProj && it == r.cfg.Iters-1 {
		epochs = r.cfg.Epochs - it*r.cfg.InnerEpochs
	}
	var hook func(int) error
	if r.cfg.Method == admmq.STE {
		hook = r.steRestore
	}
	if admm {
		hook = func(int) error {
			for i, p := range r.params {
				admmq.AddPenaltyGrad(p.Grad.F, p.Value.F, r.y[i], r.lambda[i], r.tensorRho(i, rho))
			}
			return nil
		}
	}
	for k := range epochs {
		t0 := time.Now()
		res, err := train.Fit(ctx, r.g, r.feed, train.Options{
			Epochs: 1, Loss: r.cfg.Loss, Optimizer: r.cfg.Optimizer, Schedule: r.cfg.Schedule,
			Teacher: r.data.Teacher, Engine: &r.eng, Seed: r.cfg.Seed, GradHook: hook,
			StartEpoch: r.epoch, StartStep: r.step, MicroBatch: r.cfg.MicroBatch,
		})
		if r.cfg.Method == admmq.STE {
			r.steEpochEnd()
		}
		if err != nil {
			return fmt.Errorf("network: iteration %d: %w", it+1, err)
		}
		st.TrainSeconds += time.Since(t0).Seconds()
		r.epoch++
		r.step += res.Steps
		st.TrainLoss = res.Last.Loss
		st.InnerEpochs = k + 1
		if r.cfg.Progress != nil {
			r.cfg.Progress(Progress{Iter: it + 1, Iters: r.cfg.Iters, Epoch: k + 1, Of: epochs, Loss: res.Last.Loss})
		}
		if r.cfg.Gamma > 0 && admm {
			t1 := time.Now()
			gn, ok, err := r.criterion(ctx, rho, xprev)
			st.StatSeconds += time.Since(t1).Seconds()
			if err != nil {
				return err
			}
			st.GradNorm = gn
			if ok {
				break
			}
		}
	}
	if admm {
		var dual2 float64
		for i, p := range r.params {
			rt := r.tensorRho(i, rho)
			admmq.UpdateDual(r.lambda[i], p.Value.F, r.y[i], rt)
			// lastY is y before this iteration's y-update: the dual residual's y_prev.
			var d2 float64
			for j, v := range r.y[i] {
				d := float64(v) - float64(r.lastY[i][j])
				d2 += d * d
			}
			copy(r.lastY[i], r.y[i])
			dual2 += rt * rt * d2
		}
		st.DualResidual = math.Sqrt(dual2)
	} else {
		// PGD's x is on the grid after its last step; GD+Proj's and STE's y is the
		// projection of x.
		changed := 0
		total := 0
		for i, p := range r.params {
			if err := r.targets[i].Set.Project32(r.y[i], p.Value.F, r.targets[i].Layout); err != nil {
				return fmt.Errorf("network: projecting %s: %w", r.targets[i].Name, err)
			}
			for j, v := range r.y[i] {
				if v != r.lastY[i][j] {
					changed++
				}
			}
			copy(r.lastY[i], r.y[i])
			total += len(r.y[i])
		}
		st.Changed = float64(changed) / float64(total)
	}
	t1 := time.Now()
	if err := r.measure(ctx, &st, rho); err != nil {
		return err
	}
	st.StatSeconds += time.Since(t1).Seconds()
	if admm && r.cfg.Balance != nil {
		// λ is the unscaled multiplier: balancing changes ρ alone.
		r.rhoFactor = r.cfg.Balance.Next(rho, st.Residual, st.DualResidual) / r.cfg.Rho.Rho(it)
	}
	if err := r.splitChanges(&st); err != nil {
		return err
	}
	if err := r.keepBest(&st); err != nil {
		return err
	}
	st.Seconds = time.Since(start).Seconds()
	r.history = append(r.history, st)
	r.iter++
	if r.cfg.Progress != nil {
		r.cfg.Progress(Progress{Iter: it + 1, Iters: r.cfg.Iters, Epoch: st.InnerEpochs, Of: epochs, Loss: st.TrainLoss, Done: true, Stats: &st})
	}
	return nil
}

// updateY runs the y-update of the ADMM variant at iteration it and returns the fraction
// of elements changed.
func (r *Run) updateY(rho float64, it int) (float64, error) {
	changed, total := 0, 0
	switch r.cfg.Method {
	case admmq.IADMMQ:
		for i, p := range r.params {
			c, err := admmq.UpdateYQ(r.targets[i].Set, r.y[i], p.Value.F, r.lambda[i], r.scratch[i], r.tensorRho(i, rho), r.targets[i].Layout)
			if err != nil {
				return 0, fmt.Errorf("network: y-update of %s: %w", r.targets[i].Name, err)
			}
			changed += c
			total += len(r.y[i])
		}
	case admmq.ADMMR:
		for i, p := range r.params {
			m := admmq.Mask{P: r.cfg.P, Seed: r.cfg.Seed, Iter: it, Stream: uint64(i)}
			c, err := admmq.UpdateYR(r.targets[i].Set, r.y[i], p.Value.F, r.lambda[i], r.scratch[i], r.tensorRho(i, rho), r.targets[i].Layout, m)
			if err != nil {
				return 0, fmt.Errorf("network: y-update of %s: %w", r.targets[i].Name, err)
			}
			changed += c
			total += len(r.y[i])
		}
	case admmq.ADMMS:
		var d2 float64
		for i, p := range r.params {
			d, err := admmq.SoftPrepare(r.targets[i].Set, r.scratch[i], r.zt[i], p.Value.F, r.lambda[i], rho, r.targets[i].Layout)
			if err != nil {
				return 0, fmt.Errorf("network: y-update of %s: %w", r.targets[i].Name, err)
			}
			d2 += d
		}
		s := admmq.SoftFactor(d2, r.cfg.Beta, rho)
		for i := range r.params {
			changed += admmq.SoftApply(r.y[i], r.scratch[i], r.zt[i], s)
			total += len(r.y[i])
		}
	}
	return float64(changed) / float64(total), nil
}

// projectX projects the targeted weights in place (PGD, after every optimizer step).
func (r *Run) projectX() {
	for i, p := range r.params {
		// Project32 fails only on NaN, which the next loss reports.
		_ = r.targets[i].Set.Project32(p.Value.F, p.Value.F, r.targets[i].Layout)
		p.Changed()
	}
}

// gridY returns the grid point y stands for: y itself, or P_A(y) for ADMM-S.
func (r *Run) gridY(i int) ([]float32, error) {
	if r.cfg.Method != admmq.ADMMS {
		return r.y[i], nil
	}
	out := make([]float32, len(r.y[i]))
	err := r.targets[i].Set.Project32(out, r.y[i], r.targets[i].Layout)
	return out, err
}

// iterateY returns the grid point that iteration scores and Finish exports: gridY, or
// under ProjectX (ADMM) the projection of x.
func (r *Run) iterateY(i int) ([]float32, error) {
	if !r.cfg.ProjectX || !IsADMM(r.cfg.Method) {
		return r.gridY(i)
	}
	out := make([]float32, len(r.y[i]))
	if err := r.targets[i].Set.Project32(out, r.params[i].Value.F, r.targets[i].Layout); err != nil {
		return nil, fmt.Errorf("network: projecting %s: %w", r.targets[i].Name, err)
	}
	return out, nil
}

// withWeights runs fn with the targeted weights set to w, then restores x.
func (r *Run) withWeights(w [][]float32, fn func() error) error {
	saved := make([][]float32, len(r.params))
	for i, p := range r.params {
		saved[i] = append([]float32(nil), p.Value.F...)
		copy(p.Value.F, w[i])
		p.Changed()
	}
	err := fn()
	for i, p := range r.params {
		copy(p.Value.F, saved[i])
		p.Changed()
	}
	return err
}

// measure fills f(x), f(y), L, ‖x − y‖ and the held-out accuracy of y.
func (r *Run) measure(ctx context.Context, st *IterStats, rho float64) error {
	sub := splitBy(&limit{b: r.data.Calib, n: r.stepsN}, r.cfg.MicroBatch)
	evalCtx := r.eng
	evalCtx.Rand = nil
	eo := train.EvalOptions{Loss: r.cfg.Loss, Reference: r.data.Teacher, Engine: &evalCtx, Outputs: r.cfg.Outputs, ReferenceCache: &r.subRef}
	if !train.NeedsTeacher(r.cfg.Loss) {
		eo.Reference = nil
	}
	mx, err := train.Evaluate(ctx, r.g, sub, eo)
	if err != nil {
		return fmt.Errorf("network: measuring f(x): %w", err)
	}
	st.FX = mx.Loss
	ys := make([][]float32, len(r.params))
	var pen, res2 float64
	for i, p := range r.params {
		if ys[i], err = r.iterateY(i); err != nil {
			return err
		}
		if IsADMM(r.cfg.Method) {
			pen += admmq.Penalty(p.Value.F, r.y[i], r.lambda[i], r.tensorRho(i, rho))
		}
		for j, v := range p.Value.F {
			d := float64(v) - float64(r.y[i][j])
			res2 += d * d
		}
	}
	st.Lagrangian = st.FX + pen
	st.Residual = math.Sqrt(res2)
	return r.withWeights(ys, func() error {
		sub := splitBy(&limit{b: r.data.Calib, n: r.stepsN}, r.cfg.MicroBatch)
		my, err := train.Evaluate(ctx, r.g, sub, eo)
		if err != nil {
			return fmt.Errorf("network: measuring f(y): %w", err)
		}
		st.FY = my.Loss
		if r.data.Eval == nil {
			return nil
		}
		if r.cfg.ScoreRecalibrated {
			restore, err := r.recalibrate(ctx)
			if err != nil {
				return err
			}
			defer restore()
		}
		me, err := train.Evaluate(ctx, r.g, splitBy(r.data.Eval, r.cfg.MicroBatch), train.EvalOptions{Reference: r.data.Teacher, Engine: &evalCtx, Outputs: r.cfg.Outputs, ReferenceCache: &r.evalRef})
		if err != nil {
			return fmt.Errorf("network: evaluating y: %w", err)
		}
		if me.Labelled {
			st.Accuracy, st.HasAccuracy = me.Accuracy, true
		} else {
			st.Accuracy, st.HasAccuracy = me.Agreement, me.HasAgreement
		}
		st.Agreement = me.Agreement
		return nil
	})
}

// criterion evaluates ‖∇ₓL(x, y, λ)‖ (inference mode, fixed subset) and tests Alg. 2's
// stopping rule.
func (r *Run) criterion(ctx context.Context, rho float64, xprev [][]float32) (float64, bool, error) {
	if err := r.lossGradient(ctx); err != nil {
		return 0, false, err
	}
	var gn2, dy2, dp2 float64
	for i, p := range r.params {
		g := append([]float32(nil), p.Grad.F...)
		admmq.AddPenaltyGrad(g, p.Value.F, r.y[i], r.lambda[i], r.tensorRho(i, rho))
		for j, v := range g {
			gn2 += float64(v) * float64(v)
			d := float64(p.Value.F[j]) - float64(r.y[i][j])
			dy2 += d * d
			e := float64(p.Value.F[j]) - float64(xprev[i][j])
			dp2 += e * e
		}
	}
	r.g.ZeroGrad()
	gn := math.Sqrt(gn2)
	return gn, gn <= rho*r.cfg.Gamma*math.Sqrt(min(dy2, dp2)), nil
}

// measureGradientRho sets each tensor's factor on ρ to ‖∇_t f(y⁰)‖/‖y⁰_t‖
// (Config.GradientRho), keeping the scale-free factor where the gradient is zero or y⁰ is.
func (r *Run) measureGradientRho(ctx context.Context) error {
	y0 := make([][]float32, len(r.params))
	for i := range r.params {
		var err error
		if y0[i], err = r.gridY(i); err != nil {
			return err
		}
	}
	err := r.withWeights(y0, func() error { return r.lossGradient(ctx) })
	if err != nil {
		return fmt.Errorf("network: measuring the gradient for ρ: %w", err)
	}
	for i, p := range r.params {
		var g2, y2 float64
		for j, g := range p.Grad.F {
			g2 += float64(g) * float64(g)
			y2 += float64(y0[i][j]) * float64(y0[i][j])
		}
		if k := math.Sqrt(g2 / y2); k > 0 && !math.IsInf(k, 0) {
			r.rhoScale[i] = k
		} else {
			r.rhoScale[i] = admmq.ScaleFreeRho(y0[i])
		}
	}
	r.g.ZeroGrad()
	r.gradRho = false
	return nil
}

// lossGradient leaves in the parameters' gradients ∇f at the current weights: the
// training loss's mean over the fixed subset of the calibration data, in inference mode
// so that it depends on the weights alone (no Dropout, no batch statistics).
func (r *Run) lossGradient(ctx context.Context) error {
	gctx := r.eng
	gctx.Rand, gctx.Training, gctx.NoGrad = nil, false, false
	tctx := gctx
	tctx.NoGrad = true
	r.g.ZeroGrad()
	sub := splitBy(&limit{b: r.data.Calib, n: r.stepsN}, r.cfg.MicroBatch)
	total := min(r.stepsN*r.data.BatchSize, r.data.Samples)
	totals, err := r.batchTotals(ctx, sub, total, &tctx)
	if err != nil {
		return err
	}
	var grads train.Gradients
	var feed, tfeed train.Feed
	for sub.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := feed.Load(r.g, sub); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		if train.NeedsTeacher(r.cfg.Loss) {
			if err := tfeed.Load(r.data.Teacher, sub); err != nil {
				return fmt.Errorf("network: teacher: %w", err)
			}
		}
		// A model declaring a fixed batch runs on chunks of it (train.Feed.Chunks); a
		// last chunk shorter than a declared batch above 1 is left out, as in training.
		n := feed.N
		for _, c := range feed.Chunks(r.g) {
			nc := c[1] - c[0]
			if nc != n && nc != train.DeclaredBatch(r.g) {
				continue
			}
			var ys []int64
			// One label per sample, or T per sample for [N, T] sequence labels.
			if y := sub.Y(); y != nil {
				per := train.LabelsPer(y, n)
				ys = y[c[0]*per : c[1]*per]
			}
			var touts []*engine.Tensor
			if train.NeedsTeacher(r.cfg.Loss) {
				var err error
				if touts, err = r.data.Teacher.Forward(&tctx, tfeed.Slice(c[0], c[1], nc)...); err != nil {
					return fmt.Errorf("network: teacher: %w", err)
				}
			}
			outs, err := r.g.Forward(&gctx, feed.Slice(c[0], c[1], nc)...)
			if err != nil {
				return fmt.Errorf("network: %w", err)
			}
			if _, err := train.ChunkLoss(r.cfg.Loss, r.g, outs, touts, ys, nc, totals, &grads); err != nil {
				return fmt.Errorf("network: %w", err)
			}
			if err := r.g.Backward(&gctx, grads.Outputs()...); err != nil {
				return fmt.Errorf("network: %w", err)
			}
		}
	}
	sub.Reset()
	return nil
}

// Weight is a targeted weight after Finish, exactly on its grid: every value is
// float32(level)·scale of its output channel, bit for bit.
type Weight struct {
	Name   string
	Values []float32
	// Levels are the grid's integer levels in increasing order.
	Levels []int
	// Scales is nil when the values are the levels themselves, else one scale per index
	// of the tensor's dimension Axis.
	Scales []float32
	Axis   int
}

// Finish sets the targeted weights to their grid point y and, when recalib is set,
// re-estimates the BatchNorm running statistics of m's graph over the calibration data
// with them. It returns the weights, exactly on the grid. Under IterateBest it first
// restores the state of the best iteration (Exported), so that the result is bit for bit
// that of a run stopped after it.
func (r *Run) Finish(ctx context.Context, m *onnxio.Model, grid Grid, recalib bool) ([]Weight, error) {
	if b := r.best; b != nil && b.Iter != r.iter {
		params := make(map[string][]float32, len(b.Params))
		for _, p := range b.Params {
			params[p.Name] = p.Values
		}
		for _, p := range r.g.Params() {
			if p.Value.F != nil {
				copy(p.Value.F, params[p.Name])
			}
		}
		r.g.ParamsChanged()
		for i := range r.y {
			copy(r.y[i], b.Y[i])
		}
	} else if r.cfg.ProjectX && IsADMM(r.cfg.Method) {
		for i := range r.y {
			px, err := r.iterateY(i)
			if err != nil {
				return nil, err
			}
			copy(r.y[i], px)
		}
	}
	var ws []Weight
	for i, p := range r.params {
		y, err := r.gridY(i)
		if err != nil {
			return nil, err
		}
		w := snap(grid, y, r.targets[i])
		copy(p.Value.F, w.Values)
		p.Changed()
		ws = append(ws, w)
	}
	if recalib {
		if err := r.recalibrateBN(ctx, m); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// recalibrateBN re-estimates m's BatchNorm statistics in the graph over the calibration
// data with the weights it holds, from the same random stream each time, so that the
// in-loop score (ScoreRecalibrated) and Finish compute the same statistics.
func (r *Run) recalibrateBN(ctx context.Context, m *onnxio.Model) error {
	rc := r.eng
	rc.Rand = rand.New(rand.NewPCG(r.cfg.Seed, 0x626e)) // stream "bn"
	r.data.Calib.Reset()
	if err := train.RecalibrateBN(ctx, r.g, m, splitBy(r.data.Calib, r.cfg.MicroBatch), &rc); err != nil {
		return fmt.Errorf("network: re-estimating BatchNorm statistics: %w", err)
	}
	return nil
}

// recalibrate sets the targeted weights to their exported values (snap of y, which the
// caller has put in the graph) and re-estimates the BatchNorm statistics as Finish does;
// restore puts back every parameter it changed.
func (r *Run) recalibrate(ctx context.Context) (restore func(), err error) {
	var saved [][]float32
	params := r.g.Params()
	for _, p := range params {
		saved = append(saved, slices.Clone(p.Value.F))
	}
	restore = func() {
		for i, p := range params {
			copy(p.Value.F, saved[i])
			p.Changed()
		}
	}
	for i, p := range r.params {
		// Finish snaps with the target's grid; a caller's own set has none and its
		// values are its levels.
		if g := r.targets[i].Grid; g != "" {
			copy(p.Value.F, snap(g, p.Value.F, r.targets[i]).Values)
			p.Changed()
		}
	}
	if err := r.recalibrateBN(ctx, r.m); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// feed adapts the shuffled calibration batches to train.Fit: one Fit epoch is one pass,
// or limit steps that continue across passes. It tracks its position for checkpoints
// and runs before (PGD's projection) ahead of every step and after the last.
type feed struct {
	b        train.Batcher
	limit    int
	n        int
	epoch    int // times b was reset: the epoch of its seeded order
	consumed int // batches read in the current pass of b
	before   func()
}

func (f *feed) Next() bool {
	if f.before != nil {
		f.before()
	}
	if f.limit > 0 && f.n == f.limit {
		return false
	}
	if !f.b.Next() {
		if f.limit == 0 || f.b.Err() != nil {
			return false
		}
		f.restart()
		if !f.b.Next() {
			return false
		}
	}
	f.n++
	f.consumed++
	return true
}

func (f *feed) Reset() {
	f.n = 0
	if f.limit == 0 {
		f.restart()
	}
}

// restart starts the next pass over b.
func (f *feed) restart() {
	f.b.Reset()
	f.epoch++
	f.consumed = 0
}

func (f *feed) X() []float32         { return f.b.X() }
func (f *feed) Y() []int64           { return f.b.Y() }
func (f *feed) Shape() []int64       { return f.b.Shape() }
func (f *feed) Err() error           { return f.b.Err() }
func (f *feed) position() (int, int) { return f.epoch, f.consumed }

// The batches of a model with several inputs carry them through feed and limit.
func (f *feed) ExtraInputs() int { return extraInputs(f.b) }
func (f *feed) ExtraInput(k int) (string, []int64, int, []float32, []int64) {
	return f.b.(train.MultiBatcher).ExtraInput(k)
}
func (l *limit) ExtraInputs() int { return extraInputs(l.b) }
func (l *limit) ExtraInput(k int) (string, []int64, int, []float32, []int64) {
	return l.b.(train.MultiBatcher).ExtraInput(k)
}

func extraInputs(b train.Batcher) int {
	if m, ok := b.(train.MultiBatcher); ok {
		return m.ExtraInputs()
	}
	return 0
}

// limit reads the first n batches of b (in the data's order) as one epoch.
type limit struct {
	b train.Batcher
	n int
	i int
}

func (l *limit) Next() bool {
	if l.i >= l.n || !l.b.Next() {
		return false
	}
	l.i++
	return true
}

func (l *limit) Reset()         { l.i = 0; l.b.Reset() }
func (l *limit) X() []float32   { return l.b.X() }
func (l *limit) Y() []int64     { return l.b.Y() }
func (l *limit) Shape() []int64 { return l.b.Shape() }
func (l *limit) Err() error     { return l.b.Err() }

// split reads b's batches in pieces of at most k samples: the statistics and BatchNorm
// re-estimation of a run whose batches are trained in micro-batches (Config.MicroBatch),
// so that no pass needs more memory than a training micro-batch. Inference results do
// not depend on the split (up to summation order); BatchNorm re-estimation averages the
// statistics of the pieces, as training sees them. k < 1 passes b through unchanged.
type split struct {
	b     train.Batcher
	k     int
	lo, n int // the current piece starts at sample lo of b's batch of n
	hi    int
	shape []int64
}

// batchTotals returns what ChunkLoss needs to share the criterion's subset among its
// chunks: the samples, and when the loss is an objective on labels or with normalised-MSE
// terms, the label positions counted (not IgnoreLabel) and the teacher's Σt² over the
// chunks the criterion counts, read in a first pass over sub.
func (r *Run) batchTotals(ctx context.Context, sub train.Batcher, samples int, tctx *engine.Context) (train.BatchTotals, error) {
	bt := train.BatchTotals{Samples: samples}
	obj, ok := r.cfg.Loss.(*train.Objective)
	if !ok || !obj.Labelled && !train.HasNMSE(obj) {
		return bt, nil
	}
	b := train.DeclaredBatch(r.g)
	var tfeed train.Feed
	for sub.Next() {
		if err := ctx.Err(); err != nil {
			return bt, err
		}
		n, y := int(sub.Shape()[0]), sub.Y()
		m := n // the chunks counted: all but a last one shorter than a declared batch
		if b > 1 && n > b {
			m = n / b * b
		}
		if n == 0 {
			continue
		}
		for _, v := range y[:m*(len(y)/n)] {
			if v != train.IgnoreLabel {
				bt.Labelled++
			}
		}
		if !train.HasNMSE(obj) {
			continue
		}
		if err := tfeed.Load(r.data.Teacher, sub); err != nil {
			return bt, fmt.Errorf("network: teacher: %w", err)
		}
		step := m
		if b > 0 && n > b {
			step = b
		}
		for lo := 0; lo < m; lo += step {
			touts, err := r.data.Teacher.Forward(tctx, tfeed.Slice(lo, lo+step, step)...)
			if err != nil {
				return bt, fmt.Errorf("network: teacher: %w", err)
			}
			bt.TeacherSquares = train.AddTeacherSquares(obj, touts, bt.TeacherSquares)
		}
	}
	if err := sub.Err(); err != nil {
		return bt, fmt.Errorf("network: %w", err)
	}
	sub.Reset()
	return bt, nil
}

func splitBy(b train.Batcher, k int) train.Batcher {
	if k < 1 {
		return b
	}
	return &split{b: b, k: k}
}

func (s *split) Next() bool {
	if s.hi >= s.n {
		if !s.b.Next() {
			return false
		}
		s.n, s.lo, s.hi = int(s.b.Shape()[0]), 0, 0
	}
	// The pieces of train.Fit's micro-batches, so that the statistics reuse its plans.
	s.lo, s.hi = s.hi, min(s.hi+train.MicroSize(s.n, s.k), s.n)
	s.shape = append(append(s.shape[:0], int64(s.hi-s.lo)), s.b.Shape()[1:]...)
	return true
}

func (s *split) X() []float32 {
	x := s.b.X()
	per := len(x) / s.n
	return x[s.lo*per : s.hi*per]
}

func (s *split) Y() []int64 {
	y := s.b.Y()
	if s.n == 0 || len(y)%s.n != 0 {
		return y
	}
	per := len(y) / s.n // one label per sample, or per position of a sequence
	return y[s.lo*per : s.hi*per]
}

func (s *split) Shape() []int64 { return s.shape }
func (s *split) Err() error     { return s.b.Err() }
func (s *split) Reset()         { s.n, s.lo, s.hi = 0, 0, 0; s.b.Reset() }
