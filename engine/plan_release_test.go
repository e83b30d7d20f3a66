package engine

import (
	"math"
	"testing"
)

// TestBackwardReleaseExact: with the activations kept for backward returned to the pool
// once the backward pass has read them for the last time (their buffers then holding the
// gradients of earlier steps), two training steps give bit for bit the gradients and
// outputs of a plan that keeps them all to the end, and the plan is smaller.
func TestBackwardReleaseExact(t *testing.T) {
	for _, model := range []string{"fmnist-cnn", "fmnist-resnet", "fmnist-mlp"} {
		t.Run(model, func(t *testing.T) {
			var grads [2]map[string][]float32
			var outs [2][]float32
			var bytes [2]int64
			for vi, keep := range []bool{false, true} {
				m, _, x, _ := loadTestModel(t, model, "fmnist-calib.npz")
				g, err := Build(m, Options{Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				g.noRelease = keep
				trainFloats(t, g)
				ctx := &Context{Training: true}
				xb := rows(x, 0, 96)
				if bytes[vi], err = g.PlanBytes(ctx, NewFloat(xb.Shape, nil)); err != nil {
					t.Fatal(err)
				}
				g.ZeroGrad()
				// Two steps: the second runs on buffers the first backward pass reused.
				for step := range 2 {
					o, err := g.Forward(ctx, rows(x, 96*step, 96*(step+1)))
					if err != nil {
						t.Fatal(err)
					}
					outs[vi] = append(outs[vi], o[0].F...)
					gy := NewFloat(o[0].Shape, make([]float32, len(o[0].F)))
					for i := range gy.F {
						gy.F[i] = float32(i%7) - 3
					}
					if err := g.Backward(ctx, gy); err != nil {
						t.Fatal(err)
					}
				}
				grads[vi] = map[string][]float32{}
				for _, p := range g.Params() {
					if p.Grad != nil {
						grads[vi][p.Name] = append([]float32(nil), p.Grad.F...)
					}
				}
			}
			for i, v := range outs[0] {
				if math.Float32bits(v) != math.Float32bits(outs[1][i]) {
					t.Fatalf("output [%d] = %v, %v keeping every activation", i, v, outs[1][i])
				}
			}
			for name, gs := range grads[1] {
				for i, v := range gs {
					if math.Float32bits(v) != math.Float32bits(grads[0][name][i]) {
						t.Fatalf("gradient of %s [%d] = %v, %v keeping every activation", name, i, grads[0][name][i], v)
					}
				}
			}
			if bytes[0] >= bytes[1] {
				t.Errorf("plan of %d bytes releasing activations, %d keeping them: want fewer", bytes[0], bytes[1])
			}
			t.Logf("plan %d bytes, %d keeping every activation", bytes[0], bytes[1])
		})
	}
}
