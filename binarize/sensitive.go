package binarize

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// KeepSensitive, a name of Selection.Keep (and of DefaultKeep), keeps in full precision
// the weights whose binarization costs the most accuracy: before training, Run projects
// each target weight alone onto its grid, re-estimates BatchNorm and scores the model on
// the validation split, as Analyze does. A weight is kept when its drop is significant —
// its one-sided 95 % lower bound, paired over the split's samples (UpperDrop with a
// negative z), is above zero — largest drop first, as long as the kept weights hold at
// most Options.SensitiveShare of the targets' values and leave at least one target.
//
// The rule is measured, not assumed (issue 15): on fmnist-resnet, with the first, last
// and depthwise weights already kept, the bare projections of its first block's 3×3 and
// 1×1 weights cost 4.4 and 3.6 pp of validation accuracy, every other weight less than
// the split's noise, and keeping those two (18 % of the binarized values) raised ADMM-Q's
// validation accuracy from 89.9 to 92.4 % (seed 1). fmnist-mlp's and fmnist-cnn's
// binarized weights either cost less than the noise or are more than the share, so
// nothing changes there.
//
// Without labels a disagreement with the full-precision model is not a drop by itself
// (any projection has some, and with the model's own predictions as labels every one
// would count as a loss): the drop is instead the one the full-precision model's own
// probabilities expect (train.Fidelity.ExpectedDrop: each disagreement weighed by
// p(its class) − p(the projection's class), the accuracy lost if those probabilities are
// calibrated), tested with the same paired bound as a labelled drop. On fmnist-mlp's and
// fmnist-resnet's validation splits (seeds 1–3, 1 000 of 10 000 images) the expected
// drops came within 1.03 pp of the labelled ones (whose own standard error there is about
// 0.6 pp), the same weights were kept on four splits of six, and on the other two each
// rule kept one marginal weight the other did not; fmnist-resnet binarized without labels
// gained 2.17 pp on the held-out set ([+1.78, +2.56], 3 seeds) over keeping nothing as
// sensitive (docs/results/defaults/sensitive/unlabelled).
const KeepSensitive = "sensitive"

// DefaultSensitiveShare is Options.SensitiveShare's default: a quarter of the targets'
// values at most stay in full precision, so that the file stays mostly binary.
const DefaultSensitiveShare = 0.25

// sensitiveZ is the one-sided 95 % normal quantile.
const sensitiveZ = 1.6448536269514722

// Sensitivity is what KeepSensitive measured (Result.Sensitivity).
type Sensitivity struct {
	// Measured reports whether the weights were scored; Reason says why not otherwise.
	Measured bool
	Reason   string
	// Labels reports whether the drops are accuracies lost against the labels; otherwise
	// they are the drops expected from the full-precision model's probabilities
	// (SensitiveLayer.Expected), the split having no labels.
	Labels bool
	// FullPrecision is the model's score on the validation split; Layers holds every
	// target weight in graph order, Kept the names kept in full precision, largest
	// drop first.
	FullPrecision Score
	Layers        []SensitiveLayer
	Kept          []string
	// Seconds is the measurement's wall time.
	Seconds float64
}

// SensitiveLayer is one target weight's bare-projection drop on the validation split.
type SensitiveLayer struct {
	Name  string
	Count int64
	// Drop is the accuracy lost against the full-precision model (a fraction), Lower its
	// one-sided 95 % lower bound.
	Drop, Lower float64
	// Disagree is the share of the split's samples whose top-1 class (or decision) differs
	// from the full-precision model's; Expected is the drop expected from the
	// full-precision model's own probabilities (Score.ExpectedDrop), which is Drop itself
	// when the split has no labels.
	Disagree, Expected float64
	Kept               bool
}

// hasSensitive reports whether sel keeps KeepSensitive.
func hasSensitive(sel network.Selection) bool { return slices.Contains(sel.Keep, KeepSensitive) }

// withoutSensitive is sel without KeepSensitive, which network does not know.
func withoutSensitive(sel network.Selection) network.Selection {
	if !hasSensitive(sel) {
		return sel
	}
	sel.Keep = slices.DeleteFunc(slices.Clone(sel.Keep), func(k string) bool { return k == KeepSensitive })
	return sel
}

