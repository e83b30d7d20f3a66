package admmq

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomQuadratic draws the paper's instance: Q = Q̃ᵀQ̃ + q̃q̃ᵀ, b = 20·N(0,1).
func randomQuadratic(t testing.TB, rng *rand.Rand, d int, sigma2 float64) *Quadratic {
	qt := make([]float64, d*d)
	for i := range qt {
		qt[i] = rng.NormFloat64()
	}
	qv := make([]float64, d)
	for i := range qv {
		qv[i] = math.Sqrt(sigma2) * rng.NormFloat64()
	}
	q := make([]float64, d*d)
	for i := 0; i < d; i++ {
		for j := 0; j <= i; j++ {
			var s float64
			for k := 0; k < d; k++ {
				s += qt[k*d+i] * qt[k*d+j]
			}
			s += qv[i] * qv[j]
			q[i*d+j], q[j*d+i] = s, s
		}
	}
	b := make([]float64, d)
	for i := range b {
		b[i] = 20 * rng.NormFloat64()
	}
	f, err := NewQuadratic(q, b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// paperStart returns x⁰ = y⁰ = P_A(10·N(0,1)) ∈ A and λ⁰ = −∇f(x⁰), the start under
// which Lemma 3.2 holds from the first iteration.
func paperStart(t testing.TB, rng *rand.Rand, f *Quadratic, s *Set) *State {
	return startAt(t, rng, f, s, 10, true)
}

// farStart returns x⁰ = y⁰ = P_A(100·N(0,1)), far from the minimizer, so that the
// iterates travel across many grid points and y changes on many iterations: near
// paperStart's x⁰ y almost never moves, and a lemma checked there is checked on steps
// where nothing happens. λ⁰ is −∇f(x⁰) when gradLambda is set (Lemma 3.2's start), else 0
// (allowed by Alg. 2, and what makes the first x-update of I-ADMM-Q non-trivial: with
// λ⁰ = −∇f(x⁰) and x⁰ = y¹ the gradient of L at x⁰ is zero and no inner step runs).
func farStart(t testing.TB, rng *rand.Rand, f *Quadratic, s *Set, gradLambda bool) *State {
	return startAt(t, rng, f, s, 100, gradLambda)
}

// startAt returns x⁰ = y⁰ = P_A(scale·N(0,1)) and λ⁰ = −∇f(x⁰) (gradLambda) or 0.
func startAt(t testing.TB, rng *rand.Rand, f *Quadratic, s *Set, scale float64, gradLambda bool) *State {
	d := f.Dim()
	x0 := make([]float64, d)
	for i := range x0 {
		x0[i] = scale * rng.NormFloat64()
	}
	if err := s.Project64(x0, x0, Layout{}); err != nil {
		t.Fatal(err)
	}
	lam := make([]float64, d)
	if gradLambda {
		f.Grad(lam, x0)
		for i := range lam {
			lam[i] = -lam[i]
		}
	}
	st, err := NewState(s, x0, lam, Layout{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func runRecord(t testing.TB, f Problem, s Projector, st *State, opt Options) []Stats {
	var out []Stats
	if err := Run(context.Background(), f, s, st, opt, func(x Stats) { out = append(out, x) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func tol(v float64) float64 { return 1e-9 * (1 + math.Abs(v)) }

// Lemma 3.1: for ρ ≥ L_f, L(xʳ, yʳ, λʳ) ≥ f(yʳ) for all r ≥ 1.
func TestLemma31LagrangianAboveObjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		for _, mult := range []float64{1, 1.5, 4} {
			st := paperStart(t, rng, f, s)
			st.Lambda = make([]float64, f.Dim()) // the lemma needs no special λ⁰
			stats := runRecord(t, f, s, st, Options{Method: ADMMQ, Rho: Schedule{Rho0: mult * f.Lipschitz()}, Iters: 300})
			for _, x := range stats {
				if x.Lagrangian < x.FY-tol(x.FY) {
					t.Fatalf("instance %d, ρ = %g·L_f, iteration %d: L = %v < f(y) = %v", inst, mult, x.Iter, x.Lagrangian, x.FY)
				}
			}
		}
	}
}

// Lemma 3.2: for convex f and ρ > √2·L_f, L(x^{r+1},y^{r+1},λ^{r+1}) − L(xʳ,yʳ,λʳ) ≤
// (L_f²/ρ − ρ/2)‖x^{r+1} − xʳ‖² ≤ 0; and ADMM-Q never ends worse than f(y⁰). The start is
// far from the minimizer so that the bound is checked on iterations where y changes —
// the case the lemma is about (its proof bounds the jump of the projection) — and the test
// requires that it was.
func TestLemma32MonotoneAndNeverWorse(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	flips, runsWithFlips, runs := 0, 0, 0
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		lf := f.Lipschitz()
		for _, mult := range []float64{1.42, 2, 5} {
			rho := mult * lf
			st := farStart(t, rng, f, s, true)
			fy0 := f.Value(st.Y)
			prevL := fy0 // L(x⁰, y⁰, λ⁰) = f(y⁰) since x⁰ = y⁰
			opt := Options{Method: ADMMQ, Rho: Schedule{Rho0: rho}, Iters: 1}
			runFlips := 0
			for r := 0; r < 200; r++ {
				xPrev := slices.Clone(st.X)
				yPrev := slices.Clone(st.Y)
				x := runRecord(t, f, s, st, opt)[0]
				if !slices.Equal(yPrev, st.Y) {
					runFlips++
				}
				var dx2 float64
				for i := range xPrev {
					dx2 += (st.X[i] - xPrev[i]) * (st.X[i] - xPrev[i])
				}
				bound := (lf*lf/rho - rho/2) * dx2
				if x.Lagrangian-prevL > bound+tol(prevL) {
					t.Fatalf("instance %d, ρ = %g·L_f, iteration %d: ΔL = %v exceeds the bound %v", inst, mult, x.Iter, x.Lagrangian-prevL, bound)
				}
				if x.FY > fy0+tol(fy0) {
					t.Fatalf("instance %d, ρ = %g·L_f, iteration %d: f(y) = %v worse than f(y⁰) = %v", inst, mult, x.Iter, x.FY, fy0)
				}
				prevL = x.Lagrangian
			}
			runs++
			flips += runFlips
			if runFlips > 0 {
				runsWithFlips++
			}
		}
	}
	// Measured with these seeds: 168 iterations changed y, in 25 of the 30 runs.
	if flips < 100 || runsWithFlips < 20 {
		t.Fatalf("y changed on %d iterations in %d of %d runs: the bound was hardly checked where y moves", flips, runsWithFlips, runs)
	}
}

// Below √2·L_f the lemma gives no guarantee, and indeed L increases on some iteration.
func TestLemma32FailsForSmallRho(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 20; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		st := paperStart(t, rng, f, s)
		prev := f.Value(st.Y)
		for _, x := range runRecord(t, f, s, st, Options{Method: ADMMQ, Rho: Schedule{Rho0: 0.05 * f.Lipschitz()}, Iters: 200}) {
			if x.Lagrangian > prev+tol(prev) {
				t.Logf("instance %d: L rises from %v to %v at iteration %d with ρ = 0.05·L_f", inst, prev, x.Lagrangian, x.Iter)
				return
			}
			prev = x.Lagrangian
		}
	}
	t.Fatal("no instance showed a non-monotone augmented Lagrangian with ρ = 0.05·L_f")
}

// Theorem 3.4: limit points are ρ-stationary, x̄ = P_A(x̄ − ∇f(x̄)/ρ).
func TestLimitPointsAreRhoStationary(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		rho := 2 * f.Lipschitz()
		st := paperStart(t, rng, f, s)
		stats := runRecord(t, f, s, st, Options{Method: ADMMQ, Rho: Schedule{Rho0: rho}, Iters: 3000})
		last := stats[len(stats)-1]
		if last.Residual > 1e-6 || last.Changed != 0 {
			t.Fatalf("instance %d: not converged after 3000 iterations: ‖x−y‖ = %v", inst, last.Residual)
		}
		// x̄ = ȳ ∈ A in the limit; test the definition at ȳ exactly and at x̄ within tolerance.
		for _, pt := range [][]float64{st.Y, st.X} {
			ok, err := IsStationary(f, s, pt, rho, 1e-9, Layout{})
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("instance %d: limit point %v is not ρ-stationary", inst, pt)
			}
		}
	}
}

// ADMM-S coincides with ADMM-Q iterate by iterate when β/ρ ≥ sup‖z − P_A(z)‖ (= v√d/2 for vℤ^d).
func TestADMMSEqualsADMMQForLargeBeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 5; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		rho := 0.3 * f.Lipschitz() // deliberately outside the monotone regime
		a := paperStart(t, rng, f, s)
		b := &State{X: slices.Clone(a.X), Y: slices.Clone(a.Y), Lambda: slices.Clone(a.Lambda)}
		qa := runRecord(t, f, s, a, Options{Method: ADMMQ, Rho: Schedule{Rho0: rho}, Iters: 500})
		qs := runRecord(t, f, s, b, Options{Method: ADMMS, Rho: Schedule{Rho0: rho}, Iters: 500, Beta: rho * s.SupDist(8)})
		for r := range qa {
			if qa[r].FY != qs[r].FY || qa[r].Lagrangian != qs[r].Lagrangian {
				t.Fatalf("instance %d iteration %d: ADMM-Q %+v, ADMM-S %+v", inst, r+1, qa[r], qs[r])
			}
		}
		if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) || !slices.Equal(a.Lambda, b.Lambda) {
			t.Fatalf("instance %d: final states differ", inst)
		}
		// With a small β the trajectories must part (otherwise the test above proves nothing).
		c := &State{X: slices.Clone(b.X), Y: slices.Clone(b.Y), Lambda: slices.Clone(b.Lambda)}
		d := &State{X: slices.Clone(b.X), Y: slices.Clone(b.Y), Lambda: slices.Clone(b.Lambda)}
		runRecord(t, f, s, c, Options{Method: ADMMQ, Rho: Schedule{Rho0: rho}, Iters: 50})
		runRecord(t, f, s, d, Options{Method: ADMMS, Rho: Schedule{Rho0: rho}, Iters: 50, Beta: rho * 0.1})
		if slices.Equal(c.X, d.X) {
			t.Fatalf("instance %d: ADMM-S with small β equals ADMM-Q", inst)
		}
	}
}

