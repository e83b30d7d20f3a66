package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
)

func buildTiny(t *testing.T, m *onnxio.Model, trainable ...string) *engine.Graph {
	t.Helper()
	g, err := engine.Build(m, engine.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(trainable) > 0 {
		if err := g.SetTrainable(trainable...); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// snapshot copies every float parameter of g.
func snapshot(g *engine.Graph) map[string][]float32 {
	s := map[string][]float32{}
	for _, p := range g.Params() {
		if p.Value.DType == engine.Float32 {
			s[p.Name] = append([]float32(nil), p.Value.F...)
		}
	}
	return s
}

func sameBits(a, b map[string][]float32) (string, bool) {
	for k, va := range a {
		vb := b[k]
		if len(va) != len(vb) {
			return k, false
		}
		for i := range va {
			if math.Float32bits(va[i]) != math.Float32bits(vb[i]) {
				return k, false
			}
		}
	}
	return "", len(a) == len(b)
}

type tinyRun struct {
	g    *engine.Graph
	opt  Optimizer
	res  Result
	err  error
	reps []EpochReport
}

func fitTiny(t *testing.T, epochs int, mod func(*Options)) *tinyRun {
	t.Helper()
	data := newBlobs(1, 300, 6, 4)
	eval := newBlobs(2, 200, 6, 4)
	g := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	r := &tinyRun{g: g, opt: NewAdam(AdamOptions{})}
	o := Options{
		Epochs: epochs, Optimizer: r.opt, Schedule: Constant{LR: 1e-2}, Seed: 5,
		Engine: &engine.Context{Workers: 2},
		Eval:   newSliceBatcher(eval, 64, false, 0),
		EpochEnd: func(rep EpochReport) error {
			r.reps = append(r.reps, rep)
			return nil
		},
	}
	if mod != nil {
		mod(&o)
	}
	r.res, r.err = Fit(context.Background(), g, newSliceBatcher(data, 32, true, 9), o)
	return r
}

// TestFitLearns trains the small MLP on separable clusters: the training loss falls and the
// held-out accuracy rises well above chance.
func TestFitLearns(t *testing.T) {
	r := fitTiny(t, 6, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Epochs != 6 || r.res.Steps != 6*10 || len(r.reps) != 6 {
		t.Fatalf("result %+v with %d reports, want 6 epochs of 10 steps", r.res, len(r.reps))
	}
	first, last := r.reps[0], r.reps[5]
	t.Logf("loss %.4f → %.4f, held-out accuracy %.3f → %.3f", first.Loss, last.Loss, first.Eval.Accuracy, last.Eval.Accuracy)
	if !(last.Loss < 0.5*first.Loss) {
		t.Errorf("training loss went from %v to %v", first.Loss, last.Loss)
	}
	if !last.Eval.Labelled || last.Eval.Accuracy < 0.9 || last.Eval.Samples != 200 {
		t.Errorf("held-out metrics %+v", *last.Eval)
	}
	if last.Steps != 60 || last.Epoch != 5 {
		t.Errorf("last report %+v", last)
	}
}

// TestFitDeterministic runs the same training twice (Dropout, shuffling, two workers) and
// compares every parameter bit for bit, and the optimizer states byte for byte.
func TestFitDeterministic(t *testing.T) {
	a, b := fitTiny(t, 2, nil), fitTiny(t, 2, nil)
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if k, ok := sameBits(snapshot(a.g), snapshot(b.g)); !ok {
		t.Fatalf("parameter %s differs between two identical runs", k)
	}
	sa, _ := a.opt.MarshalBinary()
	sb, _ := b.opt.MarshalBinary()
	if !bytes.Equal(sa, sb) {
		t.Fatal("optimizer states differ between two identical runs")
	}
	// Another seed gives other Dropout masks and so other weights: the comparison above
	// can fail.
	c := fitTiny(t, 2, func(o *Options) { o.Seed = 6 })
	if _, ok := sameBits(snapshot(a.g), snapshot(c.g)); ok {
		t.Fatal("a different Dropout seed gave the same weights")
	}
}

// TestFitGradHook checks the hook runs once per step after Backward and before the update:
// a hook that zeroes every gradient leaves plain SGD with nothing to do, while running
// statistics (not trained) still move.
func TestFitGradHook(t *testing.T) {
	var calls []int
	data := newBlobs(1, 300, 6, 4)
	g := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	before := snapshot(g)
	res, err := Fit(context.Background(), g, newSliceBatcher(data, 32, true, 9), Options{
		Epochs: 2, Optimizer: mustSGD(SGDOptions{}), Schedule: Constant{LR: 0.5}, StartStep: 100,
		GradHook: func(step int) error {
			calls = append(calls, step)
			nonzero := false
			for _, p := range g.Params() {
				if p.Trainable {
					for i, v := range p.Grad.F {
						nonzero = nonzero || v != 0
						p.Grad.F[i] = 0
					}
				}
			}
			if !nonzero {
				return errors.New("hook saw no gradient")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 20 || len(calls) != 20 || calls[0] != 100 || calls[19] != 119 {
		t.Fatalf("%d steps, hook calls %v", res.Steps, calls)
	}
	after := snapshot(g)
	for _, n := range tinyTrainable {
		if k, ok := sameBits(map[string][]float32{n: before[n]}, map[string][]float32{n: after[n]}); !ok {
			t.Errorf("parameter %s changed although the hook zeroed its gradient", k)
		}
	}
	if _, ok := sameBits(map[string][]float32{"m": before["mean"]}, map[string][]float32{"m": after["mean"]}); ok {
		t.Error("BatchNorm running mean did not move in training mode")
	}
}

// TestFitCancelConsistent cancels during a step: Fit finishes that step and stops, leaving
// parameters and optimizer state exactly as after that many complete steps (compared with a
// run stopped by a hook error before the next update).
func TestFitCancelConsistent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := newBlobs(1, 300, 6, 4)
	g1 := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	o1 := NewAdam(AdamOptions{})
	res, err := Fit(ctx, g1, newSliceBatcher(data, 32, true, 9), Options{
		Epochs: 3, Optimizer: o1, Seed: 5, Engine: &engine.Context{Workers: 2},
		GradHook: func(step int) error {
			if step == 13 {
				cancel()
			}
			return nil
		},
	})
	if !errors.Is(err, context.Canceled) || res.Steps != 14 || res.Epochs != 1 {
		t.Fatalf("cancelled run: %+v, %v; want 14 steps, 1 epoch and context.Canceled", res, err)
	}
	g2 := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	o2 := NewAdam(AdamOptions{})
	stop := errors.New("stop before step 14's update")
	res2, err := Fit(context.Background(), g2, newSliceBatcher(data, 32, true, 9), Options{
		Epochs: 3, Optimizer: o2, Seed: 5, Engine: &engine.Context{Workers: 2},
		GradHook: func(step int) error {
			if step == 14 {
				return stop
			}
			return nil
		},
	})
	if !errors.Is(err, stop) || res2.Steps != 14 {
		t.Fatalf("stopped run: %+v, %v", res2, err)
	}
	// The hook's run did step 14's forward and backward, which moved BatchNorm's running
	// statistics once more; compare the trained parameters and the optimizer state.
	s1, s2 := snapshot(g1), snapshot(g2)
	for _, n := range tinyTrainable {
		if k, ok := sameBits(map[string][]float32{n: s1[n]}, map[string][]float32{n: s2[n]}); !ok {
			t.Fatalf("parameter %s differs between the cancelled and the stopped run", k)
		}
	}
	b1, _ := o1.MarshalBinary()
	b2, _ := o2.MarshalBinary()
	if !bytes.Equal(b1, b2) {
		t.Fatal("optimizer state differs between the cancelled and the stopped run")
	}
}

func TestFitEpochEndStop(t *testing.T) {
	n := 0
	r := fitTiny(t, 5, func(o *Options) {
		o.EpochEnd = func(rep EpochReport) error {
			n++
			if rep.Epoch == 1 {
				return ErrStop
			}
			return nil
		}
	})
	if r.err != nil || !r.res.Stopped || r.res.Epochs != 2 || n != 2 {
		t.Fatalf("result %+v, err %v, %d callbacks; want a stop after 2 epochs", r.res, r.err, n)
	}
	boom := errors.New("boom")
	r = fitTiny(t, 5, func(o *Options) { o.EpochEnd = func(EpochReport) error { return boom } })
	if !errors.Is(r.err, boom) || r.res.Epochs != 1 {
		t.Fatalf("callback error: %+v, %v", r.res, r.err)
	}
}

// TestFitDistillation trains a perturbed copy of a model towards the original with the
// distillation loss on unlabelled data: the loss falls and top-1 agreement rises.
func TestFitDistillation(t *testing.T) {
	for _, loss := range []Loss{Distillation{Temperature: 2}, MSE{}} {
		teacher := buildTiny(t, tinyMLP(3, 6, 16, 4, false))
		student := buildTiny(t, tinyMLP(4, 6, 16, 4, false), tinyTrainable...)
		data := newSliceBatcher(newBlobs(1, 300, 6, 4), 32, true, 9)
		data.nolabel = true
		eval := newSliceBatcher(newBlobs(2, 200, 6, 4), 50, false, 0)
		eval.nolabel = true
		var reps []EpochReport
		_, err := Fit(context.Background(), student, data, Options{
			Epochs: 20, Loss: loss, Teacher: teacher, Schedule: Constant{LR: 1e-2}, Eval: eval,
			EpochEnd: func(r EpochReport) error { reps = append(reps, r); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		first, last := reps[0], reps[len(reps)-1]
		t.Logf("%T: loss %.4f → %.4f, agreement %.3f → %.3f", loss, first.Loss, last.Loss, first.Eval.Agreement, last.Eval.Agreement)
		if last.Eval.Labelled || !last.Eval.HasAgreement || !last.Eval.HasLoss {
			t.Errorf("unlabelled metrics %+v", *last.Eval)
		}
		if !(last.Loss < 0.5*first.Loss) || !(last.Eval.Agreement > first.Eval.Agreement) || last.Eval.Agreement < 0.85 {
			t.Errorf("%T: distillation did not converge: %+v → %+v", loss, first, last)
		}
	}
}

func TestFitErrors(t *testing.T) {
	g := buildTiny(t, tinyMLP(3, 6, 16, 4, false), tinyTrainable...)
	frozen := buildTiny(t, tinyMLP(3, 6, 16, 4, false))
	lab := func() Batcher { return newSliceBatcher(newBlobs(1, 40, 6, 4), 16, false, 0) }
	unl := func() Batcher {
		b := newSliceBatcher(newBlobs(1, 40, 6, 4), 16, false, 0)
		b.nolabel = true
		return b
	}
	bad := newBlobs(1, 40, 6, 4)
	bad.y[3] = 9
	for _, c := range []struct {
		name string
		g    *engine.Graph
		data Batcher
		o    Options
		want string
	}{
		{"no trainable", frozen, lab(), Options{Epochs: 1}, "SetTrainable"},
		{"no teacher", g, lab(), Options{Epochs: 1, Loss: Distillation{}}, "no teacher"},
		{"teacher is student", g, lab(), Options{Epochs: 1, Loss: MSE{}, Teacher: g}, "separate graph"},
		{"no labels", g, unl(), Options{Epochs: 1}, "needs labels"},
		{"label out of range", g, newSliceBatcher(bad, 16, false, 0), Options{Epochs: 1}, "outside the model's 4 classes"},
		{"NaN learning rate", g, lab(), Options{Epochs: 1, Schedule: Constant{LR: math.NaN()}}, "learning rate"},
	} {
		before := snapshot(c.g)
		_, err := Fit(context.Background(), c.g, c.data, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		for _, n := range tinyTrainable {
			if k, ok := sameBits(map[string][]float32{n: before[n]}, map[string][]float32{n: snapshot(c.g)[n]}); !ok && c.name != "label out of range" {
				t.Errorf("%s: parameter %s changed", c.name, k)
			}
		}
	}
}

// TestEvaluate checks accuracy and agreement against a direct count of top-1 predictions.
func TestEvaluate(t *testing.T) {
	g := buildTiny(t, tinyMLP(3, 6, 16, 4, false))
	ref := buildTiny(t, tinyMLP(4, 6, 16, 4, false))
	d := newBlobs(2, 130, 6, 4)
	m, err := Evaluate(context.Background(), g, newSliceBatcher(d, 50, false, 0), EvalOptions{Loss: CrossEntropy{}, Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	// Reference: the whole set in one inference run each, counted here.
	x := engine.NewFloat([]int{130, 6}, d.x)
	outs, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	y := append([]float32(nil), outs[0].F...)
	routs, err := ref.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	var correct, agree int
	for i := range 130 {
		a, b := argmax(y[i*4:i*4+4]), argmax(routs[0].F[i*4:i*4+4])
		if int64(a) == d.y[i] {
			correct++
		}
		if a == b {
			agree++
		}
	}
	ce, _ := CrossEntropy{}.Value(y, 4, Target{Labels: d.y}, nil)
	if m.Samples != 130 || !m.Labelled || m.Accuracy != float64(correct)/130 || m.Agreement != float64(agree)/130 {
		t.Errorf("metrics %+v, want accuracy %d/130, agreement %d/130", m, correct, agree)
	}
	if !m.HasLoss || math.Abs(m.Loss-ce) > 1e-6*ce {
		t.Errorf("mean loss %v, whole-set loss %v", m.Loss, ce)
	}
	// Against a copy of itself agreement is total and the distillation loss vanishes.
	self := buildTiny(t, tinyMLP(3, 6, 16, 4, false))
	m, err = Evaluate(context.Background(), g, newSliceBatcher(d, 50, false, 0), EvalOptions{Loss: Distillation{}, Reference: self})
	if err != nil || m.Agreement != 1 || !m.HasLoss || m.Loss > 1e-12 {
		t.Errorf("self-agreement %+v, %v", m, err)
	}
}

// TestRecalibrateBN checks the re-estimated running statistics against the cumulative
// average over batches of the batch means and unbiased variances of BatchNormalization's
// input, computed here in float64 from the first layer's weights.
func TestRecalibrateBN(t *testing.T) {
	m := tinyMLP(3, 6, 16, 4, true)
	g := buildTiny(t, m)
	d := newBlobs(2, 100, 6, 4)
	if err := RecalibrateBN(context.Background(), g, m, newSliceBatcher(d, 32, false, 0), &engine.Context{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	w1, b1 := g.Param("w1").Value.F, g.Param("b1").Value.F
	const hidden = 16
	wantMean, wantVar := make([]float64, hidden), make([]float64, hidden)
	batches := 0
	for lo := 0; lo < 100; lo += 32 {
		hi := min(lo+32, 100)
		n := float64(hi - lo)
		for c := range hidden {
			var s, s2 float64
			for i := lo; i < hi; i++ {
				h := float64(b1[c])
				for j := range 6 {
					h += float64(w1[c*6+j]) * float64(d.x[i*6+j])
				}
				s += h
				s2 += h * h
			}
			mean := s / n
			wantMean[c] += mean
			wantVar[c] += (s2 - n*mean*mean) / (n - 1)
		}
		batches++
	}
	for c := range hidden {
		wm, wv := wantMean[c]/float64(batches), wantVar[c]/float64(batches)
		gm, gv := float64(g.Param("mean").Value.F[c]), float64(g.Param("var").Value.F[c])
		if math.Abs(gm-wm) > 1e-5*(1+math.Abs(wm)) || math.Abs(gv-wv) > 1e-5*wv {
			t.Errorf("channel %d: running mean %v var %v, want %v %v", c, gm, gv, wm, wv)
		}
	}
	// Cancelled: the statistics are restored.
	before := snapshot(g)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RecalibrateBN(ctx, g, m, newSliceBatcher(newBlobs(5, 100, 6, 4), 32, false, 0), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled recalibration: %v", err)
	}
	if k, ok := sameBits(before, snapshot(g)); !ok {
		t.Errorf("cancelled recalibration changed %s", k)
	}
}

// TestFitResume stops after one epoch, carries the state a checkpoint holds (parameter
// values including BatchNorm's running statistics, the optimizer's MarshalBinary, the
// Dropout stream's PCG state) into a fresh graph and optimizer, and finishes the second
// epoch there: the weights equal, bit for bit, those of one uninterrupted two-epoch run.
func TestFitResume(t *testing.T) {
	data := newBlobs(1, 300, 6, 4)
	run := func(g *engine.Graph, opt Optimizer, pcg *rand.PCG, b *sliceBatcher, epochs, start int) {
		t.Helper()
		_, err := Fit(context.Background(), g, b, Options{
			Epochs: epochs, Optimizer: opt, Schedule: Cosine{LR: 1e-2, Total: 20},
			Engine: &engine.Context{Workers: 2, Rand: rand.New(pcg)}, StartEpoch: start, StartStep: 10 * start,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	whole := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	run(whole, NewAdam(AdamOptions{}), rand.NewPCG(1, 2), newSliceBatcher(data, 32, true, 9), 2, 0)

	first := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	opt, pcg := NewAdam(AdamOptions{}), rand.NewPCG(1, 2)
	run(first, opt, pcg, newSliceBatcher(data, 32, true, 9), 1, 0)
	optState, _ := opt.MarshalBinary()
	pcgState, _ := pcg.MarshalBinary()
	params := snapshot(first)

	second := buildTiny(t, tinyMLP(3, 6, 16, 4, true), tinyTrainable...)
	for name, v := range params {
		copy(second.Param(name).Value.F, v)
	}
	opt2, pcg2 := NewAdam(AdamOptions{}), &rand.PCG{}
	if err := opt2.UnmarshalBinary(optState); err != nil {
		t.Fatal(err)
	}
	if err := pcg2.UnmarshalBinary(pcgState); err != nil {
		t.Fatal(err)
	}
	b := newSliceBatcher(data, 32, true, 9)
	b.Reset() // the data iterator continues at epoch 1
	run(second, opt2, pcg2, b, 1, 1)
	if k, ok := sameBits(snapshot(whole), snapshot(second)); !ok {
		t.Fatalf("parameter %s differs between the resumed and the uninterrupted run", k)
	}
}
