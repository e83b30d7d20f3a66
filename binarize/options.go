package binarize

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// Optimizer names the optimizer of the x-updates.
type Optimizer string

// The optimizers.
const (
	Adam Optimizer = "adam" // PyTorch's defaults, the paper's
	SGD  Optimizer = "sgd"  // momentum 0.9
)

// LRSchedule names the learning-rate schedule.
type LRSchedule string

// The learning-rate schedules.
const (
	// StepLR multiplies the rate by 0.1 at half the epochs (or steps), the paper's.
	StepLR     LRSchedule = "step"
	ConstantLR LRSchedule = "constant"
	// CosineLR anneals per epoch down to LR/100.
	CosineLR LRSchedule = "cosine"
)

// Loss names the training loss.
type Loss string

// The losses.
const (
	// LossAuto is, for a model whose one output is logits [batch, classes],
	// cross-entropy with labels and distillation from the full-precision model without;
	// LossObjective for any other model.
	LossAuto    Loss = "auto"
	LossCE      Loss = "ce"
	LossHinge   Loss = "hinge" // the paper's code's squared hinge
	LossDistill Loss = "distill"
	LossMSE     Loss = "mse" // to the full-precision model's logits
	// LossCEDistill is the mean of cross-entropy with the labels and distillation from the
	// full-precision model (train.Mixed, weight ½ each).
	LossCEDistill Loss = "ce+distill"
)

// Start names where ADMM's x starts.
type Start string

// The starts.
const (
	// StartGrid is x⁰ = y⁰ = P(pretrained), the paper's analysis; measured better with
	// small calibration sets.
	StartGrid Start = "grid"
	// StartPretrained is x⁰ = the pretrained weights, the paper's code.
	StartPretrained Start = "pretrained"
)

// RhoScale names how Options.Rho becomes each weight tensor's ρ.
type RhoScale string

// The ρ scales.
const (
	// RhoGradient makes ρ̄ relative to the loss's gradient at the start: tensor t's ρ is
	// ρ̄·‖∇_t f(y⁰)‖/‖y⁰_t‖ (network.Config.GradientRho). Measured (issue 15): the
	// per-weight gradients of fmnist-mlp are ~5e-5 of its weights and those of fmnist-cnn
	// ~1e-2, so no absolute ρ suits both: ρ = 1 pinned the MLP's x to y (no sign flipped,
	// PGD's result) and ρ = 1e-5, which flips the MLP's signs, wrecked the CNN.
	RhoGradient RhoScale = "gradient"
	// RhoGrid is ρ̄/mean(y⁰_t²), distances counted in grid steps (network.Config.ScaleFree):
	// ρ̄ itself on the ±1 grid.
	RhoGrid RhoScale = "grid"
	// RhoAbsolute gives every tensor ρ itself, the paper's setting.
	RhoAbsolute RhoScale = "absolute"
)

// DefaultKeep is the weights Run keeps in full precision when Options.Selection is zero:
// the first and the last, as binary networks in practice do (XNOR-Net, Bi-Real, …), and
// the depthwise convolutions', unless that leaves no weight to binarize. KeepNone
// binarizes every weight, the paper's setting.
//
// Depthwise weights are few (fmnist-resnet: 1 152 of 32 896 binarized weights, 3.5 %) and
// the ones binarization hurts most: a ±1 depthwise kernel has no sum over input channels
// to average its error, and PGD and ADMM-Q at ρ̄ = 1 never flip their signs. Measured on
// fmnist-resnet's validation split (issue 15, seeds 1–3): ADMM-Q 86.5 / 87.1 / 87.7 % with
// them binarized, 89.9 / 88.9 / 88.3 % with them kept. fmnist-mlp and fmnist-cnn have none.
var DefaultKeep = []string{"first", "last", "depthwise", KeepSensitive}

// KeepNone, as the only name of Selection.Keep, binarizes every weight.
const KeepNone = "none"

