package admmq

import (
	"fmt"

	"gonum.org/v1/gonum/mat"
)

// Quadratic is f(x) = ½xᵀQx + bᵀx with Q symmetric positive semi-definite. It implements
// Problem, AugmentedMinimizer (one Cholesky factor of Q + ρI, kept while ρ is unchanged)
// and Lipschitzer (L_f = λ_max(Q)). A Quadratic is not safe for concurrent use.
type Quadratic struct {
	q    *mat.SymDense
	b    []float64
	lmax float64
	lmin float64

	rho  float64
	chol mat.Cholesky
	rhs  *mat.VecDense
	sol  *mat.VecDense
	tmp  *mat.VecDense
}

// NewQuadratic returns the quadratic with matrix q (d×d, row-major, symmetric) and vector b.
func NewQuadratic(q []float64, b []float64) (*Quadratic, error) {
	d := len(b)
	if len(q) != d*d {
		return nil, fmt.Errorf("admmq: quadratic: Q has %d entries, want %d×%d", len(q), d, d)
	}
	for i := 0; i < d; i++ {
		for j := 0; j < i; j++ {
			if q[i*d+j] != q[j*d+i] {
				return nil, fmt.Errorf("admmq: quadratic: Q is not symmetric at (%d,%d)", i, j)
			}
		}
	}
	s := mat.NewSymDense(d, append([]float64(nil), q...))
	var eig mat.EigenSym
	if !eig.Factorize(s, false) {
		return nil, fmt.Errorf("admmq: quadratic: eigen-decomposition of Q failed")
	}
	vals := eig.Values(nil)
	if vals[0] < -1e-9*max(1, vals[d-1]) {
		return nil, fmt.Errorf("admmq: quadratic: Q is not positive semi-definite (λ_min = %g)", vals[0])
	}
	return &Quadratic{q: s, b: append([]float64(nil), b...), lmin: vals[0], lmax: vals[d-1],
		rhs: mat.NewVecDense(d, nil), sol: mat.NewVecDense(d, nil), tmp: mat.NewVecDense(d, nil)}, nil
}

// Dim implements Problem.
func (f *Quadratic) Dim() int { return len(f.b) }

// Value implements Problem.
func (f *Quadratic) Value(x []float64) float64 {
	xv := mat.NewVecDense(len(x), x)
	f.tmp.MulVec(f.q, xv)
	return 0.5*mat.Dot(xv, f.tmp) + mat.Dot(mat.NewVecDense(len(f.b), f.b), xv)
}

// Grad implements Problem.
func (f *Quadratic) Grad(dst, x []float64) {
	f.tmp.MulVec(f.q, mat.NewVecDense(len(x), x))
	for i := range dst {
		dst[i] = f.tmp.AtVec(i) + f.b[i]
	}
}

// Lipschitz implements Lipschitzer: λ_max(Q).
func (f *Quadratic) Lipschitz() float64 { return f.lmax }

// MinEigen returns λ_min(Q).
func (f *Quadratic) MinEigen() float64 { return f.lmin }

// MinimizeAugmented implements AugmentedMinimizer: x = (Q + ρI)⁻¹(ρy − b − λ).
func (f *Quadratic) MinimizeAugmented(x, y, lambda []float64, rho float64) error {
	d := len(f.b)
	if rho != f.rho {
		a := mat.NewSymDense(d, nil)
		a.CopySym(f.q)
		for i := 0; i < d; i++ {
			a.SetSym(i, i, a.At(i, i)+rho)
		}
		if !f.chol.Factorize(a) {
			return fmt.Errorf("admmq: quadratic: Q + ρI is not positive definite (ρ = %g)", rho)
		}
		f.rho = rho
	}
	for i := 0; i < d; i++ {
		f.rhs.SetVec(i, rho*y[i]-f.b[i]-lambda[i])
	}
	if err := f.chol.SolveVecTo(f.sol, f.rhs); err != nil {
		return fmt.Errorf("admmq: quadratic x-update: %w", err)
	}
	for i := range x {
		x[i] = f.sol.AtVec(i)
	}
	return nil
}
