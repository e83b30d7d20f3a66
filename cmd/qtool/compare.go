package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/urfave/cli/v2"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "run several algorithms over several seeds on the same model and data, and tabulate and plot the results",
		ArgsUsage: "[MODEL.onnx]",
		UsageText: `qtool compare [MODEL.onnx --data CALIB] [--algos LIST] [--seeds N] [--out DIR]

Every algorithm starts from the same pretrained weights and sees the same calibration and
held-out split (--seed); seed i of --seeds N (i = 0..N-1) uses --seed+i for the data order,
Dropout and ADMM-R's masks, the same for every algorithm. Writes DIR/compare.md, .csv and
.json, and DIR/accuracy.png, DIR/lagrangian.png and DIR/residual.png.

Examples:
   qtool compare --seeds 2
   qtool compare testmodels/fmnist-mlp.onnx --data /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --limit 10000 --eval-data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --seeds 5 --out results`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "algos", Value: "gd-proj,pgd,i-admm-q,admm-r,admm-s", Usage: "comma-separated `LIST` of algorithms (admm-q is i-admm-q)"},
			&cli.IntFlag{Name: "seeds", Value: 5, Usage: "runs per algorithm, with seeds --seed … --seed+N−1"},
			&cli.StringFlag{Name: "out", Value: "compare-out", Usage: "output `DIR` for the table and plots"},
			&cli.StringFlag{Name: "eval-data", Usage: "held-out evaluation `FILE`; without it --split defaults to " + defaultSplit},
			&cli.BoolFlag{Name: "json", Usage: "print the results as JSON on stdout"},
			&cli.DurationFlag{Name: "log-every", Value: 30e9, Usage: "interval of progress lines when stderr is not a terminal"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
			seedFlag(),
		}, algoAndObjectiveFlags()...), dataFlags()...),
		Action: runCompare,
	}
}

// algoResult is the outcome of one run of compare; its JSON form is part of compare.json.
type algoResult struct {
	Algo     string   `json:"algo"`
	Seed     uint64   `json:"seed"`
	Accuracy *float64 `json:"-"` // fraction; JSON has AccuracyPct
	Agree    float64  `json:"-"`
	// AccuracyPct and AgreementPct are Accuracy and Agree in percent, for JSON.
	AccuracyPct  *float64            `json:"accuracy_pct,omitempty"`
	AgreementPct float64             `json:"agreement_pct"`
	Loss         float64             `json:"final_train_loss"`
	FY           float64             `json:"final_f_y"`
	Seconds      float64             `json:"seconds"`
	History      []network.IterStats `json:"-"`
	Iterations   []iterRecord        `json:"history"`
	Bytes        int64               `json:"output_bytes"`
}

func newAlgoResult(r *binarize.Result) *algoResult {
	a := &algoResult{Algo: string(r.Method), Seed: r.Seed, Accuracy: r.Accuracy(), Agree: r.Binarized.Agreement,
		AgreementPct: toPct(r.Binarized.Agreement), History: r.History, Iterations: iterRecords(r.History),
		Bytes: int64(len(r.Bytes)), Seconds: roundTo(r.Seconds, 3)}
	a.AccuracyPct = pctOf(a.Accuracy)
	if h := r.History; len(h) > 0 {
		a.Loss, a.FY = h[len(h)-1].TrainLoss, h[len(h)-1].FY
	}
	return a
}

// compareRow is one algorithm's line of the table.
type compareRow struct {
	Algo string `json:"algo"`
	// Accuracy (or agreement without labels) over seeds, in [0,1]; JSON has them in
	// percent, rounded (the _pct fields).
	AccMean      float64       `json:"-"`
	AccStd       float64       `json:"-"`
	AgreeMean    float64       `json:"-"`
	AccMeanPct   float64       `json:"accuracy_mean_pct"`
	AccStdPct    float64       `json:"accuracy_std_pct"`
	AgreeMeanPct float64       `json:"agreement_mean_pct"`
	LossMean     float64       `json:"final_train_loss_mean"`
	FYMean       float64       `json:"final_f_y_mean"`
	SecMean      float64       `json:"seconds_mean"`
	Runs         []*algoResult `json:"runs"`
}

