package quadexp

import (
	"context"
	"math"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// BenchmarkJobD64 times single jobs of the full protocol's hardest pair, (8,64,30), instance
// 1 at ρ̄ = 10⁻³: all 50 starts × every β (ADMM-S, 700 runs after aliasing) or p (ADMM-R,
// 350 runs), 30 000 iterations each, on one core. Run with
//
//	go test ./admmq/quadexp -run '^$' -bench JobD64 -benchtime 1x
//
// and QTOOL_BLAS=go for the portable Go arithmetic.
func BenchmarkJobD64(b *testing.B) {
	cfg := PaperConfig(1)
	cfg.Pairs = []Pair{{8, 64, 30}}
	in, err := NewInstance(cfg, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	newKernels, name := chooseKernels(false)
	b.Logf("arithmetic: %s", name)
	const ri = 3 // ρ̄ = 1e-3
	for _, m := range []admmq.Method{admmq.ADMMQ, admmq.ADMMS, admmq.ADMMR, admmq.GDProj} {
		subs := []float64{0}
		switch m {
		case admmq.ADMMS:
			subs = nil
			for _, beta := range cfg.Betas {
				if beta/(cfg.RhoBars[ri]*in.LMax) < in.Pair.V*math.Sqrt(float64(in.Pair.D))/2 {
					subs = append(subs, beta)
				}
			}
		case admmq.ADMMR:
			subs = cfg.Ps
		}
		b.Run(string(m), func(b *testing.B) {
			k := newKernels()
			for b.Loop() {
				j := &job{method: m, rhoIdx: ri, subs: subs}
				if err := runJob(context.Background(), cfg, in, j, k); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(subs)*cfg.Starts), "runs")
		})
	}
}
