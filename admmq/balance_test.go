package admmq

import (
	"math"
	"testing"
)

// TestBalancingRule: primal ≫ dual grows ρ by τ, dual ≫ primal shrinks it, residuals
// within μ of each other (or both zero) leave it; zero fields are Boyd's μ = 10, τ = 2.
func TestBalancingRule(t *testing.T) {
	b := Balancing{}
	for _, c := range []struct{ primal, dual, want float64 }{
		{100, 1, 2}, {1, 100, 0.5}, {5, 1, 1}, {1, 5, 1}, {0, 0, 1}, {1, 0, 2}, {0, 1, 0.5},
	} {
		if got := b.Next(1, c.primal, c.dual); got != c.want {
			t.Errorf("primal %v, dual %v: ρ 1 → %v, want %v", c.primal, c.dual, got, c.want)
		}
	}
	if got := (Balancing{Mu: 2, Tau: 3}).Next(1, 5, 1); got != 3 {
		t.Errorf("μ = 2, τ = 3, primal 5, dual 1: ρ → %v, want 3", got)
	}
}

// TestRescaleScaledDual: after ρ changes, the rescaled scaled dual gives the same λ = ρu.
func TestRescaleScaledDual(t *testing.T) {
	lambda := []float64{0.3, -1.7, 2.5e-3}
	rho := 0.7
	u := make([]float64, len(lambda))
	for i, l := range lambda {
		u[i] = l / rho
	}
	for _, next := range []float64{rho * 2, rho / 2, 13} {
		RescaleScaledDual(u, rho, next)
		rho = next
		for i, l := range lambda {
			if math.Abs(rho*u[i]-l) > 1e-12*math.Abs(l) {
				t.Fatalf("ρ = %v: λ = %v, want %v", rho, rho*u[i], l)
			}
		}
	}
}

// TestScaleFreeRhoProperty: scaling a tensor by c divides its factor by c², so that on a
// per-channel scaled grid the y-update of the scaled problem (x and y scaled by c, λ by
// 1/c as ∇f is when a normalisation compensates) is c times the original, signs equal.
func TestScaleFreeRhoProperty(t *testing.T) {
	set := MustSet(Spec{Kind: KindScaledBinary, Scale: ScaleOptimal, PerChannel: true})
	l := Layout{Shape: []int{4, 6}}
	x := make([]float64, 24)
	lambda := make([]float64, 24)
	for i := range x {
		x[i] = math.Sin(float64(3*i+1)) * (1 + float64(i%6))
		lambda[i] = 0.2 * math.Cos(float64(7*i))
	}
	y0 := make([]float64, 24)
	if err := set.Project64(y0, x, l); err != nil {
		t.Fatal(err)
	}
	k := ScaleFreeRho(y0)
	for _, c := range []float64{4, 0.01, 1e3} {
		xc, lc, y0c := make([]float64, 24), make([]float64, 24), make([]float64, 24)
		for i := range x {
			xc[i], lc[i], y0c[i] = c*x[i], lambda[i]/c, c*y0[i]
		}
		kc := ScaleFreeRho(y0c)
		if math.Abs(kc*c*c/k-1) > 1e-12 {
			t.Fatalf("c = %v: factor %v, want %v/c²", c, kc, k)
		}
		const rhoBar = 0.5
		y, yc, s := make([]float64, 24), make([]float64, 24), make([]float64, 24)
		if _, err := UpdateYQ(set, y, x, lambda, s, rhoBar*k, l); err != nil {
			t.Fatal(err)
		}
		if _, err := UpdateYQ(set, yc, xc, lc, s, rhoBar*kc, l); err != nil {
			t.Fatal(err)
		}
		for i := range y {
			if math.Signbit(y[i]) != math.Signbit(yc[i]) || math.Abs(yc[i]-c*y[i]) > 1e-9*math.Abs(c*y[i]) {
				t.Fatalf("c = %v: y[%d] = %v scaled, %v·c = %v", c, i, yc[i], y[i], c*y[i])
			}
		}
	}
}
