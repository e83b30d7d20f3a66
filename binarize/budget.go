package binarize

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/onnxio"
)

// Constraint is what a budgeted file must keep on the validation split. Nil fields are
// not constrained; at least one must be set.
type Constraint struct {
	// MaxDrop is the largest accuracy drop below full precision, as a fraction (0.01 is
	// one percentage point); without labels the largest disagreement with it.
	MaxDrop *float64
	// MinSQNR is the worst output's lowest SQNR against full precision, in dB.
	MinSQNR *float64
	// MinAgreement is the lowest top-1 (or decision) agreement with full precision, a
	// fraction.
	MinAgreement *float64
}

// BudgetOptions configures Budget.
type BudgetOptions struct {
	Constraint Constraint
	// TargetSize > 0 stops shrinking once the predicted file — the original's size with
	// the chosen weights' float bytes replaced by their packed codes and scales, the
	// unpacking constants not counted — is at most this many bytes: the most accurate
	// configuration of that size rather than the smallest that meets the constraint.
	TargetSize int64
	// MaxTrials bounds the fine-tuning runs (zero: 3): the first configuration, and a
	// relaxed one after each miss.
	MaxTrials int
	// Grids are the candidate grids besides full precision; nil means AnalyzeGrids.
	Grids []network.Grid
	// Analysis, when set, is the sensitivity measurement to start from (an Analyze of the
	// same model, data and Options); nil runs Analyze.
	Analysis *Analysis
	// Trial, when set, is called after each trial.
	Trial func(Trial)
	// Confidence is the one-sided confidence with which a trial's validation score must
	// keep MaxDrop and MinAgreement (zero: DefaultConfidence): the drop's upper bound
	// (UpperDrop) must be within MaxDrop, and the agreement's lower bound above
	// MinAgreement, rather than the measured values, so that a split of a few hundred
	// samples does not pass a file by luck. Negative: the measured values (no margin).
	Confidence float64
}

// BudgetValidation is the validation fraction (Options.Validation) suited to Budget: its
// acceptance margin shrinks as one over the square root of the validation split's size, and
// at DefaultValidation's few hundred samples it exceeds a 1 pp allowance, so half the
// calibration data is set apart rather than a tenth.
const BudgetValidation = 0.5

// DefaultConfidence is BudgetOptions.Confidence's default: a file that meets the
// constraint on validation misses it on new data of the same kind with probability about
// 5 %, as far as the normal approximation goes.
const DefaultConfidence = 0.95

// Choice is one weight's grid in a trial and why it was chosen.
type Choice struct {
	Weight string
	// Grid is "" for full precision.
	Grid network.Grid
	// Bytes is the weight's size in the file: packed on a grid, its float bytes kept.
	Bytes  int64
	Reason string
}

// Trial is one configuration fine-tuned and measured on the validation split.
type Trial struct {
	Choices []Choice
	// PredictedBytes is the weights' predicted size, FileBytes the exported file's.
	PredictedBytes, FileBytes int64
	// Predicted is each constrained quantity as the selection predicted it from the
	// sensitivities, Validation what the trained file scored on the validation split.
	Predicted  Prediction
	Validation Score
	Met        bool
	// Missed names the constraints the validation score missed.
	Missed []string
	// DropBound is the upper confidence bound of the drop (of the disagreement without
	// labels) that MaxDrop was checked against: the measured drop when the margin is off.
	DropBound float64
	// Relaxed is the weight the next trial moved to a larger grid after a miss;
	// Tightened says the next trial was chosen with twice the allowance after a success
	// (the sensitivities overstate a fine-tuned file's loss). Neither for the last trial.
	Relaxed   string
	Tightened bool
	// Widened says the next trial puts every weight on its widest grid after a miss,
	// because relaxing one weight would have predicted a file at least that large:
	// fine-tuning the float weights of a mostly float configuration can change more
	// predictions than a uniformly quantized one loses (fmnist-resnet, README).
	Widened bool
	// Bisect, when above 0, is how many of the first trial's selection moves (see
	// selection.path) the next trial applies on top of the widest grids: after a gross
	// miss (a bound more than grossMiss times the allowance, before any trial met) and a
	// widest trial that met, the trials bisect between the two.
	Bisect int
	// Scale is the factor the constraint's allowance was multiplied by in the selection.
	Scale float64
	// Unrefined says the file is the configuration's bare projection (BatchNorm
	// re-estimated): a trial also scores it before fine-tuning, and keeps it when no
	// fine-tuned iterate beats it on the validation split.
	Unrefined bool
	Seconds   float64
	result    *Result
}