// Options configures Run. Every zero field takes its default, so the zero Options is
// `qtool binarize` without flags — except Seed, which is used as it is (the CLI's
// --seed defaults to 1; Defaults sets 1 too).
type Options struct {
	// Method is the algorithm; zero means admmq.IADMMQ, what users call ADMM-Q (a
	// network has no exact x-update, so admmq.ADMMQ itself is refused).
	Method admmq.Method
	// Grid is the set the weights are put on; zero means network.Auto: per weight,
	// Binary (±1, no scale) where a normalisation follows and absorbs the scale,
	// BinaryChannel elsewhere (PyTorch's exports fold BatchNorm into the convolutions, and
	// ±1 without a scale gave them SQNRs of −450 dB). Any other grid is used for every
	// weight.
	Grid network.Grid
	// Grids gives single weights, by name, a grid of their own instead of Grid: a file
	// of mixed grids (see Budget). Every name must be a targeted weight.
	Grids map[string]network.Grid
	// Selection chooses the targeted weights among every Conv, ConvTranspose, Gemm and
	// MatMul weight; zero means Keep DefaultKeep (every weight when that leaves none), and
	// Keep {KeepNone} every weight.
	Selection network.Selection
	// SensitiveShare is the largest share of the targets' values that KeepSensitive keeps
	// in full precision; zero means DefaultSensitiveShare.
	SensitiveShare float64
	// Rho is the penalty schedule, read as RhoScale says; a zero Rho0 means DefaultRho.
	Rho admmq.Schedule
	// RhoScale says how Rho becomes each tensor's ρ; zero means RhoGradient.
	// AbsoluteRho is RhoScale = RhoAbsolute, the paper's setting.
	RhoScale    RhoScale
	AbsoluteRho bool
	// BalanceRho adapts ρ by residual balancing (admmq.Balancing, μ = 10, τ = 2).
	BalanceRho bool
	// RemeasureRho, under RhoGradient, measures ρ's factors again at every iteration's y
	// rather than once at y⁰ (network.Config.RemeasureRho).
	RemeasureRho bool
	// UnnormalizedGrowth multiplies, at every iteration, the ρ of each weight that no
	// normalisation follows (network.Config.UnnormalizedGrowth); zero means
	// DefaultUnnormalizedGrowth under RhoGradient and 1 (none) under the other scales, 1
	// turns it off.
	UnnormalizedGrowth float64
	// P is ADMM-R's mask probability (zero: 0.3, the paper's), Beta ADMM-S's β (zero:
	// 1e3, the paper's).
	P, Beta float64
	// Iters is the number of outer iterations (zero: 8), InnerEpochs the optimizer
	// epochs per x-update (zero: 5; the paper's 40 epochs = 8 × 5). InnerSteps > 0
	// makes each x-update that many optimizer steps instead.
	Iters, InnerEpochs, InnerSteps int
	// Gamma > 0 stops an x-update once ‖∇ₓL‖ ≤ ρ·Gamma·min{‖x−y‖, ‖x−x_prev‖} (Alg. 2).
	Gamma float64
	// Epochs is GD+Proj's fine-tuning length; zero means Iters × InnerEpochs.
	Epochs int
	// Optimizer (zero: Adam), LR (zero: 1e-2, the paper's) and Schedule (zero: StepLR).
	// LR is the base rate: a target weight's rate is LR times the mean magnitude
	// |level×scale| of its grid point at the start (1 on the binary grid, the channel
	// scale α_c on binary-channel), so that a step is the same fraction of the distance
	// between grid points on every grid; biases and normalisation parameters take LR.
	// AbsoluteLR gives every parameter LR itself, the rate before grids were scaled.
	// LastIterate exports the state after the last outer iteration, as the paper does,
	// instead of the iterate with the best accuracy on Data.Eval (the default: on scaled
	// grids ADMM oscillates and the last iterate is an accident of the budget).
	LastIterate bool
	Optimizer   Optimizer
	LR          float64
	Schedule    LRSchedule
	AbsoluteLR  bool
	// Loss (zero: LossAuto) and the distillation Temperature (zero: 1).
	Loss        Loss
	Temperature float64
	// Augment transforms the training batches' images (not the validation split's, nor
	// the statistics' batches): see calib.Augment. Zero: none.
	Augment calib.Augment
	// ClassAxis declares the class axis of outputs by name ("" for every output; negative
	// counts from the end), overriding what is inferred from the graph; OutputWeights
	// weighs outputs in the objective by name (others weigh 1, 0 leaves one out). Either
	// makes LossAuto choose LossObjective. See train.DetectOutputs.
	ClassAxis     map[string]int
	OutputWeights map[string]float64
	// Start is ADMM's starting point; zero means StartGrid.
	Start Start
	// NoRescale turns off the rescaling of binary-grid weights that BatchNorm follows
	// to mean |w| = 1 per channel (network.Precondition).
	NoRescale bool
	// NoBNRecalib keeps the BatchNorm running statistics instead of re-estimating them
	// with the binary weights.
	NoBNRecalib bool
	// ProjectX makes an ADMM run score and export P(x), the projection of its trained
	// weights, instead of y (network.Config.ProjectX): what the paper's reference code
	// reports. For reproducing its tables from random initialisation, where y oscillates.
	ProjectX bool
	// StatSamples is how many calibration samples f(x), f(y) and the criterion are
	// measured on; zero means 2048.
	StatSamples int
	// BatchSize is the training and evaluation batch; zero means 512 (the paper's).
	BatchSize int
	// MicroBatch > 0 trains each batch in micro-batches of that many samples, accumulating
	// their gradients into one optimizer step (train.Options.MicroBatch); zero chooses the
	// largest that fits MaxMemory (MicroBatchFor), which is BatchSize when the batch fits.
	MicroBatch int
	// Seed drives the data order, Dropout, ADMM-R's masks and the validation split.
	Seed uint64
	// Validation is the fraction of the calibration data Run sets apart as the
	// validation split when Data.Validation is nil (see ValidationSize); zero means
	// DefaultValidation, a negative value none (training on every calibration sample,
	// with no in-loop accuracy: the runs before validation splits existed).
	Validation float64

	// Format and Opset are export's (zero: packed, the model's opset); Version is
	// recorded in the file's metadata.
	Format  export.Format
	Opset   int64
	Version string
	// NBitsBlockSize and NBitsMinBits are export's BlockSize and MinBits for the
	// MatMulNBits format (zero: export's defaults); other formats ignore them.
	NBitsBlockSize int
	NBitsMinBits   int
	// Output, when set, is the file the model is written to. An existing file is
	// replaced only once the new one (written next to it) has been read back, built and
	// evaluated, so a failure or a cancellation leaves the old file or the new one.
	Output string
	// Verify, when set, is called with the path of the new file once it is written and
	// before it is read back; an error keeps the previous Output.
	Verify func(path string) error

	// Progress, when set, is called after each inner epoch and outer iteration.
	Progress func(network.Progress)
	// SensitiveProgress, when set, is called as KeepSensitive measures the weights: with
	// done = 0 before the first, then after each.
	SensitiveProgress func(done, total int)
	// Checkpoint, when set, receives the run's state after each outer iteration
	// (network.Run.Checkpoint); Resume, when set, is such a state to continue from.
	Checkpoint func(state []byte) error
	Resume     []byte

	// BLAS (zero: the engine's pure-Go one), Workers (zero: GOMAXPROCS) and MaxMemory
	// (zero: calib.DefaultMaxMemory, a bound on each graph's plans) are the engine's.
	BLAS      gblas.Float32
	Workers   int
	MaxMemory int64

	// scoreStart makes the projection before fine-tuning a candidate iterate
	// (network.Config.ScoreStart); Budget sets it for its trials.
	scoreStart bool
}

