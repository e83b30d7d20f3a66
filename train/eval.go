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
	// Reference, when set, is the model the outputs are compared with (the full-precision
	// model): top-1 agreement and the fidelity of every output; and the teacher of Loss.
	Reference *engine.Graph
	// ReferenceCache, when set, keeps the Reference's outputs of each batch, so that a
	// later Evaluate with the same cache over the same batches in the same order (the
	// statistics of an optimisation, measured each iteration with new weights against a
	// frozen teacher) skips the Reference's forward passes. See RefCache.
	ReferenceCache *RefCache
	// Outputs describes the model's outputs (DetectOutputs); nil means DetectOutputs
	// without the model file, from the shapes of the first batch's outputs.
	Outputs []OutputSpec
	// Engine carries the BLAS implementation and worker count; nil means the graphs' Options.
	Engine *engine.Context
}

// Metrics are the results of an evaluation.
type Metrics struct {
	// Samples is the number of samples evaluated.
	Samples int
	// Labelled reports whether the data had labels, and so whether Accuracy is meaningful.
	Labelled bool
	// Accuracy is the fraction of the labelled output's positions (samples for [N, C]
	// logits) whose top-1 class, or decision for a binary head, is the label; Correct and
	// Positions are its numerator and denominator.
	Accuracy           float64
	Correct, Positions int
	// HasAgreement reports whether a Reference was given and an output has classes or
	// decisions, and so whether Agreement is meaningful.
	HasAgreement bool
	// Agreement is the fraction of positions on which the model's top-1 class (or decision)
	// equals the Reference's: of the labelled output when there is one (the first output
	// with classes or decisions), else the lowest over the outputs.
	Agreement float64
	// ExpectedDrop, with HasAgreement, is the largest Fidelity.ExpectedDrop of the outputs
	// Agreement is taken over: the accuracy the model is expected to lose against the
	// Reference, measured without labels; AgreementPositions is that output's positions.
	ExpectedDrop       float64
	AgreementPositions int
	// MaxLogitDiff is the largest absolute difference between an output value of the model
	// and the Reference's, when a Reference was given.
	MaxLogitDiff float64
	// Outputs holds the fidelity of every output to the Reference's, in graph order, when
	// a Reference was given.
	Outputs []Fidelity
	// HasLoss reports whether Loss was computed.
	HasLoss bool
	// Loss is the mean of EvalOptions.Loss over the samples.
	Loss float64
}

