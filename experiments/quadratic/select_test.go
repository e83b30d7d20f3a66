package quadratic

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// The selection starts must be disjoint from the reporting starts, and adding or removing
// selection starts must not change the reporting ones (they are drawn first), so the
// reporting starts of an instance do not depend on how selection was done.
func TestSelectionStartsDisjoint(t *testing.T) {
	cfg := PaperConfig(1)
	other := cfg
	other.SelectStarts = 3
	for pi := range cfg.Pairs {
		in, err := NewInstance(cfg, pi, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.X0) != cfg.Starts || len(in.XSel) != cfg.SelectStarts {
			t.Fatalf("%v: %d reporting and %d selection starts, want %d and %d", in.Pair, len(in.X0), len(in.XSel), cfg.Starts, cfg.SelectStarts)
		}
		for _, a := range in.XSel {
			for _, r := range in.X0 {
				if slices.Equal(a, r) {
					t.Fatalf("%v: a selection start is a reporting start", in.Pair)
				}
			}
		}
		o, err := NewInstance(other, pi, 0)
		if err != nil {
			t.Fatal(err)
		}
		for s := range in.X0 {
			if !slices.Equal(in.X0[s], o.X0[s]) {
				t.Fatalf("%v: reporting start %d depends on the number of selection starts", in.Pair, s)
			}
		}
	}
	// A job runs the starts of its phase.
	in, _ := NewInstance(cfg, 0, 0)
	if j := (&job{sel: true}); &j.starts(in)[0] != &in.XSel[0] {
		t.Fatal("a selection job does not run the selection starts")
	}
	if j := (&job{}); &j.starts(in)[0] != &in.X0[0] {
		t.Fatal("a reporting job does not run the reporting starts")
	}
}

// Run's reported scores must be those of the chosen setting on the reporting starts, and
// its selection median that of the same setting on the selection starts: rerunning both
// by hand must give the same numbers.
func TestSelectionAndReportingRuns(t *testing.T) {
	cfg := tinyConfig()
	res, err := Run(context.Background(), cfg, Options{Workers: 2, PureGo: true})
	if err != nil {
		t.Fatal(err)
	}
	g := kernels{gemm: gemmFMA}
	for pi, pr := range res.Pairs {
		for ii := range pr.Instances {
			ir := &pr.Instances[ii]
			in, err := NewInstance(cfg, pi, ii)
			if err != nil {
				t.Fatal(err)
			}
			for _, mr := range ir.Methods {
				ri := slices.Index(cfg.RhoBars, mr.Best.RhoBar)
				m, sub := mr.Method, mr.Best.Beta+mr.Best.P
				if m == admmq.ADMMS && isAlias(in.Pair, in.LMax, mr.Best.RhoBar, sub) {
					m, sub = admmq.ADMMQ, 0 // the alias's scores are ADMM-Q's
				}
				for _, sel := range []bool{true, false} {
					j := &job{pair: pi, inst: ii, method: m, rhoIdx: ri, sel: sel, subs: []float64{sub}}
					grp := 0
					if sel && m == admmq.ADMMR {
						// ADMM-R's mask stream depends on the group of the p in its job,
						// so selection is rerun as Run ran it: all p in one job.
						j.subs, grp = cfg.Ps, slices.Index(cfg.Ps, sub)
					}
					if err := runJob(context.Background(), cfg, in, j, g); err != nil {
						t.Fatal(err)
					}
					S := len(j.starts(in))
					j.scores = j.scores[grp*S : (grp+1)*S]
					_, med, _, _ := summarize(j.scores)
					if sel && Score(med) != mr.SelectMedian {
						t.Errorf("%v %s: selection median %v, rerun on the selection starts gives %v", in.Pair, mr.Method, mr.SelectMedian, med)
					}
					if !sel && !slices.Equal(toScores(j.scores), mr.Scores) {
						t.Errorf("%v %s: reported scores %v, rerun on the reporting starts gives %v", in.Pair, mr.Method, mr.Scores, j.scores)
					}
				}
			}
		}
	}
}