// Defaults returns the options of `qtool binarize` without flags, every field explicit.
func Defaults() Options {
	o := Options{Seed: 1}.withDefaults()
	return o
}

// withDefaults fills every zero field with its default.
func (o Options) withDefaults() Options {
	set := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	seti := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&o.SensitiveShare, DefaultSensitiveShare)
	if o.Method == "" {
		o.Method = admmq.IADMMQ
	}
	if o.Grid == "" {
		o.Grid = network.Auto
	}
	if o.AbsoluteRho {
		o.RhoScale = RhoAbsolute
	}
	if o.RhoScale == "" {
		o.RhoScale = RhoGradient
	}
	set(&o.Rho.Rho0, DefaultRho)
	if o.RhoScale == RhoGradient {
		set(&o.UnnormalizedGrowth, DefaultUnnormalizedGrowth)
	}
	set(&o.UnnormalizedGrowth, 1)
	set(&o.P, 0.3)
	set(&o.Beta, 1e3)
	seti(&o.Iters, 8)
	seti(&o.InnerEpochs, 5)
	if o.Optimizer == "" {
		o.Optimizer = Adam
	}
	set(&o.LR, 1e-2)
	if o.Schedule == "" {
		o.Schedule = StepLR
	}
	if o.Loss == "" {
		o.Loss = LossAuto
	}
	set(&o.Temperature, 1)
	if o.Start == "" {
		o.Start = StartGrid
	}
	set(&o.Validation, DefaultValidation)
	seti(&o.StatSamples, 2048)
	seti(&o.BatchSize, 512)
	if o.Format == "" {
		o.Format = export.Packed
	}
	seti(&o.Workers, runtime.GOMAXPROCS(0))
	if o.MaxMemory == 0 {
		o.MaxMemory = calib.DefaultMaxMemory
	}
	return o
}

