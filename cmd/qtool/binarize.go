package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/train"
	"github.com/urfave/cli/v2"
)

// The CLI's own defaults; the algorithm's are binarize.Defaults (see package binarize
// and README for where each comes from).
const (
	defaultSplit     = "0.8:0.2"
	defaultModelName = "fmnist-mlp"
)

// algoFlags are the flags shared by binarize and compare; their defaults are
// binarize.Defaults, so the library and the CLI run the same algorithm.
func algoFlags() []cli.Flag {
	const cat = "Algorithm"
	d := binarize.Defaults()
	return []cli.Flag{
		&cli.Float64Flag{Name: "rho", Category: cat, Value: d.Rho.Rho0, Usage: "ADMM penalty ρ₀, read as --rho-scale says"},
		&cli.StringFlag{Name: "rho-scale", Category: cat, Value: string(d.RhoScale), Usage: "how --rho becomes tensor t's ρ: gradient (ρ₀·‖∇f(y⁰_t)‖/‖y⁰_t‖, relative to the loss's gradient at the start), grid (ρ₀/mean(P(x⁰_t)²): ρ₀ itself on the ±1 grid, ρ₀/α² on a grid of scale α) or absolute (ρ₀ itself, the paper's)"},
		&cli.BoolFlag{Name: "absolute-rho", Category: cat, Usage: "--rho-scale absolute: every tensor's ρ is --rho, the paper's setting (and the README's older tables)"},
		&cli.BoolFlag{Name: "rho-remeasure", Category: cat, Usage: "with --rho-scale gradient, measure ρ's factors again at every outer iteration's y, not once at y⁰"},
		&cli.BoolFlag{Name: "balance-rho", Category: cat, Usage: "adapt ρ by residual balancing (Boyd et al. 2011 §3.4.1: ×2 when ‖x−y‖ > 10·‖ρΔy‖, ÷2 in the reverse case)"},
		&cli.Float64Flag{Name: "rho-growth", Category: cat, Value: 1, Usage: "multiply ρ by `G` every --rho-every iterations (1: constant, the paper's analysis)"},
		&cli.IntFlag{Name: "rho-every", Category: cat, Value: 1, Usage: "grow ρ every `K` outer iterations"},
		&cli.Float64Flag{Name: "rho-growth-unnormalized", Category: cat, Value: d.UnnormalizedGrowth, Usage: "multiply, every outer iteration, the ρ of each weight that no normalisation follows by `G`, on top of --rho-growth (1: constant; the default applies with --rho-scale gradient, the other scales default to 1): without a normalisation to absorb the binary weights' error, x must end on y"},
		&cli.Float64Flag{Name: "p", Category: cat, Value: d.P, Usage: "ADMM-R: probability that a weight's y is updated"},
		&cli.Float64Flag{Name: "beta", Category: cat, Value: d.Beta, Usage: "ADMM-S: soft-projection β"},
		&cli.IntFlag{Name: "iters", Category: cat, Value: d.Iters, Usage: "outer (ADMM) iterations"},
		&cli.IntFlag{Name: "inner-epochs", Category: cat, Value: d.InnerEpochs, Usage: "epochs of the optimizer per x-update (the most with --criterion)"},
		&cli.IntFlag{Name: "inner-steps", Category: cat, Usage: "optimizer steps per x-update instead of --inner-epochs"},
		&cli.Float64Flag{Name: "criterion", Category: cat, Usage: "stop an x-update once ‖∇ₓL‖ ≤ ρ·`GAMMA`·min{‖x−y‖, ‖x−x_prev‖} (Alg. 2), tested after each inner epoch"},
		&cli.StringFlag{Name: "optimizer", Category: cat, Value: string(d.Optimizer), Usage: "adam or sgd (momentum 0.9)"},
		&cli.Float64Flag{Name: "lr", Category: cat, Value: d.LR, Usage: "learning rate"},
		&cli.StringFlag{Name: "lr-schedule", Category: cat, Value: string(d.Schedule), Usage: "constant, step (×0.1 at half the epochs, the paper's) or cosine"},
		&cli.IntFlag{Name: "epochs", Category: cat, Usage: "gd-proj: fine-tuning epochs (default: --iters × --inner-epochs)"},
		&cli.StringFlag{Name: "keep", Category: cat, Usage: "keep these weights in full precision: first (every weight a path from a graph input meets first), last (every weight a path to a graph output meets last), depthwise (every depthwise convolution's weight), sensitive (the weights whose binarization alone costs significant validation accuracy, measured before the run, at most a quarter of the binarized values; without labels the drop the full-precision model's own probabilities expect), or parameter `NAME`s, comma-separated; none binarizes every weight (the paper's setting) (default: first,last,depthwise,sensitive, or none when that leaves no weight)"},
		&cli.Float64Flag{Name: "sensitive-share", Category: cat, Usage: "with --keep sensitive (the default): the largest `FRACTION` of the binarized weights' values kept in full precision for sensitivity (default: 0.25)"},
		&cli.StringFlag{Name: "only", Category: cat, Usage: "binarize only these weight `NAME`s, comma-separated"},
		&cli.StringFlag{Name: "grid", Category: cat, Value: string(d.Grid), Usage: "auto (per weight: binary where a normalisation follows, binary-channel elsewhere), binary (±1, no scale), binary-channel (±α per channel), ternary, int2, int4 or int8, for every weight"},
		&cli.StringFlag{Name: "loss", Category: cat, Value: string(d.Loss), Usage: "objective (every output matched with the full-precision model; labels supervise the classifier output), ce, hinge (the paper's code), distill, ce+distill (their mean), mse, or auto: for a single [batch, classes] output ce with labels and distill without, objective otherwise"},
		&cli.Float64Flag{Name: "temperature", Category: cat, Value: d.Temperature, Usage: "distillation temperature T"},
		&cli.StringFlag{Name: "augment", Category: cat, Value: "none", Usage: "transform the training images of every batch (C×H×W samples only; never the validation split): shift (random shifts of up to 2 pixels, edges repeated), shift=`N` (up to N pixels), flip (mirror left-right at random: not for text or digits), comma-separated, or none"},
		&cli.BoolFlag{Name: "last-iterate", Category: cat, Usage: "export the last outer iteration's weights (the paper's) instead of those with the best validation accuracy"},
		&cli.BoolFlag{Name: "no-bn-recalib", Category: cat, Usage: "do not re-estimate BatchNorm statistics with the binary weights"},
		&cli.BoolFlag{Name: "no-rescale", Category: cat, Usage: "binary grid: do not first rescale each weight followed by BatchNorm to mean |w| = 1 per channel (the function is unchanged; the paper's ±1 grid then sits far from the weights)"},
		&cli.StringFlag{Name: "start", Category: cat, Value: string(d.Start), Usage: "ADMM's starting x: grid (x⁰ = y⁰ = P(pretrained), the paper's analysis; measured better with small calibration sets) or pretrained (the paper's code)"},
		&cli.IntFlag{Name: "stat-samples", Category: cat, Value: d.StatSamples, Usage: "calibration samples f(x), f(y) and the criterion's gradient are measured on"},
		&cli.StringFlag{Name: "init", Category: cat, Value: string(binarize.InitModel), Usage: "model (the model's weights) or random (re-initialise them as PyTorch's defaults do, seeded by --seed: the paper's experiments without pre-training; the full-precision reference is then the random network)"},
		&cli.Float64Flag{Name: "validation", Category: cat, Value: d.Validation, Usage: fmt.Sprintf("`FRACTION` of the calibration data (after --split) set apart as the validation split that the in-loop accuracy and every automatic choice are measured on (raised to %d samples while 3/4 of the data remain for training; with --budget the default is %g); 0: none, training on all of it", binarize.MinValidation, binarize.BudgetValidation)},
	}
}