// Prediction is the selection's prediction of a configuration: losses summed over the
// weights on a grid, each weight's loss measured alone (Analyze).
type Prediction struct {
	// Drop is the accuracy drop (disagreement without labels), a fraction.
	Drop float64
	// Agreement is 1 − the summed disagreements.
	Agreement float64
	// SQNR is from the summed noise-to-signal ratios, in dB.
	SQNR float64
}

// BudgetResult is the outcome of Budget.
type BudgetResult struct {
	// Result is the chosen trial's run, measured once on Data.Eval (when given) and
	// written to Options.Output.
	*Result
	Analysis *Analysis
	Trials   []Trial
	// Chosen indexes Trials.
	Chosen int
}

// BudgetMissedError reports that no trial met the constraint on the validation split.
type BudgetMissedError struct {
	Model  string
	Trials []Trial
}

func (e *BudgetMissedError) Error() string {
	return fmt.Sprintf("%s: no configuration of %d trial(s) met the constraint on the validation split", e.Model, len(e.Trials))
}

// ErrNoConstraint is returned by Budget without any constraint set.
var ErrNoConstraint = errors.New("binarize: a budget needs a constraint: MaxDrop, MinSQNR or MinAgreement")

// Budget binarizes model to the smallest file that keeps opts.Constraint on the
// validation split, each weight on its own grid or in full precision:
//
//  1. the sensitivities (Analyze, on the validation split) predict each configuration's
//     loss as the sum of its weights' losses measured alone, negatives counted as 0;
//  2. the selection starts with every weight in full precision and repeatedly moves one
//     weight to a smaller grid, choosing the move that saves the most bytes per unit of
//     predicted loss added (a move that adds none first, then the most bytes saved) among
//     those that keep every predicted quantity within the constraint, until no move fits
//     or the file reaches TargetSize;
//  3. Run fine-tunes that configuration with o, and the trained file is scored on the
//     validation split: it meets MaxDrop when the drop's one-sided upper confidence bound
//     (UpperDrop, at BudgetOptions.Confidence) does, MinAgreement when the agreement's
//     lower bound (LowerAgreement) does, so that a validation split too small to resolve
//     the allowance cannot pass a file by luck. When it misses, the quantized weight with the largest predicted
//     loss moves to its next larger grid (or full precision); when it meets the
//     constraint, the next configuration is chosen as in 2 with twice the allowance, as
//     fine-tuning recovers part of what a projection alone loses. A configuration runs
//     only if it is new and predicted smaller than the best file that met, up to
//     MaxTrials;
//  4. the smallest file that met the constraint on the validation split is measured once
//     on data.Eval and written to o.Output.
//
// Without a passing trial it returns a *BudgetMissedError with every trial.
func Budget(ctx context.Context, model *onnxio.Model, data Data, o Options, bo BudgetOptions) (*BudgetResult, error) {
	c := bo.Constraint
	if c.MaxDrop == nil && c.MinSQNR == nil && c.MinAgreement == nil {
		return nil, ErrNoConstraint
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if bo.MaxTrials == 0 {
		bo.MaxTrials = 3
	}
	if bo.MaxTrials < 0 {
		return nil, &OptionError{Field: "MaxTrials", Value: bo.MaxTrials, Reason: "want at least 1"}
	}
	if bo.Confidence == 0 {
		bo.Confidence = DefaultConfidence
	}
	if !(bo.Confidence < 1) {
		return nil, &OptionError{Field: "Confidence", Value: bo.Confidence, Reason: "want a probability below 1 (negative: no margin)"}
	}
	a := bo.Analysis
	if a == nil {
		var err error
		if a, err = Analyze(ctx, model, Data{Calib: data.Calib, Validation: data.Validation}, o, AnalyzeOptions{Grids: bo.Grids}); err != nil {
			return nil, err
		}
	}
	if c.MaxDrop != nil && a.Metric == MetricSQNR {
		return nil, &OptionError{Field: "Constraint.MaxDrop", Value: *c.MaxDrop, Reason: "the model has no class or decision output to measure a drop on: constrain the SQNR"}
	}
	sel := newSelection(a, c)
	if bo.Confidence > 0 {
		sel.z = distuv.UnitNormal.Quantile(bo.Confidence)
	}
	// The file as it is, external data included: what TargetSize is compared with once the
	// chosen weights' float bytes are replaced by their packed ones.
	sel.fileBytes = int64(proto.Size(model.Proto))
	for _, p := range model.Params() {
		if len(p.Tensor.GetExternalData()) > 0 {
			sel.fileBytes += onnxio.TensorBytes(p.Tensor)
		}
	}
	cfg := sel.choose(bo.TargetSize)
	widest, widened := sel.widest(), false
	// After a gross miss the trials bracket the answer: lo moves of the first selection's
	// path on top of the widest grids met (0: the widest grids themselves), hi missed.
	path, bisecting, lo, hi := sel.path, false, 0, 0
	out := &BudgetResult{Analysis: a, Chosen: -1}
	run := o
	run.Output, run.Verify = "", nil
	for len(out.Trials) < bo.MaxTrials {
		t, err := sel.trial(ctx, model, data, run, cfg)
		if err != nil {
			return nil, err
		}
		out.Trials = append(out.Trials, t)
		k := len(out.Trials) - 1
		if t.Met && (out.Chosen < 0 || t.FileBytes < out.Trials[out.Chosen].FileBytes) {
			out.Chosen = k
		}
		next := cfg.clone()
		if bisecting || widened && t.Met && slices.Equal(cfg, widest) && hi > 0 {
			// The widest grids met after a gross miss, or a bisection trial came back:
			// halve the bracket of moves.
			if bisecting {
				if t.Met {
					lo = out.Trials[k-1].Bisect
				} else {
					hi = out.Trials[k-1].Bisect
				}
			}
			bisecting = true
			if j := (lo + hi) / 2; j > lo {
				next = sel.along(widest, path[:j])
				out.Trials[k].Bisect = j
				for i := range sel.reasons {
					sel.reasons[i] = fmt.Sprintf("first %d of the %d moves of trial 1's selection on the widest grids, after trial %d", j, len(path), k+1)
				}
			}
		} else if !t.Met && out.Chosen < 0 && !widened && len(path) > 0 && sel.gross(t) &&
			sel.below(cfg, widest) > bo.MaxTrials-len(out.Trials) {
			// The sensitivities, each measured alone, understated the configuration's loss
			// many times over (torchvision ResNet-18 with BatchNorm folded: 0.92 pp
			// predicted, 15 pp measured), and the trials left cannot relax every weight
			// below its widest grid one at a time: the widest grids instead, then a
			// bisection between the two.
			next, widened, hi = widest.clone(), true, len(path)
			out.Trials[k].Widened = true
			for j := range sel.reasons {
				sel.reasons[j] = fmt.Sprintf("widest grid after trial %d missed %v by more than %g× the allowance", k+1, t.Missed, grossMiss)
			}
		} else if t.Met {
			// The sensitivities are of projections without fine-tuning, which recovers part
			// of the loss: try the configuration chosen with twice the allowance.
			sel.scale *= 2
			next = sel.choose(bo.TargetSize)
			out.Trials[k].Tightened = true
		} else if i := sel.relax(next); i >= 0 && (widened || sel.predictBytes(next) < sel.predictBytes(widest) || slices.Equal(cfg, widest)) {
			out.Trials[k].Relaxed = a.Layers[i].Name
			sel.reasons[i] = fmt.Sprintf("relaxed after trial %d missed %v", k+1, t.Missed)
		} else if i >= 0 {
			next, widened = widest.clone(), true
			out.Trials[k].Widened = true
			for j := range sel.reasons {
				sel.reasons[j] = fmt.Sprintf("widest grid after trial %d missed %v", k+1, t.Missed)
			}
		}
		// Only a configuration smaller than the best file that met is worth a trial.
		worth := !slices.Equal(next, cfg) && len(out.Trials) < bo.MaxTrials &&
			(out.Chosen < 0 || sel.predictBytes(next) < sel.predictBytes(config(out.Trials[out.Chosen].grids())))
		if !worth {
			out.Trials[k].Relaxed, out.Trials[k].Tightened, out.Trials[k].Widened, out.Trials[k].Bisect = "", false, false, 0
		}
		if bo.Trial != nil {
			bo.Trial(out.Trials[k])
		}
		if !worth {
			break
		}
		cfg = next
	}
	if out.Chosen < 0 {
		return nil, &BudgetMissedError{Model: model.Name, Trials: out.Trials}
	}
	res := out.Trials[out.Chosen].result
	if err := sel.final(ctx, model, data, o, res); err != nil {
		return nil, err
	}
	out.Result = res
	return out, nil
}

// grossMiss is how many times its allowance a trial's measured loss must exceed, before
// any trial met, for the next trial to take the widest grids instead of relaxing one
// weight: a miss that large says that the weights' losses do not add up as the
// sensitivities measured alone predict.
const grossMiss = 2.0

// move is one step of the greedy selection: layer to grid.
type move struct {
	layer int
	grid  network.Grid
}

// selection is the state of the greedy choice: each layer's candidate index (len(grids)
// for full precision) over grids sorted by bytes.
type selection struct {
	a     *Analysis
	c     Constraint
	grids [][]network.Grid // per layer, candidates from smallest to largest
	// path is the last choose's moves in the order it took them, the cheapest loss per
	// byte saved first.
	path    []move
	reasons []string
	// scale multiplies the constraint's allowance in the selection (fits).
	scale float64
	// fileBytes is the original file's size, the start of the predicted size.
	fileBytes int64
	// z is the normal quantile of BudgetOptions.Confidence: the margins are z standard
	// errors (0: none).
	z float64
}

func newSelection(a *Analysis, c Constraint) *selection {
	s := &selection{a: a, c: c, reasons: make([]string, len(a.Layers)), scale: 1}
	for _, l := range a.Layers {
		gs := slices.Clone(a.Grids)
		slices.SortStableFunc(gs, func(x, y network.Grid) int {
			bx, _ := l.On(x)
			by, _ := l.On(y)
			return int(bx.Bytes - by.Bytes)
		})
		s.grids = append(s.grids, gs)
	}
	return s
}

// config holds each layer's grid, "" for full precision.
type config []network.Grid

func (c config) clone() config { return slices.Clone(c) }

// grids is the trial's configuration.
func (t Trial) grids() []network.Grid {
	g := make([]network.Grid, len(t.Choices))
	for i, ch := range t.Choices {
		g[i] = ch.Grid
	}
	return g
}

// predictBytes is the configuration's weights' size.
func (s *selection) predictBytes(cfg config) int64 {
	var b int64
	for i, g := range cfg {
		b += s.bytes(i, g)
	}
	return b
}

// losses are a layer's predicted losses on grid g: drop (or disagreement), disagreement
// and noise-to-signal ratio, negatives as 0.
func (s *selection) losses(i int, g network.Grid) (drop, disagree, nsr float64) {
	if g == "" {
		return 0, 0, 0
	}
	gs, _ := s.a.Layers[i].On(g)
	drop = max(0, gs.Loss)
	if s.a.Metric == MetricSQNR {
		drop = 0
	}
	if gs.Score.HasAgreement {
		disagree = max(0, 1-gs.Score.Agreement)
	}
	nsr = math.Pow(10, -gs.Score.SQNR/10)
	if s.a.Metric != MetricAccuracy {
		drop = disagree
	}
	return drop, disagree, nsr
}

func (s *selection) predict(cfg config) Prediction {
	var d, dis, nsr float64
	for i, g := range cfg {
		a, b, c := s.losses(i, g)
		d, dis, nsr = d+a, dis+b, nsr+c
	}
	return Prediction{Drop: d, Agreement: 1 - dis, SQNR: -10 * math.Log10(nsr)}
}

// fits reports whether p keeps the constraint, its allowance (the drop, the
// disagreement, the noise-to-signal ratio) multiplied by s.scale.
func (s *selection) fits(p Prediction) bool {
	c, k := s.c, s.scale
	return (c.MaxDrop == nil || p.Drop <= k**c.MaxDrop) &&
		(c.MinAgreement == nil || 1-p.Agreement <= k*(1-*c.MinAgreement)) &&
		(c.MinSQNR == nil || math.Pow(10, -p.SQNR/10) <= k*math.Pow(10, -*c.MinSQNR/10))
}

func (s *selection) bytes(i int, g network.Grid) int64 {
	if g == "" {
		return s.a.Layers[i].FloatBytes
	}
	gs, _ := s.a.Layers[i].On(g)
	return gs.Bytes
}

// cost is a move's added predicted loss in the constraint's terms: the largest of the
// constrained quantities' increases, each relative to its allowance.
func (s *selection) cost(before, after Prediction) float64 {
	c, worst := s.c, 0.0
	if c.MaxDrop != nil {
		worst = max(worst, (after.Drop-before.Drop)/math.Max(*c.MaxDrop, 1e-9))
	}
	if c.MinAgreement != nil {
		worst = max(worst, (before.Agreement-after.Agreement)/math.Max(1-*c.MinAgreement, 1e-9))
	}
	if c.MinSQNR != nil {
		lim := math.Pow(10, -*c.MinSQNR/10)
		worst = max(worst, (math.Pow(10, -after.SQNR/10)-math.Pow(10, -before.SQNR/10))/lim)
	}
	return worst
}

// choose runs the greedy selection from full precision, recording its moves in s.path.
func (s *selection) choose(target int64) config {
	s.path = s.path[:0:0]
	n := len(s.a.Layers)
	cfg := make(config, n)
	size := s.fileBytes
	for {
		if target > 0 && size <= target {
			break
		}
		cur := s.predict(cfg)
		best, bestGrid, bestRatio, bestSaved := -1, network.Grid(""), -1.0, int64(0)
		for i := range n {
			for _, g := range s.grids[i] {
				saved := s.bytes(i, cfg[i]) - s.bytes(i, g)
				if saved <= 0 {
					continue
				}
				old := cfg[i]
				cfg[i] = g
				p := s.predict(cfg)
				cfg[i] = old
				if !s.fits(p) {
					continue
				}
				cost := s.cost(cur, p)
				ratio := math.Inf(1)
				if cost > 0 {
					ratio = float64(saved) / cost
				}
				if ratio > bestRatio || ratio == bestRatio && saved > bestSaved {
					best, bestGrid, bestRatio, bestSaved = i, g, ratio, saved
				}
			}
		}
		if best < 0 {
			break
		}
		cfg[best] = bestGrid
		s.path = append(s.path, move{best, bestGrid})
		size -= bestSaved
	}
	for i, g := range cfg {
		s.reasons[i] = s.why(i, g)
	}
	return cfg
}

// why explains layer i's grid g in the first configuration.
func (s *selection) why(i int, g network.Grid) string {
	unit := func(gs network.Grid) string {
		d, _, nsr := s.losses(i, gs)
		if s.a.Metric == MetricSQNR {
			return fmt.Sprintf("%.1f dB", -10*math.Log10(nsr))
		}
		return fmt.Sprintf("%.2f pp", 100*d)
	}
	smaller := ""
	for _, h := range s.grids[i] {
		if s.bytes(i, h) < s.bytes(i, g) {
			smaller = fmt.Sprintf("; %s would cost %s", h, unit(h))
			break
		}
	}
	scaled := ""
	if s.scale != 1 {
		scaled = fmt.Sprintf(" (chosen with %g× the allowance)", s.scale)
	}
	if g == "" {
		return "full precision: no grid fit the budget left" + smaller + scaled
	}
	return fmt.Sprintf("%s: predicted %s alone%s%s", g, unit(g), smaller, scaled)
}

// widest puts every layer on its largest candidate grid (int8 among the defaults).
func (s *selection) widest() config {
	cfg := make(config, len(s.grids))
	for i, gs := range s.grids {
		if len(gs) > 0 {
			cfg[i] = gs[len(gs)-1]
		}
	}
	return cfg
}

// along applies moves to base, each only where it makes its layer smaller: the first
// moves of a selection's path on top of the widest grids.
func (s *selection) along(base config, moves []move) config {
	cfg := base.clone()
	for _, m := range moves {
		if s.bytes(m.layer, m.grid) < s.bytes(m.layer, cfg[m.layer]) {
			cfg[m.layer] = m.grid
		}
	}
	return cfg
}

// below counts the layers of cfg on a grid smaller than widest's (full precision is not).
func (s *selection) below(cfg, widest config) int {
	n := 0
	for i, g := range cfg {
		if g != "" && s.bytes(i, g) < s.bytes(i, widest[i]) {
			n++
		}
	}
	return n
}

// gross reports whether a trial missed by more than grossMiss times the allowance of a
// constraint it missed (measured, with the margin, in the constraint's terms).
func (s *selection) gross(t Trial) bool {
	c, v := s.c, t.Validation
	n := s.a.ValidationSamples
	switch {
	case c.MaxDrop != nil && t.DropBound > grossMiss**c.MaxDrop:
		return true
	case c.MinAgreement != nil && v.HasAgreement && 1-LowerAgreement(v, n, s.z) > grossMiss*(1-*c.MinAgreement):
		return true
	case c.MinSQNR != nil && v.SQNR < *c.MinSQNR-10*math.Log10(grossMiss):
		return true
	}
	return false
}

// relax moves the quantized layer with the largest predicted loss (bytes breaking ties
// the other way: the smaller layer first) one candidate up, and returns it, or −1 when
// every layer is in full precision.
func (s *selection) relax(cfg config) int {
	worst, worstCost := -1, -1.0
	full := s.predict(make(config, len(cfg)))
	for i, g := range cfg {
		if g == "" {
			continue
		}
		one := make(config, len(cfg))
		one[i] = g
		c := s.cost(full, s.predict(one))
		if c > worstCost || c == worstCost && s.bytes(i, g) < s.bytes(worst, cfg[worst]) {
			worst, worstCost = i, c
		}
	}
	if worst < 0 {
		return -1
	}
	k := slices.Index(s.grids[worst], cfg[worst])
	if k+1 < len(s.grids[worst]) {
		cfg[worst] = s.grids[worst][k+1]
	} else {
		cfg[worst] = ""
	}
	return worst
}

// trial fine-tunes cfg with Run and scores it on the validation split.
func (s *selection) trial(ctx context.Context, model *onnxio.Model, data Data, o Options, cfg config) (Trial, error) {
	t := Trial{Predicted: s.predict(cfg), Scale: s.scale}
	o.Grids = map[string]network.Grid{}
	var only []string
	for i, g := range cfg {
		l := s.a.Layers[i]
		t.Choices = append(t.Choices, Choice{Weight: l.Name, Grid: g, Bytes: s.bytes(i, g), Reason: s.reasons[i]})
		t.PredictedBytes += s.bytes(i, g)
		if g != "" {
			only = append(only, l.Name)
			o.Grids[l.Name] = g
		}
	}
	if len(only) == 0 {
		// No weight fits the budget: there is nothing to binarize, and no file to write.
		t.Validation, t.Missed = s.a.FullPrecision, []string{"no weight fits the budget"}
		return t, nil
	}
	o.Selection = network.Selection{Only: only}
	// Fine-tuning on a small calibration set can lose more than it recovers (torchvision
	// ResNet-18 on Fashion-MNIST: 88.6 → 77.4 % on validation in two iterations), so the
	// bare projection, what the sensitivities measured, competes as iteration 0.
	o.scoreStart = true
	res, err := Run(ctx, model, Data{Calib: data.Calib, Validation: data.Validation}, o)
	if err != nil {
		return t, err
	}
	t.result, t.FileBytes, t.Seconds = res, int64(len(res.Bytes)), res.Seconds
	t.Unrefined = res.Exported == 0 && res.Start != nil
	t.Validation = scoreOf(res.Binarized)
	t.Missed, t.DropBound = s.missed(res)
	t.Met = len(t.Missed) == 0
	return t, nil
}

// missed lists the constraints the run's validation scores miss, each checked at the
// confidence s.z stands for, and the drop's upper bound.
func (s *selection) missed(res *Result) ([]string, float64) {
	var m []string
	v := scoreOf(res.Binarized)
	c := s.c
	n := s.a.ValidationSamples
	bound := 1 - LowerAgreement(v, n, s.z)
	if s.a.Metric == MetricAccuracy {
		bound = UpperDrop(res.FullPrecision.Accuracy-v.Accuracy, v, s.z)
	}
	if c.MaxDrop != nil && bound > *c.MaxDrop {
		m = append(m, "max-drop")
	}
	if c.MinAgreement != nil && (!v.HasAgreement || LowerAgreement(v, n, s.z) < *c.MinAgreement) {
		m = append(m, "min-agreement")
	}
	if c.MinSQNR != nil && v.SQNR < *c.MinSQNR {
		m = append(m, "min-sqnr")
	}
	return m, bound
}

// UpperDrop is the one-sided upper confidence bound, z standard errors above, of an
// accuracy drop measured on the same samples as v (a paired difference). Per sample the
// difference of the two models' correctness is −1, 0 or +1, and it is non-zero only where
// their predictions differ, so its variance is at most (1 − agreement) − drop²: the
// standard error follows from the agreement without per-sample records. Without a
// measured agreement every sample counts as a possible difference. The samples are the
// score's labelled positions: for per-position labels (segmentation), positions of one
// image are correlated and the bound is too narrow.
func UpperDrop(drop float64, v Score, z float64) float64 {
	if z == 0 || v.Positions == 0 {
		return drop
	}
	differ := 1.0
	if v.HasAgreement {
		differ = 1 - v.Agreement
	}
	return drop + z*math.Sqrt(max(0, differ-drop*drop)/float64(v.Positions))
}

// LowerAgreement is the one-sided lower confidence bound, z standard errors below, of
// v's agreement with the full-precision model, a binomial proportion over n samples.
func LowerAgreement(v Score, n int, z float64) float64 {
	if !v.HasAgreement || z == 0 || n == 0 {
		return v.Agreement
	}
	return v.Agreement - z*math.Sqrt(v.Agreement*(1-v.Agreement)/float64(n))
}

// final measures the chosen trial once on data.Eval and writes it to o.Output.
func (s *selection) final(ctx context.Context, model *onnxio.Model, data Data, o Options, res *Result) error {
	if res == nil {
		return &BudgetMissedError{Model: model.Name}
	}
	teacher, err := Build(model, o)
	if err != nil {
		return err
	}
	eval := data.Eval
	if eval != nil {
		res.ReportSplit, res.HeldOutSamples = SplitHeldOut, eval.Len()
		if res.FullPrecision, err = evaluate(ctx, teacher, nil, eval, o, res.Outputs); err != nil {
			return fmt.Errorf("%s: evaluating the full-precision model: %w", model.Name, err)
		}
	} else {
		_, eval, err = splitCalib(data, o)
		if err != nil {
			return err
		}
	}
	if o.Output == "" {
		res.Model, res.Binarized, err = check(ctx, res.Bytes, model.Name+" (binarized)", model.Dir, teacher, eval, o, res.Outputs)
		return err
	}
	return writeChecked(ctx, res, teacher, eval, o)
}