// DefaultRho is ρ̄ under RhoGradient: an exact x-update from y⁰ would move each tensor
// by about ‖y⁰_t‖/ρ̄. Chosen on validation splits only (issue 15; README "ρ, residuals
// and the exported iterate").
const DefaultRho = 1

// DefaultUnnormalizedGrowth is the factor by which ρ grows every iteration on weights that
// no normalisation follows, under RhoGradient. Measured on a torchvision ResNet-18 exported
// with its BatchNorm folded into the convolutions (every weight unnormalised), validation
// split of calibration data the model never trained on (issue 15; README, "Weights no
// normalisation follows"): ADMM-Q at a constant ρ̄ = 1 exported a y 21 pp below PGD's,
// ×10 an iteration brought it level. The shipped Fashion-MNIST nets normalise every
// binarized weight and are unchanged by it.
const DefaultUnnormalizedGrowth = 10

// DefaultValidation is the default fraction of the calibration data held out for
// validation. A tenth costs the training little; ValidationSize raises it on small sets
// so that the split can tell iterates apart.
const DefaultValidation = 0.1

// MinValidation is the validation split's size below which Run warns (SmallSplit): at
// 1000 samples the Wilson 95 % interval of an accuracy near 90 % is already ±1.9 pp,
// wider than most differences between iterates.
const MinValidation = 1000

// ValidationSize is how many of n calibration samples a run with fraction frac (after
// defaults; negative: none) sets apart for validation: frac·n rounded, raised to
// MinValidation as long as that leaves three quarters of the data for training (a
// quarter of the data otherwise), and 0 when fewer than 2 samples would remain on either
// side.
func ValidationSize(n int, frac float64) int {
	if frac <= 0 || n < 4 {
		return 0
	}
	v := int(math.Round(frac * float64(n)))
	v = max(v, min(MinValidation, n/4))
	if v < 1 || n-v < 2 {
		return 0
	}
	return v
}

// OptionError reports an Options field with a value Run cannot use.
type OptionError struct {
	// Field is the Options field, e.g. "Rho.Rho0" or "Selection".
	Field  string
	Value  any
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("binarize: Options.%s = %v: %s", e.Field, e.Value, e.Reason)
}