// ADMM-R with p = 1 is ADMM-Q; with p < 1 it differs and depends only on (seed, iteration).
func TestADMMRWithP1IsADMMQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	f := randomQuadratic(t, rng, 16, 30)
	rho := 0.5 * f.Lipschitz()
	a := paperStart(t, rng, f, s)
	b := &State{X: slices.Clone(a.X), Y: slices.Clone(a.Y), Lambda: slices.Clone(a.Lambda)}
	c := &State{X: slices.Clone(a.X), Y: slices.Clone(a.Y), Lambda: slices.Clone(a.Lambda)}
	runRecord(t, f, s, a, Options{Method: ADMMQ, Rho: Schedule{Rho0: rho}, Iters: 400})
	runRecord(t, f, s, b, Options{Method: ADMMR, Rho: Schedule{Rho0: rho}, Iters: 400, P: 1, Seed: 9})
	runRecord(t, f, s, c, Options{Method: ADMMR, Rho: Schedule{Rho0: rho}, Iters: 400, P: 0.5, Seed: 9})
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) || !slices.Equal(a.Lambda, b.Lambda) {
		t.Fatal("ADMM-R with p = 1 differs from ADMM-Q")
	}
	if slices.Equal(a.X, c.X) {
		t.Fatal("ADMM-R with p = 0.5 equals ADMM-Q")
	}
}

