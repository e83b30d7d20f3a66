package network

import (
	"bytes"
	"context"
	"math"
	"sort"
	"testing"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// The STE tests run on digits-mlp (Gemm, BatchNorm, ReLU, Gemm: no Dropout) with one
// batch of the whole data, so that a training-mode loss is a deterministic function of
// the weights and can be differentiated by finite differences.
const (
	digitsPath  = "../../testmodels/digits-mlp.onnx"
	digitsData  = "../../testmodels/digits-test.npz"
	digitsBatch = 64
)

func openDigits(t *testing.T) calib.Dataset {
	t.Helper()
	d, err := calib.Open(digitsData, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 64}, Classes: 10}, Limit: digitsBatch, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func steRun(t *testing.T, cfg Config) (*Run, *engine.Graph, *onnxio.Model, []Target) {
	t.Helper()
	m, g := load(t, digitsPath)
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	d := openDigits(t)
	cfg.Method, cfg.Workers, cfg.StatSamples = admmq.STE, 1, digitsBatch
	r, err := New(m, g, ts, cfg, dataOf(t, d, nil, digitsBatch, cfg.Seed))
	if err != nil {
		t.Fatal(err)
	}
	return r, g, m, ts
}

// trainLoss is the training-mode cross-entropy of g over the digits batch.
func trainLoss(t *testing.T, g *engine.Graph, d calib.Dataset) float64 {
	t.Helper()
	x := make([]float32, digitsBatch*64)
	y := make([]int64, digitsBatch)
	idx := make([]int, digitsBatch)
	for i := range idx {
		idx[i] = i
	}
	if err := d.Read(idx, x, y); err != nil {
		t.Fatal(err)
	}
	ctx := engine.Context{Workers: 1, Training: true, NoGrad: true}
	outs, err := g.Forward(&ctx, engine.NewFloat([]int{digitsBatch, 64}, x))
	if err != nil {
		t.Fatal(err)
	}
	var gr train.Gradients
	l, err := train.ApplyLoss(train.CrossEntropy{}, g, outs, nil, y, digitsBatch, &gr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSTEGradientAtProjection: one STE step of plain SGD (learning rate 1) moves the
// latent x by exactly the gradient of the training loss at P_A(x), checked against central
// finite differences of the loss through the engine with the weights set to P_A(x); the
// finite differences at x itself, the negative control, disagree.
func TestSTEGradientAtProjection(t *testing.T) {
	sgd, err := train.NewSGD(train.SGDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, g, _, ts := steRun(t, Config{Iters: 1, InnerEpochs: 1, InnerSteps: 1, Optimizer: sgd, Schedule: train.Constant{LR: 1}, Seed: 1})
	x0 := make([][]float32, len(ts))
	for i, tg := range ts {
		x0[i] = append([]float32(nil), g.Param(tg.Name).Value.F...)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := openDigits(t)
	for i, tg := range ts {
		x1 := g.Param(tg.Name).Value.F
		step := make([]float64, len(x1)) // x0 − x1 = ∇f(P(x0)) with learning rate 1
		order := make([]int, len(x1))
		for j := range x1 {
			step[j] = float64(x0[i][j]) - float64(x1[j])
			order[j] = j
		}
		sort.Slice(order, func(a, b int) bool { return math.Abs(step[order[a]]) > math.Abs(step[order[b]]) })
		// Fresh graphs: one at P(x0), one at x0 (the control); every other parameter as loaded.
		_, gp := load(t, digitsPath)
		_, gx := load(t, digitsPath)
		for _, tt := range ts {
			p := gp.Param(tt.Name).Value.F
			if err := tt.Set.Project32(p, p, tt.Layout); err != nil {
				t.Fatal(err)
			}
		}
		fd := func(g *engine.Graph, j int) float64 {
			w := g.Param(tg.Name).Value.F
			const h = 1e-2
			v := w[j]
			w[j] = v + h
			up := trainLoss(t, g, d)
			w[j] = v - h
			down := trainLoss(t, g, d)
			w[j] = v
			return (up - down) / (2 * h)
		}
		scale := math.Abs(step[order[0]])
		control := 0
		for _, j := range order[:6] {
			got, want := step[j], fd(gp, j)
			if math.Abs(got-want) > 0.03*math.Abs(want)+1e-3*scale {
				t.Errorf("%s[%d]: STE step %.6g, ∂f/∂w at P(x) by finite differences %.6g", tg.Name, j, got, want)
			}
			if c := fd(gx, j); math.Abs(got-c) > 0.1*math.Abs(got) {
				control++
			}
		}
		if control < 3 {
			t.Errorf("%s: the gradient at x agrees with the STE step on %d of 6 coordinates: the test cannot tell P(x) from x", tg.Name, 6-control)
		}
	}
}

// TestSTEConstantProjection: with every latent weight far inside its level region
// (|x| = 10, steps of 1e-3) P_A(x) never changes, and STE is plain training of the
// projected network with the targeted weights frozen: every other parameter, BatchNorm's
// running statistics included, ends bit for bit as train.Fit leaves it.
func TestSTEConstantProjection(t *testing.T) {
	const steps = 4
	r, g, m, ts := steRun(t, Config{Iters: 1, InnerEpochs: 1, InnerSteps: steps, Optimizer: train.NewAdam(train.AdamOptions{}), Schedule: train.Constant{LR: 1e-3}, Seed: 2})
	for _, p := range r.params {
		for j, v := range p.Value.F {
			p.Value.F[j] = float32(math.Copysign(10, float64(v)))
		}
	}
	var trainable []string
	for _, p := range g.Params() {
		if p.Trainable {
			trainable = append(trainable, p.Name)
		}
	}
	x0 := append([]float32(nil), r.params[0].Value.F...)
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ws, err := r.Finish(context.Background(), m, Binary, false)
	if err != nil {
		t.Fatal(err)
	}

	_, ref := load(t, digitsPath)
	frozen := map[string]bool{}
	for i, tg := range ts {
		copy(ref.Param(tg.Name).Value.F, ws[i].Values)
		frozen[tg.Name] = true
	}
	var names []string
	for _, n := range trainable {
		if !frozen[n] {
			names = append(names, n)
		}
	}
	if err := ref.SetTrainable(names...); err != nil {
		t.Fatal(err)
	}
	d := openDigits(t)
	data := dataOf(t, d, nil, digitsBatch, 2)
	if _, err := train.Fit(context.Background(), ref, &feed{b: data.Train, limit: steps}, train.Options{
		Epochs: 1, Optimizer: train.NewAdam(train.AdamOptions{}), Schedule: train.Constant{LR: 1e-3},
		Engine: &engine.Context{Workers: 1}, Seed: 2,
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range g.Params() {
		q := ref.Param(p.Name)
		for j, v := range p.Value.F {
			if math.Float32bits(v) != math.Float32bits(q.Value.F[j]) {
				t.Fatalf("%s[%d]: %v after STE, %v after training the projected network", p.Name, j, v, q.Value.F[j])
			}
		}
	}
	moved := false
	for j, v := range r.latent[0] {
		moved = moved || v != x0[j]
	}
	if !moved {
		t.Error("the latent weights did not move")
	}
}

// TestSTEDeterministicAndResumable: two STE runs with clipping write the same
// checkpoints, and a run resumed from the first checkpoint ends bit for bit as the
// uninterrupted one; the clip holds the latent weights in [−1, 1].
func TestSTEDeterministicAndResumable(t *testing.T) {
	cfg := func(ck func([]byte) error) Config {
		return Config{Iters: 3, InnerEpochs: 2, Schedule: train.Constant{LR: 0.05}, Seed: 4, STEClip: true, Checkpoint: ck}
	}
	var saved [2][][]byte
	var graphs [2]*engine.Graph
	for i := range saved {
		r, g, _, _ := steRun(t, cfg(func(b []byte) error { saved[i] = append(saved[i], bytes.Clone(b)); return nil }))
		if err := r.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		graphs[i] = g
		for _, p := range r.params {
			for j, v := range p.Value.F {
				if v < -1 || v > 1 {
					t.Fatalf("latent weight %d = %v outside the clip range", j, v)
				}
			}
		}
	}
	for it := range saved[0] {
		if !bytes.Equal(saved[0][it], saved[1][it]) {
			t.Fatalf("iteration %d: two identical runs wrote different checkpoints", it+1)
		}
	}
	r, g, _, _ := steRun(t, cfg(nil))
	if err := r.Restore(saved[0][0]); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range graphs[0].Params() {
		q := g.Param(p.Name)
		for j, v := range p.Value.F {
			if math.Float32bits(v) != math.Float32bits(q.Value.F[j]) {
				t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", p.Name, j, v, q.Value.F[j])
			}
		}
	}
}
