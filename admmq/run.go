package admmq

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Problem is a differentiable objective f over ℝ^d.
type Problem interface {
	Dim() int
	// Value returns f(x).
	Value(x []float64) float64
	// Grad writes ∇f(x) into dst.
	Grad(dst, x []float64)
}

// AugmentedMinimizer is implemented by problems whose ADMM x-update has an exact solution.
type AugmentedMinimizer interface {
	// MinimizeAugmented writes argmin_x f(x) + ⟨λ, x − y⟩ + ρ/2‖x − y‖² into x.
	MinimizeAugmented(x, y, lambda []float64, rho float64) error
}

// Lipschitzer is implemented by problems that know the Lipschitz constant L_f of ∇f.
type Lipschitzer interface {
	Lipschitz() float64
}

// Method names an algorithm.
type Method string

// The algorithms.
const (
	ADMMQ  Method = "admm-q"   // Alg. 1, exact x-update
	IADMMQ Method = "i-admm-q" // Alg. 2, inexact x-update by gradient descent
	ADMMR  Method = "admm-r"   // Alg. 3, Bernoulli(p) masks on the y-update
	ADMMS  Method = "admm-s"   // Alg. 4, soft projection
	PGD    Method = "pgd"      // x = P_A(x − ∇f(x)/ρ)
	GDProj Method = "gd-proj"  // x = x − ∇f(x)/ρ, y = P_A(x); the name admmq/network and the CLI use
	// STE is BinaryConnect's straight-through estimator: x = x − ∇f(P_A(x))/ρ, y = P_A(x).
	// The gradient is taken at the projection and applied to the latent x unchanged
	// (the derivative of P_A, zero almost everywhere, is replaced by the identity).
	STE Method = "ste"
)

// Options configures Run.
type Options struct {
	Method Method   `json:"method"`
	Rho    Schedule `json:"rho"`
	// Iters is the number of iterations Run performs.
	Iters int `json:"iters"`
	// Beta is β of ADMM-S.
	Beta float64 `json:"beta,omitempty"`
	// P is the mask probability of ADMM-R.
	P float64 `json:"p,omitempty"`
	// Seed drives the ADMM-R masks (together with the iteration number).
	Seed uint64 `json:"seed"`
	// Gamma is γ of I-ADMM-Q's stopping rule ‖∇ₓL‖ ≤ ργ·min{‖x−y‖, ‖x−x_prev‖}.
	Gamma float64 `json:"gamma,omitempty"`
	// InnerSteps is I-ADMM-Q's budget of gradient steps per x-update (default 1000).
	InnerSteps int `json:"inner_steps,omitempty"`
	// InnerStep is I-ADMM-Q's gradient step size; 0 means 1/(L_f + ρ) from Lipschitzer.
	InnerStep float64 `json:"inner_step,omitempty"`
	// Layout is passed to the projector.
	Layout Layout `json:"-"`
}

// State is everything a run carries between iterations. It is plain data: serialize it
// (encoding/json round-trips float64 exactly) to checkpoint, and pass it back to Run to
// resume bit-identically.
type State struct {
	X      []float64 `json:"x"`
	Y      []float64 `json:"y"`
	Lambda []float64 `json:"lambda"`
	// Iter is the number of iterations done so far.
	Iter int `json:"iter"`
}

// NewState returns the initial state x⁰ = x0, y⁰ = P_A(x0), λ⁰ = lambda0 (zero when nil).
// The paper starts from x⁰ = y⁰ ∈ A, which this gives when x0 is already in A.
func NewState(p Projector, x0, lambda0 []float64, l Layout) (*State, error) {
	st := &State{X: append([]float64(nil), x0...), Y: make([]float64, len(x0)), Lambda: make([]float64, len(x0))}
	if lambda0 != nil {
		if len(lambda0) != len(x0) {
			return nil, fmt.Errorf("admmq: initial λ has %d elements, x %d", len(lambda0), len(x0))
		}
		copy(st.Lambda, lambda0)
	}
	if err := p.Project64(st.Y, st.X, l); err != nil {
		return nil, fmt.Errorf("admmq: initial y: %w", err)
	}
	return st, nil
}

