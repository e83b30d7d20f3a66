package binarize

import (
	"context"
	"errors"
	"fmt"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// LossObjective is train.Objective: every output matched with the full-precision model's
// (KL per position along a class axis, Bernoulli KL for sigmoid outputs, normalised MSE
// for the rest), the labels supervising the first classifier or binary output when the
// data have them. LossAuto chooses it for every model but a single-logits classifier.
const LossObjective Loss = "objective"

// detectSamples is the most calibration samples the outputs are told apart on.
const detectSamples = 64

// outputs describes the model's outputs for the objective and the fidelity metrics, from
// the graph (producers, declared shapes) and the teacher's outputs on the first
// calibration batch, with o's overrides. A name that is not an output is an *OptionError.
func (o Options) outputs(ctx context.Context, m *onnxio.Model, teacher *engine.Graph, d calib.Dataset, labelled bool) ([]train.OutputSpec, error) {
	// A few samples tell the outputs apart; a whole training batch might not fit in memory
	// in one pass (MicroBatch).
	size := min(o.BatchSize, detectSamples)
	if o.MicroBatch > 0 {
		size = min(size, o.MicroBatch)
	}
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: size})
	if err != nil {
		return nil, err
	}
	if !b.Next() {
		if err := b.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("binarize: the calibration data gave no batch")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Through a Feed, so that every input of the model is given, in chunks of a declared
	// batch.
	var f train.Feed
	if err := f.Load(teacher, b); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	outs, err := f.Forward(teacher, &engine.Context{BLAS: o.BLAS, Workers: o.Workers, NoGrad: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	specs, err := train.DetectOutputs(m, teacher, outs, train.DetectOptions{ClassAxis: o.ClassAxis, Weights: o.OutputWeights, Labelled: labelled})
	var oe *train.OutputError
	if errors.As(err, &oe) {
		field := "ClassAxis"
		if oe.Option == "Weights" {
			field = "OutputWeights"
		}
		return nil, &OptionError{Field: field, Value: fmt.Sprintf("%q", oe.Output), Reason: oe.Error()}
	}
	return specs, err
}

// singleClassifier reports whether the model has one float output and it is [N, C] logits:
// the models LossAuto keeps training with the plain cross-entropy and distillation losses,
// bit for bit as before objectives existed.
func singleClassifier(specs []train.OutputSpec) bool {
	n := 0
	for _, s := range specs {
		if s.Kind != train.Ignored {
			n++
		}
	}
	return n == 1 && specs[0].Kind == train.Logits && specs[0].Axis == 1
}

// objective returns the training loss, its resolved name and, for LossObjective, the
// objective's description.
func (o Options) objective(specs []train.OutputSpec, shapes [][]int, labelled bool) (train.Loss, Loss, error) {
	overridden := len(o.ClassAxis) > 0 || len(o.OutputWeights) > 0
	if o.Loss != LossObjective && (o.Loss != LossAuto || singleClassifier(specs) && !overridden) {
		l, name := o.loss(labelled)
		return l, name, nil
	}
	obj := &train.Objective{Outputs: specs, Temperature: o.Temperature}
	if lo := train.LabelOutput(specs); labelled && lo >= 0 {
		obj.Labelled, obj.LabelOutput = true, lo
	}
	if err := obj.Validate(shapes); err != nil {
		return nil, "", &OptionError{Field: "OutputWeights", Value: fmt.Sprint(o.OutputWeights), Reason: err.Error()}
	}
	return obj, LossObjective, nil
}
