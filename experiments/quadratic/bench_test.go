package quadratic

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
//	go test ./experiments/quadratic -run '^$' -bench 'Job' -benchtime 1x
//
// and QTOOL_BLAS=go for the portable Go arithmetic.
func BenchmarkJobD64(b *testing.B) { benchJobs(b, Pair{8, 64, 30}) }

// BenchmarkJobD16 is BenchmarkJobD64 for (8,16,30), the size of five of the seven pairs.
func BenchmarkJobD16(b *testing.B) { benchJobs(b, Pair{8, 16, 30}) }

func benchJobs(b *testing.B, p Pair) {
	cfg := PaperConfig(1)
	cfg.Pairs = []Pair{p}
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

// BenchmarkGemm64 times the x-update product of a 64-run region at d = 64 (the FLOP rate is
// 2·64³ per op).
func BenchmarkGemm64(b *testing.B) {
	const m, d = 64, 64
	a, w, c := make([]float64, m*d), make([]float64, d*d), make([]float64, m*d)
	for i := range a {
		a[i] = float64(i%7) - 3
	}
	for i := range w {
		w[i] = float64(i%5) - 2
	}
	run := func(b *testing.B, g gemmFunc) {
		for b.Loop() {
			g(m, d, d, a, d, w, d, c, d)
		}
		b.ReportMetric(2*m*d*d*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	if haveSIMD() {
		b.Run("avx512", func(b *testing.B) { run(b, gemmSIMD) })
	}
	b.Run("go", func(b *testing.B) { run(b, gemmFMA) })
	if haveAVX2() {
		b.Run("avx2", func(b *testing.B) { run(b, gemmAVX2) })
	}
}
