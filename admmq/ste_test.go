package admmq

import (
	"math/rand/v2"
	"testing"
)

// TestSTEStep: one STE iteration moves the latent x by the gradient taken at P_A(x), not
// at x, and leaves y = P_A(x_new); a state whose y is stale still gets the gradient at P_A(x).
func TestSTEStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 2))
	s := MustSet(Spec{Kind: KindBinary})
	f := randomQuadratic(t, rng, 8, 10)
	x0 := make([]float64, 8)
	for i := range x0 {
		x0[i] = rng.Float64()*2 - 1
	}
	st, err := NewState(s, x0, nil, Layout{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Y {
		st.Y[i] = 0 // stale y: the step must not read it
	}
	rho := 2 * f.Lipschitz()
	p := make([]float64, 8)
	if err := s.Project64(p, x0, Layout{}); err != nil {
		t.Fatal(err)
	}
	g := make([]float64, 8)
	f.Grad(g, p)
	runRecord(t, f, s, st, Options{Method: STE, Rho: Schedule{Rho0: rho}, Iters: 1})
	for i := range x0 {
		if want := x0[i] - g[i]/rho; st.X[i] != want {
			t.Fatalf("x[%d] = %v, want x − ∇f(P(x))/ρ = %v", i, st.X[i], want)
		}
	}
	if err := s.Project64(p, st.X, Layout{}); err != nil {
		t.Fatal(err)
	}
	for i := range p {
		if st.Y[i] != p[i] {
			t.Fatalf("y[%d] = %v, want P(x) = %v", i, st.Y[i], p[i])
		}
	}
}