func TestMaskFrequency(t *testing.T) {
	for _, p := range []float64{0.01, 0.3, 0.9} {
		m := Mask{P: p, Seed: 1, Iter: 7, Stream: 2}
		const n = 200000
		on := 0
		for i := 0; i < n; i++ {
			if m.On(i) {
				on++
			}
		}
		// 5 standard deviations of a Binomial(n, p).
		if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(on)-n*p) > 5*sd {
			t.Errorf("p = %v: %d of %d bits on", p, on, n)
		}
	}
	a, b := Mask{P: 0.5, Seed: 1, Iter: 1}, Mask{P: 0.5, Seed: 1, Iter: 2}
	same := 0
	for i := 0; i < 1000; i++ {
		if a.On(i) == b.On(i) {
			same++
		}
	}
	if same > 600 || same < 400 {
		t.Errorf("masks of consecutive iterations agree on %d of 1000 bits", same)
	}
}

// Lemma E.1: PGD with ρ ≥ L_f decreases f monotonically; its limit is ρ-stationary.
func TestPGDMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 16, 30)
		rho := f.Lipschitz()
		st := paperStart(t, rng, f, s)
		prev := f.Value(st.Y)
		stats := runRecord(t, f, s, st, Options{Method: PGD, Rho: Schedule{Rho0: rho}, Iters: 2000})
		for _, x := range stats {
			if x.FY > prev+tol(prev) {
				t.Fatalf("instance %d iteration %d: f rose from %v to %v", inst, x.Iter, prev, x.FY)
			}
			prev = x.FY
		}
		if ok, _ := IsStationary(f, s, st.X, rho, 0, Layout{}); !ok {
			t.Fatalf("instance %d: PGD limit is not ρ-stationary", inst)
		}
	}
}