// algoAndObjectiveFlags are algoFlags with the objective's.
func algoAndObjectiveFlags() []cli.Flag {
	return append(algoFlags(), objectiveFlags("Algorithm")...)
}

func binarizeCommand() *cli.Command {
	return &cli.Command{
		Name:      "binarize",
		Usage:     "fine-tune a model's weights onto {-1,+1} with ADMM-Q (or ADMM-R, ADMM-S, PGD, GD+Proj, STE) and export it",
		ArgsUsage: "[MODEL.onnx]",
		UsageText: `qtool binarize [MODEL.onnx --data CALIB] [-o OUT.onnx] [flags]

With no arguments, binarizes the embedded fmnist-mlp on its 1000-image calibration subset
and writes fmnist-mlp-binary.onnx.

Examples:
   qtool binarize
   qtool binarize testmodels/fmnist-mlp.onnx --data /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --limit 10000 -o mlp-bin.onnx
   qtool binarize model.onnx --data calib.npz --max-drop 1.5 --json --report report   # CI gate
   qtool binarize model.onnx --data calib.npz --eval-data holdout.npz --budget --max-drop 1   # smallest file within 1 pp
   qtool binarize testmodels/fmnist-cnn.onnx --data testmodels/fmnist-calib.npz --grid binary-channel --algo admm-r --p 0.3`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output `FILE` (default: NAME-binary.onnx in the current folder)"},
			&cli.StringFlag{Name: "algo", Value: string(admmq.IADMMQ), Usage: "i-admm-q (alias admm-q: on a network ADMM-Q is I-ADMM-Q), admm-r, admm-s, pgd, gd-proj or ste (BinaryConnect: straight-through gradient at the projection, latent weights clipped to the grid's range)"},
			&cli.StringFlag{Name: "eval-data", Usage: "held-out evaluation `FILE` (same formats and flags as --data); without it --split defaults to " + defaultSplit},
			&cli.StringFlag{Name: "format", Value: "packed", Usage: "packed (1 bit per weight), qdq (int8/int4 + DequantizeLinear), float, or matmulnbits (MatMul and Gemm weights as onnxruntime's MatMulNBits, kept packed in onnxruntime's memory: 4 bits per ±1 weight by default, see --nbits-bits; other weights packed)"},
			&cli.IntFlag{Name: "nbits-bits", Usage: "matmulnbits: narrowest code width `N` written, 2, 4 or 8 (0: 4; onnxruntime 1.30's CPU kernels run 2-bit codes only by dequantizing or with int8 activations)"},
			&cli.IntFlag{Name: "nbits-block", Usage: "matmulnbits: block length `K` along the reduced axis, a power of two of at least 16 (0: 128)"},
			&cli.Int64Flag{Name: "opset", Usage: "raise the output's opset to `N` (0: keep the model's)"},
			&cli.StringFlag{Name: "report", Usage: "write the report to `FILE`.json and FILE.md"},
			&cli.Float64Flag{Name: "max-drop", Value: -1, Usage: "exit with code 3 when accuracy drops more than `PP` percentage points (agreement below 100-PP without labels)"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON on stdout (logs go to stderr)"},
			&cli.StringFlag{Name: "checkpoint", Usage: "save the run's state to `FILE` after every outer iteration"},
			&cli.StringFlag{Name: "resume", Usage: "continue the run saved in checkpoint `FILE` (same model, data and flags)"},
			&cli.DurationFlag{Name: "log-every", Value: 10 * time.Second, Usage: "interval of progress lines when stderr is not a terminal"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
			seedFlag(),
		}, append(append(gateFlags(), budgetFlags()...), algoAndObjectiveFlags()...)...), dataFlags()...),
		Action: runBinarize,
	}
}

