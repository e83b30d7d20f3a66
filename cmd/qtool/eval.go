package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/train"
	"github.com/urfave/cli/v2"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "measure a model's top-1 accuracy, or its agreement with another model",
		ArgsUsage: "MODEL.onnx",
		UsageText: `qtool eval MODEL.onnx --data FILE [--reference FP.onnx [--min-sqnr DB] [--min-agreement PCT]] [--outputs OUT.npz] [--json]

Examples:
   qtool eval testmodels/fmnist-cnn.onnx --data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
   qtool eval out.onnx --data testmodels/fmnist-calib.npz --ref testmodels/fmnist-mlp.onnx --json`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "ref", Aliases: []string{"reference"}, Usage: "reference `MODEL.onnx` (the full-precision model): report every output's fidelity to it (SQNR, cosine, max error, top-1 or decision agreement)"},
			&cli.StringFlag{Name: "outputs", Usage: "write every output of MODEL on the data to `FILE.npz` (one float32 array per output, named after it, batches concatenated)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"},
			seedFlag(),
		}, append(gateFlags(), append(objectiveFlags(""), dataFlags()...)...)...),
		Action: runEval,
	}
}

// evalResult is what eval reports; its JSON form is part of qtool's CLI interface.
type evalResult struct {
	Model   string `json:"model"`
	Samples int    `json:"samples"`
	// Accuracy is the top-1 accuracy in [0,1]; nil when the data have no labels. JSON
	// carries it in percent, as every qtool JSON does (AccuracyPct).
	Accuracy    *float64 `json:"-"`
	AccuracyPct *float64 `json:"accuracy_pct,omitempty"`
	Correct     int      `json:"correct,omitempty"`
	// Ref, Agreement and MaxLogitDiff are set with --ref.
	Ref          string   `json:"ref,omitempty"`
	Agreement    *float64 `json:"-"`
	AgreementPct *float64 `json:"agreement_pct,omitempty"`
	MaxLogitDiff *float64 `json:"max_logit_diff,omitempty"`
	// AccuracyCI is the Wilson 95 % interval of the accuracy, in percent.
	AccuracyCI *[2]float64 `json:"accuracy_ci95_pct,omitempty"`
	// Outputs is every output's fidelity to Ref.
	Outputs []outputRecord `json:"outputs,omitempty"`
	// OutputsFile is the --outputs file written.
	OutputsFile   string  `json:"outputs_file,omitempty"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	// Gates are --min-sqnr and --min-agreement with their verdicts, as binarize reports
	// them; FailedGates names the failed ones, and eval then exits with code 3.
	Gates       []gateRecord `json:"gates,omitempty"`
	GatePassed  *bool        `json:"gate_passed,omitempty"`
	FailedGates []string     `json:"failed_gates,omitempty"`
	fidelity    []train.Fidelity
	positions   int    // the labelled positions Correct counts over (samples for [N, C])
	BLAS        string `json:"blas"`
}

func runEval(c *cli.Context) error {
	ctx, stop := withSignals(c.Context)
	defer stop()
	return interrupted(ctx, runEvalCtx(ctx, c), "")
}

func runEvalCtx(ctx context.Context, c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("eval takes one MODEL.onnx argument, got %d", c.NArg())
	}
	be, err := selectBackend(c)
	if err != nil {
		return err
	}
	seed := c.Uint64("seed")
	m, err := loadModel(c.Args().First(), be, seed)
	if err != nil {
		return err
	}
	if (c.IsSet("min-sqnr") || c.IsSet("min-agreement")) && c.String("ref") == "" {
		// The gates compare with the reference; without it they could never be measured.
		return usagef("--min-sqnr and --min-agreement compare with the full-precision model: add --ref FP.onnx")
	}
	var ref *loaded
	if p := c.String("ref"); p != "" {
		if ref, err = loadModel(p, be, seed); err != nil {
			return err
		}
	}
	data, err := openData(c, m.input(), seed)
	if err != nil {
		return err
	}
	defer data.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fitEvalBatch(c, data, be, m, ref); err != nil {
		return err
	}
	ca, err := parseClassAxis(c.String("class-axis"))
	if err != nil {
		return err
	}
	specs, err := train.DetectOutputs(m.Model, m.Graph, nil, train.DetectOptions{ClassAxis: ca})
	if err != nil {
		return usagef("--class-axis: %v", err)
	}
	ev, err := evaluate(ctx, m, ref, data.Eval, data.BatchSize, be, specs)
	if err != nil {
		return err
	}
	if p := c.String("outputs"); p != "" {
		if err := writeOutputs(ctx, m, data.Eval, data.BatchSize, be, p); err != nil {
			return err
		}
		ev.OutputsFile = p
	}
	ev.BLAS = be.Info.Name
	if err := ev.gate(c); err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return ev.gateError()
	}
	w := c.App.Writer
	fmt.Fprintf(w, "model      %s\nsamples    %d\n", ev.Model, ev.Samples)
	if ev.Accuracy != nil {
		fmt.Fprintf(w, "accuracy   %.2f %% (%d/%d, 95 %% interval %.2f–%.2f %%)\n", 100**ev.Accuracy, ev.Correct, ev.positions, ev.AccuracyCI[0], ev.AccuracyCI[1])
	} else {
		fmt.Fprintln(w, "accuracy   n/a: the data have no labels")
	}
	if ev.Agreement != nil {
		fmt.Fprintf(w, "agreement  %.2f %% top-1 with %s\nmax |Δlogit| %.6g\n", 100**ev.Agreement, ev.Ref, *ev.MaxLogitDiff)
	}
	writeFidelity(w, ev.Outputs)
	if ev.OutputsFile != "" {
		fmt.Fprintf(w, "outputs    written to %s\n", ev.OutputsFile)
	}
	fmt.Fprintf(w, "speed      %.0f samples/s (%s BLAS)\n", ev.SamplesPerSec, ev.BLAS)
	for _, g := range ev.Gates {
		fmt.Fprintf(w, "gate       %s\n", g)
	}
	return ev.gateError()
}

// gate evaluates --min-sqnr and --min-agreement on the fidelity to --ref, as binarize
// does on its result.
func (ev *evalResult) gate(c *cli.Context) error {
	if !c.IsSet("min-sqnr") && !c.IsSet("min-agreement") {
		return nil
	}
	ev.Gates = fidelityGates(c, ev.fidelity)
	passed := true
	for _, g := range ev.Gates {
		if !g.Passed {
			passed = false
			ev.FailedGates = append(ev.FailedGates, g.Gate)
		}
	}
	ev.GatePassed = &passed
	return nil
}

// gateError is the exit-code-3 error of failed gates, nil when they passed.
func (ev *evalResult) gateError() error {
	if ev.GatePassed == nil || *ev.GatePassed {
		return nil
	}
	var failed []string
	for _, g := range ev.Gates {
		if !g.Passed {
			failed = append(failed, g.String())
		}
	}
	return exitError{code: exitGateFail, err: fmt.Errorf("gate failed: %s", strings.Join(failed, "; "))}
}

// evaluate runs m (and ref, when given) over d in inference mode, through train.Evaluate,
// and measures the throughput.
func evaluate(ctx context.Context, m, ref *loaded, d calib.Dataset, batchSize int, be backend, specs []train.OutputSpec) (*evalResult, error) {
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: batchSize})
	if err != nil {
		return nil, err
	}
	o := train.EvalOptions{Engine: &engine.Context{BLAS: be.BLAS, Workers: be.Workers}, Outputs: specs}
	if ref != nil {
		o.Reference = ref.Graph
	}
	start := time.Now()
	mt, err := train.Evaluate(ctx, m.Graph, b, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	res := &evalResult{Model: m.Path, Samples: mt.Samples}
	if mt.Labelled {
		acc := mt.Accuracy
		res.Accuracy = &acc
		res.Correct, res.positions = mt.Correct, mt.Positions
		res.AccuracyCI = wilsonPct(mt.Correct, mt.Positions)
	}
	if ref != nil {
		diff := mt.MaxLogitDiff
		res.Ref, res.MaxLogitDiff = ref.Path, &diff
		if mt.HasAgreement {
			a := mt.Agreement
			res.Agreement = &a
		}
		res.Outputs, res.fidelity = outputRecords(mt.Outputs), mt.Outputs
	}
	res.AccuracyPct, res.AgreementPct = pctOf(res.Accuracy), pctOf(res.Agreement)
	if s := time.Since(start).Seconds(); s > 0 {
		res.SamplesPerSec = float64(mt.Samples) / s
	}
	return res, nil
}
