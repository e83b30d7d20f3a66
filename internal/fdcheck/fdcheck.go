// Package fdcheck is qtool's one finite-difference gradient check, shared by the tests of
// the packages that compute gradients (engine's kernels, train's losses): it compares an
// analytic gradient with central differences of the loss, entry by entry.
package fdcheck

import (
	"math"
	"testing"
)

// Spec is how a check perturbs and compares.
type Spec struct {
	// Step returns the perturbation of an entry whose value is x.
	Step func(x float64) float64
	// An entry agrees when |analytic − numeric| ≤ Atol + Rtol·|numeric|.
	Atol, Rtol float64
}

// Fixed perturbs every entry by h.
func Fixed(h float64) func(float64) float64 { return func(float64) float64 { return h } }

// Check compares analytic(j), the gradient of the scalar loss with respect to x[j], with
// the central difference of loss, perturbing x[j] in place and restoring it. The
// difference is divided by the distance the perturbed values actually lie apart in T, so
// that float32 rounding of x±h does not bias it. It reports the first five entries that
// differ and their count on t, and returns whether every entry agreed.
func Check[T float32 | float64](t testing.TB, what string, x []T, analytic func(j int) float64, loss func() float64, s Spec) bool {
	t.Helper()
	bad := 0
	for j := range x {
		orig := x[j]
		h := T(s.Step(float64(orig)))
		x[j] = orig + h
		lp := loss()
		x[j] = orig - h
		lm := loss()
		x[j] = orig
		num := (lp - lm) / (float64(orig+h) - float64(orig-h))
		if got := analytic(j); !Close(got, num, s.Atol, s.Rtol) {
			if bad < 5 {
				t.Errorf("%s[%d]: gradient %.6g, finite differences %.6g", what, j, got, num)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d gradient entries differ", what, bad, len(x))
	}
	return bad == 0
}

// Close reports whether got is within atol+rtol·|want| of want (NaN matches NaN,
// infinities must match exactly).
func Close(got, want, atol, rtol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		return got == want
	}
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}
