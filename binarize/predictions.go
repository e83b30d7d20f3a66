package binarize

import (
	"context"
	"fmt"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// Predictions runs m (a Result's Model, or the full-precision model) once over d in
// inference mode and returns, for every position of its labelled output (a sample for
// [N, C] logits, a sample and time step for a sequence), the predicted class and the
// label (−1 without labels). The labelled output is train.LabelOutput(specs), specs as in
// Result.Outputs.
//
// It decides the way train.Evaluate counts Result.Binarized.Correct (top-1 with ties to
// the lowest class and NaN never winning, or a binary head's decision as 0/1), so that
// per-sample statistics such as McNemar's test count the same hits as the accuracy
// reported next to them; binarize's tests check that the counts agree. It lives here and
// not in train because it is the exported file, built with o's engine options, that is
// measured, as Run measures it.
func Predictions(ctx context.Context, m *onnxio.Model, d calib.Dataset, o Options, specs []train.OutputSpec) (pred, labels []int64, err error) {
	o = o.withDefaults()
	out := train.LabelOutput(specs)
	if out < 0 {
		return nil, nil, fmt.Errorf("%s: no output has classes or a binary decision to predict", m.Name)
	}
	s := specs[out]
	g, err := Build(m, o)
	if err != nil {
		return nil, nil, err
	}
	size := o.BatchSize
	if o.MicroBatch > 0 && o.MicroBatch < size {
		size = o.MicroBatch // as evaluate: a pass at the training batch may not fit
	}
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: size})
	if err != nil {
		return nil, nil, err
	}
	run := engine.Context{BLAS: o.BLAS, Workers: o.Workers, NoGrad: true}
	var f train.Feed
	for b.Next() {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if err := f.Load(g, b); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		outs, err := f.Forward(g, &run)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if out >= len(outs) {
			return nil, nil, fmt.Errorf("%s: %d outputs, want at least %d", m.Name, len(outs), out+1)
		}
		p, err := decide(s, outs[out])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		y := b.Y()
		switch {
		case len(y) == len(p):
			labels = append(labels, y...)
		case len(y) == 0 || allUnlabelled(y):
			for range p {
				labels = append(labels, -1)
			}
		default:
			return nil, nil, fmt.Errorf("%s: output %s: %d labels for %d positions", m.Name, s.Name, len(y), len(p))
		}
		pred = append(pred, p...)
	}
	if err := b.Err(); err != nil {
		return nil, nil, err
	}
	return pred, labels, nil
}

func allUnlabelled(y []int64) bool {
	for _, v := range y {
		if v >= 0 {
			return false
		}
	}
	return true
}

// decide returns the class of every position of y, as train's labelHits decides it.
func decide(s train.OutputSpec, y *engine.Tensor) ([]int64, error) {
	switch {
	case s.Kind.HasClassAxis():
		if s.Axis < 0 || s.Axis >= len(y.Shape) || y.Shape[s.Axis] < 1 {
			return nil, fmt.Errorf("output %s: shape %v has no class axis %d", s.Name, y.Shape, s.Axis)
		}
		outer, inner := 1, 1
		for _, d := range y.Shape[:s.Axis] {
			outer *= d
		}
		for _, d := range y.Shape[s.Axis+1:] {
			inner *= d
		}
		classes := y.Shape[s.Axis]
		if outer*classes*inner != len(y.F) {
			return nil, fmt.Errorf("output %s: shape %v does not hold %d values", s.Name, y.Shape, len(y.F))
		}
		p := make([]int64, 0, outer*inner)
		for o := range outer {
			for i := range inner {
				base, best := o*classes*inner+i, 0
				for c := 1; c < classes; c++ {
					v, bv := y.F[base+c*inner], y.F[base+best*inner]
					if v > bv || bv != bv {
						best = c
					}
				}
				p = append(p, int64(best))
			}
		}
		return p, nil
	case s.Kind.Binary():
		threshold := float32(0.5) // a probability
		if s.Kind == train.BinaryLogit {
			threshold = 0
		}
		p := make([]int64, len(y.F))
		for i, v := range y.F {
			if v >= threshold {
				p[i] = 1
			}
		}
		return p, nil
	}
	return nil, fmt.Errorf("output %s (%s) has no classes", s.Name, s.Kind)
}
