package admmq

import (
	"fmt"
	"math"
)

// This file holds the step-level pieces of ADMM on one tensor (or one whole vector). An
// external loop that owns the x-update (for a network, K inner epochs of Adam) runs one
// ADMM iteration r over its weight tensors t as
//
//	ρ := sched.Rho(r)
//	for each t: UpdateYQ(P, y_t, x_t, λ_t, scratch, ρ, layout_t)        (ADMM-Q)
//	         or UpdateYR(..., Mask{P: p, Seed: seed, Iter: r, Stream: t})  (ADMM-R)
//	         or ADMM-S: d² += SoftPrepare(...) for each t; then s := SoftFactor(d², β, ρ);
//	            SoftApply(y_t, z_t, z̃_t, s) for each t
//	K epochs: after each backward pass, AddPenaltyGrad(∇f_t, x_t, y_t, λ_t, ρ) for each t
//	for each t: UpdateDual(λ_t, x_t, y_t, ρ)
//
// and reports L = f(x) + Σ_t Penalty(x_t, y_t, λ_t, ρ). Run does exactly this on vectors.
//
// The y-updates check that their slices have equal lengths and return an error otherwise;
// Shift, SoftApply, UpdateDual, AddPenaltyGrad and Penalty, which sit in inner loops, expect
// equal lengths (the first argument's) and panic on shorter ones, like copy-free slice code.

// project dispatches to the Projector method of T's width.
func project[T Float](p Projector, dst, src []T, l Layout) error {
	switch d := any(dst).(type) {
	case []float32:
		return p.Project32(d, any(src).([]float32), l)
	case []float64:
		return p.Project64(d, any(src).([]float64), l)
	}
	// Named float types (type W float32) land here; convert through the underlying width.
	return fmt.Errorf("admmq: element type %T not supported; use float32 or float64", dst)
}

// Shift sets z = x + λ/ρ, the point the y-update projects.
func Shift[T Float](z, x, lambda []T, rho float64) {
	inv := 1 / rho
	for i := range z {
		z[i] = T(float64(x[i]) + float64(lambda[i])*inv)
	}
}

func checkLens(op string, n int, others ...int) error {
	for _, m := range others {
		if m != n {
			return fmt.Errorf("admmq: %s: slices of different lengths (%d and %d)", op, n, m)
		}
	}
	return nil
}

// copyCount copies src into dst and returns how many elements changed.
func copyCount[T Float](dst, src []T) int {
	changed := 0
	for i, v := range src {
		if dst[i] != v {
			changed++
			dst[i] = v
		}
	}
	return changed
}

// UpdateYQ is the ADMM-Q y-update y = P_A(x + λ/ρ). scratch must have len(y) elements; it
// returns how many elements of y changed.
func UpdateYQ[T Float](p Projector, y, x, lambda, scratch []T, rho float64, l Layout) (changed int, err error) {
	if err := checkLens("y-update", len(y), len(x), len(lambda), len(scratch)); err != nil {
		return 0, err
	}
	Shift(scratch, x, lambda, rho)
	if err := project(p, scratch, scratch, l); err != nil {
		return 0, fmt.Errorf("admmq: y-update: %w", err)
	}
	return copyCount(y, scratch), nil
}

// Mask is the Bernoulli(P) mask of ADMM-R (Alg. 3) for one tensor at one iteration. Its bits
// are a pure function of (Seed, Iter, Stream, element index): use Stream to give each tensor
// of a network its own mask. Nothing is carried between iterations, so resuming from a
// checkpoint reproduces the same masks.
type Mask struct {
	P      float64
	Seed   uint64
	Iter   int
	Stream uint64
}

// splitmix64 is a bijective mixer used to turn (iteration, stream, block) into generator
// seeds that are far apart.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// MaskBits is the counter-based generator behind Mask: element i's bit uses the 64-bit
// output splitmix64(key ⊕ i·φ), so any element can be computed independently.
type MaskBits struct {
	key       uint64
	threshold uint64 // bit is 1 when the 53-bit uniform is < P·2^53
	all       bool
}

func (m Mask) bits() MaskBits {
	key := splitmix64(m.Seed ^ splitmix64(uint64(m.Iter)^splitmix64(m.Stream+0x632be59bd9b4e019)))
	switch {
	case m.P >= 1:
		return MaskBits{key: key, all: true}
	case m.P <= 0:
		return MaskBits{key: key}
	}
	return MaskBits{key: key, threshold: uint64(m.P * (1 << 53))}
}

// Bits returns the mask's generator, for loops that test many elements.
func (m Mask) Bits() MaskBits { return m.bits() }

// On reports whether element i is updated.
func (b MaskBits) On(i int) bool { return b.on(i) }

func (b MaskBits) on(i int) bool {
	if b.all {
		return true
	}
	return splitmix64(b.key^(uint64(i)*0x9e3779b97f4a7c15))>>11 < b.threshold
}

// On reports whether element i is updated under the mask.
func (m Mask) On(i int) bool { return m.bits().on(i) }

// UpdateYR is the ADMM-R y-update: ŷ = P_A(x + λ/ρ), then y_i = ŷ_i where the mask is on and
// y_i is kept elsewhere. With P = 1 it is exactly UpdateYQ.
func UpdateYR[T Float](p Projector, y, x, lambda, scratch []T, rho float64, l Layout, m Mask) (changed int, err error) {
	if !(m.P > 0 && m.P <= 1) {
		return 0, fmt.Errorf("admmq: ADMM-R: mask probability %v, want 0 < p ≤ 1", m.P)
	}
	if err := checkLens("y-update", len(y), len(x), len(lambda), len(scratch)); err != nil {
		return 0, err
	}
	Shift(scratch, x, lambda, rho)
	if err := project(p, scratch, scratch, l); err != nil {
		return 0, fmt.Errorf("admmq: y-update: %w", err)
	}
	b := m.bits()
	for i, v := range scratch {
		if y[i] != v && b.on(i) {
			y[i] = v
			changed++
		}
	}
	return changed, nil
}

