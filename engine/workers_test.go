package engine

import "testing"

// TestGradientsIndependentOfWorkers: the outputs and the gradient of every parameter of
// the shipped models, in training mode, are the same bits with 1, 2 and 3 workers — what
// qtool's reproducibility promise (same file whatever the thread count) rests on. Weight
// gradients are sums over the images, so a split of the batch by worker would change
// their order; conv kernels sum in slots fixed by the batch (convGradSlots).
func TestGradientsIndependentOfWorkers(t *testing.T) {
	for _, model := range []string{"fmnist-cnn", "fmnist-resnet", "fmnist-mlp"} {
		for _, n := range []int{160, 512} {
			var grads [3]map[string][]float32
			var outs [3][]float32
			for wi, w := range []int{1, 2, 3} {
				m, _, x, _ := loadTestModel(t, model, "fmnist-calib.npz")
				g, err := Build(m, Options{Workers: w})
				if err != nil {
					t.Fatal(err)
				}
				trainFloats(t, g)
				xb := rows(x, 0, n)
				ctx := &Context{Training: true}
				o, err := g.Forward(ctx, xb)
				if err != nil {
					t.Fatal(err)
				}
				outs[wi] = append([]float32(nil), o[0].F...)
				gy := NewFloat(o[0].Shape, make([]float32, len(o[0].F)))
				for i := range gy.F {
					gy.F[i] = float32(i%7) - 3
				}
				g.ZeroGrad()
				if err := g.Backward(ctx, gy); err != nil {
					t.Fatal(err)
				}
				grads[wi] = map[string][]float32{}
				for _, p := range g.Params() {
					if p.Grad != nil {
						grads[wi][p.Name] = append([]float32(nil), p.Grad.F...)
					}
				}
			}
			for wi := 1; wi < 3; wi++ {
				for i := range outs[0] {
					if outs[0][i] != outs[wi][i] {
						t.Errorf("n=%d workers %d: output differs at %d", n, wi+1, i)
						break
					}
				}
				for k, a := range grads[0] {
					b := grads[wi][k]
					for i := range a {
						if a[i] != b[i] {
							t.Errorf("n=%d workers %d: grad %s differs at %d: %g vs %g", n, wi+1, k, i, a[i], b[i])
							break
						}
					}
				}
			}
		}
	}
}
