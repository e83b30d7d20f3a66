package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
)

// TestMicroBatchStep: on the shipped CNN, one optimizer step over a batch of 64 split
// into micro-batches of 16 or 32 takes the gradient and the mean loss of
// the full-batch step, within float rounding. The batch is four copies of the same 16
// samples, so that every micro-batch's BatchNorm statistics equal the batch's (micro-
// batches normalise by their own statistics; see Options.MicroBatch): any difference
// left is accumulation's weighting or summation order.
func TestMicroBatchStep(t *testing.T) {
	m, err := onnxio.Load(filepath.Join("..", "testmodels", "fmnist-cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	x16 := fixture32Path(t, filepath.Join("..", "testmodels", "fmnist-calib.npz"), "x")[:16*784]
	var x []float32
	for range 4 {
		x = append(x, x16...)
	}
	type outcome struct {
		loss  float64
		grads map[string][]float32
	}
	stepWith := func(micro int) outcome {
		g, err := engine.Build(m, engine.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		teacher, err := engine.Build(m, engine.Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range g.Params() {
			if p.Value.DType == engine.Float32 {
				names = append(names, p.Name)
			}
		}
		if err := g.SetTrainable(names...); err != nil {
			t.Fatal(err)
		}
		out := outcome{grads: map[string][]float32{}}
		hook := func(int) error {
			for _, p := range g.Params() {
				if p.Trainable {
					out.grads[p.Name] = append([]float32(nil), p.Grad.F...)
				}
			}
			return nil
		}
		data := &fixedBatcher{x: x, sample: []int64{1, 28, 28}, n: 64, size: 64}
		res, err := Fit(context.Background(), g, data, Options{Epochs: 1, Loss: Distillation{Temperature: 1}, Teacher: teacher,
			Engine: &engine.Context{Workers: 1}, GradHook: hook, MicroBatch: micro})
		if err != nil {
			t.Fatal(err)
		}
		out.loss = res.Last.Loss
		return out
	}
	full := stepWith(0)
	if same := stepWith(64); same.loss != full.loss {
		t.Fatalf("MicroBatch = batch size changed the loss: %v, want %v bit for bit", same.loss, full.loss)
	}
	for _, micro := range []int{16, 32} {
		got := stepWith(micro)
		if e := math.Abs(got.loss-full.loss) / full.loss; e > 1e-5 {
			t.Errorf("micro-batches of %d: loss %v, full batch %v", micro, got.loss, full.loss)
		}
		for name, want := range full.grads {
			g := got.grads[name]
			var norm, diff float64
			for i := range want {
				norm += float64(want[i]) * float64(want[i])
				d := float64(g[i]) - float64(want[i])
				diff += d * d
			}
			// float32 sums of the same terms in another order: relative to the
			// gradient's norm.
			if math.Sqrt(diff) > 1e-5*math.Sqrt(norm) {
				t.Errorf("micro-batches of %d: gradient of %s differs by %.3g (norm %.3g)", micro, name, math.Sqrt(diff), math.Sqrt(norm))
			}
		}
	}
}