// The theory-valid rows must run ADMM-Q and PGD at ρ = c·L_f > √2·L_f of each instance, on
// the reporting starts; and the protocol must refuse a c that Lemma 3.2 does not cover.
func TestTheoryRhoRows(t *testing.T) {
	cfg := tinyConfig()
	res, err := Run(context.Background(), cfg, Options{Workers: 2, PureGo: true})
	if err != nil {
		t.Fatal(err)
	}
	g := kernels{gemm: gemmFMA}
	for pi, pr := range res.Pairs {
		for ii := range pr.Instances {
			ir := &pr.Instances[ii]
			in, err := NewInstance(cfg, pi, ii)
			if err != nil {
				t.Fatal(err)
			}
			if len(ir.Theory) != 2*len(cfg.TheoryC) {
				t.Fatalf("%d theory rows, want %d", len(ir.Theory), 2*len(cfg.TheoryC))
			}
			for k, c := range cfg.TheoryC {
				for _, m := range []admmq.Method{admmq.ADMMQ, admmq.PGD} {
					tr := ir.TheoryAt(m, c)
					if tr == nil || tr.Rho != c*in.LMax || !(tr.Rho > math.Sqrt2*in.LMax) {
						t.Fatalf("%v %s c=%g: row %+v, want ρ = %g > √2·L_f = %g", in.Pair, m, c, tr, c*in.LMax, math.Sqrt2*in.LMax)
					}
					j := &job{pair: pi, inst: ii, method: m, rhoIdx: len(cfg.RhoBars) + k, subs: []float64{0}}
					if j.rhoBar(cfg)*in.LMax != tr.Rho {
						t.Fatalf("the job runs ρ = %g, the row says %g", j.rhoBar(cfg)*in.LMax, tr.Rho)
					}
					if err := runJob(context.Background(), cfg, in, j, g); err != nil {
						t.Fatal(err)
					}
					if _, med, _, _ := summarize(j.scores); Score(med) != tr.Median {
						t.Errorf("%v %s c=%g: median %v, rerun gives %v", in.Pair, m, c, tr.Median, med)
					}
				}
			}
		}
	}
	for _, c := range []float64{math.Sqrt2, 1, 0, -2} {
		bad := tinyConfig()
		bad.TheoryC = []float64{c}
		if bad.Validate() == nil {
			t.Errorf("theory c = %v accepted", c)
		}
	}
}

// The alias exclusion must remove exactly the β with β/ρ ≥ v√d/2, where ADMM-S provably is
// ADMM-Q (each of them, simulated, gives ADMM-Q's scores bit for bit), and keep every
// other β; "with aliases" must choose the same β as "without" unless an alias wins.
func TestAliasExclusion(t *testing.T) {
	cfg := tinyConfig()
	cfg.Betas = powers(-5, 5, 1)
	res, err := Run(context.Background(), cfg, Options{Workers: 2, PureGo: true})
	if err != nil {
		t.Fatal(err)
	}
	g := kernels{gemm: gemmFMA}
	var aliases, kept int
	for pi, pr := range res.Pairs {
		for ii := range pr.Instances {
			ir := &pr.Instances[ii]
			in, err := NewInstance(cfg, pi, ii)
			if err != nil {
				t.Fatal(err)
			}
			ms, mq := ir.Method(admmq.ADMMS), ir.Method(admmq.ADMMQ)
			for ri, rb := range cfg.RhoBars {
				q := &job{pair: pi, inst: ii, method: admmq.ADMMQ, rhoIdx: ri, subs: []float64{0}}
				if err := runJob(context.Background(), cfg, in, q, g); err != nil {
					t.Fatal(err)
				}
				var nonAlias []float64
				for _, beta := range cfg.Betas {
					// Against the definition, not isAlias: ‖z − P_A(z)‖ ≤ v√d/2 on vℤ^d.
					sup := in.Pair.V * math.Sqrt(float64(in.Pair.D)) / 2
					if beta/(rb*in.LMax) < sup {
						nonAlias = append(nonAlias, beta)
						kept++
						continue
					}
					aliases++
					s := &job{pair: pi, inst: ii, method: admmq.ADMMS, rhoIdx: ri, subs: []float64{beta}}
					if err := runJob(context.Background(), cfg, in, s, g); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(s.scores, q.scores) {
						t.Fatalf("%v ρ̄=%g β=%g: an excluded alias differs from ADMM-Q", in.Pair, rb, beta)
					}
				}
				all, na := AtRho(ms.PerRho, rb), AtRho(ms.PerRhoNoAlias, rb)
				if all.Alias != isAlias(in.Pair, in.LMax, rb, all.Beta) {
					t.Fatalf("ρ̄=%g: β=%g marked alias=%v", rb, all.Beta, all.Alias)
				}
				if all.Alias && (all.Median != AtRho(mq.PerRho, rb).Median) {
					t.Fatalf("ρ̄=%g: the chosen alias's median %v is not ADMM-Q's %v", rb, all.Median, AtRho(mq.PerRho, rb).Median)
				}
				if len(nonAlias) == 0 {
					if na != nil {
						t.Fatalf("ρ̄=%g: every β is an alias but there is a choice without aliases: %+v", rb, na)
					}
					continue
				}
				if na == nil || !slices.Contains(nonAlias, na.Beta) || na.Alias {
					t.Fatalf("ρ̄=%g: the choice without aliases %+v is not among the non-alias β %v", rb, na, nonAlias)
				}
				if !all.Alias && *all != *na {
					t.Fatalf("ρ̄=%g: with aliases %+v, without %+v, but no alias won", rb, *all, *na)
				}
			}
		}
	}
	if aliases == 0 || kept == 0 {
		t.Fatalf("the test saw %d aliases and %d kept β; it needs both", aliases, kept)
	}
}
