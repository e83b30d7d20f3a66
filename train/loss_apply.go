package train

import (
	"fmt"
	"slices"

	"github.com/qtool/qtool/engine"
)

// Gradients holds the output gradients of a loss between batches, so that a training
// loop allocates them once.
type Gradients struct {
	ts   []engine.Tensor
	ptrs []*engine.Tensor
	fs   [][]float32
}

// Outputs returns the gradient of each output for Graph.Backward, nil for the outputs the
// loss gives none.
func (gr *Gradients) Outputs() []*engine.Tensor { return gr.ptrs }

// size prepares one gradient buffer per output: for the first only with a plain Loss, for
// every float32 output with a GraphLoss.
func (gr *Gradients) size(outs []*engine.Tensor, all bool) [][]float32 {
	if len(gr.ts) != len(outs) {
		gr.ts = make([]engine.Tensor, len(outs))
		gr.ptrs = make([]*engine.Tensor, len(outs))
		gr.fs = make([][]float32, len(outs))
	}
	for i, y := range outs {
		gr.ptrs[i], gr.fs[i] = nil, nil
		if (i > 0 && !all) || y.DType != engine.Float32 {
			continue
		}
		t := &gr.ts[i]
		if cap(t.F) < len(y.F) {
			t.F = make([]float32, len(y.F))
		}
		t.DType, t.Shape, t.F = engine.Float32, y.Shape, t.F[:len(y.F)]
		gr.ptrs[i], gr.fs[i] = t, t.F
	}
	return gr.fs
}

// ApplyLoss evaluates l on a batch of n samples: outs are g's outputs, teacher the teacher
// model's on the same batch (nil when NeedsTeacher(l) is false) and labels the batch's
// labels. A GraphLoss sees every output; a plain Loss the first, which must be logits
// [batch, classes]. When gr is not nil it receives the gradient of every output, for
// g.Backward(ctx, gr.Outputs()...).
func ApplyLoss(l Loss, g *engine.Graph, outs, teacher []*engine.Tensor, labels []int64, n int, gr *Gradients) (float64, error) {
	if gl, ok := l.(GraphLoss); ok {
		var grads [][]float32
		if gr != nil {
			grads = gr.size(outs, true)
		}
		return gl.GraphValue(outs, teacher, labels, grads)
	}
	y, classes, err := logits(g, outs, n)
	if err != nil {
		return 0, err
	}
	t := Target{Labels: labels}
	if teacher != nil {
		ty, _, err := logits(g, teacher, n)
		if err != nil {
			return 0, fmt.Errorf("teacher: %w", err)
		}
		t.Teacher = ty.F
	}
	var grad []float32
	if gr != nil {
		grad = gr.size(outs, false)[0]
	}
	return l.Value(y.F, classes, t, grad)
}

// BatchTotals describes the batch a chunk belongs to, for ChunkLoss: the terms of an
// Objective that are means over something other than samples need the batch's count of it.
type BatchTotals struct {
	// Samples is the number of samples of the batch that its chunks cover.
	Samples int
	// Labelled is the number of their label positions that are not IgnoreLabel.
	Labelled int
	// TeacherSquares holds, per output, Σt² of the teacher's outputs over those samples
	// for the outputs matched by normalised MSE (AddTeacherSquares); nil when none is.
	TeacherSquares []float64
}

// ChunkLoss is ApplyLoss on a chunk of nc of the samples of a batch (gradient
// accumulation, or the chunks of a model's fixed declared batch), scaled to the chunk's
// share of the batch's loss: the sum of the chunks' values and gradients is the batch's
// loss and its gradient. A mean over samples is shared by samples; an Objective's
// cross-entropy on labels with ignored positions is a mean over the positions counted,
// shared by the positions each chunk counts; its normalised MSE Σ(s−t)²/Σt² is shared by
// each chunk's Σt².
func ChunkLoss(l Loss, g *engine.Graph, outs, teacher []*engine.Tensor, labels []int64, nc int, b BatchTotals, gr *Gradients) (float64, error) {
	if nc == b.Samples {
		return ApplyLoss(l, g, outs, teacher, labels, nc, gr)
	}
	share := float64(nc) / float64(b.Samples)
	obj, ok := l.(*Objective)
	per := len(labels) / max(nc, 1)
	byPositions := ok && obj.Labelled && b.Labelled < per*b.Samples
	if byPositions || (ok && b.TeacherSquares != nil) {
		scale := slices.Repeat([]float64{share}, len(outs))
		if byPositions {
			scale[obj.LabelOutput] = 0
			if b.Labelled > 0 {
				scale[obj.LabelOutput] = float64(countLabelled(labels)) / float64(b.Labelled)
			}
		}
		for i := range b.TeacherSquares {
			if !obj.nmse(i) {
				continue
			}
			// NMSE divides by Σt², or by the element count when the teacher's outputs are
			// all zero, in the chunk as in the batch.
			den, all := sumSquares(teacher[i].F), b.TeacherSquares[i]
			if den == 0 {
				den = float64(len(teacher[i].F))
			}
			if all == 0 {
				all = float64(len(teacher[i].F)) / share
			}
			scale[i] = den / all
		}
		var grads [][]float32
		if gr != nil {
			grads = gr.size(outs, true)
		}
		return obj.scaledValue(outs, teacher, labels, grads, scale)
	}
	loss, err := ApplyLoss(l, g, outs, teacher, labels, nc, gr)
	if err != nil {
		return loss, err
	}
	if gr != nil {
		for _, gt := range gr.Outputs() {
			if gt == nil {
				continue
			}
			for i := range gt.F {
				gt.F[i] *= float32(share)
			}
		}
	}
	return loss * share, nil
}

// HasNMSE reports whether l is an Objective that matches some output by normalised MSE,
// whose chunks ChunkLoss shares by BatchTotals.TeacherSquares.
func HasNMSE(l Loss) bool {
	if obj, ok := l.(*Objective); ok {
		for i := range obj.Outputs {
			if obj.nmse(i) {
				return true
			}
		}
	}
	return false
}

// AddTeacherSquares adds Σt² of the teacher's outputs to acc for each output that the
// Objective l matches by normalised MSE, and returns acc (nil when l has no such output).
func AddTeacherSquares(l Loss, teacher []*engine.Tensor, acc []float64) []float64 {
	obj, ok := l.(*Objective)
	if !ok {
		return nil
	}
	for i := range obj.Outputs {
		if !obj.nmse(i) || i >= len(teacher) {
			continue
		}
		if acc == nil {
			acc = make([]float64, len(obj.Outputs))
		}
		acc[i] += sumSquares(teacher[i].F)
	}
	return acc
}

func sumSquares(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}
