package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// pickFlags returns the flags of fs with the given names, so that a command shares
// binarize's definitions (and defaults) of the few it takes.
func pickFlags(fs []cli.Flag, names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range fs {
		if slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

// analyzeFlags are the binarize flags that change what analyze measures.
func analyzeFlags() []cli.Flag {
	return pickFlags(algoAndObjectiveFlags(), "keep", "only", "validation", "no-bn-recalib", "no-rescale", "class-axis", "output-weights")
}

func analyzeCommand() *cli.Command {
	return &cli.Command{
		Name:      "analyze",
		Usage:     "measure each weight's sensitivity to each grid on the validation split (projection and BatchNorm re-estimation, no fine-tuning)",
		ArgsUsage: "MODEL.onnx",
		UsageText: `qtool analyze MODEL.onnx --data CALIB [--json] [--plot FILE.png] [flags]

For every weight binarize would target, the weight alone is projected onto each grid, the
BatchNorm statistics are re-estimated on the calibration data and the model is scored on
the validation split binarize carves from it with the same flags; then every weight at
once. The score is the accuracy's drop (labels), the disagreement with the full-precision
model (no labels) or the worst output's SQNR (no class output).

Examples:
   qtool analyze testmodels/fmnist-cnn.onnx --data testmodels/fmnist-calib.npz --plot cnn.png
   qtool analyze model.onnx --data calib.npz --grids binary-channel,int4 --json`,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "grids", Usage: "comma-separated `GRIDS` to project onto (default: binary,binary-channel,ternary,int4,int8)"},
			&cli.StringFlag{Name: "plot", Usage: "write a bar chart of the drops per layer and grid, with each layer's share of the bytes, to `FILE.png`"},
			&cli.BoolFlag{Name: "json", Usage: "print the analysis as JSON on stdout"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
			seedFlag(),
		}, analyzeFlags()...), dataFlags()...),
		Action: runAnalyze,
	}
}

func runAnalyze(c *cli.Context) error {
	ctx, stop := withSignals(c.Context)
	defer stop()
	return interrupted(ctx, doAnalyze(ctx, c), "no analysis written")
}

