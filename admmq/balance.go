package admmq

// Balancing is the residual-balancing rule of Boyd et al. (2011, §3.4.1) for ρ: when the
// primal residual ‖x − y‖ exceeds Mu times the dual residual ρ‖y − y_prev‖, ρ grows by
// Tau, so that the penalty pulls x to the grid harder; when the dual exceeds Mu times
// the primal, ρ shrinks by Tau, so that y moves less. Zero fields mean Boyd's μ = 10 and
// τ = 2.
type Balancing struct {
	Mu  float64 `json:"mu,omitempty"`
	Tau float64 `json:"tau,omitempty"`
}

// Next returns ρ after an iteration with the given primal and dual residuals. With both
// residuals zero, or within a factor Mu of each other, ρ is returned unchanged.
//
// This package's λ is the unscaled multiplier, which the rule leaves as it is; a caller
// holding the scaled dual u = λ/ρ must rescale it with RescaleScaledDual.
func (b Balancing) Next(rho, primal, dual float64) float64 {
	mu, tau := b.Mu, b.Tau
	if mu <= 0 {
		mu = 10
	}
	if tau <= 0 {
		tau = 2
	}
	switch {
	case primal > mu*dual:
		return rho * tau
	case dual > mu*primal:
		return rho / tau
	}
	return rho
}

// RescaleScaledDual rescales the scaled dual u = λ/ρ in place when ρ changes from
// rhoOld to rhoNew, so that λ = ρu is unchanged.
func RescaleScaledDual[T Float](u []T, rhoOld, rhoNew float64) {
	f := rhoOld / rhoNew
	for i, v := range u {
		u[i] = T(float64(v) * f)
	}
}

// ScaleFreeRho returns the factor that makes ρ scale-free for a tensor whose initial
// grid point is y0: 1/‖y0‖², so that the penalty ρ̄/2·‖x − y‖²/‖y0‖² is in units of the
// loss per squared distance relative to the tensor's own grid magnitude (for a per-channel
// grid ‖y0‖² = Σ_c n_c·α_c², the grid scale² times the size). Scaling a tensor by c (a
// following normalisation compensating, f unchanged) scales y0 by c on scaled grids and
// the factor by 1/c², exactly what keeps the y-update's signs and the penalty's weight
// against f the same; and one ρ̄ weighs a 100-element and a 10⁶-element tensor alike.
// It returns 1 for an all-zero y0.
func ScaleFreeRho[T Float](y0 []T) float64 {
	var s float64
	for _, v := range y0 {
		s += float64(v) * float64(v)
	}
	if s == 0 {
		return 1
	}
	return 1 / s
}