// Validate reports the first field of o (after defaults) that Run cannot use, as an
// *OptionError. It reads no file, so a caller can check options before loading data.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(field string, v any, reason string) error {
		return &OptionError{Field: field, Value: v, Reason: reason}
	}
	if !slices.Contains(network.Methods(), o.Method) {
		if o.Method == admmq.ADMMQ {
			return bad("Method", o.Method, (&network.MethodError{Method: o.Method}).Error())
		}
		return bad("Method", o.Method, "want one of "+methodList())
	}
	if _, err := network.ParseGrid(string(o.Grid)); err != nil {
		return bad("Grid", o.Grid, err.Error())
	}
	for _, name := range sortedKeys(o.Grids) {
		if g := o.Grids[name]; g == network.Auto || !slices.Contains(network.Grids(), g) {
			return bad("Grids", fmt.Sprintf("%s=%s", name, g), "want one of "+gridList())
		}
	}
	if o.SensitiveShare < 0 || o.SensitiveShare >= 1 || math.IsNaN(o.SensitiveShare) {
		return bad("SensitiveShare", o.SensitiveShare, "want a share in [0, 1)")
	}
	if len(o.Selection.Keep) > 0 && len(o.Selection.Only) > 0 {
		return bad("Selection", o.Selection, "Keep and Only exclude each other")
	}
	if k := o.Selection.Keep; len(k) > 1 && slices.Contains(k, KeepNone) {
		return bad("Selection", o.Selection, "Keep "+KeepNone+" keeps no weight: it stands alone")
	}
	if g := o.UnnormalizedGrowth; g < 0 || math.IsNaN(g) || math.IsInf(g, 0) {
		return bad("UnnormalizedGrowth", g, "want a finite factor ≥ 0 (1: none)")
	}
	switch o.RhoScale {
	case RhoGradient, RhoGrid, RhoAbsolute:
	default:
		return bad("RhoScale", o.RhoScale, "want gradient, grid or absolute")
	}
	if err := o.Rho.Validate(); err != nil {
		return bad("Rho", o.Rho, err.Error())
	}
	if o.Method == admmq.ADMMR && !(o.P > 0 && o.P <= 1) {
		return bad("P", o.P, "want 0 < p ≤ 1")
	}
	if o.Method == admmq.ADMMS && !(o.Beta > 0) {
		return bad("Beta", o.Beta, "want β > 0")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Iters", o.Iters}, {"InnerEpochs", o.InnerEpochs}, {"StatSamples", o.StatSamples}, {"BatchSize", o.BatchSize}} {
		if f.v < 1 {
			return bad(f.name, f.v, "want at least 1")
		}
	}
	if o.InnerSteps < 0 || o.Epochs < 0 {
		return bad("InnerSteps", fmt.Sprintf("%d (Epochs %d)", o.InnerSteps, o.Epochs), "InnerSteps and Epochs must not be negative")
	}
	if !(o.Validation < 1) || math.IsNaN(o.Validation) {
		return bad("Validation", o.Validation, "want a fraction below 1 (negative: no validation split)")
	}
	if !(o.Gamma >= 0) {
		return bad("Gamma", o.Gamma, "want γ ≥ 0")
	}
	if !(o.LR > 0) {
		return bad("LR", o.LR, "want a positive learning rate")
	}
	if o.Augment.Shift < 0 {
		return bad("Augment", o.Augment.Shift, "want a shift of 0 or more pixels")
	}
	if !(o.Temperature > 0) {
		return bad("Temperature", o.Temperature, "want a positive temperature")
	}
	switch o.Optimizer {
	case Adam, SGD:
	default:
		return bad("Optimizer", o.Optimizer, "want adam or sgd")
	}
	switch o.Schedule {
	case StepLR, ConstantLR, CosineLR:
	default:
		return bad("Schedule", o.Schedule, "want step, constant or cosine")
	}
	switch o.Loss {
	case LossAuto, LossCE, LossHinge, LossDistill, LossMSE, LossObjective, LossCEDistill:
	default:
		return bad("Loss", o.Loss, "want auto, objective, ce, hinge, distill, ce+distill or mse")
	}
	for _, name := range sortedKeys(o.OutputWeights) {
		if w := o.OutputWeights[name]; !(w >= 0) || math.IsInf(w, 0) {
			return bad("OutputWeights", fmt.Sprintf("%s=%v", name, w), "want a finite weight ≥ 0")
		}
	}
	switch o.Start {
	case StartGrid, StartPretrained:
	default:
		return bad("Start", o.Start, "want grid or pretrained")
	}
	if _, err := export.ParseFormat(string(o.Format)); err != nil {
		return bad("Format", o.Format, err.Error())
	}
	if b := o.NBitsBlockSize; b != 0 && (b < 16 || b&(b-1) != 0) {
		return bad("NBitsBlockSize", b, "want a power of two of at least 16, as MatMulNBits requires")
	}
	if b := o.NBitsMinBits; b != 0 && b != 2 && b != 4 && b != 8 {
		return bad("NBitsMinBits", b, "want 2, 4 or 8, the MatMulNBits widths onnxruntime runs")
	}
	if o.Opset != 0 && (o.Opset < export.MinOpset || o.Opset > onnxio.MaxOpset) {
		return bad("Opset", o.Opset, fmt.Sprintf("qtool writes opsets %d to %d", export.MinOpset, onnxio.MaxOpset))
	}
	if o.Workers < 0 || o.MaxMemory < 0 {
		return bad("Workers", o.Workers, "Workers and MaxMemory must not be negative")
	}
	return nil
}

// methodAliases are the other names ParseMethod accepts. "admm-q" is what the paper and
// qtool's users call the network algorithm, which on a network can only be I-ADMM-Q
// (Alg. 2): there is no exact x-update. "gd-proj" is GD+Proj's name on the command line.
var methodAliases = map[string]admmq.Method{"admm-q": admmq.IADMMQ, "gd-proj": admmq.GDProj}