// testHookPending, when set by a test, sees the new output file before it is checked.
var testHookPending func(tmp string)

func runBinarize(c *cli.Context) error {
	// Before any work: a signal while loading or evaluating the full-precision model must
	// also clean up (the embedded default's temporary folder) and exit 130 or 143.
	ctx, stop := withSignals(c.Context)
	defer stop()
	err := doBinarize(ctx, c)
	return interrupted(ctx, err, "no output written"+checkpointHint(c))
}

// binarizeOutputs checks binarize's output paths before any work and returns -o's.
func binarizeOutputs(c *cli.Context, grid network.Grid) (string, error) {
	model := ""
	if c.NArg() == 1 {
		model = c.Args().First()
	}
	out := c.String("output")
	if out == "" {
		base := defaultModelName
		if model != "" {
			base = strings.TrimSuffix(filepath.Base(model), filepath.Ext(model))
		}
		suffix := "binary"
		if grid != network.Binary && grid != network.Auto { // auto grids are binary too
			suffix = string(grid)
		}
		if c.Bool("budget") {
			suffix = "budget"
		}
		out = base + "-" + suffix + ".onnx"
	}
	outs := []namedPath{{"-o", out}}
	if p := c.String("report"); p != "" {
		p = reportBase(p)
		outs = append(outs, namedPath{"--report", p + ".json"}, namedPath{"--report", p + ".md"})
	}
	if p := c.String("checkpoint"); p != "" {
		outs = append(outs, namedPath{"--checkpoint", p})
	}
	ins := []namedPath{{"model", model}, {"--data", c.String("data")}, {"--eval-data", c.String("eval-data")},
		{"--labels", c.String("labels")}, {"--resume", c.String("resume")}}
	return out, checkOutputs(ins, outs, map[[2]string]bool{{"--resume", "--checkpoint"}: true})
}

