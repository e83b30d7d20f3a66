package train

import (
	"context"
	"testing"

	"github.com/qtool/qtool/engine"
)

func benchParams(n int) []*engine.Param {
	w := make([]float32, n)
	g := make([]float32, n)
	for i := range w {
		w[i] = float32(i%13) * 0.01
		g[i] = float32(i%7-3) * 0.001
	}
	return []*engine.Param{{Name: "w", Value: engine.NewFloat([]int{n}, w), Grad: engine.NewFloat([]int{n}, g), Trainable: true}}
}

// BenchmarkOptimizerStep updates 4M parameters (16 MiB, beyond the caches) per op; the
// paper's MLP has 36.8M.
func BenchmarkOptimizerStep(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  Optimizer
	}{
		{"adam", NewAdam(AdamOptions{})},
		{"adamw", NewAdam(AdamOptions{WeightDecay: 1e-4, Decoupled: true})},
		{"sgd-momentum", mustSGD(SGDOptions{Momentum: 0.9})},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := benchParams(1 << 22)
			ctx := &engine.Context{Workers: 2}
			b.SetBytes(int64(4 * len(p[0].Value.F)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.opt.Step(ctx, p, 1e-3); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFitStep measures the loop's overhead and allocations per training step on the
// small MLP (one op is one step).
func BenchmarkFitStep(b *testing.B) {
	m := tinyMLP(3, 64, 256, 10, true)
	g, err := engine.Build(m, engine.Options{Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.SetTrainable(tinyTrainable...); err != nil {
		b.Fatal(err)
	}
	d := newSliceBatcher(newBlobs(1, 128, 64, 10), 128, false, 0)
	opt := NewAdam(AdamOptions{})
	o := Options{Epochs: 1, Optimizer: opt, Engine: &engine.Context{Workers: 2}}
	if _, err := Fit(context.Background(), g, d, o); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fit(context.Background(), g, d, o); err != nil {
			b.Fatal(err)
		}
	}
}
