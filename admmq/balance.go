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
// grid point is y0: n/‖y0‖² = 1/mean(y0²), the inverse squared grid scale (for a
// per-channel grid the size-weighted mean of α_c²). The penalty ρ̄/2·‖x − y‖²/mean(y0²)
// then counts distances in units of the tensor's own grid step, whatever the weights'
// scale: scaling a tensor by c (a following normalisation compensating, f unchanged)
// scales y0 by c on scaled grids and the factor by 1/c², which keeps the y-update's signs
// and the penalty's weight against f the same. On the ±1 grid the factor is exactly 1, so
// ρ̄ is the paper's ρ there. The tensor's size is deliberately not divided out (a
// factor 1/‖y0‖² instead): measured on fmnist-cnn, whose kernels are 10²–10⁴ elements,
// that made ρ 10²–10⁴ times smaller than the absolute ρ = 1 that works there, and lost
// 2–5 pp at every ρ̄ in {0.1, 1, 10} (README). It returns 1 for an all-zero y0.
func ScaleFreeRho[T Float](y0 []T) float64 {
	var s float64
	for _, v := range y0 {
		s += float64(v) * float64(v)
	}
	if s == 0 {
		return 1
	}
	return float64(len(y0)) / s
}