// ParseMethod returns the network algorithm named s: a name of network.Methods, or
// "admm-q" for I-ADMM-Q.
func ParseMethod(s string) (admmq.Method, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, m := range network.Methods() {
		if string(m) == s {
			return m, nil
		}
	}
	if m, ok := methodAliases[s]; ok {
		return m, nil
	}
	return "", &OptionError{Field: "Method", Value: fmt.Sprintf("%q", s), Reason: "want one of " + methodList()}
}

func methodList() string {
	var names []string
	for _, m := range network.Methods() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ") + " (admm-q is i-admm-q)"
}

// loss returns the training loss and its resolved name.
func (o Options) loss(labelled bool) (train.Loss, Loss) {
	switch o.Loss {
	case LossCE:
		return train.CrossEntropy{}, LossCE
	case LossHinge:
		return train.SquaredHinge{}, LossHinge
	case LossDistill:
		return train.Distillation{Temperature: o.Temperature}, LossDistill
	case LossMSE:
		return train.MSE{}, LossMSE
	case LossCEDistill:
		return train.Mixed{Label: train.CrossEntropy{}, Teacher: train.Distillation{Temperature: o.Temperature}, Weight: 0.5}, LossCEDistill
	}
	if labelled {
		return train.CrossEntropy{}, LossCE
	}
	return train.Distillation{Temperature: o.Temperature}, LossDistill
}

// config is the network configuration of o, with its learning-rate policy: the step
// schedule decays at half the run's epochs (or steps), as the paper's code does.
func (o Options) config(loss train.Loss) (network.Config, error) {
	cfg := network.Config{
		Method: o.Method, Rho: o.Rho, P: o.P, Beta: o.Beta,
		Iters: o.Iters, InnerEpochs: o.InnerEpochs, InnerSteps: o.InnerSteps, Gamma: o.Gamma, Epochs: o.Epochs,
		Loss: loss, Seed: o.Seed, StatSamples: o.StatSamples, StartOnGrid: o.Start == StartGrid,
		BLAS: o.BLAS, Workers: o.Workers, Progress: o.Progress, Checkpoint: o.Checkpoint,
		// BinaryConnect's clip, the baseline the paper measures itself against (STE only).
		STEClip: true,
	}
	if !o.LastIterate {
		cfg.Export, cfg.ScoreStart = network.IterateBest, o.scoreStart
	}
	cfg.ScoreRecalibrated = !o.NoBNRecalib
	cfg.ProjectX = o.ProjectX
	// A tensor without gradient falls back to the grid's scale.
	cfg.ScaleFree = o.RhoScale != RhoAbsolute
	cfg.GradientRho = o.RhoScale == RhoGradient
	cfg.RemeasureRho = o.RemeasureRho
	cfg.UnnormalizedGrowth = o.UnnormalizedGrowth
	if o.BalanceRho {
		cfg.Balance = &admmq.Balancing{}
	}
	total := o.Iters * o.InnerEpochs
	if o.InnerSteps > 0 {
		total = o.Iters
	}
	if o.Method == admmq.GDProj && o.Epochs > 0 {
		total = o.Epochs
	}
	switch o.Schedule {
	case ConstantLR:
		cfg.Schedule = train.Constant{LR: o.LR}
	case StepLR:
		cfg.Schedule = train.StepDecay{LR: o.LR, Every: max(total/2, 1), Gamma: 0.1}
	case CosineLR:
		cfg.Schedule = train.Cosine{LR: o.LR, Min: o.LR / 100, Total: total, PerEpoch: true}
	}
	if o.Optimizer == SGD {
		opt, err := train.NewSGD(train.SGDOptions{Momentum: 0.9})
		if err != nil {
			return cfg, err
		}
		cfg.Optimizer = opt
	} else {
		cfg.Optimizer = train.NewAdam(train.AdamOptions{})
	}
	return cfg, nil
}

// TotalEpochs is the number of optimizer epochs (or, with InnerSteps, x-updates) a run
// of o takes: the length of a progress bar.
func (o Options) TotalEpochs() int {
	o = o.withDefaults()
	if o.Method == admmq.GDProj && o.Epochs > 0 {
		return o.Epochs
	}
	return o.Iters * o.InnerEpochs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// exportOptions is what every export call of a run shares, so the check before training
// and the final write cannot disagree on the format's parameters.
func (o Options) exportOptions() export.Options {
	return export.Options{Format: o.Format, Opset: o.Opset, BlockSize: o.NBitsBlockSize, MinBits: o.NBitsMinBits}
}
