package binarize

import (
	"errors"
	"fmt"

	"github.com/qtool/qtool/engine"
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

// TrainNeed returns the bytes training with batches of batch samples in micro-batches of
// micro needs, as the engine's plan accounting (Graph.PlanBytes) counts them: the
// student's training plan (activations and their gradients, every float parameter
// trainable) and the teacher's inference plan at micro samples, plus what no plan counts:
// each float parameter's gradient and Adam's two moments, and the data, three batches of
// batch samples (the shuffled and the ordered calibration batches and the held-out ones).
// sample is one sample's shape; a plan over the graphs' limit is its *engine.MemoryError.
func TrainNeed(student, teacher *engine.Graph, sample []int, batch, micro int) (int64, error) {
	x := engine.NewFloat(append([]int{micro}, sample...), nil)
	s, err := student.PlanBytes(&engine.Context{Training: true}, x)
	if err != nil {
		return 0, err
	}
	t, err := teacher.PlanBytes(&engine.Context{NoGrad: true}, x)
	if err != nil {
		return 0, err
	}
	var params int64
	for _, p := range student.Params() {
		if p.Value.DType == engine.Float32 {
			params += int64(len(p.Value.F))
		}
	}
	per := int64(4)
	for _, d := range sample {
		per *= int64(d)
	}
	return s + t + 3*params*4 + 3*int64(batch)*per, nil
}

// MicroBatchFor returns the largest micro-batch up to batch whose TrainNeed fits in limit
// (batch itself when the whole batch fits), found by bisection: the plans grow with the
// samples. student must have its float parameters trainable. Even one sample over the
// limit is a *MemoryError.
func MicroBatchFor(student, teacher *engine.Graph, sample []int, batch int, limit int64, model string) (int, error) {
	fits := func(b int) (bool, int64, error) {
		n, err := TrainNeed(student, teacher, sample, batch, b)
		var me *engine.MemoryError
		if errors.As(err, &me) {
			return false, n, nil
		}
		return err == nil && n <= limit, n, err
	}
	ok, _, err := fits(batch)
	if err != nil || ok {
		return batch, err
	}
	ok, need, err := fits(1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, &MemoryError{Model: model, Need: need, Limit: limit}
	}
	lo, hi := 1, batch-1 // fits(lo); find the largest that does
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		ok, _, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}
