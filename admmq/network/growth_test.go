package network

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
	"github.com/qtool/qtool/train"
)

// mlpWithout returns fmnist-mlp with the BatchNormalization named norm made an Identity
// (so the weight before it has no normalisation after it), or unchanged for norm "".
func mlpWithout(t *testing.T, norm string) *onnxio.Model {
	t.Helper()
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		t.Fatal(err)
	}
	m = m.Clone()
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" && n.GetName() == norm {
			id := "Identity"
			n.OpType = &id
			n.Input = n.Input[:1]
			n.Attribute = nil
		}
	}
	return m
}

// growthRun runs 4 iterations of method on m at an absolute ρ = 1e-3 with the given
// UnnormalizedGrowth and returns the run and its targets.
func growthRun(t *testing.T, m *onnxio.Model, method admmq.Method, growth float64) (*Run, []Target) {
	t.Helper()
	g, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, ts := binaryRun(t, m, g, Config{
		Method: method, Rho: admmq.Schedule{Rho0: 1e-3}, P: 0.3, Beta: 1e3, UnnormalizedGrowth: growth,
		Iters: 4, InnerEpochs: 1, Schedule: train.Constant{LR: 1e-2}, Seed: 3, StatSamples: 64,
		Workers: 1, StartOnGrid: true,
	})
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r, ts
}

// residual is ‖x − y‖ of target i.
func (r *Run) residualOf(i int) float64 {
	var s float64
	for j, v := range r.params[i].Value.F {
		d := float64(v) - float64(r.y[i][j])
		s += d * d
	}
	return math.Sqrt(s)
}

// TestUnnormalizedGrowth: Config.UnnormalizedGrowth multiplies the ρ of the weights that
// no normalisation follows, and only theirs, by G^r at iteration r; as ρ grows the
// x-update's minimiser tends to y, so that weight's x ends nearer its y than at a
// constant ρ. Negative controls: a network whose every weight is normalised runs bit for
// bit as without the growth, and PGD and ADMM-S ignore it.
func TestUnnormalizedGrowth(t *testing.T) {
	const G = 100
	cut := mlpWithout(t, "/bn4/BatchNormalization")
	grown, ts := growthRun(t, cut, admmq.IADMMQ, G)
	flat, _ := growthRun(t, cut, admmq.IADMMQ, 1)
	last := -1
	for i, tg := range ts {
		want := 1e-3
		if !tg.Normalized {
			want *= math.Pow(G, 3) // iteration 3 (0-based) ran last
			last = i
		}
		if got := grown.tensorRhos()[i]; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s (normalised %v): ρ %g after 4 iterations, want %g", tg.Name, tg.Normalized, got, want)
		}
		wantG := 1.0
		if !tg.Normalized {
			wantG = G
		}
		if got := grown.Growths()[i]; got != wantG {
			t.Errorf("%s (normalised %v): growth %v, want %v", tg.Name, tg.Normalized, got, wantG)
		}
		if got := flat.tensorRhos()[i]; got != 1e-3 {
			t.Errorf("%s without growth: ρ %g, want 1e-3", tg.Name, got)
		}
	}
	if last < 0 {
		t.Fatal("no unnormalised weight: the cut did not take")
	}
	rg, rf := grown.residualOf(last), flat.residualOf(last)
	t.Logf("%s: ‖x − y‖ %.4g with growth ×%d, %.4g without", ts[last].Name, rg, G, rf)
	// Adam's steps of 1e-2 leave x jittering around y by about that much per weight, so
	// the residual cannot fall to 0; measured: about a tenth of the constant ρ's.
	if !(rg < rf/4) {
		t.Errorf("%s: ‖x − y‖ %.4g with ρ grown to %g, %.4g at 1e-3: want x pinned to y", ts[last].Name, rg, 1e-3*math.Pow(G, 3), rf)
	}

	// Every weight normalised: the growth has nothing to act on.
	whole := mlpWithout(t, "")
	a, _ := growthRun(t, whole, admmq.IADMMQ, G)
	b, _ := growthRun(t, whole, admmq.IADMMQ, 1)
	for i := range a.params {
		if !slices.Equal(a.params[i].Value.F, b.params[i].Value.F) || !slices.Equal(a.y[i], b.y[i]) {
			t.Errorf("every weight normalised: %s differs with the growth", a.targets[i].Name)
		}
	}
	for _, m := range []admmq.Method{admmq.PGD, admmq.ADMMS} {
		r, ts := growthRun(t, cut, m, G)
		for i, v := range r.tensorRhos() {
			if v != 1e-3 {
				t.Errorf("%s: %s's ρ %g, want the schedule's 1e-3", m, ts[i].Name, v)
			}
		}
	}
}
