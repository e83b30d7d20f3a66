package binarize

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestUpperDropPaired: with every disagreement a change of correctness, UpperDrop's
// standard error is the sample standard error of the per-sample paired differences,
// computed here from the records themselves; further disagreements (both models wrong,
// differently) only widen the bound; z = 0 gives the measured drop.
func TestUpperDropPaired(t *testing.T) {
	const n, lost, gained, bothWrong = 500, 14, 5, 6
	diffs := make([]float64, n)
	for i := range lost {
		diffs[i] = 1
	}
	for i := range gained {
		diffs[lost+i] = -1
	}
	var mean, sq float64
	for _, d := range diffs {
		mean += d / n
		sq += d * d / n
	}
	se := math.Sqrt((sq - mean*mean) / n)
	z := distuv.UnitNormal.Quantile(0.95)
	v := Score{Labelled: true, Positions: n, HasAgreement: true, Agreement: 1 - float64(lost+gained)/n}
	if got, want := UpperDrop(mean, v, z), mean+z*se; math.Abs(got-want) > 1e-12 {
		t.Errorf("UpperDrop = %v, want %v (drop %v + %v × paired SE %v)", got, want, mean, z, se)
	}
	wider := v
	wider.Agreement -= float64(bothWrong) / n
	if UpperDrop(mean, wider, z) <= UpperDrop(mean, v, z) {
		t.Errorf("more disagreements did not widen the bound: %v ≤ %v", UpperDrop(mean, wider, z), UpperDrop(mean, v, z))
	}
	if got := UpperDrop(mean, v, 0); got != mean {
		t.Errorf("z = 0: %v, want the drop %v", got, mean)
	}
}

// TestUpperDropCoverage: the acceptance rule's promise, by simulation. A binarized model
// whose true drop is exactly the allowance (1 pp, with 4 % of the samples changing
// correctness) is measured on 500-sample validation splits; the rule (UpperDrop at 95 %
// within 1 pp) must accept it in about 5 % of the splits (the normal approximation's
// error allowed for), where the measured drop alone accepts it about half the time.
func TestUpperDropCoverage(t *testing.T) {
	const n, splits, allowance = 500, 4000, 0.01
	const pLost, pGained = 0.025, 0.015 // true drop 1 pp
	z := distuv.UnitNormal.Quantile(0.95)
	rng := rand.New(rand.NewPCG(1, 2))
	var byBound, byValue int
	for range splits {
		lost, gained := 0, 0
		for range n {
			switch u := rng.Float64(); {
			case u < pLost:
				lost++
			case u < pLost+pGained:
				gained++
			}
		}
		drop := float64(lost-gained) / n
		v := Score{Labelled: true, Positions: n, HasAgreement: true, Agreement: 1 - float64(lost+gained)/n}
		if UpperDrop(drop, v, z) <= allowance {
			byBound++
		}
		if drop <= allowance {
			byValue++
		}
	}
	if f := float64(byBound) / splits; f < 0.02 || f > 0.08 {
		t.Errorf("the bound accepted a model at the allowance in %.1f %% of the splits, want about 5 %%", 100*f)
	}
	if f := float64(byValue) / splits; f < 0.4 {
		t.Errorf("the measured drop accepted it in %.1f %% of the splits, want about half (the control)", 100*f)
	}
}

// TestLowerAgreement: the binomial bound below the measured agreement, none at z = 0 or
// without a measured agreement.
func TestLowerAgreement(t *testing.T) {
	v := Score{HasAgreement: true, Agreement: 0.96}
	z := distuv.UnitNormal.Quantile(0.95)
	if got, want := LowerAgreement(v, 400, z), 0.96-z*math.Sqrt(0.96*0.04/400); math.Abs(got-want) > 1e-12 {
		t.Errorf("LowerAgreement = %v, want %v", got, want)
	}
	if got := LowerAgreement(v, 400, 0); got != 0.96 {
		t.Errorf("z = 0: %v", got)
	}
}
