package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/atomicfile"
)

// binarizeSummary is binarize's result; its JSON form (--json, --report) is part of
// qtool's CLI interface. Accuracies, agreements and drops are in percent (drops in
// percentage points), rounded to 4 decimals, in the fields whose names end in _pct.
type binarizeSummary struct {
	Model  string `json:"model"`
	Output string `json:"output"`
	Algo   string `json:"algo"`
	Grid   string `json:"grid"`
	Format string `json:"format"`
	Loss   string `json:"loss"`
	// Augment is the training images' augmentation (--augment), omitted without one.
	Augment    string   `json:"augment,omitempty"`
	Seed       uint64   `json:"seed"`
	Targets    []string `json:"targets"`
	Labelled   bool     `json:"labelled"`
	CalibData  string   `json:"calib_data"`
	EvalData   string   `json:"eval_data"`
	CalibCount int      `json:"calib_samples"`
	EvalCount  int      `json:"eval_samples"`
	// Splits counts the samples of each split: calib_samples less the validation split
	// is trained on; eval_samples is the held-out set (0 in held_out when there is none
	// and the accuracies are of the validation split).
	Splits splitCounts `json:"splits"`
	// AccuracySplit is the split the accuracies, agreements and fidelities above the
	// history are measured on ("held-out" unless there is none); HistorySplit the split
	// of the history's accuracies ("validation", or "" without one).
	AccuracySplit string   `json:"accuracy_split"`
	HistorySplit  string   `json:"history_accuracy_split,omitempty"`
	FPAccuracy    *float64 `json:"fp_accuracy_pct,omitempty"`
	// FPAccuracyCI is the Wilson 95 % interval of the full-precision accuracy, in percent.
	FPAccuracyCI *[2]float64 `json:"fp_accuracy_ci95_pct,omitempty"`
	BinAccuracy  *float64    `json:"binary_accuracy_pct,omitempty"`
	// FPCorrect and BinCorrect count the labelled positions the accuracies hold over
	// Positions (samples for [N, C] outputs, the non-padding steps of [N, T] labels), so
	// that a user can check them exactly against another runtime.
	FPCorrect  int     `json:"fp_correct,omitempty"`
	BinCorrect int     `json:"binary_correct,omitempty"`
	Positions  int     `json:"accuracy_positions,omitempty"`
	Agreement  float64 `json:"agreement_pct"`
	// DropPP is the accuracy drop in percentage points (with labels), or 100 − agreement.
	DropPP     float64  `json:"drop_pct"`
	MaxDropPP  *float64 `json:"max_drop_pct,omitempty"`
	GatePassed bool     `json:"gate_passed"`
	// Gates are the CI gates asked for, each with its verdict; FailedGates names the
	// failed ones.
	Gates       []gateRecord `json:"gates,omitempty"`
	FailedGates []string     `json:"failed_gates,omitempty"`
	// AccuracyCI is the Wilson 95 % interval of the binarized accuracy, in percent.
	AccuracyCI *[2]float64 `json:"binary_accuracy_ci95_pct,omitempty"`
	// Objective describes the objective per output when the loss is "objective"; Outputs
	// is every output's fidelity to the full-precision model on the held-out data.
	Objective   string         `json:"objective,omitempty"`
	Outputs     []outputRecord `json:"outputs,omitempty"`
	InputBytes  int64          `json:"input_bytes"`
	OutputBytes int64          `json:"output_bytes"`
	BNRecalib   bool           `json:"bn_recalibrated"`
	// ExportedIter is the outer iteration whose weights were exported (0: the projection
	// of the starting weights, scored before fine-tuning, see Start); LastIterate says it
	// was chosen as the last (--last-iterate), not by the best validation accuracy.
	ExportedIter int `json:"exported_iter"`
	// RhoFactors is each binarized weight's factor on --rho (see --rho-scale), by name.
	RhoFactors map[string]float64 `json:"rho_factors,omitempty"`
	// RhoGrowths is each binarized weight's factor on its ρ per outer iteration: the
	// growth where no normalisation follows (--rho-growth-unnormalized), else 1.
	RhoGrowths  map[string]float64 `json:"rho_growths,omitempty"`
	LastIterate bool               `json:"last_iterate,omitempty"`
	Seconds     float64            `json:"seconds"`
	BLAS        string             `json:"blas"`
	Warnings    []string           `json:"warnings,omitempty"`
	// Storage is export's storage report of the output against the input.
	Storage *export.Report `json:"storage,omitempty"`
	History []iterRecord   `json:"history"`
	// Start is the projection of the starting weights, scored on the validation split
	// before fine-tuning ("iter": 0; exported when "best").
	Start *iterRecord `json:"start,omitempty"`
	// Budget is --budget's trials and choices.
	Budget *budgetJSON `json:"budget,omitempty"`
	// CostlyLayers are, after a failed --max-drop gate, the weights that cost the most
	// alone on the validation split, and KeepCommand the command that keeps them.
	CostlyLayers []costlyJSON `json:"costly_layers,omitempty"`
	KeepCommand  string       `json:"keep_command,omitempty"`
	// Sensitive is what --keep sensitive (part of the default keep) measured before the
	// run; omitted when the keep does not name it.
	Sensitive *sensitiveJSON `json:"sensitive,omitempty"`
}