// keepSensitive measures ts as KeepSensitive says and returns the targets left to
// binarize and what was measured. It scores on the run's own graphs: g (built from m,
// as the run built it, before any preconditioning) is projected and restored, teacher is
// the full-precision model the scores are against, and o's batch and micro-batch are
// the run's, so that the measurement stays within the run's memory.
func keepSensitive(ctx context.Context, m *onnxio.Model, g *engine.Graph, teacher *engine.Graph, specs []train.OutputSpec, labelled bool, o Options, trainSet, valid calib.Dataset, ts []network.Target) ([]network.Target, *Sensitivity, error) {
	s := &Sensitivity{}
	switch {
	case valid == nil:
		s.Reason = "no validation split"
		return ts, s, nil
	case len(ts) < 2:
		s.Reason = "one weight to binarize"
		return ts, s, nil
	}
	start := time.Now()
	bnSet, err := bnSubset(trainSet, 0, o.Seed)
	if err != nil {
		return nil, nil, err
	}
	pr := &prober{ctx: ctx, g: g, m: m, teacher: teacher, train: bnSet, valid: valid, o: o, specs: specs,
		recalib: !o.NoBNRecalib && hasBatchNorm(m)}
	// Scored preconditioned as the run's first iterate is, then left as found: the run
	// preconditions only the weights it binarizes.
	pr.snapshot()
	orig := pr.saved
	if err := pr.precondition(ts); err != nil {
		return nil, nil, err
	}
	defer func() { pr.saved = orig; pr.restore() }()
	fp, err := evaluate(ctx, teacher, nil, valid, o, specs)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: evaluating the full-precision model: %w", m.Name, err)
	}
	s.Labels = labelled && fp.Labelled
	if !s.Labels && !hasAgreementOutput(specs) {
		s.Reason = "no labels, and no output with classes or decisions to expect a drop from"
		return ts, s, nil
	}
	s.Measured, s.FullPrecision = true, scoreOf(fp)
	if o.SensitiveProgress != nil {
		o.SensitiveProgress(0, len(ts))
	}
	var total int64
	for i, t := range ts {
		sc, err := pr.score([]network.Target{t})
		if err != nil {
			return nil, nil, err
		}
		l := SensitiveLayer{Name: t.Name, Count: count(t.Dims)}
		if sc.HasAgreement {
			l.Disagree, l.Expected = 1-sc.Agreement, sc.ExpectedDrop
		}
		switch {
		case s.Labels:
			l.Drop = s.FullPrecision.Accuracy - sc.Accuracy
			l.Lower = UpperDrop(l.Drop, sc, -sensitiveZ)
		case sc.HasAgreement:
			l.Drop = sc.ExpectedDrop
			l.Lower = UpperDrop(l.Drop, Score{Positions: sc.AgreementPositions, HasAgreement: true, Agreement: sc.Agreement}, -sensitiveZ)
		default:
			return nil, nil, fmt.Errorf("%s: scoring %s without labels: no agreement with the full-precision model was measured", m.Name, t.Name)
		}
		total += l.Count
		s.Layers = append(s.Layers, l)
		if o.SensitiveProgress != nil {
			o.SensitiveProgress(i+1, len(ts))
		}
	}
	order := make([]int, len(s.Layers))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(s.Layers[b].Drop, s.Layers[a].Drop) })
	var kept int64
	for _, i := range order {
		l := &s.Layers[i]
		// NaN (a reference output that is not finite) is not significant either.
		if !(l.Lower > 0) || float64(kept+l.Count) > o.SensitiveShare*float64(total) || kept+l.Count >= total {
			continue
		}
		kept += l.Count
		l.Kept = true
		s.Kept = append(s.Kept, l.Name)
	}
	left := slices.DeleteFunc(slices.Clone(ts), func(t network.Target) bool { return slices.Contains(s.Kept, t.Name) })
	s.Seconds = time.Since(start).Seconds()
	return left, s, nil
}

// hasAgreementOutput reports whether an output has classes or decisions, whose agreement
// with the full-precision model gives an expected drop.
func hasAgreementOutput(specs []train.OutputSpec) bool {
	for _, sp := range specs {
		if sp.Kind.HasClassAxis() || sp.Kind.Binary() {
			return true
		}
	}
	return false
}
