package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/export"
	"github.com/urfave/cli/v2"
)

// budgetFlags are binarize's flags for --budget.
func budgetFlags() []cli.Flag {
	const cat = "Budget"
	return []cli.Flag{
		&cli.BoolFlag{Name: "budget", Category: cat, Usage: "choose a grid (or full precision) per weight: the smallest file whose validation score keeps --max-drop, --min-sqnr or --min-agreement (chosen from qtool analyze's sensitivities, fine-tuned and checked on validation: a miss relaxes the most sensitive weight, a success tries twice the allowance; the smallest file that met is written)"},
		&cli.StringFlag{Name: "target-size", Category: cat, Usage: "with --budget: stop shrinking once the predicted file (packed weights and scales, lookup tables not counted) is at most `BYTES` (e.g. 200KiB), keeping the rest more precise"},
		&cli.IntFlag{Name: "max-trials", Category: cat, Value: 3, Usage: "with --budget: at most `N` fine-tuning runs (trials)"},
		&cli.Float64Flag{Name: "budget-confidence", Category: cat, Value: 100 * binarize.DefaultConfidence, Usage: "with --budget: a trial meets --max-drop (--min-agreement) when the drop's upper (the agreement's lower) one-sided `PCT` confidence bound on the validation split does, not just the measured value; 0: the measured value"},
		&cli.StringFlag{Name: "budget-grids", Category: cat, Usage: "with --budget: candidate `GRIDS`, comma-separated (default: binary,binary-channel,ternary,int4,int8)"},
	}
}

// budgetConstraint maps the gate flags onto the budget's constraint.
func budgetConstraint(c *cli.Context) (binarize.Constraint, error) {
	var k binarize.Constraint
	if c.IsSet("max-drop") {
		v := c.Float64("max-drop") / 100
		k.MaxDrop = &v
	}
	if c.IsSet("min-sqnr") {
		v := c.Float64("min-sqnr")
		k.MinSQNR = &v
	}
	if c.IsSet("min-agreement") {
		v := c.Float64("min-agreement") / 100
		k.MinAgreement = &v
	}
	if k.MaxDrop == nil && k.MinSQNR == nil && k.MinAgreement == nil {
		return k, usagef("--budget needs a constraint: --max-drop PP, --min-sqnr DB or --min-agreement PCT")
	}
	return k, nil
}

// budgetJSON is the budget's part of binarize's --json: every trial, the chosen one and
// each weight's grid with the reason.
type budgetJSON struct {
	Metric            string        `json:"metric"`
	ValidationSamples int           `json:"validation_samples"`
	AnalysisSeconds   float64       `json:"analysis_seconds"`
	Chosen            int           `json:"chosen_trial"`
	Trials            []trialJSON   `json:"trials"`
	Sensitivity       *analysisJSON `json:"sensitivity"`
}

type trialJSON struct {
	Trial          int          `json:"trial"`
	Choices        []choiceJSON `json:"choices"`
	PredictedBytes int64        `json:"predicted_weight_bytes"`
	FileBytes      int64        `json:"file_bytes"`
	PredictedDrop  float64      `json:"predicted_drop_pct"`
	PredictedSQNR  *float64     `json:"predicted_sqnr_db,omitempty"`
	Validation     scoreJSON    `json:"validation"`
	ValidationDrop *float64     `json:"validation_drop_pct,omitempty"`
	DropBound      float64      `json:"validation_drop_bound_pct"`
	Met            bool         `json:"met"`
	Missed         []string     `json:"missed,omitempty"`
	Relaxed        string       `json:"relaxed,omitempty"`
	Tightened      bool         `json:"tightened,omitempty"`
	Widened        bool         `json:"widened,omitempty"`
	// Bisect: the next trial takes this many of trial 1's selection moves on the widest grids.
	Bisect int `json:"bisect_moves,omitempty"`
	// Unrefined: the file is the bare projection, which beat every fine-tuned iterate.
	Unrefined      bool    `json:"unrefined,omitempty"`
	AllowanceScale float64 `json:"allowance_scale"`
	Seconds        float64 `json:"seconds"`
}