// sensitiveJSON is binarize.Sensitivity in the JSON units.
type sensitiveJSON struct {
	Measured bool   `json:"measured"`
	Reason   string `json:"reason,omitempty"`
	// Basis is what the drops were measured against: "labels", or "expected" (from the
	// full-precision model's probabilities, the split having no labels).
	Basis string `json:"basis,omitempty"`
	// Layers holds each weight's accuracy drop when projected alone, BatchNorm
	// re-estimated, on the validation split, with the one-sided 95 % lower bound that
	// must be above 0 for it to be kept.
	Layers  []sensitiveLayerJSON `json:"layers,omitempty"`
	Kept    []string             `json:"kept"`
	Seconds float64              `json:"seconds"`
}

type sensitiveLayerJSON struct {
	Name     string  `json:"name"`
	Params   int64   `json:"params"`
	DropPct  float64 `json:"drop_pct"`
	LowerPct float64 `json:"drop_lower95_pct"`
	// DisagreePct is the share of the split's samples whose prediction differs from the
	// full-precision model's; ExpectedPct the drop expected from the full-precision
	// model's own probabilities (drop_pct itself without labels).
	DisagreePct float64 `json:"disagree_pct"`
	ExpectedPct float64 `json:"expected_drop_pct"`
	Kept        bool    `json:"kept"`
}

func sensitiveRecord(s *binarize.Sensitivity) *sensitiveJSON {
	if s == nil {
		return nil
	}
	r := &sensitiveJSON{Measured: s.Measured, Reason: s.Reason, Kept: s.Kept, Seconds: s.Seconds}
	if s.Measured {
		r.Basis = "expected"
		if s.Labels {
			r.Basis = "labels"
		}
	}
	if r.Kept == nil {
		r.Kept = []string{}
	}
	for _, l := range s.Layers {
		r.Layers = append(r.Layers, sensitiveLayerJSON{Name: l.Name, Params: l.Count, DropPct: toPct(l.Drop), LowerPct: toPct(l.Lower),
			DisagreePct: toPct(l.Disagree), ExpectedPct: toPct(l.Expected), Kept: l.Kept})
	}
	return r
}

// sensitiveProgress reports --keep sensitive's measurement, which runs before the first
// epoch: redrawn in place on a terminal, one line when it starts and one when it ends in
// logs.
func sensitiveProgress(w io.Writer) func(done, total int) {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	var start time.Time
	return func(done, total int) {
		switch {
		case done == 0:
			start = time.Now()
			if !tty {
				fmt.Fprintf(w, "qtool: --keep sensitive: scoring %d weights alone on the validation split\n", total)
			}
		case tty:
			fmt.Fprintf(w, "\rsensitive: %d/%d weights", done, total)
		}
		if done == total {
			if tty {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "qtool: --keep sensitive: %d weights scored in %.1f s\n", total, time.Since(start).Seconds())
		}
	}
}