// Evaluate runs g in inference mode over one epoch of data (which it then Resets) and
// returns accuracy (with labels), agreement and fidelity to the reference (with a
// reference) and the mean loss. Ties in the top-1 go to the lowest class index. Cancelling
// ctx stops between batches with ctx's error.
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
	specs := o.Outputs
	var fid []fidelityAcc
	labelOut := -1
	var correct, positions int
	var lossSum float64
	batch := 0
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
		lab := LabelsPer(labels, n) > 0 && labelled(labels)
		labelledAll = labelledAll && lab
		var routs []*engine.Tensor
		if o.Reference != nil && o.ReferenceCache != nil {
			routs = o.ReferenceCache.get(batch, n)
		}
		if o.Reference != nil && routs == nil {
			if err := st.tfeed.Load(o.Reference, data); err != nil {
				return m, fmt.Errorf("evaluate: reference: %w", err)
			}
			var err error
			if routs, err = st.tfeed.Forward(o.Reference, &run); err != nil {
				return m, fmt.Errorf("evaluate: reference: %w", err)
			}
			if o.ReferenceCache != nil {
				o.ReferenceCache.put(batch, n, routs)
			}
		}
		batch++
		outs, err := f.Forward(g, &run)
		if err != nil {
			return m, fmt.Errorf("evaluate: %w", err)
		}
		if specs == nil {
			if specs, err = DetectOutputs(nil, g, outs, DetectOptions{Labelled: lab}); err != nil {
				return m, fmt.Errorf("evaluate: %w", err)
			}
		}
		if len(specs) != len(outs) {
			return m, fmt.Errorf("evaluate: %d output descriptions for %d outputs", len(specs), len(outs))
		}
		if fid == nil {
			fid = make([]fidelityAcc, len(outs))
			labelOut = LabelOutput(specs)
		}
		if lossOK {
			if o.Loss.NeedsLabels() && !lab || NeedsTeacher(o.Loss) && routs == nil {
				lossOK = false
			} else {
				v, err := ApplyLoss(o.Loss, g, outs, routs, labels, n, nil)
				if err != nil {
					return m, fmt.Errorf("evaluate: %w", err)
				}
				lossSum += v * float64(n)
			}
		}
		if lab && labelOut >= 0 {
			c, p, err := labelHits(specs[labelOut], outs[labelOut], labels)
			if err != nil {
				return m, fmt.Errorf("evaluate: %w", err)
			}
			correct += c
			positions += p
		}
		if routs != nil {
			for i, s := range specs {
				if s.Kind == Ignored {
					continue
				}
				if err := fid[i].add(s, outs[i], routs[i]); err != nil {
					return m, fmt.Errorf("evaluate: output %s: %w", s.Name, err)
				}
			}
		}
		m.Samples += n
	}
	if err := data.Err(); err != nil {
		return m, fmt.Errorf("evaluate: reading data: %w", err)
	}
	if o.ReferenceCache != nil {
		o.ReferenceCache.done(batch)
	}
	data.Reset()
	if m.Samples == 0 {
		return m, fmt.Errorf("evaluate: the data gave no batch")
	}
	if labelledAll && labelOut >= 0 && positions > 0 {
		m.Labelled, m.Correct, m.Positions = true, correct, positions
		m.Accuracy = float64(correct) / float64(positions)
	}
	if o.Reference != nil {
		agree := 2.0
		for i, s := range specs {
			if s.Kind == Ignored {
				continue
			}
			f := fid[i].result(s)
			m.Outputs = append(m.Outputs, f)
			m.MaxLogitDiff = math.Max(m.MaxLogitDiff, f.MaxAbsErr)
			if f.HasAgreement && (i == labelOut || labelOut < 0) {
				if f.Agreement < agree {
					agree, m.AgreementPositions = f.Agreement, f.Positions
				}
				m.ExpectedDrop = math.Max(m.ExpectedDrop, f.ExpectedDrop)
			}
		}
		if agree <= 1 {
			m.HasAgreement, m.Agreement = true, agree
		}
	}
	if lossOK {
		m.HasLoss, m.Loss = true, lossSum/float64(m.Samples)
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

// RefCache holds a reference model's outputs, batch by batch, for Evaluate
// (EvalOptions.ReferenceCache). The first complete pass fills it; later passes read it.
// It is only correct when every pass reads the same samples in the same order and the
// reference does not change; a pass whose batches differ in number or size from the
// cached ones runs the reference. When the outputs would take more than Max bytes the
// cache gives up and holds nothing, so that it never costs more than Max.
type RefCache struct {
	// Max bounds the bytes held; 0 means no bound.
	Max int64

	outs     [][]*engine.Tensor
	bytes    int64
	complete bool // a whole pass is cached
	off      bool // over Max: not caching
}

// Bytes returns the bytes the cache holds.
func (c *RefCache) Bytes() int64 { return c.bytes }

// get returns batch i's cached outputs, nil when the cache has none of n samples.
func (c *RefCache) get(i, n int) []*engine.Tensor {
	if !c.complete || i >= len(c.outs) {
		return nil
	}
	outs := c.outs[i]
	if len(outs) == 0 || len(outs[0].Shape) == 0 || outs[0].Shape[0] != n {
		return nil
	}
	return outs
}

// put copies batch i's outputs (the engine's buffers are reused by the next forward pass)
// while the first pass fills the cache.
func (c *RefCache) put(i, n int, outs []*engine.Tensor) {
	if c.complete || c.off || i != len(c.outs) {
		return
	}
	cp := make([]*engine.Tensor, len(outs))
	for k, t := range outs {
		if len(t.Shape) == 0 || t.Shape[0] != n {
			c.drop() // an output without the batch axis first: not cacheable by batch
			return
		}
		cp[k] = &engine.Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...),
			F: append([]float32(nil), t.F...), I: append([]int64(nil), t.I...)}
		c.bytes += 4*int64(len(t.F)) + 8*int64(len(t.I))
	}
	if c.Max > 0 && c.bytes > c.Max {
		c.drop()
		return
	}
	c.outs = append(c.outs, cp)
}

// done ends a pass of n batches: the cache is complete when it holds all of them.
func (c *RefCache) done(n int) {
	if !c.off && !c.complete {
		if len(c.outs) == n {
			c.complete = true
		} else {
			c.outs, c.bytes = nil, 0
		}
	}
}

func (c *RefCache) drop() {
	c.outs, c.bytes, c.off = nil, 0, true
}