// iadmmqConstants returns α and β of the I-ADMM-Q decrease lemma (appendix, Lemma
// "decrease_inexact"), with σ(ρ) = ρ − μ and μ = max(0, −λ_min(∇²f)):
// L^{r+1} − L^r ≤ α‖x^{r+1} − x^r‖² + β‖x^r − x^{r−1}‖², so that with α + β < 0 the
// potential Φ^r = L^r + β‖x^r − x^{r−1}‖² never increases.
func iadmmqConstants(f *Quadratic, rho, gamma float64) (alpha, beta float64) {
	lf := f.Lipschitz()
	sigma := rho - math.Max(0, -f.MinEigen())
	beta = 4 * (rho + lf) * (rho + lf) * gamma * gamma / rho
	alpha = 2*lf*lf/rho + beta + gamma*gamma*(rho+lf)/2 - (1-gamma)*(1-gamma)*sigma/2
	return alpha, beta
}

// iadmmqRun runs I-ADMM-Q from a far start with λ⁰ = 0 (so that every x-update, the first
// included, has work to do) and reports, per iteration r ≥ 1, whether the x-update met
// the checkable stopping rule, the change of L, ‖x^{r+1} − x^r‖², and whether y changed.
type iadmmqStep struct {
	met, flip    bool
	l            float64 // L(x^{r+1}, y^{r+1}, λ^{r+1}), which sets the rounding tolerance
	dL, d, dPrev float64
	inner        int
}

func iadmmqRun(t *testing.T, f *Quadratic, s *Set, st *State, rho, gamma float64, iters int) []iadmmqStep {
	opt := Options{Method: IADMMQ, Rho: Schedule{Rho0: rho}, Iters: 1, Gamma: gamma, InnerSteps: 5000}
	prevL := f.Value(st.Y) // L(x⁰, y⁰, λ⁰) with x⁰ = y⁰
	var dPrev float64
	var out []iadmmqStep
	y := make([]float64, f.Dim())
	g := make([]float64, f.Dim())
	for r := 0; r < iters; r++ {
		xPrev, yPrev, lamPrev := slices.Clone(st.X), slices.Clone(st.Y), slices.Clone(st.Lambda)
		x := runRecord(t, f, s, st, opt)[0]
		var d float64
		for i := range xPrev {
			d += (st.X[i] - xPrev[i]) * (st.X[i] - xPrev[i])
		}
		met := x.InnerSteps < opt.InnerSteps
		if met {
			// The rule itself, recomputed here: ‖∇ₓL(x^{r+1}, y^{r+1}, λʳ)‖ ≤ ργ·min{‖x−y‖, ‖x−x_prev‖}.
			copy(y, st.Y)
			f.Grad(g, st.X)
			AddPenaltyGrad(g, st.X, y, lamPrev, rho)
			var gn, dy float64
			for i := range g {
				gn += g[i] * g[i]
				dy += (st.X[i] - y[i]) * (st.X[i] - y[i])
			}
			if math.Sqrt(gn) > rho*gamma*math.Sqrt(min(d, dy))*(1+1e-12) {
				t.Fatalf("iteration %d: the x-update stopped with ‖∇ₓL‖ = %v above ργ·min = %v", x.Iter, math.Sqrt(gn), rho*gamma*math.Sqrt(min(d, dy)))
			}
		}
		out = append(out, iadmmqStep{met: met, flip: !slices.Equal(yPrev, st.Y), l: x.Lagrangian, dL: x.Lagrangian - prevL, d: d, dPrev: dPrev, inner: x.InnerSteps})
		prevL, dPrev = x.Lagrangian, d
	}
	return out
}