type choiceJSON struct {
	Weight string `json:"weight"`
	Grid   string `json:"grid"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
}

func trialRecords(a *binarize.Analysis, ts []binarize.Trial) []trialJSON {
	var out []trialJSON
	for i, t := range ts {
		r := trialJSON{Trial: i + 1, PredictedBytes: t.PredictedBytes, FileBytes: t.FileBytes,
			PredictedDrop: toPct(t.Predicted.Drop), Validation: scoreRecord(t.Validation), Met: t.Met, DropBound: toPct(t.DropBound),
			Missed: t.Missed, Relaxed: t.Relaxed, Tightened: t.Tightened, Widened: t.Widened, Bisect: t.Bisect, Unrefined: t.Unrefined, AllowanceScale: t.Scale, Seconds: roundTo(t.Seconds, 3)}
		if !math.IsInf(t.Predicted.SQNR, 0) {
			v := roundTo(t.Predicted.SQNR, 3)
			r.PredictedSQNR = &v
		}
		switch {
		case a.Metric == binarize.MetricAccuracy && t.Validation.Labelled:
			v := toPct(a.FullPrecision.Accuracy - t.Validation.Accuracy)
			r.ValidationDrop = &v
		case t.Validation.HasAgreement:
			v := toPct(1 - t.Validation.Agreement)
			r.ValidationDrop = &v
		}
		for _, ch := range t.Choices {
			g := string(ch.Grid)
			if g == "" {
				g = "fp32"
			}
			r.Choices = append(r.Choices, choiceJSON{Weight: ch.Weight, Grid: g, Bytes: ch.Bytes, Reason: ch.Reason})
		}
		out = append(out, r)
	}
	return out
}

func budgetRecord(a *binarize.Analysis, ts []binarize.Trial, chosen int, model string) *budgetJSON {
	return &budgetJSON{Metric: string(a.Metric), ValidationSamples: a.ValidationSamples,
		AnalysisSeconds: roundTo(a.Seconds, 3), Chosen: chosen + 1, Trials: trialRecords(a, ts),
		Sensitivity: analysisRecord(a, model)}
}

// budgetOptions checks --budget's flags, before any work, and maps them.
func budgetOptions(c *cli.Context) (binarize.BudgetOptions, error) {
	k, err := budgetConstraint(c)
	if err != nil {
		return binarize.BudgetOptions{}, err
	}
	if c.IsSet("checkpoint") || c.IsSet("resume") {
		// A checkpoint is of one run; a budget is several.
		return binarize.BudgetOptions{}, usagef("--budget runs several trainings: --checkpoint and --resume do not apply")
	}
	if c.Int("max-trials") < 1 {
		return binarize.BudgetOptions{}, usagef("--max-trials %d: want at least 1", c.Int("max-trials"))
	}
	bo := binarize.BudgetOptions{Constraint: k, MaxTrials: c.Int("max-trials"), Confidence: c.Float64("budget-confidence") / 100}
	if p := c.Float64("budget-confidence"); !(p >= 0 && p < 100) {
		return bo, usagef("--budget-confidence %g: want a percentage in [0, 100)", p)
	} else if p == 0 {
		bo.Confidence = -1 // the library's "no margin"
	}
	if v := c.String("target-size"); v != "" {
		if bo.TargetSize, err = calib.ParseSize(v); err != nil {
			return bo, usagef("--target-size: %v", err)
		}
	}
	bo.Grids, err = parseGrids("--budget-grids", c.String("budget-grids"))
	return bo, err
}

// runBudget runs binarize.Budget with the flags. A miss on every trial is the gate's
// failure: the trials are printed (or given as JSON) and the exit code is 3.
func (s *binSetup) runBudget(ctx context.Context, c *cli.Context, o binarize.Options, stderr io.Writer) (*binarize.BudgetResult, error) {
	bo, err := budgetOptions(c)
	if err != nil {
		return nil, err
	}
	quiet := c.Bool("quiet")
	a, err := binarize.Analyze(ctx, s.teacher.Model, binarize.Data{Calib: s.data.Calib}, o, binarize.AnalyzeOptions{Grids: bo.Grids,
		Progress: func(done, total int) {
			if !quiet && done == total {
				fmt.Fprintf(stderr, "qtool: budget: %d sensitivity measurements on the validation split\n", total)
			}
		}})
	if err != nil {
		return nil, flagError(err, c, s.path)
	}
	bo.Analysis = a
	bo.Trial = func(t binarize.Trial) {
		if quiet {
			return
		}
		var grids []string
		for _, ch := range t.Choices {
			g := string(ch.Grid)
			if g == "" {
				g = "fp32"
			}
			grids = append(grids, g)
		}
		verdict := "met"
		if !t.Met {
			verdict = "missed " + strings.Join(t.Missed, ", ")
		}
		if t.Unrefined {
			verdict += " (the projection before fine-tuning, which beat every fine-tuned iterate)"
		}
		fmt.Fprintf(stderr, "qtool: budget trial: [%s] %d B: %s on validation\n", strings.Join(grids, " "), t.FileBytes, verdict)
	}
	res, err := binarize.Budget(ctx, s.teacher.Model, binarize.Data{Calib: s.data.Calib, Eval: s.data.Eval}, o, bo)
	var miss *binarize.BudgetMissedError
	if errors.As(err, &miss) {
		rec := budgetRecord(a, miss.Trials, -1, s.path)
		if c.Bool("json") {
			if err := writeJSON(c.App.Writer, map[string]any{"gate_passed": false, "failed_gates": []string{"--budget"}, "budget": rec}); err != nil {
				return nil, err
			}
		} else {
			writeTrials(c.App.Writer, rec)
		}
		return nil, exitError{code: exitGateFail, err: fmt.Errorf("budget: %v; nothing written (relax the constraint or raise --max-trials)", err)}
	}
	return res, flagError(err, c, s.path)
}

// writeTrials prints the trials and the chosen configuration's grids.
func writeTrials(w io.Writer, b *budgetJSON) {
	fmt.Fprintf(w, "budget: %d trial(s) on the validation split (%d samples); sensitivities in %.1f s\n", len(b.Trials), b.ValidationSamples, b.AnalysisSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "trial\tallowance\tfile bytes\tpredicted drop\tvalidation drop\tmet\tnext\t")
	for _, t := range b.Trials {
		vd := "n/a"
		if t.ValidationDrop != nil {
			vd = fmt.Sprintf("%.2f pp (bound %.2f)", *t.ValidationDrop, t.DropBound)
		}
		next := ""
		switch {
		case t.Relaxed != "":
			next = "relax " + t.Relaxed
		case t.Tightened:
			next = "2× allowance"
		case t.Widened:
			next = "every weight on its widest grid"
		case t.Bisect > 0:
			next = fmt.Sprintf("trial 1's first %d moves on the widest grids", t.Bisect)
		}
		fmt.Fprintf(tw, "%d\t%g×\t%d\t%.2f pp\t%s\t%v\t%s\t\n", t.Trial, t.AllowanceScale, t.FileBytes, t.PredictedDrop, vd, t.Met, next)
	}
	tw.Flush()
	show := len(b.Trials) - 1
	if b.Chosen > 0 {
		show = b.Chosen - 1
	}
	if show < 0 {
		return
	}
	fmt.Fprintf(w, "grids of trial %d:\n", show+1)
	for _, ch := range b.Trials[show].Choices {
		fmt.Fprintf(w, "  %-28s %-15s %9d B  %s\n", ch.Weight, ch.Grid, ch.Bytes, ch.Reason)
	}
}

// budgetChoices are the storage report's reasons for the weights the budget kept in full
// precision, and the grids and reasons of the others.
func budgetChoices(b *budgetJSON) export.CompareOptions {
	o := export.CompareOptions{Reasons: map[string]string{}, Grids: map[string]export.GridChoice{}}
	if b == nil || b.Chosen < 1 {
		return o
	}
	for _, ch := range b.Trials[b.Chosen-1].Choices {
		if ch.Grid == "fp32" {
			o.Reasons[ch.Weight] = "kept by --budget: " + ch.Reason
		} else {
			o.Grids[ch.Weight] = export.GridChoice{Grid: ch.Grid, Why: ch.Reason}
		}
	}
	return o
}

// costlyLayers measures, after a failed --max-drop gate, which weights cost the most on
// the run's own grids (binarize.Analyze on the validation split) and returns up to three
// of them, most costly first, with the command that keeps in full precision the fewest of
// them whose drops alone add up to the excess over the gate (at most all but one weight:
// keeping every one leaves nothing to binarize).
func costlyLayers(ctx context.Context, c *cli.Context, s *binSetup, o binarize.Options, res *binarize.Result, excessPP float64) ([]costlyJSON, string, error) {
	var grids []network.Grid
	own := map[string]network.Grid{}
	for _, t := range res.Targets {
		own[t.Name] = t.Grid
		if !slices.Contains(grids, t.Grid) {
			grids = append(grids, t.Grid)
		}
	}
	a, err := binarize.Analyze(ctx, s.teacher.Model, binarize.Data{Calib: s.data.Calib}, o, binarize.AnalyzeOptions{Grids: grids})
	if err != nil {
		return nil, "", err
	}
	var out []costlyJSON
	for _, l := range a.Layers {
		g, ok := l.On(own[l.Name])
		if ok && g.Loss > 0 {
			out = append(out, costlyJSON{Weight: l.Name, Grid: string(g.Grid), DropPP: toPct(g.Loss), SharePct: toPct(l.Share)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DropPP > out[j].DropPP })
	out = out[:min(len(out), 3)]
	if len(out) == 0 {
		return nil, "", nil
	}
	keep := splitList(c.String("keep"))
	if !c.IsSet("keep") && !c.IsSet("only") {
		// The rerun's --keep replaces the default keep: it must name it too.
		keep = slices.Clone(binarize.DefaultKeep)
	}
	base := len(keep)
	sum := 0.0
	for _, l := range out[:min(len(out), len(res.Targets)-1)] {
		keep = append(keep, l.Weight)
		if sum += l.DropPP; sum >= excessPP {
			break
		}
	}
	if len(keep) == base {
		return out, "", nil // a single weight: nothing to keep but it
	}
	return out, keepCommand(c, strings.Join(keep, ",")), nil
}

// costlyJSON is one weight the failed gate's sensitivity measurement blames.
type costlyJSON struct {
	Weight   string  `json:"weight"`
	Grid     string  `json:"grid"`
	DropPP   float64 `json:"drop_alone_pct"`
	SharePct float64 `json:"share_of_param_bytes_pct"`
}

// keepCommand is the command c ran, with --keep set to keep: the flags the user set, in
// the command's order, so that the rerun changes nothing else.
func keepCommand(c *cli.Context, keep string) string {
	out := []string{"qtool", c.Command.Name}
	for _, a := range c.Args().Slice() {
		out = append(out, shellQuote(a))
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if name == "keep" || !c.IsSet(name) {
			continue
		}
		if _, ok := f.(*cli.BoolFlag); ok {
			out = append(out, "--"+name)
			continue
		}
		out = append(out, "--"+name, shellQuote(fmt.Sprint(c.Value(name))))
	}
	return strings.Join(append(out, "--keep", shellQuote(keep)), " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\|&;<>()*?[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// costlyText is the failed gate's advice: the costly weights and the --keep command.
func costlyText(s *binarizeSummary) string {
	if len(s.CostlyLayers) == 0 {
		return ""
	}
	var parts []string
	for _, l := range s.CostlyLayers {
		parts = append(parts, fmt.Sprintf("%s (%s alone: −%.2f pp, %.1f %% of the parameter bytes)", l.Weight, l.Grid, l.DropPP, l.SharePct))
	}
	text := fmt.Sprintf("\nthe weights that cost the most on the validation split: %s", strings.Join(parts, "; "))
	if s.KeepCommand != "" {
		text += "\nto keep the costliest in full precision: " + s.KeepCommand
	}
	return text
}

// writeBudgetMarkdown is the report's budget section: every trial, then the chosen one's
// grids with their reasons.
func writeBudgetMarkdown(w io.Writer, b *budgetJSON) {
	fmt.Fprintf(w, "\n## Budget\n\n%d trial(s), each measured on the validation split (%d samples); trial %d written.\n\n", len(b.Trials), b.ValidationSamples, b.Chosen)
	fmt.Fprintln(w, "| trial | allowance | file bytes | predicted drop (pp) | validation drop (pp) | met | grids |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|---|---|")
	for _, t := range b.Trials {
		vd := "n/a"
		if t.ValidationDrop != nil {
			vd = fmt.Sprintf("%.2f (bound %.2f)", *t.ValidationDrop, t.DropBound)
		}
		var grids []string
		for _, ch := range t.Choices {
			grids = append(grids, ch.Grid)
		}
		fmt.Fprintf(w, "| %d | %g× | %d | %.2f | %s | %v | %s |\n", t.Trial, t.AllowanceScale, t.FileBytes, t.PredictedDrop, vd, t.Met, strings.Join(grids, " "))
	}
}
