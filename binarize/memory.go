package binarize

import (
	"errors"
	"fmt"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/train"
)

// MemoryError reports that training even one sample at a time does not fit the limit.
type MemoryError struct {
	Model string
	// Need is what a single-sample micro-batch needs, Limit the memory limit, in bytes.
	Need, Limit int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%s: training one sample at a time needs %d bytes (data, plans, gradients and optimizer state), over the memory limit of %d bytes", e.Model, e.Need, e.Limit)
}

// accountShare is the part of the memory limit that what TrainNeed counts may take. The
// rest is for what it does not count — the Go runtime's garbage between collections (the
// run holds the collector to the limit, see Run), plans dropped and remade, the models'
// protobufs, kernels' scratch, the BLAS's buffers — so that the process's peak resident
// memory stays within the limit.
const accountShare = 0.75

// Shape is how a run of batches of Batch samples over Samples calibration samples is
// split for training: micro-batches of Micro samples (train.MicroSize of Batch) and, for
// the last batch when Samples is not a multiple of Batch, of Last samples (0: none).
// Each distinct size is one engine plan per graph.
type Shape struct {
	Batch, Samples, Micro, Last int
	// Eval is the batch of the evaluation passes when it is larger than Micro and Last
	// (an evaluation set larger than the samples trained on), else 0: the teacher runs
	// an inference plan at that size too.
	Eval int
}

// split returns the shape of batches of batch samples trained in pieces of at most micro.
func split(batch, samples, micro int) Shape {
	s := Shape{Batch: batch, Samples: samples, Micro: train.MicroSize(batch, micro)}
	if r := samples % batch; r > 0 && samples > batch {
		s.Last = train.MicroSize(r, micro)
	}
	return s
}

// Need is what a training run holds, by part, in bytes.
type Need struct {
	// Student is the trained graph's plans at the shape's sizes (training plans: activations
	// and their gradients, every float parameter trainable); Teacher the full-precision
	// graph's inference plans at the same sizes.
	Student, Teacher int64
	// Params are the float parameters' copies: the trained values, their gradients,
	// Adam's two moments, the teacher's values, and y, λ and a scratch buffer of the
	// binarized weights (counted for every parameter).
	Params int64
	// Data are the calibration samples held in memory (resident) and three batch buffers
	// (the shuffled and the ordered calibration batches and the held-out ones).
	Data int64
	// Input is one pass's input batch, at the larger of the shape's sizes. It is part of
	// Data, but the engine also checks a plan's input against the graph's own limit, so
	// each graph's limit must leave room for it.
	Input int64
}

// limits returns the bounds of the trained graph's and the teacher's plan caches in a
// run that needs n within budget. The student's is what the budget leaves it: its
// training plans at the shape's sizes fit, and so do the statistics' and the criterion's,
// which are no larger. The teacher's is its need: PlanBytes counts its inference plans
// as they allocate.
func (n Need) limits(budget int64) (student, teacher int64) {
	return max(n.Student+n.Input, budget-n.Teacher-n.Params-n.Data), n.Teacher + n.Input
}

// Total is the sum of the parts.
func (n Need) Total() int64 { return n.Student + n.Teacher + n.Params + n.Data }

// TrainNeed returns what training in the shape sh holds, as the engine's plan accounting
// (Graph.PlanBytes) counts plans. sample is one sample's shape, resident the bytes of data
// the run keeps in memory (the decoded calibration and held-out sets; 0 when read from
// disk). A plan over the graphs' limit is its *engine.MemoryError.
func TrainNeed(student, teacher *engine.Graph, sample []int, sh Shape, resident int64) (Need, error) {
	var n Need
	per := int64(4)
	for _, d := range sample {
		per *= int64(d)
	}
	n.Input = per * int64(max(sh.Micro, sh.Last, sh.Eval))
	for _, b := range []int{sh.Micro, sh.Last, sh.Eval} {
		if b == 0 || (b == sh.Last && sh.Last == sh.Micro) {
			continue
		}
		x := engine.NewFloat(append([]int{b}, sample...), nil)
		if b != sh.Eval {
			s, err := student.PlanBytes(&engine.Context{Training: true}, x)
			if err != nil {
				return n, err
			}
			n.Student += s
		}
		t, err := teacher.PlanBytes(&engine.Context{NoGrad: true}, x)
		if err != nil {
			return n, err
		}
		n.Teacher += t
	}
	var params int64
	for _, p := range student.Params() {
		if p.Value.DType == engine.Float32 {
			params += int64(len(p.Value.F))
		}
	}
	n.Params = 8 * params * 4
	n.Data = resident + 3*int64(sh.Batch)*per
	return n, nil
}

// MicroBatchFor returns the training shape of batches of batch samples over samples
// calibration samples: the largest micro-batch up to batch (batch itself when the whole
// batch fits) whose TrainNeed fits in accountShare of limit, found by bisection over the
// number of pieces (the plans grow with the samples), and that need. student must have
// its float parameters trainable. Even one sample over the limit is a *MemoryError.
func MicroBatchFor(student, teacher *engine.Graph, sample []int, batch, samples int, resident, limit int64, model string) (Shape, Need, error) {
	budget := int64(accountShare * float64(limit))
	fits := func(pieces int) (bool, Shape, Need, error) {
		sh := split(batch, samples, (batch+pieces-1)/pieces)
		n, err := TrainNeed(student, teacher, sample, sh, resident)
		var me *engine.MemoryError
		if errors.As(err, &me) {
			return false, sh, n, nil
		}
		return err == nil && n.Total() <= budget, sh, n, err
	}
	ok, sh, need, err := fits(1)
	if err != nil || ok {
		return sh, need, err
	}
	ok, sh, need, err = fits(batch)
	if err != nil {
		return Shape{}, Need{}, err
	}
	if !ok {
		return Shape{}, Need{}, &MemoryError{Model: model, Need: need.Total(), Limit: budget}
	}
	lo, hi := 2, batch // fits(hi); find the fewest pieces that do
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, _, _, err := fits(mid)
		if err != nil {
			return Shape{}, Need{}, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	_, sh, need, err = fits(hi)
	return sh, need, err
}

// ResidentBytes returns the bytes of decoded data a run over calib and eval (nil: calib)
// keeps in memory: each set's float samples, unless it is larger than limit, which calib
// reads from disk batch by batch.
func ResidentBytes(calibSet, eval calib.Dataset, limit int64) int64 {
	size := func(d calib.Dataset) int64 {
		n := int64(4 * d.Len())
		for _, v := range d.SampleShape() {
			n *= v
		}
		if n > limit {
			return 0
		}
		return n
	}
	r := size(calibSet)
	if eval != nil && eval != calibSet {
		r += size(eval)
	}
	return r
}