// compareResult is compare's output; its JSON form is part of qtool's CLI interface.
type compareResult struct {
	Model      string        `json:"model"`
	Labelled   bool          `json:"labelled"`
	FPAccuracy *float64      `json:"fp_accuracy_pct,omitempty"` // percent
	CalibCount int           `json:"calib_samples"`
	EvalCount  int           `json:"eval_samples"`
	Grid       string        `json:"grid"`
	Loss       string        `json:"loss"`
	Seeds      []uint64      `json:"seeds"`
	Rows       []*compareRow `json:"rows"`
}

func runCompare(c *cli.Context) error {
	// Before any work, as binarize: a signal during loading also cleans up.
	ctx, stop := withSignals(c.Context)
	defer stop()
	return interrupted(ctx, compare(ctx, c), "")
}

func compare(ctx context.Context, c *cli.Context) error {
	stderr := c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	var algos []admmq.Method
	for _, a := range splitList(c.String("algos")) {
		al, err := binarize.ParseMethod(a)
		if err != nil {
			return usagef("--algos: %v", err)
		}
		algos = append(algos, al)
	}
	if len(algos) == 0 {
		return usagef("--algos: name at least one algorithm")
	}
	if c.Int("seeds") < 1 {
		return usagef("--seeds %d: want at least 1", c.Int("seeds"))
	}
	dir := c.String("out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usagef("--out %s: %v", dir, err)
	}
	if err := checkOutputs(nil, []namedPath{{"--out", filepath.Join(dir, "compare.json")}}, nil); err != nil {
		return err
	}
	s, err := setupBinarize(c, stderr, algos[0])
	if err != nil {
		return err
	}
	defer s.Close()
	base := c.Uint64("seed")
	res := &compareResult{Model: s.path, CalibCount: s.data.Calib.Len(), EvalCount: s.data.Eval.Len(), Grid: string(s.opts.Grid)}
	if c.NArg() == 0 {
		res.Model = defaultModelName + ".onnx (embedded)"
	}
	for i := range c.Int("seeds") {
		res.Seeds = append(res.Seeds, base+uint64(i))
	}
	for _, algo := range algos {
		row := &compareRow{Algo: string(algo)}
		for _, seed := range res.Seeds {
			o := s.opts
			o.Method, o.Seed = algo, seed
			prog := newProgress(stderr, fmt.Sprintf("%s seed %d", algo, seed), o.TotalEpochs(), c.Duration("log-every"), c.Bool("quiet"))
			o.Progress = prog.update
			r, err := s.run(ctx, c, o)
			prog.finish()
			if err != nil {
				return err
			}
			// Every run measures the same full-precision model on the same data.
			res.Labelled, res.FPAccuracy, res.Loss = r.Labelled, accuracyPct(r.FullPrecision), string(r.Loss)
			a := newAlgoResult(r)
			if !c.Bool("quiet") {
				fmt.Fprintf(stderr, "compare: %s seed %d: accuracy %s, agreement %.2f %%, %.1f s\n", algo, seed, pct(a.Accuracy), 100*a.Agree, a.Seconds)
			}
			row.Runs = append(row.Runs, a)
		}
		row.summarise(res.Labelled)
		res.Rows = append(res.Rows, row)
	}
	if err := res.write(dir); err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.markdown(c.App.Writer)
}

func (r *compareRow) summarise(labelled bool) {
	var accs []float64
	n := float64(len(r.Runs))
	for _, run := range r.Runs {
		a := run.Agree
		if labelled && run.Accuracy != nil {
			a = *run.Accuracy
		}
		accs = append(accs, a)
		r.AgreeMean += run.Agree / n
		r.LossMean += run.Loss / n
		r.FYMean += run.FY / n
		r.SecMean += run.Seconds / n
	}
	for _, a := range accs {
		r.AccMean += a / n
	}
	if len(accs) > 1 {
		var ss float64
		for _, a := range accs {
			ss += (a - r.AccMean) * (a - r.AccMean)
		}
		r.AccStd = math.Sqrt(ss / (n - 1)) // sample standard deviation, as the paper's ± is read
	}
	r.AccMeanPct, r.AccStdPct, r.AgreeMeanPct = toPct(r.AccMean), toPct(r.AccStd), toPct(r.AgreeMean)
	r.SecMean = roundTo(r.SecMean, 3)
}

