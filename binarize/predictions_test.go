package binarize

import (
	"context"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/train"
)

// TestPredictionsCountTheReportedAccuracy: the per-sample predictions of the exported
// model hit exactly as often as the accuracy Run reports for it, and the full-precision
// model's as often as Result.FullPrecision, so that per-sample tests built on them
// (compare's McNemar) describe the reported numbers.
func TestPredictionsCountTheReportedAccuracy(t *testing.T) {
	m, data, o := small(t)
	data.Eval = data.Calib // the set the predictions are taken on below
	res, err := Run(context.Background(), m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *train.Metrics
		pred func() ([]int64, []int64, error)
	}{
		{"binarized", &res.Binarized, func() ([]int64, []int64, error) {
			return Predictions(context.Background(), res.Model, data.Calib, o, res.Outputs)
		}},
		{"full precision", &res.FullPrecision, func() ([]int64, []int64, error) {
			return Predictions(context.Background(), m, data.Calib, o, res.Outputs)
		}},
	} {
		pred, labels, err := c.pred()
		if err != nil {
			t.Fatal(err)
		}
		if len(pred) != c.m.Positions || len(labels) != len(pred) {
			t.Fatalf("%s: %d predictions, %d labels for %d positions", c.name, len(pred), len(labels), c.m.Positions)
		}
		hits := 0
		for i := range pred {
			if pred[i] == labels[i] {
				hits++
			}
		}
		if hits != c.m.Correct {
			t.Errorf("%s: %d hits, Run reports %d", c.name, hits, c.m.Correct)
		}
	}
}

// TestDecideTies: ties go to the lowest class and NaN never wins, as in train.Evaluate; a
// class axis other than the last is read along it; binary heads threshold at 0 (logit)
// or 0.5 (probability).
func TestDecideTies(t *testing.T) {
	nan := float32(0)
	nan /= nan
	y := &engine.Tensor{DType: engine.Float32, Shape: []int{3, 3}, F: []float32{1, 1, 0, nan, 2, 2, 0, nan, -1}}
	p, err := decide(train.OutputSpec{Kind: train.Logits, Axis: 1}, y)
	if err != nil || len(p) != 3 || p[0] != 0 || p[1] != 1 || p[2] != 0 {
		t.Errorf("logits: %v %v, want [0 1 0]", p, err)
	}
	// [1, 2 classes, 2 steps]: step 0 has (0, 5) → 1, step 1 has (3, 1) → 0.
	y = &engine.Tensor{DType: engine.Float32, Shape: []int{1, 2, 2}, F: []float32{0, 3, 5, 1}}
	if p, err = decide(train.OutputSpec{Kind: train.Logits, Axis: 1}, y); err != nil || len(p) != 2 || p[0] != 1 || p[1] != 0 {
		t.Errorf("sequence: %v %v, want [1 0]", p, err)
	}
	y = &engine.Tensor{DType: engine.Float32, Shape: []int{3, 1}, F: []float32{0, -0.1, 0.5}}
	if p, _ = decide(train.OutputSpec{Kind: train.BinaryLogit}, y); p[0] != 1 || p[1] != 0 || p[2] != 1 {
		t.Errorf("binary logit: %v, want [1 0 1]", p)
	}
	if p, _ = decide(train.OutputSpec{Kind: train.Sigmoid}, y); p[0] != 0 || p[1] != 0 || p[2] != 1 {
		t.Errorf("sigmoid: %v, want [0 0 1]", p)
	}
}
