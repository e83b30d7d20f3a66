package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
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
.json, and DIR/accuracy.png, DIR/lagrangian.png, DIR/residual.png (the primal residual
‖x − y‖) and DIR/dual.png (the dual residual ‖ρ(y − y_prev)‖).

Examples:
   qtool compare --seeds 2
   qtool compare testmodels/fmnist-mlp.onnx --data /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz --limit 10000 --eval-data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --seeds 5 --out results`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "algos", Value: "gd-proj,pgd,ste,i-admm-q,admm-r,admm-s", Usage: "comma-separated `LIST` of algorithms (admm-q is i-admm-q)"},
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
	// WeightsSHA256 digests the exported binarized weights (weightsDigest) and
	// NetworkSHA256 the whole exported graph (networkDigest): equal digests across
	// algorithms of one seed mean the same weights, or the same network.
	WeightsSHA256 string `json:"weights_sha256"`
	NetworkSHA256 string `json:"network_sha256,omitempty"`
	// correct holds, per held-out position, whether the exported model got it right (or
	// agreed with the full-precision model without labels); nil when unavailable.
	correct []bool
}

func newAlgoResult(r *binarize.Result) *algoResult {
	a := &algoResult{Algo: string(r.Method), Seed: r.Seed, Accuracy: r.Accuracy(), Agree: r.Binarized.Agreement,
		AgreementPct: toPct(r.Binarized.Agreement), History: r.History, Iterations: iterRecords(r.History, perSample(r)),
		Bytes: int64(len(r.Bytes)), Seconds: roundTo(r.Seconds, 3),
		WeightsSHA256: weightsDigest(r), NetworkSHA256: networkDigest(r)}
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
	AccMean      float64 `json:"-"`
	AccStd       float64 `json:"-"`
	AgreeMean    float64 `json:"-"`
	AccMeanPct   float64 `json:"accuracy_mean_pct"`
	AccStdPct    float64 `json:"accuracy_std_pct"`
	AgreeMeanPct float64 `json:"agreement_mean_pct"`
	LossMean     float64 `json:"final_train_loss_mean"`
	FYMean       float64 `json:"final_f_y_mean"`
	SecMean      float64 `json:"seconds_mean"`
	// IdenticalTo names the earlier row whose runs exported the same binary weights on
	// every seed; the two rows are then one result.
	IdenticalTo string        `json:"identical_to,omitempty"`
	Runs        []*algoResult `json:"runs"`
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
	// Pairs compares every two rows seed by seed: paired differences with a t interval and
	// McNemar's test per seed (comparestats.go).
	Pairs []*pairStat `json:"pairs"`
	// Identical lists the algorithms that exported the same binary weights, and Warnings
	// says so in words, once per group.
	Identical []identicalGroup `json:"identical_weights,omitempty"`
	Warnings  []string         `json:"warnings,omitempty"`
	// BNRecalibrated reports whether the exported models' BatchNorm statistics were
	// re-estimated (the table's accuracies) while the per-iteration accuracies, measured
	// during training, were not: AccuracyCurve says how accuracy.png measures.
	BNRecalibrated bool   `json:"bn_recalibrated"`
	AccuracyCurve  string `json:"accuracy_curve"`
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
	res.BNRecalibrated = !s.opts.NoBNRecalib
	evalSet := s.data.Eval
	if evalSet == nil {
		evalSet = s.data.Calib
	}
	var fpPred []int64 // the full-precision model's, for agreement without labels
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
			if a.correct, fpPred, err = correctness(ctx, r, evalSet, o, s.teacher.Model, fpPred); err != nil {
				return err
			}
			if !c.Bool("quiet") {
				fmt.Fprintf(stderr, "compare: %s seed %d: accuracy %s, agreement %.2f %%, %.1f s\n", algo, seed, pct(a.Accuracy), 100*a.Agree, a.Seconds)
			}
			row.Runs = append(row.Runs, a)
		}
		row.summarise(res.Labelled)
		res.Rows = append(res.Rows, row)
	}
	res.Identical = identicalGroups(res.Rows)
	for _, g := range res.Identical {
		res.Warnings = append(res.Warnings, g.warning())
		if !c.Bool("quiet") {
			fmt.Fprintf(stderr, "compare: warning: %s\n", g.warning())
		}
	}
	res.Pairs = pairStats(res.Rows, res.Labelled)
	res.AccuracyCurve = accuracyCurveNote(res.BNRecalibrated)
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
	fmt.Fprintf(w, "\n| algorithm | %s (mean ± std) | agreement with FP | final train loss | final f(y) | time (s) | same weights as |\n|---|---:|---:|---:|---:|---:|---|\n", what)
	for _, r := range res.Rows {
		same := ""
		if r.IdenticalTo != "" {
			same = "**" + r.IdenticalTo + "** (every seed)"
		}
		fmt.Fprintf(w, "| %s | %.2f ± %.2f %% | %.2f %% | %.4f | %.4f | %.1f | %s |\n", r.Algo, 100*r.AccMean, 100*r.AccStd, 100*r.AgreeMean, r.LossMean, r.FYMean, r.SecMean, same)
	}
	for _, warn := range res.Warnings {
		fmt.Fprintf(w, "\n**Warning:** %s.\n", warn)
	}
	if len(res.Pairs) == 0 {
		return nil
	}
	n := len(res.Seeds)
	interval := fmt.Sprintf("95 %% interval: paired t interval over the %d seeds, mean ± t(0.975; %d)·s/√%d", n, n-1, n)
	if n < 2 {
		interval = "95 % interval: unavailable with one seed (no spread to estimate)"
	}
	fmt.Fprintf(w, "\nPaired differences A − B of %s in percentage points, seed by seed on the same held-out samples; %s. "+
		"McNemar per seed: samples only A / only B gets right, and the two-sided p-value that both are equally accurate "+
		"(exact binomial below %d discordant samples, else χ² with continuity correction); no correction for the number of pairs.\n\n",
		what, interval, mcnemarExactBelow)
	fmt.Fprintf(w, "| A − B | mean (pp) | 95 %% interval (pp) | seeds A > / < / = B | McNemar per seed: only A / only B, p |\n|---|---:|---:|---:|---|\n")
	for _, p := range res.Pairs {
		name := p.A + " − " + p.B
		if p.Identical {
			name += " (identical weights)"
		}
		ci := "unavailable (1 seed)"
		if p.CI95Pct != nil {
			ci = fmt.Sprintf("[%+.2f, %+.2f]", p.CI95Pct[0], p.CI95Pct[1])
		}
		mc := "unavailable"
		if len(p.McNemar) > 0 {
			var parts []string
			for _, m := range p.McNemar {
				parts = append(parts, fmt.Sprintf("%d/%d, p = %s", m.AOnly, m.BOnly, fmtP(m.P)))
			}
			mc = strings.Join(parts, "; ")
		}
		fmt.Fprintf(w, "| %s | %+.2f | %s | %d / %d / %d | %s |\n", name, p.MeanPct, ci, p.Wins, p.Losses, p.Ties, mc)
	}
	return nil
}

func (res *compareResult) write(dir string) error {
	var md strings.Builder
	md.WriteString("# qtool compare\n\n")
	if err := res.markdown(&md); err != nil {
		return err
	}
	fmt.Fprintf(&md, "\n![accuracy per iteration](accuracy.png)\n\n%s.\n\n![augmented Lagrangian](lagrangian.png)\n\n![primal residual](residual.png)\n\n![dual residual](dual.png)\n", res.AccuracyCurve)
	if err := atomicfile.WriteBytes(filepath.Join(dir, "compare.md"), []byte(md.String())); err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("algo,seed,accuracy_pct,agreement_pct,final_train_loss,final_f_y,seconds,identical_to,weights_sha256\n")
	for _, r := range res.Rows {
		for _, run := range r.Runs {
			acc := ""
			if run.AccuracyPct != nil {
				acc = fmt.Sprintf("%.4f", *run.AccuracyPct)
			}
			fmt.Fprintf(&csv, "%s,%d,%s,%.4f,%.6f,%.6f,%.3f,%s,%s\n", r.Algo, run.Seed, acc, run.AgreementPct, run.Loss, run.FY, run.Seconds, r.IdenticalTo, run.WeightsSHA256)
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
	for _, f := range res.figures() {
		if len(f.curves) == 0 {
			continue
		}
		if err := atomicfile.Write(filepath.Join(dir, f.file), f.render); err != nil {
			return err
		}
	}
	return nil
}

// correctness runs r's exported model once over the held-out data and returns, per
// position, whether it was right: its class equals the label, or without labels the
// full-precision model's class (fp's predictions, computed on first need and returned for
// the next run). McNemar's test needs these per-sample results, which Result does not
// keep. A model without a class or decision output has none (nil).
func correctness(ctx context.Context, r *binarize.Result, eval calib.Dataset, o binarize.Options, fp *onnxio.Model, fpPred []int64) ([]bool, []int64, error) {
	if r.Model == nil || train.LabelOutput(r.Outputs) < 0 {
		return nil, fpPred, nil
	}
	pred, ref, err := binarize.Predictions(ctx, r.Model, eval, o, r.Outputs)
	if err != nil {
		return nil, fpPred, err
	}
	labelled := r.Labelled && r.Binarized.Labelled // as the table's value (algoResult.value)
	if !labelled {
		if fpPred == nil {
			if fpPred, _, err = binarize.Predictions(ctx, fp, eval, o, r.Outputs); err != nil {
				return nil, nil, err
			}
		}
		ref = fpPred
	}
	if len(ref) != len(pred) {
		return nil, fpPred, nil
	}
	ok := make([]bool, len(pred))
	hits := 0
	for i := range pred {
		ok[i] = pred[i] == ref[i]
		if ok[i] {
			hits++
		}
	}
	// The test must be about the numbers in the table; binarize's tests check that
	// Predictions counts as Evaluate does, and this guards the wiring.
	if labelled && hits != r.Binarized.Correct || !labelled && r.Binarized.HasAgreement &&
		math.Abs(float64(hits)/float64(len(ok))-r.Binarized.Agreement) > 1e-9 {
		return nil, fpPred, fmt.Errorf("compare: %s seed %d: per-sample results count %d of %d right, which is not the accuracy measured (internal error)", r.Method, r.Seed, hits, len(ok))
	}
	return ok, fpPred, nil
}

// accuracyCurveNote says how accuracy.png measures, against the table.
func accuracyCurveNote(bnRecalibrated bool) string {
	if bnRecalibrated {
		return "Lines in accuracy.png: validation accuracy of y at each outer iteration after BatchNorm re-estimation, the score the " +
			"exported iterate is chosen by; large marks at the last iteration: the exported models on the held-out data, as in the table"
	}
	return "Lines in accuracy.png: validation accuracy of y at each outer iteration; BatchNorm statistics are not re-estimated " +
		"(--no-bn-recalib), as in the table; large marks at the last iteration: the exported models, as in the table"
}

// curve is one algorithm's line in a figure, with the style that tells it apart.
type curve struct {
	algo, label string
	pts         plotter.XYs
	line        draw.LineStyle
	glyph       draw.GlyphStyle
	// identicalTo names an earlier curve with exactly the same points.
	identicalTo string
}

// figure is one of compare's plots, kept as data so that tests can inspect its structure.
type figure struct {
	file, title, xLabel, yLabel string
	curves                      []curve
	// marks are the exported models' values (the table's), one per algorithm, drawn
	// large at the last iteration in the algorithm's colour and glyph.
	marks     []curve
	marksNote string
}

// curveStyle gives row i its own colour, dash pattern and glyph, so that lines stay
// apart in grey print and when they overlap. Earlier rows are drawn wider: a later line
// with the same points (an identical result) then shows on top of the earlier one
// instead of hiding it.
func curveStyle(i, rows int) (draw.LineStyle, draw.GlyphStyle) {
	c := plotutil.DarkColors[i%len(plotutil.DarkColors)]
	width := vg.Points(1.2 + 2.4*float64(rows-1-i)/float64(max(rows-1, 1)))
	return draw.LineStyle{Color: c, Width: width, Dashes: plotutil.Dashes(i)},
		draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: plotutil.Shape(i)}
}

func (res *compareResult) figures() []figure {
	specs := []struct {
		file, title, y string
		admmOnly       bool
		value          func(network.IterStats) float64
	}{
		{"accuracy.png", "validation accuracy of y per outer iteration (mean over seeds)", "accuracy (%)", false, func(s network.IterStats) float64 { return 100 * s.Accuracy }},
		{"lagrangian.png", "augmented Lagrangian L(x, y, λ) (mean over seeds)", "L", true, func(s network.IterStats) float64 { return s.Lagrangian }},
		{"residual.png", "primal residual ‖x − y‖ (mean over seeds)", "‖x − y‖", true, func(s network.IterStats) float64 { return s.Residual }},
		{"dual.png", "dual residual ‖ρ(y − y_prev)‖: how far the y-update moved (mean over seeds)", "‖ρ(y − y_prev)‖", true, func(s network.IterStats) float64 { return s.DualResidual }},
	}
	if !res.Labelled {
		specs[0].title, specs[0].y = "held-out agreement of y with full precision per outer iteration (mean over seeds)", "agreement (%)"
	}
	var figs []figure
	for _, sp := range specs {
		f := figure{file: sp.file, title: sp.title, xLabel: "outer iteration", yLabel: sp.y}
		for i, r := range res.Rows {
			if sp.admmOnly && !network.IsADMM(admmq.Method(r.Algo)) {
				continue
			}
			pts := meanCurve(r.Runs, sp.value)
			if len(pts) == 0 {
				continue
			}
			c := curve{algo: r.Algo, label: r.Algo, pts: pts}
			c.line, c.glyph = curveStyle(i, len(res.Rows))
			for _, prev := range f.curves {
				if slices.Equal(prev.pts, pts) {
					c.identicalTo = prev.algo
					c.label = fmt.Sprintf("%s (identical to %s)", r.Algo, prev.algo)
					break
				}
			}
			f.curves = append(f.curves, c)
			if sp.file == "accuracy.png" {
				m := c
				m.pts = plotter.XYs{{X: pts[len(pts)-1].X, Y: 100 * r.AccMean}}
				m.glyph.Radius = vg.Points(6)
				f.marks = append(f.marks, m)
			}
		}
		if len(f.marks) > 0 {
			if res.BNRecalibrated {
				f.title += "\nlines: validation, BatchNorm re-estimated; large marks: exported models, as in the table"
			} else {
				f.title += "\nlines: BatchNorm as trained (--no-bn-recalib); large marks: exported models, as in the table"
			}
			f.marksNote = "exported model (table)"
		}
		figs = append(figs, f)
	}
	return figs
}

// figureWidth and figureHeight are the size of compare's PNGs.
const figureWidth, figureHeight = 9 * vg.Inch, 4.5 * vg.Inch

// layout splits the canvas into the plot's area and a strip on its right for the legend,
// as wide as the legend needs, so that the legend never covers data.
func layout(dc draw.Canvas, leg *plot.Legend) (plotArea, legendArea draw.Canvas) {
	r := leg.Rectangle(dc)
	w := r.Max.X - r.Min.X + vg.Points(12)
	return draw.Crop(dc, 0, -w, 0, 0), draw.Crop(dc, dc.Max.X-dc.Min.X-w+vg.Points(6), 0, 0, -vg.Points(36))
}

// plot builds the gonum plot and, apart from it for layout, its legend.
func (f figure) plot() (*plot.Plot, *plot.Legend, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = f.title, f.xLabel, f.yLabel
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(36) // long enough to show the dash pattern
	leg.Padding = vg.Points(4)
	for _, c := range f.curves {
		l, err := plotter.NewLine(c.pts)
		if err != nil {
			return nil, nil, err
		}
		l.LineStyle = c.line
		s, err := plotter.NewScatter(c.pts)
		if err != nil {
			return nil, nil, err
		}
		s.GlyphStyle = c.glyph
		p.Add(l, s)
		leg.Add(c.label, l, s)
	}
	for _, m := range f.marks {
		s, err := plotter.NewScatter(m.pts)
		if err != nil {
			return nil, nil, err
		}
		s.GlyphStyle = m.glyph
		p.Add(s)
	}
	if f.marksNote != "" {
		s, err := plotter.NewScatter(plotter.XYs{{}})
		if err != nil {
			return nil, nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: color.Gray{Y: 80}, Radius: vg.Points(6), Shape: draw.RingGlyph{}}
		leg.Add("large marks: "+f.marksNote, s)
	}
	return p, &leg, nil
}

// render writes the figure as a PNG.
func (f figure) render(w io.Writer) error {
	p, leg, err := f.plot()
	if err != nil {
		return err
	}
	img := vgimg.New(figureWidth, figureHeight)
	dc := draw.New(img)
	plotArea, legendArea := layout(dc, leg)
	p.Draw(plotArea)
	leg.Draw(legendArea)
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
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