// I-ADMM-Q (Alg. 2) at the paper's sufficient ρ = 6·L_f, γ = 0.1 (α + β < 0): every inner
// solve that stops meets the checkable rule; wherever it and the previous one met it, the
// decrease lemma's bound holds, so the potential Φ never increases; the limit is
// ρ-stationary. The runs must exercise the lemma: real inner loops, and iterations where y
// changes among those checked.
func TestInexactADMMQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	checked, checkedFlips, innerSteps := 0, 0, 0
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		rho, gamma := 6*f.Lipschitz(), 0.1
		alpha, beta := iadmmqConstants(f, rho, gamma)
		if alpha+beta >= 0 {
			t.Fatalf("instance %d: α + β = %v at ρ = 6·L_f, γ = 0.1; the paper says it is negative", inst, alpha+beta)
		}
		st := farStart(t, rng, f, s, false)
		steps := iadmmqRun(t, f, s, st, rho, gamma, 300)
		if steps[0].inner == 0 {
			t.Fatalf("instance %d: the first x-update took no inner step", inst)
		}
		for r := 1; r < len(steps); r++ {
			c := steps[r]
			if c.met {
				innerSteps += c.inner
			}
			if c.dL+beta*(c.d-c.dPrev) > tol(c.l) {
				t.Fatalf("instance %d, iteration %d: Φ rises by %v", inst, r+1, c.dL+beta*(c.d-c.dPrev))
			}
			if !c.met || !steps[r-1].met {
				continue // the lemma assumes γ-approximate x-updates
			}
			checked++
			if c.flip {
				checkedFlips++
			}
			if bound := alpha*c.d + beta*c.dPrev; c.dL > bound+tol(c.l) {
				t.Fatalf("instance %d, iteration %d: ΔL = %v exceeds α‖Δx‖² + β‖Δx_prev‖² = %v", inst, r+1, c.dL, bound)
			}
		}
		if ok, _ := IsStationary(f, s, st.Y, rho, 0, Layout{}); !ok {
			t.Fatalf("instance %d: I-ADMM-Q limit %v is not ρ-stationary", inst, st.Y)
		}
	}
	// Measured with these seeds: 185 checked iterations, 33 of them with y changing.
	if checked < 100 || checkedFlips < 15 || innerSteps < checked {
		t.Fatalf("the lemma was checked on %d iterations (%d with y changing, %d inner steps): too few to exercise it", checked, checkedFlips, innerSteps)
	}
}

// Negative control of TestInexactADMMQ: with ρ = 0.05·L_f and γ = 0.9, α + β > 0 and the
// lemma promises nothing; the potential Φ then does rise, so the bound checked above is not
// one that every run satisfies.
func TestInexactADMMQSmallRhoNoDecrease(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 10; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		rho, gamma := 0.05*f.Lipschitz(), 0.9
		alpha, beta := iadmmqConstants(f, rho, gamma)
		if alpha+beta <= 0 {
			t.Fatalf("instance %d: α + β = %v; the control needs parameters outside the lemma", inst, alpha+beta)
		}
		st := farStart(t, rng, f, s, false)
		for r, c := range iadmmqRun(t, f, s, st, rho, gamma, 100) {
			if r > 0 && c.dL+beta*(c.d-c.dPrev) > tol(c.l) {
				t.Logf("instance %d, iteration %d: Φ rises by %v with ρ = 0.05·L_f, γ = 0.9", inst, r+1, c.dL+beta*(c.d-c.dPrev))
				return
			}
		}
	}
	t.Fatal("Φ never rose with ρ = 0.05·L_f, γ = 0.9: the decrease test could not tell valid parameters from invalid ones")
}