// sensitiveText lists the weights --keep sensitive kept, with their drops.
func sensitiveText(s *sensitiveJSON) string {
	var parts []string
	for _, name := range s.Kept {
		for _, l := range s.Layers {
			if l.Name == name {
				what := "alone"
				if s.Basis == "expected" {
					what = "expected alone"
				}
				parts = append(parts, fmt.Sprintf("%s (%.2f pp %s)", name, l.DropPct, what))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// splitCounts are the sample counts of the three splits.
type splitCounts struct {
	Train      int `json:"train"`
	Validation int `json:"validation"`
	HeldOut    int `json:"held_out"`
}

// historySplit names the split of the history's accuracies.
func historySplit(res *binarize.Result) string {
	if res.ValidationSamples == 0 {
		return ""
	}
	return string(binarize.SplitValidation)
}

// perSample is the validation split's size when the run's accuracies are per sample (the
// report's positions are its samples), for the history's intervals; 0 otherwise.
func perSample(res *binarize.Result) int {
	reported := res.HeldOutSamples
	switch res.ReportSplit {
	case binarize.SplitValidation:
		reported = res.ValidationSamples
	case binarize.SplitTrain:
		reported = res.TrainSamples
	}
	if !res.Binarized.Labelled || res.Binarized.Positions != reported {
		return 0
	}
	return res.ValidationSamples
}

// iterRecord is network.IterStats in the JSON units: percentages for fractions.
type iterRecord struct {
	Iter       int     `json:"iter"`
	Rho        float64 `json:"rho"`
	TrainLoss  float64 `json:"train_loss"`
	FX         float64 `json:"f_x"`
	FY         float64 `json:"f_y"`
	Lagrangian float64 `json:"lagrangian"`
	Residual   float64 `json:"residual"`
	// DualResidual is ‖ρ(y − y_prev)‖; Residual is the primal residual ‖x − y‖.
	DualResidual float64 `json:"dual_residual"`
	ChangedPct   float64 `json:"changed_pct"`
	// FlippedPct is the percentage of elements whose grid level (sign) changed,
	// ScalesChangedPct that of channels whose scale changed, ScaleChangePct their mean
	// relative change: ChangedPct mixes the two.
	FlippedPct       float64 `json:"flipped_pct"`
	ScalesChangedPct float64 `json:"scales_changed_pct"`
	ScaleChangePct   float64 `json:"scale_change_pct"`
	// Best marks the iteration exported as the best by validation accuracy.
	Best bool `json:"best,omitempty"`
	// AccuracyPct is the accuracy of y on the validation split; absent without labels
	// or without a validation split. AccuracyCI is its Wilson 95 % interval, given when
	// the accuracy is per sample (a class output, not a sequence).
	AccuracyPct  *float64    `json:"accuracy_pct,omitempty"`
	AccuracyCI   *[2]float64 `json:"accuracy_ci95_pct,omitempty"`
	AgreementPct float64     `json:"agreement_pct"`
	InnerEpochs  int         `json:"inner_epochs"`
	GradNorm     float64     `json:"grad_norm,omitempty"`
	Seconds      float64     `json:"seconds"`
	// TrainSeconds and StatSeconds split Seconds between the optimizer's epochs and the
	// statistics measured around them.
	TrainSeconds float64 `json:"train_seconds"`
	StatSeconds  float64 `json:"stat_seconds"`
}

// iterRecords converts h; n > 0 is the number of samples its accuracies are fractions
// of, for their intervals (0: no intervals).
func iterRecords(h []network.IterStats, n int) []iterRecord {
	out := make([]iterRecord, 0, len(h))
	for _, s := range h {
		r := iterRecord{Iter: s.Iter, Rho: s.Rho, TrainLoss: s.TrainLoss, FX: s.FX, FY: s.FY, Lagrangian: s.Lagrangian,
			Residual: s.Residual, DualResidual: s.DualResidual, ChangedPct: toPct(s.Changed),
			FlippedPct: toPct(s.Flipped), ScalesChangedPct: toPct(s.ScalesChanged), ScaleChangePct: toPct(s.ScaleChange), Best: s.Best, AgreementPct: toPct(s.Agreement),
			InnerEpochs: s.InnerEpochs, GradNorm: s.GradNorm, Seconds: roundTo(s.Seconds, 3),
			TrainSeconds: roundTo(s.TrainSeconds, 3), StatSeconds: roundTo(s.StatSeconds, 3)}
		if s.HasAccuracy {
			a := toPct(s.Accuracy)
			r.AccuracyPct = &a
			if n > 0 {
				r.AccuracyCI = wilsonPct(int(math.Round(s.Accuracy*float64(n))), n)
			}
		}
		out = append(out, r)
	}
	return out
}

// toPct is a fraction in percent, rounded to 4 decimals: 10 000 samples resolve 0.01 %,
// and float noise such as 0.5000000000000004 never reaches a report or a gate.
func toPct(frac float64) float64 { return roundTo(100*frac, 4) }

func pctOf(frac *float64) *float64 {
	if frac == nil {
		return nil
	}
	v := toPct(*frac)
	return &v
}

func roundTo(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// pct shows a fraction in percent.
func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f %%", 100**v)
}

// pctText shows a value already in percent.
func pctText(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f %%", *v)
}

func printSummary(w io.Writer, s *binarizeSummary) {
	fmt.Fprintf(w, "model        %s\n", s.Model)
	fmt.Fprintf(w, "output       %s (%s, %s grid)\n", s.Output, s.Format, s.Grid)
	fmt.Fprintf(w, "algorithm    %s, loss %s, seed %d, %d weights binarized\n", s.Algo, s.Loss, s.Seed, len(s.Targets))
	if s.Augment != "" {
		fmt.Fprintf(w, "augmented    %s (training batches only)\n", s.Augment)
	}
	if s.Objective != "" {
		fmt.Fprintf(w, "objective    %s\n", s.Objective)
	}
	fmt.Fprintf(w, "data         %s\n", splitText(s))
	if s.Sensitive != nil && len(s.Sensitive.Kept) > 0 {
		costs, from, note := "costs", "", ""
		if s.Sensitive.Basis == "expected" {
			costs, from, note = "is expected to cost", ", from the full-precision model's probabilities", "; no labels"
		}
		fmt.Fprintf(w, "kept         %s in full precision: their binarization alone %s significant validation accuracy%s (--keep sensitive%s)\n", sensitiveText(s.Sensitive), costs, from, note)
	}
	if s.Labelled {
		fmt.Fprintf(w, "accuracy     FP %s%s → binarized %s%s (drop %.2f pp), agreement %.2f %%, on %s\n", pctText(s.FPAccuracy), ciText(s.FPAccuracyCI), pctText(s.BinAccuracy), ciText(s.AccuracyCI), s.DropPP, s.Agreement, s.AccuracySplit)
	} else {
		fmt.Fprintf(w, "agreement    %.2f %% top-1 with the full-precision model (no labels), on %s\n", s.Agreement, s.AccuracySplit)
	}
	ratio := 0.0
	if s.OutputBytes > 0 {
		ratio = float64(s.InputBytes) / float64(s.OutputBytes)
	}
	fmt.Fprintf(w, "size         %s → %s (%.1f× smaller on disk; runtimes unpack the weights at load)\n", humanBytes(s.InputBytes), humanBytes(s.OutputBytes), ratio)
	if n := len(s.History); n > 0 {
		why := "the best validation accuracy of y"
		if s.LastIterate {
			why = "the last, --last-iterate"
		}
		if s.ExportedIter == 0 && !s.LastIterate {
			fmt.Fprintf(w, "exported     the projection before fine-tuning: it beat all %d iterations on the validation split\n", n)
		} else {
			fmt.Fprintf(w, "exported     iteration %d of %d (%s)\n", s.ExportedIter, n, why)
		}
	}
	if t := signsText(s); t != "" {
		fmt.Fprintf(w, "signs        %s\n", t)
	}
	fmt.Fprintf(w, "time         %.1f s (%s BLAS)\n", s.Seconds, s.BLAS)
	writeFidelity(w, s.Outputs)
	for _, g := range s.Gates {
		fmt.Fprintf(w, "gate         %s\n", g)
	}
}

// signsText says how many binarized values changed grid level (sign) over the run's
// iterations, the per-iteration counts summed. An ADMM run that changed none exported the
// signs it started from: at the defaults that happens on nets whose every sign change
// costs validation accuracy (README, Known gaps), and a user comparing it with PGD should
// know that ρ, not the method, decided it.
func signsText(s *binarizeSummary) string {
	iters, sum := 0, 0.0
	for _, h := range s.History {
		iters = max(iters, h.Iter)
		sum += h.FlippedPct
	}
	if iters == 0 {
		return ""
	}
	if sum > 0 {
		if iters == 1 {
			return fmt.Sprintf("%.3g %% of the binarized values changed level in the one iteration", sum)
		}
		return fmt.Sprintf("%.3g %% of the binarized values changed level, summed over the %d iterations", sum, iters)
	}
	n := fmt.Sprintf("%d iterations", iters)
	if iters == 1 {
		n = "1 iteration"
	}
	t := fmt.Sprintf("no binarized value changed level in %s: the signs are those the run started from", n)
	if network.IsADMM(admmq.Method(s.Algo)) {
		t += " (a smaller --rho, or more iterations, lets them move)"
	}
	return t
}

// splitText says how the data were split and what each split is for.
func splitText(s *binarizeSummary) string {
	t := fmt.Sprintf("%d train", s.Splits.Train)
	if s.Splits.Validation > 0 {
		t += fmt.Sprintf(" / %d validation (in-loop accuracy and choices)", s.Splits.Validation)
	}
	if s.Splits.HeldOut > 0 {
		t += fmt.Sprintf(" / %d held-out (the accuracies reported)", s.Splits.HeldOut)
	} else {
		t += fmt.Sprintf("; no held-out set: the accuracies are of the %s split", s.AccuracySplit)
	}
	return t + " samples"
}

// ciText shows a Wilson interval after an accuracy.
func ciText(ci *[2]float64) string {
	if ci == nil {
		return ""
	}
	return fmt.Sprintf(" [95 %% CI %.2f–%.2f]", ci[0], ci[1])
}

// writeFidelity prints each output's fidelity to the full-precision model.
func writeFidelity(w io.Writer, outs []outputRecord) {
	for _, o := range outs {
		sq := "identical"
		if o.SQNRdB != nil {
			sq = fmt.Sprintf("SQNR %.2f dB", *o.SQNRdB)
		}
		fmt.Fprintf(w, "fidelity     %s (%s): %s, cosine %.6f, max |Δ| %.4g", o.Name, o.Kind, sq, o.Cosine, o.MaxAbsErr)
		if o.AgreementPct != nil {
			fmt.Fprintf(w, ", agreement %.2f %% of %d", *o.AgreementPct, o.Positions)
		}
		fmt.Fprintln(w)
	}
}

// wilsonPct is the Wilson score 95 % interval of k successes in n trials, in percent:
// unlike the normal approximation it stays inside [0, 100] and is not empty at 0 % or 100 %.
func wilsonPct(k, n int) *[2]float64 {
	if n <= 0 {
		return nil
	}
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return &[2]float64{toPct(math.Max(0, mid-half)), toPct(math.Min(1, mid+half))}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// writeReport writes path.json and path.md.
func writeReport(path string, s *binarizeSummary) error {
	path = reportBase(path)
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path+".json", append(js, '\n')); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# qtool binarize report\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n| model | `%s` |\n| output | `%s` (%s, %s grid) |\n| algorithm | %s, loss %s, seed %d |\n", s.Model, s.Output, s.Format, s.Grid, s.Algo, s.Loss, s.Seed)
	fmt.Fprintf(&b, "| data | %s |\n", splitText(s))
	if s.Labelled {
		fmt.Fprintf(&b, "| accuracy (%s) | FP %s%s → binarized %s%s (drop %.2f pp) |\n", s.AccuracySplit, pctText(s.FPAccuracy), ciText(s.FPAccuracyCI), pctText(s.BinAccuracy), ciText(s.AccuracyCI), s.DropPP)
	}
	fmt.Fprintf(&b, "| agreement with FP | %.2f %% |\n| file size | %s → %s |\n| BatchNorm re-estimated | %v |\n| time | %.1f s (%s BLAS) |\n\n", s.Agreement, humanBytes(s.InputBytes), humanBytes(s.OutputBytes), s.BNRecalib, s.Seconds, s.BLAS)
	fmt.Fprintf(&b, "## Iterations\n\n| iter | ρ | train loss | f(y) | L(x,y,λ) | primal ‖x−y‖ | dual ‖ρΔy‖ | y changed | signs/levels flipped | scales changed (mean rel.) | validation acc. of y |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, h := range s.History {
		acc := h.AgreementPct // without labels the validation measure is agreement
		if h.AccuracyPct != nil {
			acc = *h.AccuracyPct
		}
		mark := ""
		if h.Best {
			mark = " (exported)"
		}
		fmt.Fprintf(&b, "| %d | %.3g | %.4f | %.4f | %.5g | %.4g | %.4g | %.3g %% | %.3g %% | %.3g %% (%.3g %%) | %.2f %%%s%s |\n", h.Iter, h.Rho, h.TrainLoss, h.FY, h.Lagrangian, h.Residual, h.DualResidual, h.ChangedPct, h.FlippedPct, h.ScalesChangedPct, h.ScaleChangePct, acc, ciText(h.AccuracyCI), mark)
	}
	for _, w := range s.Warnings {
		fmt.Fprintf(&b, "\n> %s\n", w)
	}
	if s.Budget != nil {
		writeBudgetMarkdown(&b, s.Budget)
	}
	if s.Storage != nil {
		b.WriteString("\n## Storage\n\n")
		if err := s.Storage.WriteMarkdown(&b); err != nil {
			return err
		}
	}
	return atomicfile.WriteBytes(path+".md", []byte(b.String()))
}

// reportBase is --report's FILE without a .json or .md the user may have added.
func reportBase(path string) string {
	return strings.TrimSuffix(strings.TrimSuffix(path, ".json"), ".md")
}
