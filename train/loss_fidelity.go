package train

import (
	"fmt"
	"math"

	"github.com/qtool/qtool/engine"
)

// Fidelity measures how closely one output of a model follows a reference model's (the
// full-precision one) over a data set.
type Fidelity struct {
	Name string
	Kind Kind
	// SQNR is the signal-to-quantisation-noise ratio 10·log10(Σt²/Σ(t−s)²) in dB, t the
	// reference's values and s the model's: +Inf when they are equal, so a worse output
	// always has a lower SQNR.
	SQNR float64
	// Cosine is the cosine similarity Σst/√(Σs²·Σt²) of the outputs as one vector (1 when
	// both are zero).
	Cosine float64
	// MaxAbsErr is the largest |s − t|.
	MaxAbsErr float64
	// HasAgreement reports outputs with classes or decisions; Agreement is then the
	// fraction of positions with the reference's top-1 class along the class axis, or the
	// same decision at probability 0.5 (logit 0) for binary heads, over Positions.
	HasAgreement bool
	Agreement    float64
	Positions    int
	// ExpectedDrop, with HasAgreement, is the accuracy the model is expected to lose
	// against the reference if the reference's probabilities are calibrated (P(label = c)
	// = its probability of c): the mean over Positions of p(reference's class) −
	// p(model's class), p the reference's softmax (or probabilities, or sigmoid). It
	// needs no labels, is 0 where the two agree and at least 0 everywhere, and weighs
	// each disagreement by how sure the reference was.
	ExpectedDrop float64
}

// fidelityAcc accumulates one output's Fidelity over batches, in float64.
type fidelityAcc struct {
	tt, dd, ss, st, maxAbs float64
	lost                   float64 // Σ p(reference's class) − p(model's class)
	agree, positions       int
}

func (a *fidelityAcc) add(s OutputSpec, y, r *engine.Tensor) error {
	if len(y.F) != len(r.F) {
		return fmt.Errorf("%d values, the reference has %d", len(y.F), len(r.F))
	}
	for i, v := range y.F {
		sv, tv := float64(v), float64(r.F[i])
		d := sv - tv
		a.tt += tv * tv
		a.dd += d * d
		a.ss += sv * sv
		a.st += sv * tv
		// A NaN anywhere makes the error NaN, not silently ignored by Max.
		if ad := math.Abs(d); ad > a.maxAbs || ad != ad {
			a.maxAbs = ad
		}
	}
	switch {
	case s.Kind.HasClassAxis():
		outer, classes, inner, err := lanes(len(y.F), y.Shape, s.Axis)
		if err != nil {
			return err
		}
		for o := range outer {
			for i := range inner {
				base := o*classes*inner + i
				if yc, rc := argmaxLane(y.F, base, classes, inner), argmaxLane(r.F, base, classes, inner); yc == rc {
					a.agree++
				} else {
					a.lost += probGap(s.Kind, r.F, base, classes, inner, rc, yc)
				}
				a.positions++
			}
		}
	case s.Kind.Binary():
		for i, v := range y.F {
			if decision(s.Kind, v) == decision(s.Kind, r.F[i]) {
				a.agree++
			} else {
				// p(the reference's decision) − p(the other) = |2p − 1|.
				p := float64(r.F[i])
				if s.Kind == BinaryLogit {
					p = 1 / (1 + math.Exp(-p))
				}
				a.lost += math.Abs(2*p - 1)
			}
			a.positions++
		}
	}
	return nil
}

func (a *fidelityAcc) result(s OutputSpec) Fidelity {
	f := Fidelity{Name: s.Name, Kind: s.Kind, MaxAbsErr: a.maxAbs, Positions: a.positions}
	switch {
	case a.dd == 0:
		f.SQNR = math.Inf(1)
	default:
		f.SQNR = 10 * math.Log10(a.tt/a.dd)
	}
	switch {
	case a.ss == 0 && a.tt == 0:
		f.Cosine = 1
	case a.ss == 0 || a.tt == 0:
		f.Cosine = 0
	default:
		f.Cosine = a.st / math.Sqrt(a.ss*a.tt)
	}
	if a.positions > 0 {
		f.HasAgreement, f.Agreement = true, float64(a.agree)/float64(a.positions)
		f.ExpectedDrop = a.lost / float64(a.positions)
	}
	return f
}

// probGap is p(rc) − p(yc) for the lane at base of the reference's output r, rc its top-1
// class: its softmax for logits (computed from the differences to the top logit, so that
// it neither overflows nor depends on a shift), the values themselves for probabilities,
// their exponentials for log-probabilities.
func probGap(k Kind, r []float32, base, classes, inner, rc, yc int) float64 {
	top, other := float64(r[base+rc*inner]), float64(r[base+yc*inner])
	switch k {
	case Probs:
		return top - other
	case LogProbs:
		return math.Exp(top) - math.Exp(other)
	}
	var z float64
	for c := range classes {
		z += math.Exp(float64(r[base+c*inner]) - top)
	}
	return (1 - math.Exp(other-top)) / z
}

// argmaxLane is argmax of the lane base, base+inner, …: the first on ties, NaN never wins.
func argmaxLane(x []float32, base, classes, inner int) int {
	best := 0
	for c := 1; c < classes; c++ {
		v, b := x[base+c*inner], x[base+best*inner]
		if v > b || b != b {
			best = c
		}
	}
	return best
}

// decision is a binary head's decision: probability ≥ 0.5, or logit ≥ 0.
func decision(k Kind, v float32) bool {
	if k == BinaryLogit {
		return v >= 0
	}
	return v >= 0.5
}

// labelHits counts the positions of output y whose top-1 class (or decision) is the label,
// and the positions counted: those labelled IgnoreLabel are left out.
func labelHits(s OutputSpec, y *engine.Tensor, labels []int64) (int, int, error) {
	switch {
	case s.Kind.HasClassAxis():
		outer, classes, inner, err := lanes(len(y.F), y.Shape, s.Axis)
		if err != nil {
			return 0, 0, err
		}
		if len(labels) != outer*inner {
			return 0, 0, fmt.Errorf("output %s: %d labels for %d positions: give one label per position", s.Name, len(labels), outer*inner)
		}
		hits := 0
		for o := range outer {
			for i := range inner {
				if int64(argmaxLane(y.F, o*classes*inner+i, classes, inner)) == labels[o*inner+i] {
					hits++
				}
			}
		}
		return hits, countLabelled(labels), nil
	case s.Kind.Binary():
		if len(labels) != len(y.F) {
			return 0, 0, fmt.Errorf("output %s: %d labels for %d outputs", s.Name, len(labels), len(y.F))
		}
		hits := 0
		for i, v := range y.F {
			if labels[i] != IgnoreLabel && decision(s.Kind, v) == (labels[i] == 1) {
				hits++
			}
		}
		return hits, countLabelled(labels), nil
	}
	return 0, 0, nil
}