// ErrDiverged is returned when an iterate becomes NaN or infinite.
var ErrDiverged = errors.New("iterates diverged (NaN or Inf)")

// Run performs opt.Iters iterations of opt.Method from st, updating st in place, and calls
// record (if non-nil) after each iteration. It stops early with ctx's error when ctx is done.
func Run(ctx context.Context, prob Problem, proj Projector, st *State, opt Options, record func(Stats)) error {
	d := prob.Dim()
	if len(st.X) != d || len(st.Y) != d || len(st.Lambda) != d {
		return fmt.Errorf("admmq: state has sizes x %d, y %d, λ %d; problem dimension is %d", len(st.X), len(st.Y), len(st.Lambda), d)
	}
	if err := opt.Rho.Validate(); err != nil {
		return err
	}
	exact, hasExact := prob.(AugmentedMinimizer)
	switch opt.Method {
	case ADMMQ, ADMMR, ADMMS:
		if !hasExact {
			return fmt.Errorf("admmq: %s needs an exact x-update; the problem has none (use %s)", opt.Method, IADMMQ)
		}
	case IADMMQ:
		if opt.InnerStep == 0 {
			if _, ok := prob.(Lipschitzer); !ok {
				return fmt.Errorf("admmq: %s needs Options.InnerStep or a problem with Lipschitz()", IADMMQ)
			}
		}
		if opt.Gamma < 0 {
			return fmt.Errorf("admmq: γ = %v, want γ ≥ 0", opt.Gamma)
		}
	case PGD, GDProj, STE:
	default:
		return fmt.Errorf("admmq: unknown method %q", opt.Method)
	}
	if opt.Method == ADMMR && !(opt.P > 0 && opt.P <= 1) {
		return fmt.Errorf("admmq: ADMM-R needs 0 < p ≤ 1, got %v", opt.P)
	}
	if opt.Method == ADMMS && !(opt.Beta >= 0) {
		return fmt.Errorf("admmq: ADMM-S needs β ≥ 0, got %v", opt.Beta)
	}
	z := make([]float64, d)
	zt := make([]float64, d)
	g := make([]float64, d)
	xprev := make([]float64, d)
	l := opt.Layout
	for it := 0; it < opt.Iters; it++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := st.Iter
		rho := opt.Rho.Rho(r)
		var changed, inner int
		var err error
		switch opt.Method {
		case PGD:
			prob.Grad(g, st.X)
			for i := range z {
				z[i] = st.X[i] - g[i]/rho
			}
			if err = proj.Project64(st.X, z, l); err == nil {
				changed = copyCount(st.Y, st.X)
			}
		case GDProj:
			prob.Grad(g, st.X)
			for i := range g {
				st.X[i] -= g[i] / rho
			}
			if err = proj.Project64(zt, st.X, l); err == nil {
				changed = copyCount(st.Y, zt)
			}
		case STE:
			// Projected afresh rather than read from y, so that a state left by another
			// method (y ≠ P_A(x)) still gets the gradient at P_A(x).
			if err = proj.Project64(zt, st.X, l); err != nil {
				break
			}
			prob.Grad(g, zt)
			for i := range g {
				st.X[i] -= g[i] / rho
			}
			if err = proj.Project64(zt, st.X, l); err == nil {
				changed = copyCount(st.Y, zt)
			}
		default:
			switch opt.Method {
			case ADMMQ, IADMMQ:
				changed, err = UpdateYQ(proj, st.Y, st.X, st.Lambda, z, rho, l)
			case ADMMR:
				changed, err = UpdateYR(proj, st.Y, st.X, st.Lambda, z, rho, l, Mask{P: opt.P, Seed: opt.Seed, Iter: r})
			case ADMMS:
				var d2 float64
				if d2, err = SoftPrepare(proj, z, zt, st.X, st.Lambda, rho, l); err == nil {
					changed = SoftApply(st.Y, z, zt, SoftFactor(d2, opt.Beta, rho))
				}
			}
			if err != nil {
				return fmt.Errorf("admmq: iteration %d: %w", r+1, err)
			}
			copy(xprev, st.X)
			if opt.Method == IADMMQ {
				inner = inexactX(prob, st, xprev, g, rho, opt)
			} else if err = exact.MinimizeAugmented(st.X, st.Y, st.Lambda, rho); err != nil {
				return fmt.Errorf("admmq: iteration %d: x-update: %w", r+1, err)
			}
			UpdateDual(st.Lambda, st.X, st.Y, rho)
		}
		if err != nil {
			return fmt.Errorf("admmq: iteration %d: %w", r+1, err)
		}
		st.Iter++
		if !finite(st.X) || !finite(st.Y) || !finite(st.Lambda) {
			return fmt.Errorf("admmq: %s, iteration %d, ρ = %g: %w", opt.Method, st.Iter, rho, ErrDiverged)
		}
		if record != nil {
			s := Stats{Iter: st.Iter, Rho: rho, Changed: float64(changed) / float64(max(d, 1)), InnerSteps: inner}
			s.FY = prob.Value(st.Y)
			s.FYProj = s.FY
			if opt.Method == ADMMS {
				if err := proj.Project64(zt, st.Y, l); err != nil {
					return fmt.Errorf("admmq: iteration %d: %w", st.Iter, err)
				}
				s.FYProj = prob.Value(zt)
			}
			var res2 float64
			for i := range st.X {
				res2 += (st.X[i] - st.Y[i]) * (st.X[i] - st.Y[i])
			}
			s.Residual = math.Sqrt(res2)
			switch opt.Method {
			case PGD, GDProj, STE:
				s.Lagrangian = prob.Value(st.X)
			default:
				s.Lagrangian = prob.Value(st.X) + Penalty(st.X, st.Y, st.Lambda, rho)
			}
			if opt.Method == ADMMS { // ADMM-S's objective has the soft indicator β·dist(y, A)
				dist, err := proj.Dist64(st.Y, l)
				if err != nil {
					return fmt.Errorf("admmq: iteration %d: %w", st.Iter, err)
				}
				s.Lagrangian += opt.Beta * dist
			}
			record(s)
		}
	}
	return nil
}

