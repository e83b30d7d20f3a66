package quadratic

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq"
)

func tinyConfig() Config {
	return Config{
		Pairs:     []Pair{{8, 4, 30}, {8, 8, 10}},
		Instances: 2, Starts: 3, SelectStarts: 4, Iters: 200, PGDIters: 300, Last: 50,
		RhoBars: []float64{1e-3, 1e-1, 1, 10},
		Betas:   []float64{1e-2, 1, 1e2, 1e4},
		Ps:      []float64{0.3, 0.9},
		TheoryC: []float64{1.5, 6},
		Seed:    7,
	}
}

// kernelChoices returns every arithmetic Run can pick on this machine.
func kernelChoices(t *testing.T) map[string]kernels {
	out := map[string]kernels{"go": {gemm: gemmFMA}}
	if haveSIMD() {
		out["avx512"] = kernels{simd: true, gemm: gemmFMA}
	} else {
		t.Log("AVX-512 kernels not tested: this CPU lacks AVX-512F or GODEBUG turned it off")
	}
	if haveAVX2() {
		out["avx2"] = kernels{gemm: gemmAVX2}
	} else {
		t.Log("AVX2 product not tested: this CPU lacks AVX2+FMA or GODEBUG turned it off")
	}
	return out
}

// The batched, fused iteration must compute what admmq.Run computes start by start with the
// package's step functions and an exact Cholesky x-update.
func TestBatchMatchesDriver(t *testing.T) {
	cfg := Config{Pairs: []Pair{{8, 8, 30}}, Starts: 4, Iters: 80, PGDIters: 80, Last: 50,
		RhoBars: []float64{0.05, 1}, Seed: 3}
	in, err := NewInstance(cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := admmq.NewQuadratic(in.Q, in.B)
	if err != nil {
		t.Fatal(err)
	}
	set := admmq.MustSet(admmq.Spec{Kind: admmq.KindLattice, Step: 8})
	for name, g := range kernelChoices(t) {
		for ri, rb := range cfg.RhoBars {
			cases := []struct {
				m    admmq.Method
				subs []float64
				rows []int // rows whose driver run uses the same mask stream
			}{
				{admmq.ADMMQ, []float64{0}, []int{0, 1, 2, 3}},
				{admmq.ADMMS, []float64{1e-3, 3}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
				{admmq.ADMMR, []float64{0.5}, []int{0}},
				{admmq.PGD, []float64{0}, []int{0, 1, 2, 3}},
				{admmq.GDProj, []float64{0}, []int{0, 1, 2, 3}},
			}
			for _, c := range cases {
				j := &job{method: c.m, rhoIdx: ri, subs: c.subs}
				if err := runJob(context.Background(), cfg, in, j, g); err != nil {
					t.Fatal(err)
				}
				for _, row := range c.rows {
					st, err := admmq.NewState(set, in.X0[row%cfg.Starts], nil, admmq.Layout{})
					if err != nil {
						t.Fatal(err)
					}
					opt := admmq.Options{Method: c.m, Rho: admmq.Schedule{Rho0: rb * in.LMax}, Iters: cfg.Iters,
						Seed: j.seed(cfg), P: c.subs[row/cfg.Starts], Beta: c.subs[row/cfg.Starts]}
					best := math.Inf(1)
					err = admmq.Run(context.Background(), f, set, st, opt, func(s admmq.Stats) {
						if s.Iter > cfg.Iters-cfg.Last {
							best = min(best, s.FYProj)
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					got := j.scores[row]
					if math.Abs(got-best) > 1e-9*(1+math.Abs(best)) {
						t.Errorf("%s %s ρ̄=%g row %d: batch score %v, admmq.Run %v", name, c.m, rb, row, got, best)
					}
					// The final states agree too, not only the (robust) best objective.
					d := in.Pair.D
					b := j.final
					mats := [][2][]float64{{b.X[row*d : (row+1)*d], st.X}}
					switch c.m {
					case admmq.ADMMQ, admmq.ADMMR, admmq.ADMMS:
						mats = append(mats, [2][]float64{b.Y[row*d : (row+1)*d], st.Y}, [2][]float64{b.L[row*d : (row+1)*d], st.Lambda})
					}
					for k, m := range mats {
						for i := range m[0] {
							if math.Abs(m[0][i]-m[1][i]) > 1e-7*(1+math.Abs(m[1][i])) {
								t.Fatalf("%s %s ρ̄=%g row %d: final state %d differs: batch %v, admmq.Run %v", name, c.m, rb, row, k, m[0], m[1])
							}
						}
					}
				}
			}
		}
	}
}

// ADMM-S with β/ρ ≥ v√d/2 is not simulated but aliased to ADMM-Q; simulating it anyway
// must give ADMM-Q's scores bit for bit.
func TestAliasedSoftEqualsADMMQ(t *testing.T) {
	cfg := tinyConfig()
	in, err := NewInstance(cfg, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := kernels{gemm: gemmFMA}
	for ri, rb := range cfg.RhoBars {
		beta := 1.01 * in.Pair.V * math.Sqrt(float64(in.Pair.D)) / 2 * rb * in.LMax
		q := &job{method: admmq.ADMMQ, rhoIdx: ri, subs: []float64{0}}
		s := &job{method: admmq.ADMMS, rhoIdx: ri, subs: []float64{beta}}
		for _, j := range []*job{q, s} {
			if err := runJob(context.Background(), cfg, in, j, g); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(q.scores, s.scores) {
			t.Fatalf("ρ̄=%g: ADMM-S with large β %v, ADMM-Q %v", rb, s.scores, q.scores)
		}
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	cfg := tinyConfig()
	var outs [][]byte
	for _, w := range []int{1, 3, 1} {
		res, err := Run(context.Background(), cfg, Options{Workers: w, PureGo: true})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteJSON(&buf, res); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, buf.Bytes())
	}
	for i := 1; i < len(outs); i++ {
		if !bytes.Equal(outs[0], outs[i]) {
			t.Fatalf("results differ between runs with different worker counts")
		}
	}
	other := tinyConfig()
	other.Seed++
	res, err := Run(context.Background(), other, Options{Workers: 2, PureGo: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(buf.Bytes(), outs[0]) {
		t.Fatal("a different seed gave the same results")
	}
}

func TestResultsAndFiles(t *testing.T) {
	cfg := tinyConfig()
	res, err := Run(context.Background(), cfg, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range res.Pairs {
		for _, in := range pr.Instances {
			for _, m := range in.Methods {
				if len(m.Scores) != cfg.Starts {
					t.Fatalf("%s has %d scores, want %d", m.Method, len(m.Scores), cfg.Starts)
				}
				if !(m.Q25 <= m.Median && m.Median <= m.Q75) {
					t.Fatalf("%s quartiles out of order: %v %v %v", m.Method, m.Q25, m.Median, m.Q75)
				}
				// The chosen setting is the one with the lowest median of the grid on the
				// selection starts.
				for _, gp := range m.Grid {
					if gp.Median < m.SelectMedian {
						t.Fatalf("%s: grid point %+v has a lower selection median than the chosen %v", m.Method, gp, m.SelectMedian)
					}
				}
				if bp := AtRho(m.PerRho, m.Best.RhoBar); bp == nil || bp.Setting != m.Best || bp.Median != m.Median {
					t.Fatalf("%s: the per-ρ̄ entry at the chosen ρ̄ %+v is not the chosen setting %+v, median %v", m.Method, bp, m.Best, m.Median)
				}
				// Every score is the objective of a lattice point, so it is ≥ the relaxed minimum.
				for _, s := range m.Scores {
					if float64(s) < float64(in.FRelaxed)-1e-6*(1+math.Abs(float64(in.FRelaxed))) {
						t.Fatalf("%s score %v below the relaxed minimum %v", m.Method, s, in.FRelaxed)
					}
				}
			}
			for _, m := range []admmq.Method{admmq.ADMMS, admmq.ADMMR, admmq.PGD} {
				d, q, o := in.Diff(m), in.Method(admmq.ADMMQ).Scores, in.Method(m).Scores
				for s := range d {
					if want := o[s] - q[s]; !(d[s] == want || (math.IsNaN(float64(d[s])) && math.IsNaN(float64(want)))) {
						t.Fatalf("paired difference %v, want %v", d[s], want)
					}
				}
			}
		}
	}
	dir := t.TempDir()
	if err := WriteAll(dir, res, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.csv", "results.json", "summary.md", "quartiles_v8_d4_s30.png", "differences_v8_d8_s10.png"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s not written: %v", name, err)
		}
	}
	fh, err := os.Open(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	back, err := ReadJSON(fh)
	if err != nil {
		t.Fatal(err)
	}
	if back.Pairs[1].Instances[1].Methods[2].Median != res.Pairs[1].Instances[1].Methods[2].Median {
		t.Fatal("JSON round trip changed a median")
	}
}

func TestQuantileMatchesNumpy(t *testing.T) {
	// numpy.quantile([1, 2, 3, 4, 10], [0.25, 0.5, 0.75]) = [2, 3, 4];
	// numpy.quantile([1, 2, 3, 4], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25].
	cases := []struct {
		v    []float64
		want [3]float64
	}{
		{[]float64{1, 2, 3, 4, 10}, [3]float64{2, 3, 4}},
		{[]float64{1, 2, 3, 4}, [3]float64{1.75, 2.5, 3.25}},
		{[]float64{5}, [3]float64{5, 5, 5}},
	}
	for _, c := range cases {
		for i, q := range []float64{0.25, 0.5, 0.75} {
			if got := Quantile(c.v, q); math.Abs(got-c.want[i]) > 1e-12 {
				t.Errorf("Quantile(%v, %v) = %v, want %v", c.v, q, got, c.want[i])
			}
		}
	}
	if got := Quantile([]float64{1, 2, math.Inf(1), math.Inf(1)}, 0.75); !math.IsInf(got, 1) {
		t.Errorf("quantile across diverged runs = %v, want +Inf", got)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, func() Config { c := tinyConfig(); c.Ps = []float64{0}; return c }(),
		func() Config { c := tinyConfig(); c.Iters = 10; return c }()} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", c)
		}
	}
	if err := PaperConfig(1).Validate(); err != nil {
		t.Fatal(err)
	}
	p := PaperConfig(1)
	if len(p.Pairs) != 7 || len(p.RhoBars) != 9 || len(p.Betas) != 21 || len(p.Ps) != 7 {
		t.Fatalf("paper grids have %d pairs, %d ρ̄, %d β, %d p", len(p.Pairs), len(p.RhoBars), len(p.Betas), len(p.Ps))
	}
}

// Every kernel this CPU runs (AVX-512, AVX2, Go) must give the same runs bit for bit, end
// to end: freezing, regions and scoring included.
func TestArithmeticsAgree(t *testing.T) {
	cfg := tinyConfig()
	cfg.Pairs = append(cfg.Pairs, Pair{8, 16, 50})
	cfg.Starts, cfg.Iters, cfg.PGDIters = 9, 400, 500
	choices := kernelChoices(t)
	for pi := range cfg.Pairs {
		in, err := NewInstance(cfg, pi, 0)
		if err != nil {
			t.Fatal(err)
		}
		for ri := range cfg.RhoBars {
			for _, m := range Methods() {
				subs := []float64{0}
				switch m {
				case admmq.ADMMS:
					subs = cfg.Betas
				case admmq.ADMMR:
					subs = cfg.Ps
				}
				var ref *job
				for name, k := range choices {
					j := &job{method: m, rhoIdx: ri, subs: subs}
					if err := runJob(context.Background(), cfg, in, j, k); err != nil {
						t.Fatal(err)
					}
					if ref == nil {
						ref = j
						continue
					}
					b, r := j.final, ref.final
					if !bitsEqual(j.scores, ref.scores) || !bitsEqual(b.X, r.X) || !bitsEqual(b.Y, r.Y) || !bitsEqual(b.L, r.L) {
						t.Fatalf("%v %s ρ̄=%g: %s arithmetic gives a different run", in.Pair, m, cfg.RhoBars[ri], name)
					}
				}
			}
		}
	}
}

// Results written before GD+Proj was renamed "gd-proj" must read back as if written today,
// so that --merge can combine parts of a run made on either side of the rename.
func TestReadJSONRenamesOldGDProj(t *testing.T) {
	cur, err := os.ReadFile(filepath.Join("..", "..", "docs", "quadratic", "quick", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	name := []byte(`"` + string(admmq.GDProj) + `"`)
	old := bytes.ReplaceAll(cur, name, []byte(`"`+string(oldGDProj)+`"`))
	if bytes.Equal(old, cur) {
		t.Fatalf("docs/quadratic/quick/results.json does not contain %s", name)
	}
	var enc [2]bytes.Buffer
	for i, b := range [][]byte{cur, old} {
		r, err := ReadJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range r.Pairs {
			for _, in := range pr.Instances {
				if in.Method(admmq.GDProj) == nil || in.Diff(admmq.GDProj) == nil {
					t.Fatalf("%v instance %d: no %s after reading", pr.Pair, in.Index, admmq.GDProj)
				}
			}
		}
		if err := WriteJSON(&enc[i], r); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(enc[0].Bytes(), enc[1].Bytes()) {
		t.Fatal("results with the old name do not write back as the same bytes as the current ones")
	}
}