// A run interrupted, serialized, and resumed ends bit-identical to an uninterrupted one,
// including ADMM-R's masks and a growing ρ.
func TestResumeIsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	f := randomQuadratic(t, rng, 16, 30)
	for _, m := range []Method{ADMMR, ADMMS, IADMMQ} {
		opt := Options{Method: m, Rho: Schedule{Rho0: 0.01 * f.Lipschitz(), Growth: 1.5, Every: 20}, P: 0.3, Beta: 1, Seed: 42, Gamma: 0.5, InnerSteps: 50}
		a := paperStart(t, rng, f, s)
		buf, _ := json.Marshal(a)
		opt.Iters = 100
		runRecord(t, f, s, a, opt)
		var b State
		if err := json.Unmarshal(buf, &b); err != nil {
			t.Fatal(err)
		}
		opt.Iters = 37
		runRecord(t, f, s, &b, opt)
		buf, _ = json.Marshal(&b)
		var c State
		if err := json.Unmarshal(buf, &c); err != nil {
			t.Fatal(err)
		}
		opt.Iters = 63
		runRecord(t, f, s, &c, opt)
		if c.Iter != a.Iter || !slices.Equal(a.X, c.X) || !slices.Equal(a.Y, c.Y) || !slices.Equal(a.Lambda, c.Lambda) {
			t.Fatalf("%s: resumed run differs from the uninterrupted one", m)
		}
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Rho0: 2, Growth: 10, Every: 3, Max: 500}
	want := []float64{2, 2, 2, 20, 20, 20, 200, 200, 200, 500}
	for r, w := range want {
		if got := s.Rho(r); math.Abs(got-w) > 1e-12*w {
			t.Errorf("Rho(%d) = %v, want %v", r, got, w)
		}
	}
	if (Schedule{Rho0: 3}).Rho(1000) != 3 {
		t.Error("constant schedule changed")
	}
}

// The penalty pieces agree with finite differences of L and with the definition.
func TestPenaltyGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 1))
	n := 7
	x, y, lam := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i], lam[i] = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	}
	rho := 1.7
	g := make([]float64, n)
	AddPenaltyGrad(g, x, y, lam, rho)
	for i := range x {
		h := 1e-6
		xp, xm := slices.Clone(x), slices.Clone(x)
		xp[i] += h
		xm[i] -= h
		fd := (Penalty(xp, y, lam, rho) - Penalty(xm, y, lam, rho)) / (2 * h)
		if math.Abs(fd-g[i]) > 1e-6 {
			t.Fatalf("∂Penalty/∂x[%d]: finite difference %v, AddPenaltyGrad %v", i, fd, g[i])
		}
	}
	r2 := UpdateDual(lam, x, y, rho)
	var want float64
	for i := range x {
		want += (x[i] - y[i]) * (x[i] - y[i])
	}
	if math.Abs(r2-want) > 1e-12 {
		t.Fatalf("UpdateDual residual %v, want %v", r2, want)
	}
}

// Appendix D: for ADMM-S the augmented Lagrangian, soft indicator β·dist(y, A) included,
// also decreases monotonically for ρ > √2·L_f, and stays above f(y) for ρ ≥ L_f.
func TestADMMSLagrangianMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	s := MustSet(Spec{Kind: KindLattice, Step: 8})
	for inst := 0; inst < 5; inst++ {
		f := randomQuadratic(t, rng, 8, 30)
		rho := 2 * f.Lipschitz()
		for _, bp := range []float64{0.1, 1, 5} { // β/ρ, below sup‖z − P_A(z)‖ = 8·√8/2 ≈ 11.3
			st := paperStart(t, rng, f, s)
			prev := f.Value(st.Y)
			soft := 0
			for _, x := range runRecord(t, f, s, st, Options{Method: ADMMS, Rho: Schedule{Rho0: rho}, Iters: 300, Beta: bp * rho}) {
				if x.Lagrangian > prev+tol(prev) {
					t.Fatalf("instance %d, β/ρ = %g, iteration %d: L rose from %v to %v", inst, bp, x.Iter, prev, x.Lagrangian)
				}
				if x.Lagrangian < x.FY-tol(x.FY) {
					t.Fatalf("instance %d, β/ρ = %g, iteration %d: L = %v < f(y) = %v", inst, bp, x.Iter, x.Lagrangian, x.FY)
				}
				if x.FY != x.FYProj {
					soft++
				}
				prev = x.Lagrangian
			}
			if bp < 1 && soft == 0 {
				t.Fatalf("instance %d, β/ρ = %g: y was always in A, the soft step was never exercised", inst, bp)
			}
		}
	}
}