// SoftPrepare is the first half of the ADMM-S y-update for one tensor: z = x + λ/ρ and
// zt = P_A(z). It returns ‖zt − z‖² for this tensor; ADMM-S takes the norm over the whole
// variable, so sum it over all tensors before calling SoftFactor.
func SoftPrepare[T Float](p Projector, z, zt, x, lambda []T, rho float64, l Layout) (dist2 float64, err error) {
	if err := checkLens("soft y-update", len(z), len(zt), len(x), len(lambda)); err != nil {
		return 0, err
	}
	Shift(z, x, lambda, rho)
	if err := project(p, zt, z, l); err != nil {
		return 0, fmt.Errorf("admmq: soft y-update: %w", err)
	}
	for i, v := range z {
		d := float64(zt[i]) - float64(v)
		dist2 += d * d
	}
	return dist2, nil
}

// SoftFactor returns the step s ∈ [0, 1] of Alg. 4: y = z + s·(z̃ − z) with s = (β/ρ)/‖z̃ − z‖
// when β/ρ ≤ ‖z̃ − z‖, and s = 1 (y = z̃) otherwise. dist2 is ‖z̃ − z‖² over the whole variable.
func SoftFactor(dist2, beta, rho float64) float64 {
	b := beta / rho
	d := math.Sqrt(dist2)
	if b > d || d == 0 {
		return 1
	}
	return b / d
}

// SoftApply is the second half of the ADMM-S y-update: y = z + s·(zt − z), and y = zt exactly
// when s ≥ 1. It returns how many elements of y changed.
func SoftApply[T Float](y, z, zt []T, s float64) (changed int) {
	if s >= 1 {
		return copyCount(y, zt)
	}
	for i, v := range z {
		n := T(float64(v) + s*(float64(zt[i])-float64(v)))
		if y[i] != n {
			y[i] = n
			changed++
		}
	}
	return changed
}

// UpdateDual is the multiplier update λ += ρ(x − y). It returns ‖x − y‖².
func UpdateDual[T Float](lambda, x, y []T, rho float64) (resid2 float64) {
	for i := range lambda {
		d := float64(x[i]) - float64(y[i])
		lambda[i] = T(float64(lambda[i]) + rho*d)
		resid2 += d * d
	}
	return resid2
}

// AddPenaltyGrad adds the gradient of the ADMM penalty, λ + ρ(x − y), to grad in place, so
// that grad becomes ∇ₓL(x, y, λ) when it held ∇f(x).
func AddPenaltyGrad[T Float](grad, x, y, lambda []T, rho float64) {
	for i := range grad {
		grad[i] = T(float64(grad[i]) + float64(lambda[i]) + rho*(float64(x[i])-float64(y[i])))
	}
}

// Penalty returns ⟨λ, x − y⟩ + ρ/2‖x − y‖², so that L(x, y, λ) = f(x) + Penalty.
func Penalty[T Float](x, y, lambda []T, rho float64) float64 {
	var lin, sq float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		lin += float64(lambda[i]) * d
		sq += d * d
	}
	return lin + rho/2*sq
}

// Schedule is the penalty parameter: ρ_r = Rho0 · Growth^⌊r/Every⌋, capped at Max when Max > 0.
// Growth ≤ 1 or Every ≤ 0 keeps ρ constant (the paper's analysis); growth is the "scheduling"
// the paper mentions for practice.
type Schedule struct {
	Rho0   float64 `json:"rho0"`
	Growth float64 `json:"growth,omitempty"`
	Every  int     `json:"every,omitempty"`
	Max    float64 `json:"max,omitempty"`
}

// Rho returns ρ at iteration iter (0-based).
func (s Schedule) Rho(iter int) float64 {
	r := s.Rho0
	if s.Growth > 1 && s.Every > 0 && iter > 0 {
		r *= math.Pow(s.Growth, float64(iter/s.Every))
	}
	if s.Max > 0 && r > s.Max {
		r = s.Max
	}
	return r
}

// Validate reports a schedule that cannot be used.
func (s Schedule) Validate() error {
	if !(s.Rho0 > 0) || math.IsInf(s.Rho0, 0) {
		return fmt.Errorf("admmq: rho0 = %v, want a finite ρ > 0", s.Rho0)
	}
	if s.Growth < 0 || s.Every < 0 || s.Max < 0 {
		return fmt.Errorf("admmq: schedule %+v has a negative field", s)
	}
	return nil
}

// Stats is the record of one iteration of a run.
type Stats struct {
	Iter int     `json:"iter"` // iteration number r+1 whose end state this describes
	Rho  float64 `json:"rho"`
	// FY is f(y); for ADMM-S, whose y is not in A, also see FYProj.
	FY float64 `json:"f_y"`
	// FYProj is f(P_A(y)), the objective of the feasible point the iterate stands for.
	FYProj float64 `json:"f_y_proj"`
	// Lagrangian is L(x, y, λ) = f(x) + ⟨λ, x − y⟩ + ρ/2‖x − y‖², plus β·dist(y, A) for ADMM-S
	// (f(x) for PGD and GD+Proj).
	Lagrangian float64 `json:"lagrangian"`
	// Residual is ‖x − y‖.
	Residual float64 `json:"residual"`
	// Changed is the fraction of the elements of y that changed in this iteration.
	Changed float64 `json:"changed"`
	// InnerSteps is the number of gradient steps of the I-ADMM-Q x-update.
	InnerSteps int `json:"inner_steps,omitempty"`
}
