package train

import (
	"context"
	"fmt"
	"math"

	"github.com/qtool/qtool/engine"
)

// EvalOptions configures Evaluate.
type EvalOptions struct {
	// Loss, when set, is averaged over the data. A loss that needs labels is skipped on data
	// without them; one that needs a teacher uses Reference.
	Loss Loss
	// Reference, when set, is the model whose top-1 predictions Agreement compares with (the
	// full-precision model), and the teacher of Loss.
	Reference *engine.Graph
	// Engine carries the BLAS implementation and worker count; nil means the graphs' Options.
	Engine *engine.Context
}

// Metrics are the results of an evaluation.
type Metrics struct {
	// Samples is the number of samples evaluated.
	Samples int
	// Labelled reports whether the data had labels, and so whether Accuracy is meaningful.
	Labelled bool
	// Accuracy is the fraction of samples whose top-1 class is the label.
	Accuracy float64
	// HasAgreement reports whether a Reference was given, and so whether Agreement is
	// meaningful.
	HasAgreement bool
	// Agreement is the fraction of samples on which the model's top-1 class equals the
	// Reference's.
	Agreement float64
	// MaxLogitDiff is the largest absolute difference between a logit of the model and the
	// Reference's, when HasAgreement.
	MaxLogitDiff float64
	// HasLoss reports whether Loss was computed.
	HasLoss bool
	// Loss is the mean of EvalOptions.Loss over the samples.
	Loss float64
}

// Evaluate runs g in inference mode over one epoch of data (which it then Resets) and
// returns accuracy (with labels), agreement with the reference's top-1 (with a reference)
// and the mean loss. Ties in the top-1 go to the lowest class index. Cancelling ctx stops
// between batches with ctx's error.
func Evaluate(ctx context.Context, g *engine.Graph, data Batcher, o EvalOptions) (Metrics, error) {
	var m Metrics
	if o.Reference == g && g != nil {
		return m, fmt.Errorf("evaluate: the reference must be a separate graph from the one evaluated")
	}
	run := engine.Context{}
	if o.Engine != nil {
		run = *o.Engine
	}
	run.Training, run.NoGrad = false, true
	var st stepper
	st.init(g)
	var correct, agree int
	var lossSum float64
	labelledAll, lossOK := true, o.Loss != nil
	for data.Next() {
		if err := ctx.Err(); err != nil {
			return m, fmt.Errorf("evaluate: %w", err)
		}
		f, n, err := st.input(g, data)
		if err != nil {
			return m, fmt.Errorf("evaluate: %w", err)
		}
		labels := data.Y()
		lab := len(labels) == n && labelled(labels)
		labelledAll = labelledAll && lab
		var ref []float32
		if o.Reference != nil {
			if err := st.tfeed.Load(o.Reference, data); err != nil {
				return m, fmt.Errorf("evaluate: reference: %w", err)
			}
			routs, err := st.tfeed.Forward(o.Reference, &run)
			if err != nil {
				return m, fmt.Errorf("evaluate: reference: %w", err)
			}
			r, _, err := logits(o.Reference, routs, n)
			if err != nil {
				return m, fmt.Errorf("evaluate: reference: %w", err)
			}
			ref = r.F
		}
		outs, err := f.Forward(g, &run)
		if err != nil {
			return m, fmt.Errorf("evaluate: %w", err)
		}
		y, classes, err := logits(g, outs, n)
		if err != nil {
			return m, fmt.Errorf("evaluate: %w", err)
		}
		if lossOK {
			if o.Loss.NeedsLabels() && !lab || !o.Loss.NeedsLabels() && ref == nil {
				lossOK = false
			} else {
				v, err := o.Loss.Value(y.F, classes, Target{Labels: labels, Teacher: ref}, nil)
				if err != nil {
					return m, fmt.Errorf("evaluate: %w", err)
				}
				lossSum += v * float64(n)
			}
		}
		for i := range n {
			top := argmax(y.F[i*classes : (i+1)*classes])
			if lab && int64(top) == labels[i] {
				correct++
			}
			if ref != nil && top == argmax(ref[i*classes:(i+1)*classes]) {
				agree++
			}
		}
		for i, v := range ref {
			m.MaxLogitDiff = math.Max(m.MaxLogitDiff, math.Abs(float64(y.F[i])-float64(v)))
		}
		m.Samples += n
	}
	if err := data.Err(); err != nil {
		return m, fmt.Errorf("evaluate: reading data: %w", err)
	}
	data.Reset()
	if m.Samples == 0 {
		return m, fmt.Errorf("evaluate: the data gave no batch")
	}
	total := float64(m.Samples)
	if labelledAll {
		m.Labelled, m.Accuracy = true, float64(correct)/total
	}
	if o.Reference != nil {
		m.HasAgreement, m.Agreement = true, float64(agree)/total
	}
	if lossOK {
		m.HasLoss, m.Loss = true, lossSum/total
	}
	return m, nil
}

// argmax returns the index of the largest value, the first on ties; NaN never wins.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] || x[best] != x[best] {
			best = i
		}
	}
	return best
}