// inexactX runs gradient descent on L(·, y, λ) from x = x_prev until the paper's checkable
// criterion ‖∇ₓL‖ ≤ ργ·min{‖x−y‖, ‖x−x_prev‖} holds or the step budget is spent. It returns
// the number of steps taken.
func inexactX(prob Problem, st *State, xprev, g []float64, rho float64, opt Options) int {
	eta := opt.InnerStep
	if eta == 0 {
		eta = 1 / (prob.(Lipschitzer).Lipschitz() + rho)
	}
	budget := opt.InnerSteps
	if budget <= 0 {
		budget = 1000
	}
	for k := 0; ; k++ {
		prob.Grad(g, st.X)
		AddPenaltyGrad(g, st.X, st.Y, st.Lambda, rho)
		var gn, dy, dx float64
		for i := range g {
			gn += g[i] * g[i]
			dy += (st.X[i] - st.Y[i]) * (st.X[i] - st.Y[i])
			dx += (st.X[i] - xprev[i]) * (st.X[i] - xprev[i])
		}
		if math.Sqrt(gn) <= rho*opt.Gamma*math.Sqrt(min(dy, dx)) || k == budget {
			return k
		}
		for i := range g {
			st.X[i] -= eta * g[i]
		}
	}
}

func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// IsStationary reports whether x is ρ-stationary (Def. 3.3): x = P_A(x − ∇f(x)/ρ), compared
// element by element with tolerance tol.
func IsStationary(prob Problem, proj Projector, x []float64, rho, tol float64, l Layout) (bool, error) {
	g := make([]float64, len(x))
	prob.Grad(g, x)
	for i := range g {
		g[i] = x[i] - g[i]/rho
	}
	if err := proj.Project64(g, g, l); err != nil {
		return false, err
	}
	for i := range g {
		if math.Abs(g[i]-x[i]) > tol {
			return false, nil
		}
	}
	return true, nil
}
