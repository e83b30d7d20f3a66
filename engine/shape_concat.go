package engine

import (
	"slices"
)

// concatKernel joins its inputs along an axis.
type concatKernel struct {
	n    *Node
	axis int64

	// Arguments of the current call for the bound functions below, so that passing them
	// to ctx.Parallel does not allocate.
	in, gin  []*Tensor
	out      *Tensor
	a, inner int
	row      int
	fwd, bwd func(lo, hi int)
}

func buildConcat(n *Node) (Kernel, error) {
	if !n.Has("axis") {
		return nil, n.Errorf("attribute axis is required")
	}
	k := &concatKernel{n: n, axis: n.Int("axis", 0)}
	k.fwd, k.bwd = k.forward, k.backward
	return k, nil
}

func (k *concatKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) == 0 {
		return nil, k.n.Errorf("no inputs")
	}
	first := in[0]
	r := len(first.Shape)
	a, ok := normAxis(k.axis, r)
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for inputs of rank %d", k.axis, r)
	}
	s := slices.Clone(first.Shape)
	s[a] = 0
	for i, t := range in {
		if t == nil {
			return nil, k.n.Errorf("input %d is missing", i)
		}
		if t.DType != first.DType || len(t.Shape) != r {
			return nil, k.n.Errorf("input %d (%s %v) does not match input 0 (%s %v)", i, t.DType, t.Shape, first.DType, first.Shape)
		}
		for d := range r {
			if d != a && t.Shape[d] != first.Shape[d] {
				return nil, k.n.Errorf("input %d has shape %v, input 0 has %v: only axis %d may differ", i, t.Shape, first.Shape, a)
			}
		}
		s[a] += t.Shape[a]
	}
	return []*Tensor{{DType: first.DType, Shape: s}}, nil
}

// blocks returns how many outer blocks the axis splits a shape into, and the size of
// one block of each part along the axis.
func splitBlocks(shape []int, axis int) (outer, inner int) {
	return numel(shape[:axis]), numel(shape[axis+1:])
}

func (k *concatKernel) Forward(ctx *Context, in, out []*Tensor) error {
	k.setup(in, out[0])
	// Each outer index's row of the output is its own: workers take rows (SqueezeNet's
	// fire modules concatenate 55×55 planes, a tenth of its run copied on one core).
	ctx.Parallel(k.outer(), max(1, ewGrain/max(1, k.row)), k.fwd)
	k.in, k.out = nil, nil
	return nil
}

func (k *concatKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	k.setup(in, gout[0])
	k.gin = gin
	ctx.Parallel(k.outer(), max(1, ewGrain/max(1, k.row)), k.bwd)
	k.in, k.out, k.gin = nil, nil, nil
	return nil
}

// setup keeps a call's arguments: out is the output, or its gradient.
func (k *concatKernel) setup(in []*Tensor, out *Tensor) {
	k.in, k.out = in, out
	k.a, _ = normAxis(k.axis, len(out.Shape))
	_, k.inner = splitBlocks(out.Shape, k.a)
	k.row = out.Shape[k.a] * k.inner
}

func (k *concatKernel) outer() int { o, _ := splitBlocks(k.out.Shape, k.a); return o }

// forward copies rows [lo, hi) of every input into the output.
func (k *concatKernel) forward(lo, hi int) {
	for o := lo; o < hi; o++ {
		off := o * k.row
		for _, t := range k.in {
			w := t.Shape[k.a] * k.inner
			switch {
			case t.DType == Int64:
				copy(k.out.I[off:off+w], t.I[o*w:(o+1)*w])
			case w > 0 && &k.out.F[off] == &t.F[o*w]:
				// Written in place by its producer (concatInPlace).
			case w > 0 && o*k.row < len(t.F) && &k.out.F[off] == &t.F[o*k.row]:
				// Written in place a row apart by its producer (concatInPlace's strided
				// parts, whose F spans the output's rows from the first).
			default:
				copy(k.out.F[off:off+w], t.F[o*w:(o+1)*w])
			}
			off += w
		}
	}
}

// backward adds rows [lo, hi) of the output gradient to the inputs' gradients.
func (k *concatKernel) backward(lo, hi int) {
	for o := lo; o < hi; o++ {
		off := o * k.row
		for i, t := range k.in {
			w := t.Shape[k.a] * k.inner
			if k.gin[i] != nil {
				addTo(k.gin[i].F[o*w:(o+1)*w], k.out.F[off:off+w])
			}
			off += w
		}
	}
}

// Concat's backward needs only shapes, which the executor keeps for every value.
func (k *concatKernel) Retains() (in, out []bool) {
	return make([]bool, len(k.n.Proto.GetInput())), []bool{false}
}