func parseGrids(flag, s string) ([]network.Grid, error) {
	var gs []network.Grid
	for _, f := range splitList(s) {
		g, err := network.ParseGrid(f)
		if err != nil || g == network.Auto {
			return nil, usagef("%s %s: want grids among %s", flag, f, gridNames())
		}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs, nil
}

func gridNames() string {
	var s []string
	for _, g := range network.Grids() {
		s = append(s, string(g))
	}
	return strings.Join(s, ", ")
}

func doAnalyze(ctx context.Context, c *cli.Context) error {
	stderr := c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	if c.NArg() != 1 {
		return usagef("analyze takes one MODEL.onnx argument, got %d", c.NArg())
	}
	if !c.IsSet("data") {
		return usagef("analyze needs --data CALIB")
	}
	grids, err := parseGrids("--grids", c.String("grids"))
	if err != nil {
		return err
	}
	if p := c.String("plot"); p != "" {
		ins := []namedPath{{"model", c.Args().First()}, {"--data", c.String("data")}, {"--labels", c.String("labels")}}
		if err := checkOutputs(ins, []namedPath{{"--plot", p}}, nil); err != nil {
			return err
		}
	}
	s, err := setupBinarize(c, stderr, admmq.IADMMQ)
	if err != nil {
		return err
	}
	defer s.Close()
	ao := binarize.AnalyzeOptions{Grids: grids}
	if !c.Bool("quiet") {
		// Redrawn in place on a terminal; one line at the end in logs.
		f, ok := stderr.(*os.File)
		tty := ok && term.IsTerminal(int(f.Fd()))
		ao.Progress = func(done, total int) {
			if tty {
				fmt.Fprintf(stderr, "\ranalyze: %d/%d measurements", done, total)
			}
			if done == total {
				if tty {
					fmt.Fprintln(stderr)
				} else {
					fmt.Fprintf(stderr, "analyze: %d measurements\n", total)
				}
			}
		}
	}
	a, err := binarize.Analyze(ctx, s.teacher.Model, binarize.Data{Calib: s.data.Calib}, s.opts, ao)
	if err != nil {
		return flagError(err, c, s.path)
	}
	rep := analysisRecord(a, s.path)
	if p := c.String("plot"); p != "" {
		if err := atomicfile.Write(p, func(w io.Writer) error { return plotAnalysis(w, rep) }); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	return rep.writeText(c.App.Writer)
}

// writeJSON writes v as indented JSON, qtool's --json form.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// analysisJSON is analyze's --json: each `loss` in percentage points for accuracy and
// agreement, the SQNR in dB otherwise (loss_unit says which).
type analysisJSON struct {
	Model  string   `json:"model"`
	Metric string   `json:"metric"`
	Grids  []string `json:"grids"`
	// LossUnit says what the `loss` fields are: "pp" (accuracy drop or disagreement, in
	// percentage points) or "dB" (the worst output's SQNR; higher is better).
	LossUnit          string      `json:"loss_unit"`
	TrainSamples      int         `json:"train_samples"`
	ValidationSamples int         `json:"validation_samples"`
	BNRecalib         bool        `json:"bn_recalib"`
	FullPrecision     scoreJSON   `json:"full_precision"`
	Recalibrated      scoreJSON   `json:"bn_recalibrated_only"`
	ModelBytes        int64       `json:"model_param_bytes"`
	Layers            []layerJSON `json:"layers"`
	All               []gridJSON  `json:"all_layers"`
	Seconds           float64     `json:"seconds"`
	metric            binarize.Metric
}

type scoreJSON struct {
	AccuracyPct  *float64    `json:"accuracy_pct,omitempty"`
	AccuracyCI   *[2]float64 `json:"accuracy_ci_pct,omitempty"`
	Correct      int         `json:"correct,omitempty"`
	Positions    int         `json:"positions,omitempty"`
	AgreementPct *float64    `json:"agreement_pct,omitempty"`
	WorstSQNRdB  *float64    `json:"worst_sqnr_db,omitempty"`
}

type gridJSON struct {
	Grid  string    `json:"grid"`
	Bytes int64     `json:"packed_bytes"`
	Loss  float64   `json:"loss"`
	Score scoreJSON `json:"score"`
}

type layerJSON struct {
	Name       string     `json:"name"`
	Node       string     `json:"node"`
	Count      int64      `json:"count"`
	FloatBytes int64      `json:"float_bytes"`
	SharePct   float64    `json:"share_of_param_bytes_pct"`
	Normalized bool       `json:"normalized"`
	Grids      []gridJSON `json:"grids"`
}

func scoreRecord(s binarize.Score) scoreJSON {
	var r scoreJSON
	if s.Labelled {
		r.AccuracyPct = pctOf(&s.Accuracy)
		r.AccuracyCI = wilsonPct(s.Correct, s.Positions)
		r.Correct, r.Positions = s.Correct, s.Positions
	}
	if s.HasAgreement {
		r.AgreementPct = pctOf(&s.Agreement)
	}
	if !math.IsInf(s.SQNR, 0) && !math.IsNaN(s.SQNR) {
		v := roundTo(s.SQNR, 3)
		r.WorstSQNRdB = &v
	}
	return r
}

// lossValue is a loss as the report shows it: percentage points, or the SQNR in dB.
func lossValue(m binarize.Metric, g binarize.GridSensitivity) float64 {
	if m == binarize.MetricSQNR {
		if math.IsInf(g.Score.SQNR, 1) {
			return 999
		}
		return roundTo(g.Score.SQNR, 3)
	}
	return toPct(g.Loss)
}

func gridRecords(m binarize.Metric, gs []binarize.GridSensitivity) []gridJSON {
	var out []gridJSON
	for _, g := range gs {
		out = append(out, gridJSON{Grid: string(g.Grid), Bytes: g.Bytes, Loss: lossValue(m, g), Score: scoreRecord(g.Score)})
	}
	return out
}

func analysisRecord(a *binarize.Analysis, model string) *analysisJSON {
	r := &analysisJSON{Model: model, Metric: string(a.Metric), LossUnit: "pp", TrainSamples: a.TrainSamples,
		ValidationSamples: a.ValidationSamples, BNRecalib: a.BNRecalib, FullPrecision: scoreRecord(a.FullPrecision),
		Recalibrated: scoreRecord(a.Recalibrated), ModelBytes: a.ModelBytes, All: gridRecords(a.Metric, a.All),
		Seconds: roundTo(a.Seconds, 3), metric: a.Metric}
	if a.Metric == binarize.MetricSQNR {
		r.LossUnit = "dB"
	}
	for _, g := range a.Grids {
		r.Grids = append(r.Grids, string(g))
	}
	for _, l := range a.Layers {
		r.Layers = append(r.Layers, layerJSON{Name: l.Name, Node: l.Node, Count: l.Count, FloatBytes: l.FloatBytes,
			SharePct: toPct(l.Share), Normalized: l.Normalized, Grids: gridRecords(a.Metric, l.Grids)})
	}
	return r
}

func (r *analysisJSON) lossName() string {
	switch r.metric {
	case binarize.MetricAccuracy:
		return "accuracy drop (pp)"
	case binarize.MetricAgreement:
		return "disagreement with full precision (pp)"
	}
	return "worst output SQNR (dB)"
}

func (r *analysisJSON) writeText(w io.Writer) error {
	fmt.Fprintf(w, "sensitivity of %s: %s on the validation split (%d samples), each weight projected alone", r.Model, r.lossName(), r.ValidationSamples)
	if r.BNRecalib {
		fmt.Fprintf(w, ", BatchNorm re-estimated on %d samples", r.TrainSamples)
	}
	fmt.Fprintln(w)
	if a := r.FullPrecision.AccuracyPct; a != nil {
		fmt.Fprintf(w, "full precision: %.2f %%%s", *a, ciText(r.FullPrecision.AccuracyCI))
		if b := r.Recalibrated.AccuracyPct; b != nil && r.BNRecalib {
			fmt.Fprintf(w, "; BatchNorm re-estimated alone: %.2f %%%s", *b, ciText(r.Recalibrated.AccuracyCI))
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "#\tweight\tparams\tshare\t")
	for _, g := range r.Grids {
		fmt.Fprintf(tw, "%s\t", g)
	}
	fmt.Fprintln(tw)
	for i, l := range r.Layers {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f %%\t", i+1, l.Name, l.Count, l.SharePct)
		for _, g := range l.Grids {
			fmt.Fprintf(tw, "%.2f\t", g.Loss)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "\tall at once\t\t\t")
	for _, g := range r.All {
		fmt.Fprintf(tw, "%.2f\t", g.Loss)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.metric == binarize.MetricAccuracy && r.FullPrecision.Positions > 0 {
		fmt.Fprintf(w, "one validation sample is %.2f pp; drops below ~%.1f pp are within the noise of %d samples\n",
			100/float64(r.FullPrecision.Positions), noisePP(r.FullPrecision), r.FullPrecision.Positions)
	}
	fmt.Fprintf(w, "%.1f s\n", r.Seconds)
	return nil
}

// noisePP is the half-width of the Wilson interval of the full-precision accuracy: the
// size of a difference a split this small cannot tell from chance.
func noisePP(s scoreJSON) float64 {
	if s.AccuracyCI == nil {
		return 0
	}
	return (s.AccuracyCI[1] - s.AccuracyCI[0]) / 2
}

// plotAnalysis draws the losses per layer and grid as grouped bars, layers in graph
// order, and below them each layer's share of the parameter bytes on its own axis.
func plotAnalysis(w io.Writer, r *analysisJSON) error {
	top := plot.New()
	top.Title.Text = "Sensitivity of " + shortName(r.Model) + " (validation split, " + fmt.Sprint(r.ValidationSamples) + " samples)"
	top.Y.Label.Text = r.lossName()
	n := len(r.Layers)
	labels := make([]string, n)
	for i, l := range r.Layers {
		labels[i] = fmt.Sprintf("%d %s", i+1, shortName(l.Name))
	}
	width := vg.Points(math.Max(3, math.Min(14, 420/float64(max(n*len(r.Grids), 1)))))
	for k, g := range r.Grids {
		vals := make(plotter.Values, n)
		for i, l := range r.Layers {
			vals[i] = l.Grids[k].Loss
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(k)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(k)-float64(len(r.Grids)-1)/2) * width
		top.Add(b)
		top.Legend.Add(g, b)
	}
	top.Legend.Top = true
	top.NominalX(labels...)
	// Room for the legend above the tallest bars.
	top.Y.Max += 0.3 * (top.Y.Max - math.Min(top.Y.Min, 0))
	top.Add(plotter.NewGrid())
	bottom := plot.New()
	bottom.Y.Label.Text = "bytes (% of params)"
	shares := make(plotter.Values, n)
	for i, l := range r.Layers {
		shares[i] = l.SharePct
	}
	b, err := plotter.NewBarChart(shares, width*vg.Length(len(r.Grids)))
	if err != nil {
		return err
	}
	b.Color = color.Gray{Y: 120}
	b.LineStyle.Width = 0
	bottom.Add(b)
	bottom.NominalX(labels...)
	bottom.X.Tick.Label.Rotation = math.Pi / 4
	bottom.X.Tick.Label.XAlign = draw.XRight
	bottom.X.Tick.Label.YAlign = draw.YTop
	top.HideX()
	// Tick labels of one width on both y axes put both data areas at the same x, so the
	// bars line up with the layer names below without plot.Align's equal heights.
	top.Y.Tick.Marker, bottom.Y.Tick.Marker = fixedTicks{}, fixedTicks{}
	h := 1.5 * figureHeight
	img := vgimg.New(figureWidth, h)
	dc := draw.Crop(draw.New(img), vg.Points(4), -vg.Points(8), vg.Points(4), -vg.Points(4))
	top.Draw(draw.Crop(dc, 0, 0, 0.36*h, 0))
	bottom.Draw(draw.Crop(dc, 0, 0, 0, -0.64*h))
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// fixedTicks are plot's default ticks labelled in a fixed width.
type fixedTicks struct{}

func (fixedTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmt.Sprintf("%7.1f", ts[i].Value)
		}
	}
	return ts
}

// shortName keeps the end of a long name, where graph-exported names differ.
func shortName(s string) string {
	if i := strings.LastIndexAny(s, "/\\"); i >= 0 && strings.HasSuffix(s, ".onnx") {
		s = s[i+1:]
	}
	if r := []rune(s); len(r) > 28 {
		return "…" + string(r[len(r)-27:])
	}
	return s
}