func (res *compareResult) markdown(w io.Writer) error {
	what := "accuracy"
	if !res.Labelled {
		what = "agreement with FP"
	}
	fmt.Fprintf(w, "Model %s, %s grid, loss %s, %d calibration / %d held-out samples, seeds %v.\n", res.Model, res.Grid, res.Loss, res.CalibCount, res.EvalCount, res.Seeds)
	if res.FPAccuracy != nil {
		fmt.Fprintf(w, "Full precision: %.2f %%.\n", *res.FPAccuracy)
	}
	fmt.Fprintf(w, "\n| algorithm | %s (mean ± std) | agreement with FP | final train loss | final f(y) | time (s) |\n|---|---:|---:|---:|---:|---:|\n", what)
	for _, r := range res.Rows {
		fmt.Fprintf(w, "| %s | %.2f ± %.2f %% | %.2f %% | %.4f | %.4f | %.1f |\n", r.Algo, 100*r.AccMean, 100*r.AccStd, 100*r.AgreeMean, r.LossMean, r.FYMean, r.SecMean)
	}
	return nil
}

func (res *compareResult) write(dir string) error {
	var md strings.Builder
	md.WriteString("# qtool compare\n\n")
	if err := res.markdown(&md); err != nil {
		return err
	}
	md.WriteString("\n![accuracy per iteration](accuracy.png)\n\n![augmented Lagrangian](lagrangian.png)\n\n![residual](residual.png)\n")
	if err := atomicfile.WriteBytes(filepath.Join(dir, "compare.md"), []byte(md.String())); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("algo,seed,accuracy_pct,agreement_pct,final_train_loss,final_f_y,seconds\n")
	for _, r := range res.Rows {
		for _, run := range r.Runs {
			acc := ""
			if run.AccuracyPct != nil {
				acc = fmt.Sprintf("%.4f", *run.AccuracyPct)
			}
			fmt.Fprintf(&csv, "%s,%d,%s,%.4f,%.6f,%.6f,%.3f\n", r.Algo, run.Seed, acc, run.AgreementPct, run.Loss, run.FY, run.Seconds)
		}
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, "compare.csv"), []byte(csv.String())); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, "compare.json"), append(js, '\n')); err != nil {
		return err
	}
	plots := []struct {
		file, title, y string
		admmOnly       bool
		value          func(network.IterStats) float64
	}{
		{"accuracy.png", "held-out accuracy of y", "accuracy (%)", false, func(s network.IterStats) float64 { return 100 * s.Accuracy }},
		{"lagrangian.png", "augmented Lagrangian L(x, y, λ)", "L", true, func(s network.IterStats) float64 { return s.Lagrangian }},
		{"residual.png", "‖x − y‖", "‖x − y‖", true, func(s network.IterStats) float64 { return s.Residual }},
	}
	for _, pl := range plots {
		p := plot.New()
		p.Title.Text = pl.title + " (mean over seeds)"
		p.X.Label.Text = "outer iteration"
		p.Y.Label.Text = pl.y
		var lines []any
		for _, r := range res.Rows {
			if pl.admmOnly && !network.IsADMM(admmq.Method(r.Algo)) {
				continue
			}
			pts := meanCurve(r.Runs, pl.value)
			if len(pts) == 0 {
				continue
			}
			lines = append(lines, r.Algo, pts)
		}
		if len(lines) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return err
		}
		wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "png")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, pl.file), func(w io.Writer) error { _, err := wt.WriteTo(w); return err }); err != nil {
			return err
		}
	}
	return nil
}

// meanCurve averages a per-iteration value over runs.
func meanCurve(runs []*algoResult, value func(network.IterStats) float64) plotter.XYs {
	n := 0
	for _, r := range runs {
		if n == 0 || len(r.History) < n {
			n = len(r.History)
		}
	}
	pts := make(plotter.XYs, n)
	for i := range n {
		pts[i].X = float64(i + 1)
		for _, r := range runs {
			pts[i].Y += value(r.History[i]) / float64(len(runs))
		}
	}
	return pts
}
