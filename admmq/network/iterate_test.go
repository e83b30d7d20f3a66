package network

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// newRunWith is newRun on grid with cfg adjusted by mod.
func newRunWith(t *testing.T, grid Grid, mod func(*Config)) (*Run, *engine.Graph, *onnxio.Model) {
	t.Helper()
	m, g := load(t, mlpPath)
	ts, err := Targets(m, grid, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if grid == Binary {
		if _, err := Precondition(g, ts); err != nil {
			t.Fatal(err)
		}
	}
	d := openCalib(t, 256)
	cfg := Config{
		Method: admmq.IADMMQ, Rho: admmq.Schedule{Rho0: 1e-3, Growth: 2, Every: 1},
		Iters: 4, InnerEpochs: 1, Schedule: train.Constant{LR: 1e-2}, Seed: 3, StatSamples: 64, Workers: 1,
	}
	mod(&cfg)
	r, err := New(m, g, ts, cfg, dataOf(t, d, d, 64, 3))
	if err != nil {
		t.Fatal(err)
	}
	return r, g, m
}

func sameParams(t *testing.T, g, g2 *engine.Graph) {
	t.Helper()
	for _, p := range g.Params() {
		q := g2.Param(p.Name)
		for i, v := range p.Value.F {
			if math.Float32bits(v) != math.Float32bits(q.Value.F[i]) {
				t.Fatalf("%s[%d]: %v and %v", p.Name, i, v, q.Value.F[i])
			}
		}
	}
}

// TestBestIterate: under IterateBest the run exports the iteration with the highest
// held-out accuracy (the earliest on ties), flags it alone in the history, and Finish
// leaves every parameter bit for bit as a run stopped after that iteration does.
func TestBestIterate(t *testing.T) {
	ctx := context.Background()
	for _, grid := range []Grid{Binary, BinaryChannel} {
		t.Run(string(grid), func(t *testing.T) {
			long, g, m := newRunWith(t, grid, func(c *Config) { c.Export = IterateBest; c.Rho.Rho0 = 1e-2 })
			if err := long.Run(ctx); err != nil {
				t.Fatal(err)
			}
			want, score := 0, -1.0
			for _, h := range long.History() {
				if h.Accuracy > score {
					want, score = h.Iter, h.Accuracy
				}
			}
			for _, h := range long.History() {
				if h.Best != (h.Iter == want) {
					t.Errorf("iteration %d: Best = %v, want the flag on %d alone", h.Iter, h.Best, want)
				}
				t.Logf("iter %d acc %.4f flipped %.4f", h.Iter, h.Accuracy, h.Flipped)
			}
			if got := long.Exported(); got != want {
				t.Fatalf("Exported() = %d, want the argmax %d", got, want)
			}
			if _, err := long.Finish(ctx, m, grid, true); err != nil {
				t.Fatal(err)
			}
			short, g2, m2 := newRunWith(t, grid, func(c *Config) { c.Iters = want; c.Rho.Rho0 = 1e-2 })
			if err := short.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := short.Finish(ctx, m2, grid, true); err != nil {
				t.Fatal(err)
			}
			sameParams(t, g, g2)
		})
	}
}

// TestBestIterateResume: a run under IterateBest resumed from each of its checkpoints
// writes the same final checkpoint (best iterate included) and exports the same weights.
func TestBestIterateResume(t *testing.T) {
	resumeAll(t, func(c *Config) { c.Export = IterateBest })
}

// TestRhoStateResume: with scale-free ρ, residual balancing and the best iterate, every
// resumed run ends with the uninterrupted run's checkpoint (ρ factor included) and
// weights; balancing did change ρ.
func TestRhoStateResume(t *testing.T) {
	h := resumeAll(t, func(c *Config) {
		c.Export, c.ScaleFree, c.Balance = IterateBest, true, &admmq.Balancing{}
		c.Rho = admmq.Schedule{Rho0: 1}
	})
	moved := false
	for _, s := range h {
		moved = moved || s.Rho != 1
		t.Logf("iter %d ρ %g primal %g dual %g flipped %g", s.Iter, s.Rho, s.Residual, s.DualResidual, s.Flipped)
	}
	if !moved {
		t.Error("balancing left ρ at 1 in every iteration")
	}
}

func resumeAll(t *testing.T, mod func(*Config)) []IterStats {
	t.Helper()
	ctx := context.Background()
	var cks [][]byte
	full, g, m := newRunWith(t, BinaryChannel, func(c *Config) {
		mod(c)
		c.Checkpoint = func(b []byte) error { cks = append(cks, b); return nil }
	})
	if err := full.Run(ctx); err != nil {
		t.Fatal(err)
	}
	last := cks[len(cks)-1]
	if _, err := full.Finish(ctx, m, BinaryChannel, true); err != nil {
		t.Fatal(err)
	}
	for k, ck := range cks[:len(cks)-1] {
		var final []byte
		resumed, g2, m2 := newRunWith(t, BinaryChannel, func(c *Config) {
			mod(c)
			c.Checkpoint = func(b []byte) error { final = b; return nil }
		})
		if err := resumed.Restore(ck); err != nil {
			t.Fatal(err)
		}
		if err := resumed.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(final, last) {
			t.Fatalf("resumed after iteration %d: final checkpoint differs", k+1)
		}
		if resumed.Exported() != full.Exported() {
			t.Fatalf("resumed exports iteration %d, uninterrupted %d", resumed.Exported(), full.Exported())
		}
		if _, err := resumed.Finish(ctx, m2, BinaryChannel, true); err != nil {
			t.Fatal(err)
		}
		sameParams(t, g, g2)
	}
	return full.History()
}

// TestScaleFreeRhoNetwork: scaling one weight tensor of the model by c (as a following
// normalisation could compensate) divides that tensor's ρ by c² under ScaleFree, so that
// ρ·mean(y⁰²) is the same, and leaves the other tensors' ρ as it was; on the ±1 grid
// every factor is exactly 1 (scale-free ρ is the absolute ρ there).
func TestScaleFreeRhoNetwork(t *testing.T) {
	build := func(c float32) *Run {
		m, g := load(t, mlpPath)
		ts, err := Targets(m, BinaryChannel, Selection{})
		if err != nil {
			t.Fatal(err)
		}
		w := g.Param(ts[0].Name).Value.F
		for i := range w {
			w[i] *= c
		}
		d := openCalib(t, 64)
		r, err := New(m, g, ts, Config{Method: admmq.IADMMQ, Rho: admmq.Schedule{Rho0: 1}, ScaleFree: true, Iters: 1, Workers: 1}, dataOf(t, d, nil, 64, 1))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base, scaled := build(1), build(8)
	for i := range base.rhoScale {
		want := base.rhoScale[i]
		if i == 0 {
			want /= 64
		}
		if math.Abs(scaled.rhoScale[i]/want-1) > 1e-5 {
			t.Errorf("tensor %d: ρ factor %g, want %g", i, scaled.rhoScale[i], want)
		}
	}
	bin, _, _ := newRunWith(t, Binary, func(c *Config) { c.ScaleFree = true })
	for i, k := range bin.rhoScale {
		if k != 1 {
			t.Errorf("±1 grid, tensor %d: ρ factor %v, want exactly 1", i, k)
		}
	}
}

// TestChangedSplit: on binary-channel, scaling every weight of y by 1.5 changes every
// element and every channel's scale by 50 % but flips no sign: Flipped is 0.
func TestChangedSplit(t *testing.T) {
	r, _, _ := newRunWith(t, BinaryChannel, func(*Config) {})
	for _, y := range r.y {
		for j := range y {
			y[j] *= 1.5
		}
	}
	var st IterStats
	if err := r.splitChanges(&st); err != nil {
		t.Fatal(err)
	}
	if st.Flipped != 0 || st.ScalesChanged != 1 || math.Abs(st.ScaleChange-0.5) > 1e-6 {
		t.Fatalf("flipped %v, scales changed %v (mean rel. %v): want 0, 1, 0.5", st.Flipped, st.ScalesChanged, st.ScaleChange)
	}
	// A negative control: flipping the first element of each tensor is a level change.
	n := 0
	for _, y := range r.y {
		y[0] = -y[0]
		n += len(y)
	}
	if err := r.splitChanges(&st); err != nil {
		t.Fatal(err)
	}
	if want := float64(len(r.y)) / float64(n); st.Flipped != want || st.ScalesChanged != 0 {
		t.Fatalf("after one flip per tensor: flipped %v (want %v), scales changed %v (want 0)", st.Flipped, want, st.ScalesChanged)
	}
}

// TestBestIterateRecalibrated: with ScoreRecalibrated every iteration's score is the
// validation accuracy of the model Finish exports after that iteration (BatchNorm
// re-estimated), so the chosen iterate's score is exactly what the exported graph
// measures on the validation data, and it is the best of them. Negative control: scored
// with the statistics as training left them, the same run's exported graph measures
// something else than its score, the mismatch this option removes.
func TestBestIterateRecalibrated(t *testing.T) {
	ctx := context.Background()
	exported := func(recal bool) (score, got float64, hist []IterStats) {
		r, g, m := newRunWith(t, Binary, func(c *Config) {
			c.Export, c.ScoreRecalibrated = IterateBest, recal
			c.Rho.Rho0 = 1e-4
		})
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		hist = r.History()
		score = hist[r.Exported()-1].Accuracy
		if _, err := r.Finish(ctx, m, Binary, true); err != nil {
			t.Fatal(err)
		}
		r.data.Eval.Reset()
		mt, err := train.Evaluate(ctx, g, r.data.Eval, train.EvalOptions{Engine: &engine.Context{Workers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return score, mt.Accuracy, hist
	}
	score, got, hist := exported(true)
	for _, h := range hist {
		t.Logf("recalibrated: iter %d acc %.4f flipped %.4f best %v", h.Iter, h.Accuracy, h.Flipped, h.Best)
		if h.Accuracy > score {
			t.Errorf("iteration %d scored %v above the exported iterate's %v", h.Iter, h.Accuracy, score)
		}
	}
	if got != score {
		t.Errorf("exported graph's validation accuracy %v, its recalibrated score %v: want equal", got, score)
	}
	score, got, hist = exported(false)
	for _, h := range hist {
		t.Logf("as trained: iter %d acc %.4f best %v", h.Iter, h.Accuracy, h.Best)
	}
	if got == score {
		t.Errorf("negative control: scored before re-estimation, the exported graph still measures its score %v", got)
	}
}

// TestGradientRho: under GradientRho tensor t's factor on ρ is ‖∇_t f(y⁰)‖/‖y⁰_t‖.
// The gradient's norm is checked without backpropagation: the central difference of the
// loss along the gradient's own direction is its norm (Cauchy–Schwarz's equality case),
// while along a random direction it is far smaller (the negative control).
func TestGradientRho(t *testing.T) {
	ctx := context.Background()
	// On the grid, as binarize starts: the gradient below is then the one at y⁰.
	r, _, _ := newRunWith(t, Binary, func(c *Config) { c.GradientRho, c.StartOnGrid = true, true })
	if err := r.measureGradientRho(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.lossGradient(ctx); err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		mt, err := train.Evaluate(ctx, r.g, &limit{b: r.data.Calib, n: r.stepsN}, train.EvalOptions{Loss: r.cfg.Loss, Engine: &engine.Context{Workers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return mt.Loss
	}
	// along returns the central difference of the loss along the unit vector of d.
	along := func(w []float32, d []float64, h float64) float64 {
		var n2 float64
		for _, v := range d {
			n2 += v * v
		}
		n := math.Sqrt(n2)
		orig := slices.Clone(w)
		for j := range w {
			w[j] = orig[j] + float32(h*d[j]/n)
		}
		lp := loss()
		for j := range w {
			w[j] = orig[j] - float32(h*d[j]/n)
		}
		lm := loss()
		copy(w, orig)
		return (lp - lm) / (2 * h)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, p := range r.params {
		var y2 float64
		grad := make([]float64, len(p.Grad.F))
		for j, v := range p.Grad.F {
			grad[j] = float64(v)
			y2 += float64(r.y[i][j]) * float64(r.y[i][j])
		}
		norm := r.rhoScale[i] * math.Sqrt(y2)
		fd := along(p.Value.F, grad, 1e-3*math.Sqrt(y2))
		t.Logf("%s: ρ factor %.4g, ‖g‖ %.4g, derivative along g %.4g", r.targets[i].Name, r.rhoScale[i], norm, fd)
		if !(math.Abs(fd-norm) <= 0.02*norm) {
			t.Errorf("%s: ρ factor × ‖y⁰‖ = %.6g, the loss's derivative along its gradient %.6g", r.targets[i].Name, norm, fd)
		}
		rnd := make([]float64, len(grad))
		for j := range rnd {
			rnd[j] = rng.NormFloat64()
		}
		if fr := along(p.Value.F, rnd, 0.05*math.Sqrt(y2)); !(math.Abs(fr) < 0.5*norm) {
			t.Errorf("negative control %s: along a random direction %.4g, not well below ‖g‖ %.4g", r.targets[i].Name, fr, norm)
		}
	}
}

// TestRemeasureRho: with RemeasureRho, the factors that an iteration's y-update uses are
// ‖∇_t f(y)‖/‖y_t‖ at that iteration's y, with the float parameters as trained so far:
// before each iteration the test measures them itself (measureGradientRho, checked
// against finite differences by TestGradientRho, at the current y) and compares after.
// The negative control: without RemeasureRho the factors stay those of y⁰, which differ
// from the re-measured ones once training has moved the network.
func TestRemeasureRho(t *testing.T) {
	ctx := context.Background()
	for _, remeasure := range []bool{true, false} {
		r, _, _ := newRunWith(t, Binary, func(c *Config) {
			c.GradientRho, c.RemeasureRho, c.StartOnGrid, c.Iters = true, remeasure, true, 3
		})
		if err := r.iteration(ctx); err != nil {
			t.Fatal(err)
		}
		first := r.RhoScales()
		for it := 1; it < 3; it++ {
			// What iteration it measures: the gradient at the current y, before its y-update.
			probe := *r
			probe.rhoScale = slices.Clone(r.rhoScale)
			if err := probe.measureGradientRho(ctx); err != nil {
				t.Fatal(err)
			}
			want := probe.rhoScale
			if err := r.iteration(ctx); err != nil {
				t.Fatal(err)
			}
			got := r.RhoScales()
			for i := range got {
				switch {
				case remeasure && got[i] != want[i]:
					t.Errorf("iteration %d, %s: factor %.6g, the gradient at its y gives %.6g", it+1, r.targets[i].Name, got[i], want[i])
				case !remeasure && got[i] != first[i]:
					t.Errorf("negative control, iteration %d, %s: factor %.6g moved from y⁰'s %.6g", it+1, r.targets[i].Name, got[i], first[i])
				case !remeasure && math.Abs(want[i]-first[i]) <= 1e-3*first[i]:
					t.Errorf("negative control, iteration %d, %s: the gradient at y gives %.6g, as at y⁰ (%.6g): the test would not tell", it+1, r.targets[i].Name, want[i], first[i])
				}
			}
		}
	}
}

// TestGradientRhoResume: GradientRho's factors, measured at y⁰, survive a checkpoint:
// every resumed run ends as the uninterrupted one.
func TestGradientRhoResume(t *testing.T) {
	resumeAll(t, func(c *Config) {
		c.Export, c.GradientRho, c.StartOnGrid, c.ScoreRecalibrated = IterateBest, true, true, true
		c.Rho = admmq.Schedule{Rho0: 1}
	})
}

// TestBestIterateStart: under ScoreStart, y⁰ is scored before the first iteration. With a
// learning rate that wrecks every fine-tuned iterate, iteration 0 is exported, and Finish
// leaves every parameter bit for bit as a run that never iterated. Scoring it changes
// nothing else: the history equals a run without ScoreStart's. At a sane learning rate a
// fine-tuned iterate beats the bare projection and is exported instead (the control that
// the start is not simply always chosen).
func TestBestIterateStart(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		lr    float64
		start bool // whether iteration 0 should win
	}{{50, true}, {1e-2, false}} {
		wreck := func(cfg *Config) {
			cfg.Export, cfg.Schedule, cfg.Iters, cfg.InnerEpochs = IterateBest, train.Constant{LR: c.lr}, 2, 3
			cfg.ScoreRecalibrated = true
		}
		withStart, g, m := newRunWith(t, Binary, func(cfg *Config) { wreck(cfg); cfg.ScoreStart = true })
		if err := withStart.Run(ctx); err != nil {
			t.Fatal(err)
		}
		without, _, _ := newRunWith(t, Binary, wreck)
		if err := without.Run(ctx); err != nil {
			t.Fatal(err)
		}
		st := withStart.Start()
		if st == nil {
			t.Fatal("Start() = nil under ScoreStart")
		}
		h, h2 := withStart.History(), without.History()
		for i := range h {
			a, b := h[i], h2[i]
			a.Best, b.Best, a.Seconds, b.Seconds, a.StatSeconds, b.StatSeconds, a.TrainSeconds, b.TrainSeconds = false, false, 0, 0, 0, 0, 0, 0
			if a != b {
				t.Fatalf("lr %v, iteration %d differs with ScoreStart:\n%+v\n%+v", c.lr, i+1, a, b)
			}
		}
		t.Logf("lr %v: start %.4f, iterations %.4f %.4f", c.lr, st.Accuracy, h[0].Accuracy, h[1].Accuracy)
		if got := withStart.Exported() == 0; got != c.start || st.Best != c.start {
			t.Fatalf("lr %v: Exported() = %d, Start().Best = %v; want iteration 0 exported: %v", c.lr, withStart.Exported(), st.Best, c.start)
		}
		if !c.start {
			continue
		}
		if _, err := withStart.Finish(ctx, m, Binary, true); err != nil {
			t.Fatal(err)
		}
		never, g2, m2 := newRunWith(t, Binary, wreck)
		if _, err := never.Finish(ctx, m2, Binary, true); err != nil {
			t.Fatal(err)
		}
		sameParams(t, g, g2)
	}
}

// TestProjectX: under ProjectX an ADMM run exports snap(P(x)) of its exported iterate,
// not its y, and the best iterate is P(x) of the iteration it names (a run stopped there
// exports the same weights bit for bit). Negative control: at the small ρ used, y and
// P(x) differ, so exporting y would fail the first check.
func TestProjectX(t *testing.T) {
	ctx := context.Background()
	for _, grid := range []Grid{Binary, BinaryChannel} {
		t.Run(string(grid), func(t *testing.T) {
			small := func(c *Config) { c.ProjectX = true; c.Rho = admmq.Schedule{Rho0: 1e-6, Growth: 1, Every: 1} }
			last, _, m := newRunWith(t, grid, small)
			if err := last.Run(ctx); err != nil {
				t.Fatal(err)
			}
			differ := 0
			var want [][]float32
			for i, p := range last.params {
				px := make([]float32, len(p.Value.F))
				if err := last.targets[i].Set.Project32(px, p.Value.F, last.targets[i].Layout); err != nil {
					t.Fatal(err)
				}
				want = append(want, snap(grid, px, last.targets[i]).Values)
				for j, v := range snap(grid, last.y[i], last.targets[i]).Values {
					if v != want[i][j] {
						differ++
					}
				}
			}
			if differ == 0 {
				t.Fatal("control: y equals P(x) everywhere, so the test cannot tell them apart")
			}
			t.Logf("%d weights of y differ from P(x)", differ)
			ws, err := last.Finish(ctx, m, grid, false)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range ws {
				for j, v := range w.Values {
					if math.Float32bits(v) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s[%d] = %v, want snap(P(x)) %v", w.Name, j, v, want[i][j])
					}
				}
			}

			long, g, m := newRunWith(t, grid, func(c *Config) { small(c); c.Export = IterateBest })
			if err := long.Run(ctx); err != nil {
				t.Fatal(err)
			}
			e := long.Exported()
			t.Logf("exported iteration %d of %d", e, long.cfg.Iters)
			if _, err := long.Finish(ctx, m, grid, true); err != nil {
				t.Fatal(err)
			}
			short, g2, m2 := newRunWith(t, grid, func(c *Config) { small(c); c.Iters = e })
			if err := short.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := short.Finish(ctx, m2, grid, true); err != nil {
				t.Fatal(err)
			}
			sameParams(t, g, g2)
		})
	}
}
