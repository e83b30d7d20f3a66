package engine

import "slices"

// tileKernel repeats its input repeats[i] times along each axis i. The output, seen as
// [repeats[0], d0, repeats[1], d1, …], is the input read with stride 0 along every
// repeat axis, so the forward pass is one strided copy (viewCopy) and the VJP the same
// walk accumulating: each input element's gradient is the sum over its tiles.
type tileKernel struct {
	n *Node
	// shape is the doubled index space, st the input's strides along it and ss the
	// output's; idx is viewCopy's counter. All are rebuilt per call from the shapes, in
	// buffers kept between calls.
	shape, st, ss, idx, xs []int
}

func buildTile(n *Node) (Kernel, error) { return &tileKernel{n: n}, nil }

func (k *tileKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	reps, ok := intsOf(in[1])
	if !ok {
		return nil, k.n.Errorf("the repeats input must be known before running (a constant, or computed from shapes)")
	}
	x := in[0].Shape
	if len(in[1].Shape) != 1 || len(reps) != len(x) {
		return nil, k.n.Errorf("repeats %v must be one integer per input axis (input shape %v)", reps, x)
	}
	s := make([]int, len(x))
	for i, r := range reps {
		if r < 0 {
			return nil, k.n.Errorf("repeats %v must not be negative", reps)
		}
		s[i] = x[i] * int(r)
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

// layout fills the doubled index space for input shape x and output shape y; the
// repeats are y[i]/x[i] (an empty input axis leaves nothing to copy either way).
func (k *tileKernel) layout(x, y []int) {
	r := len(x)
	k.xs = stridesOf(k.xs, x)
	k.shape = slices.Grow(k.shape[:0], 2*r)[:2*r]
	k.st = slices.Grow(k.st[:0], 2*r)[:2*r]
	k.ss = slices.Grow(k.ss[:0], 2*r)[:2*r]
	k.idx = slices.Grow(k.idx[:0], 2*r)[:2*r]
	os := 1 // the output's stride of axis i
	for i := r - 1; i >= 0; i-- {
		reps := 0
		if x[i] > 0 {
			reps = y[i] / x[i]
		}
		k.shape[2*i], k.shape[2*i+1] = reps, x[i]
		k.st[2*i], k.st[2*i+1] = 0, k.xs[i]
		k.ss[2*i], k.ss[2*i+1] = x[i]*os, os
		os *= y[i]
	}
}

func (k *tileKernel) Forward(_ *Context, in, out []*Tensor) error {
	x, y := in[0], out[0]
	k.layout(x.Shape, y.Shape)
	if x.DType == Int64 {
		viewCopy(false, y.I, 0, k.ss, x.I, 0, k.st, k.shape, k.idx)
	} else {
		viewCopy(false, y.F, 0, k.ss, x.F, 0, k.st, k.shape, k.idx)
	}
	return nil
}

func (k *tileKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	k.layout(in[0].Shape, out[0].Shape)
	viewCopy(true, gin[0].F, 0, k.st, gout[0].F, 0, k.ss, k.shape, k.idx)
	return nil
}

// Retains keeps only the repeats; the gradient needs the shapes alone.
func (k *tileKernel) Retains() (in, out []bool) { return []bool{false, true}, []bool{false} }
