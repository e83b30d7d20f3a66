package admmq

import (
	"math"
	"math/rand/v2"
	"testing"
)

// At a ρ far below L_f (the paper's ρ = 1e-5 on a network) an exact x-update barely sees
// the penalty, so x^{r+1} ≈ x*, the unconstrained minimiser, and with u = λ/ρ the
// iteration becomes
//
//	y^{r+1} = sign(x* + u^r),   u^{r+1} = u^r + x* − y^{r+1},
//
// a first-order sigma-delta modulator of x*: wherever |x*| < 1, y never settles; its
// running mean tracks x*, and it flips on a fraction 1 − |x*| of the iterations (the
// minority sign comes alone, two flips each, at rate (1 − |x*|)/2). This is why ADMM-Q's y
// keeps flipping a fifth to a quarter of its signs on the CIFAR-10 stand-in at ρ = 1e-5
// (docs/results/paper): the rate measures how much of x lies inside the cube. The test runs
// the package's own y- and dual updates against the analytic x-update of
// f(x) = L/2‖x − a‖², and checks the modulator's two predictions; the controls are
// |a| > 1, where y = sign(a) from the start and never moves, and ρ ≥ L_f, the regime of
// Lemmas 3.1–3.2, where y settles.
func TestSmallRhoYIsSigmaDeltaOfTheFloatOptimum(t *testing.T) {
	const (
		n     = 4000
		iters = 600
		burn  = 200 // iterations before the window the predictions are checked on
		L     = 1.0
	)
	rng := rand.New(rand.NewPCG(21, 7))
	inside := make([]float64, n)  // |a| < 1: the modulator's case
	outside := make([]float64, n) // |a| > 1: the negative control
	for i := range inside {
		inside[i] = 0.98 * (2*rng.Float64() - 1)
		outside[i] = math.Copysign(1.05+0.95*rng.Float64(), rng.Float64()-0.5)
	}
	s := MustSet(Spec{Kind: KindBinary})

	// run returns the flip rate per element and iteration over the window and the largest
	// |mean(y) − a| over the window.
	run := func(a []float64, rho float64) (flipRate, meanErr, lastHalfFlips float64) {
		x := append([]float64(nil), a...)
		y := make([]float64, n)
		if err := s.Project64(y, a, Layout{}); err != nil {
			t.Fatal(err)
		}
		lambda := make([]float64, n)
		scratch := make([]float64, n)
		sum := make([]float64, n)
		var flips float64
		for r := 0; r < iters; r++ {
			c, err := UpdateYQ(s, y, x, lambda, scratch, rho, Layout{})
			if err != nil {
				t.Fatal(err)
			}
			// argmin L/2‖x − a‖² + ⟨λ, x − y⟩ + ρ/2‖x − y‖².
			for i := range x {
				x[i] = (L*a[i] + rho*y[i] - lambda[i]) / (L + rho)
			}
			UpdateDual(lambda, x, y, rho)
			if r >= burn {
				flips += float64(c)
				for i := range y {
					sum[i] += y[i]
				}
			}
			if r >= iters/2 {
				lastHalfFlips += float64(c)
			}
		}
		w := float64(iters - burn)
		for i := range sum {
			meanErr = math.Max(meanErr, math.Abs(sum[i]/w-a[i]))
		}
		return flips / (w * n), meanErr, lastHalfFlips
	}

	var want float64
	for _, v := range inside {
		want += 1 - math.Abs(v)
	}
	want /= n

	rho := 1e-4 * L
	rate, meanErr, _ := run(inside, rho)
	t.Logf("ρ = 1e-4·L_f, |a| < 1: flip rate %.4f, predicted mean(1 − |a|) %.4f; max |mean(y) − a| %.4f", rate, want, meanErr)
	if math.Abs(rate-want) > 0.005 {
		t.Errorf("flip rate %.4f, want 1 − |a| on average, %.4f", rate, want)
	}
	// u stays within a few units, so the window's mean of y is x* to within a few 1/window.
	if meanErr > 4/float64(iters-burn) {
		t.Errorf("max |mean(y) − a| = %.4f: y's running mean does not track the float optimum", meanErr)
	}

	// Negative control: the float optimum outside the cube. u gains a − sign(a), of a's
	// sign, so x + u only moves away from zero and y never flips.
	if rate, _, _ := run(outside, rho); rate != 0 {
		t.Errorf("|a| > 1: flip rate %.4f, want 0", rate)
	}
	// Control: at ρ ≥ L_f the penalty holds x near y and y settles.
	for _, r := range []float64{L, math.Sqrt2 * L, 2 * L} {
		if _, _, late := run(inside, r); late != 0 {
			t.Errorf("ρ = %.3g·L_f: %v flips in the last %d iterations, want y settled", r/L, late, iters/2)
		}
	}
}
