package train

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
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

// seqModel is x [batch, 5, 4] → MatMul → logits [batch, 5, 3] and, from the same x,
// emb [batch, 5, 2]; batch is fixed when fixed > 0.
func seqModel(fixed int64, seed uint64) *onnxio.Model {
	r := rand.New(rand.NewPCG(seed, 1))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	node := func(in, out string, w string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String("MatMul"), Name: proto.String(out), Input: []string{in, w}, Output: []string{out}}
	}
	n := int64(-1)
	if fixed > 0 {
		n = fixed
	}
	return &onnxio.Model{Name: "seq.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("seq"),
			Node:        []*onnxpb.NodeProto{node("x", "logits", "w"), node("x", "emb", "v")},
			Input:       []*onnxpb.ValueInfoProto{floatVI("x", n, 5, 4)},
			Output:      []*onnxpb.ValueInfoProto{floatVI("logits", n, 5, 3), floatVI("emb", n, 5, 2)},
			Initializer: []*onnxpb.TensorProto{onnxio.FloatTensor("w", []int64{4, 3}, rnd(12)), onnxio.FloatTensor("v", []int64{4, 2}, rnd(8))},
		}}}
}

// TestMicroBatchIgnoredLabels: with padded sequence labels (IgnoreLabel) whose count of
// positions varies between samples, one step split into micro-batches, or into the chunks
// of a model's fixed declared batch, takes the gradient and the loss of the whole batch:
// the cross-entropy is a mean over the positions counted in the batch, not over each
// chunk's. The objective mixes it with a distillation term on the other output: KL per
// position, a mean over samples, or normalised MSE, whose denominator is the batch's Σt². A negative control shows that weighting each chunk by its samples, as
// for a mean over samples, misses the full-batch gradient by far more than the tolerance.
func TestMicroBatchIgnoredLabels(t *testing.T) {
	const n = 8
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n*5*4)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	// Sample i keeps its first keep[i] positions (none for one), labelled at random.
	keep := [n]int{5, 1, 4, 0, 3, 5, 2, 5}
	y := make([]int64, n*5)
	for i := range n {
		for p := range 5 {
			y[i*5+p] = IgnoreLabel
			if p < keep[i] {
				y[i*5+p] = int64(r.IntN(3))
			}
		}
	}
	// The second output is matched by KL per position (a mean over samples) or by
	// normalised MSE (a ratio of sums over the batch).
	kl := &Objective{Labelled: true, LabelOutput: 0, Outputs: []OutputSpec{
		{Name: "logits", Kind: Logits, Axis: 2, Weight: 1}, {Name: "emb", Kind: Logits, Axis: 2, Weight: 1}}}
	nmse := &Objective{Labelled: true, LabelOutput: 0, Outputs: []OutputSpec{
		{Name: "logits", Kind: Logits, Axis: 2, Weight: 1}, {Name: "emb", Kind: Feature, Weight: 1}}}
	teacher, err := engine.Build(seqModel(0, 9), engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		loss float64
		grad map[string][]float32
	}
	step := func(obj *Objective, fixed int64, micro int) outcome {
		g := buildTiny(t, seqModel(fixed, 1), "w", "v")
		out := outcome{grad: map[string][]float32{}}
		hook := func(int) error {
			for _, name := range []string{"w", "v"} {
				out.grad[name] = slices.Clone(g.Param(name).Grad.F)
			}
			return nil
		}
		res, err := Fit(context.Background(), g, &fixedBatcher{x: x, y: y, sample: []int64{5, 4}, n: n, size: n},
			Options{Epochs: 1, Loss: obj, Teacher: teacher, Engine: &engine.Context{Workers: 1}, GradHook: hook, MicroBatch: micro})
		if err != nil {
			t.Fatal(err)
		}
		out.loss = res.Last.Loss
		return out
	}
	dist := func(got, want map[string][]float32) float64 {
		var norm, diff float64
		for name, w := range want {
			for i := range w {
				norm += float64(w[i]) * float64(w[i])
				d := float64(got[name][i]) - float64(w[i])
				diff += d * d
			}
		}
		return math.Sqrt(diff / norm)
	}
	for name, obj := range map[string]*Objective{"kl": kl, "nmse": nmse} {
		full := step(obj, 0, 0)
		for _, c := range []struct {
			name  string
			fixed int64
			micro int
		}{{"micro-batches of 3", 0, 3}, {"fixed batch 2", 2, 0}, {"fixed batch 1", 1, 0}} {
			got := step(obj, c.fixed, c.micro)
			if d := dist(got.grad, full.grad); d > 1e-5 {
				t.Errorf("%s, %s: gradient differs from the full batch's by %.3g of its norm", name, c.name, d)
			}
			if e := math.Abs(got.loss-full.loss) / full.loss; e > 1e-5 {
				t.Errorf("%s, %s: loss %v, full batch %v", name, c.name, got.loss, full.loss)
			}
		}
	}
	full := step(kl, 0, 0)

	// Negative control: chunks of 2 weighted by their samples.
	g := buildTiny(t, seqModel(0, 1), "w", "v")
	var grads Gradients
	for lo := 0; lo < n; lo += 2 {
		xs := engine.NewFloat([]int{2, 5, 4}, x[lo*20:(lo+2)*20])
		outs, err := g.Forward(&engine.Context{Workers: 1, Training: true}, xs)
		if err != nil {
			t.Fatal(err)
		}
		touts, err := teacher.Forward(&engine.Context{Workers: 1, NoGrad: true}, xs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ApplyLoss(kl, g, outs, touts, y[lo*5:(lo+2)*5], 2, &grads); err != nil {
			t.Fatal(err)
		}
		for _, gt := range grads.Outputs() {
			for i := range gt.F {
				gt.F[i] *= 2.0 / n
			}
		}
		if err := g.Backward(&engine.Context{Workers: 1}, grads.Outputs()...); err != nil {
			t.Fatal(err)
		}
	}
	bySamples := map[string][]float32{"w": g.Param("w").Grad.F, "v": g.Param("v").Grad.F}
	if d := dist(bySamples, full.grad); d < 1e-2 {
		t.Errorf("negative control: weighting chunks by samples misses the full-batch gradient by only %.3g of its norm", d)
	}
}