func doBinarize(ctx context.Context, c *cli.Context) error {
	start := time.Now()
	stderr := c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	method, err := binarize.ParseMethod(c.String("algo"))
	if err != nil {
		return flagError(err, c, "")
	}
	if c.IsSet("min-agreement") && !(c.Float64("min-agreement") >= 0 && c.Float64("min-agreement") <= 100) {
		return usagef("--min-agreement %g: want a percentage between 0 and 100", c.Float64("min-agreement"))
	}
	if c.Float64("max-drop") < 0 && c.IsSet("max-drop") {
		return usagef("--max-drop %g: want a non-negative number of percentage points", c.Float64("max-drop"))
	}
	grid, err := network.ParseGrid(c.String("grid"))
	if err != nil {
		return usagef("--grid: %v", err)
	}
	if c.NArg() > 1 {
		return usagef("binarize takes one MODEL.onnx argument, got %d", c.NArg())
	}
	out, err := binarizeOutputs(c, grid)
	if err != nil {
		return err
	}
	if c.Bool("budget") {
		if _, err := budgetOptions(c); err != nil {
			return err
		}
	}
	s, err := setupBinarize(c, stderr, method)
	if err != nil {
		return err
	}
	defer s.Close()
	// The embedded default's model lives in a temporary folder that is gone when the
	// command returns: reports name it, not that path.
	modelName := s.path
	if c.NArg() == 0 {
		modelName = defaultModelName + ".onnx (embedded)"
	}
	o := s.opts
	o.Output = out
	if testHookPending != nil {
		o.Verify = func(tmp string) error { testHookPending(tmp); return nil }
	}
	if p, ck := c.String("resume"), c.String("checkpoint"); p != "" || ck != "" {
		fp, err := runFingerprint(c, s.path, s.data.BatchSize, method)
		if err != nil {
			return err
		}
		if p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("--resume: %w", err)
			}
			if o.Resume, err = network.Unseal(b, fp); err != nil {
				return fmt.Errorf("--resume %s: %w", p, err)
			}
		}
		if ck != "" {
			o.Checkpoint = func(state []byte) error { return atomicfile.WriteBytes(ck, network.Seal(state, fp)) }
		}
	}
	prog := newProgress(stderr, string(method), o.TotalEpochs(), c.Duration("log-every"), c.Bool("quiet"))
	o.Progress = prog.update
	if !c.Bool("quiet") {
		o.SensitiveProgress = sensitiveProgress(stderr)
	}
	var res *binarize.Result
	var budget *binarize.BudgetResult
	if c.Bool("budget") {
		if budget, err = s.runBudget(ctx, c, o, stderr); err == nil {
			res = budget.Result
		}
	} else {
		res, err = s.run(ctx, c, o)
	}
	prog.finish()
	if err != nil {
		return err
	}
	sum := &binarizeSummary{
		Model: modelName, Output: out, Algo: string(method), Grid: string(res.Grid), Format: string(o.Format), Loss: string(res.Loss),
		Seed: res.Seed, Labelled: res.Labelled, CalibData: s.calibFrom, EvalData: s.evalFrom,
		CalibCount: s.data.Calib.Len(), EvalCount: s.data.Eval.Len(), FPAccuracy: accuracyPct(res.FullPrecision),
		Splits:        splitCounts{Train: res.TrainSamples, Validation: res.ValidationSamples, HeldOut: res.HeldOutSamples},
		AccuracySplit: string(res.ReportSplit), HistorySplit: historySplit(res),
		BinAccuracy: accuracyPct(res.Binarized), Agreement: toPct(res.Binarized.Agreement), OutputBytes: int64(len(res.Bytes)),
		BNRecalib: !o.NoBNRecalib, BLAS: s.be.Info.Name, History: iterRecords(res.History, perSample(res)),
		ExportedIter: res.Exported, LastIterate: o.LastIterate,
		Objective: res.Objective, Outputs: outputRecords(res.Binarized.Outputs),
		Sensitive: sensitiveRecord(res.Sensitivity),
	}
	if o.Augment.On() {
		sum.Augment = o.Augment.String()
	}
	if res.Start != nil {
		sum.Start = &iterRecords([]network.IterStats{*res.Start}, perSample(res))[0]
	}
	if network.IsADMM(method) && method != admmq.ADMMS {
		sum.RhoFactors, sum.RhoGrowths = map[string]float64{}, map[string]float64{}
		for i, t := range res.Targets {
			sum.RhoFactors[t.Name] = res.RhoScales[i]
			sum.RhoGrowths[t.Name] = res.RhoGrowths[i]
		}
	}
	if res.Binarized.Labelled {
		sum.AccuracyCI = wilsonPct(res.Binarized.Correct, res.Binarized.Positions)
		if res.FullPrecision.Labelled {
			sum.FPAccuracyCI = wilsonPct(res.FullPrecision.Correct, res.FullPrecision.Positions)
		}
		sum.BinCorrect, sum.Positions = res.Binarized.Correct, res.Binarized.Positions
	}
	if res.FullPrecision.Labelled {
		sum.FPCorrect = res.FullPrecision.Correct
	}
	for _, w := range res.Warnings {
		// The weights' warnings were printed before the run (binSetup); the splits' are
		// known only now, and --json carries them in its warnings.
		if _, ok := w.(binarize.SmallSplit); ok && !c.Bool("json") {
			fmt.Fprintln(stderr, "qtool:", "warning: "+warningText(w))
		}
		sum.Warnings = append(sum.Warnings, "warning: "+warningText(w))
	}
	// The sizes are of the files on disk (the embedded model's temporary copy); the
	// report names the model as the summary does.
	if budget != nil {
		sum.Budget = budgetRecord(budget.Analysis, budget.Trials, budget.Chosen, modelName)
	}
	if sum.Storage, err = export.Compare(s.teacher.Model, res.Model, s.path, out, budgetChoices(sum.Budget)); err != nil {
		return err
	}
	sum.Storage.Original = modelName
	if c.NArg() == 0 {
		sum.CalibData, sum.EvalData = "fmnist-calib.npz (embedded)", "fmnist-calib.npz (embedded)"
	}
	for _, t := range res.Targets {
		sum.Targets = append(sum.Targets, t.Name)
	}
	if fi, err := os.Stat(s.path); err == nil {
		sum.InputBytes = fi.Size()
	}
	measured := true
	if res.FullPrecision.Labelled && res.Binarized.Labelled {
		sum.DropPP = toPct(res.FullPrecision.Accuracy - res.Binarized.Accuracy)
	} else if res.Binarized.HasAgreement {
		sum.DropPP = toPct(1 - res.Binarized.Agreement)
	} else {
		measured = false // no class or decision output: nothing to drop
	}
	sum.GatePassed = true
	if c.IsSet("max-drop") {
		md := c.Float64("max-drop")
		sum.MaxDropPP = &md
		g := gateRecord{Gate: "--max-drop", Threshold: md, Passed: measured && sum.DropPP <= md}
		if measured {
			v := sum.DropPP
			g.Value = &v
		} else {
			g.Reason = "no accuracy or agreement to measure: the model has no class or decision output (use --min-sqnr)"
		}
		sum.Gates = append(sum.Gates, g)
	}
	sum.Gates = append(sum.Gates, fidelityGates(c, res.Binarized.Outputs)...)
	for _, g := range sum.Gates {
		if !g.Passed {
			sum.GatePassed = false
			sum.FailedGates = append(sum.FailedGates, g.Gate)
		}
	}
	if !sum.GatePassed && budget == nil && slices.Contains(sum.FailedGates, "--max-drop") {
		// Which weights to keep: measured on the validation split, never the held-out set.
		if sum.CostlyLayers, sum.KeepCommand, err = costlyLayers(ctx, c, s, o, res, sum.DropPP-*sum.MaxDropPP); err != nil {
			return err
		}
	}
	sum.Seconds = roundTo(time.Since(start).Seconds(), 3)
	if p := c.String("report"); p != "" {
		if err := writeReport(p, sum); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printSummary(c.App.Writer, sum)
		if sum.Budget != nil {
			writeTrials(c.App.Writer, sum.Budget)
		}
		fmt.Fprintln(c.App.Writer)
		if err := sum.Storage.WriteText(c.App.Writer); err != nil {
			return err
		}
	}
	if !sum.GatePassed {
		var failed []string
		for _, g := range sum.Gates {
			if !g.Passed {
				failed = append(failed, g.String())
			}
		}
		return exitError{code: exitGateFail, err: fmt.Errorf("gate failed: %s (%s written)%s", strings.Join(failed, "; "), out, costlyText(sum))}
	}
	return nil
}

// accuracyPct is m's accuracy in percent, or nil without labels.
func accuracyPct(m train.Metrics) *float64 {
	if !m.Labelled {
		return nil
	}
	return pctOf(&m.Accuracy)
}

// checkpointHint tells how to continue an interrupted run, when there is a checkpoint to
// continue from.
func checkpointHint(c *cli.Context) string {
	if p := c.String("checkpoint"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return fmt.Sprintf("; continue with --resume %s", p)
		}
	}
	return ""
}
