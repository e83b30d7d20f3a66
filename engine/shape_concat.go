package engine

import (
	"slices"
)

// concatKernel joins its inputs along an axis.
type concatKernel struct {
	n    *Node
	axis int64
}

func buildConcat(n *Node) (Kernel, error) {
	if !n.Has("axis") {
		return nil, n.Errorf("attribute axis is required")
	}
	return &concatKernel{n: n, axis: n.Int("axis", 0)}, nil
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

func (k *concatKernel) Forward(_ *Context, in, out []*Tensor) error {
	a, _ := normAxis(k.axis, len(out[0].Shape))
	outer, inner := splitBlocks(out[0].Shape, a)
	row := out[0].Shape[a] * inner
	off := 0
	for _, t := range in {
		w := t.Shape[a] * inner
		for o := range outer {
			if t.DType == Int64 {
				copy(out[0].I[o*row+off:o*row+off+w], t.I[o*w:(o+1)*w])
			} else {
				copy(out[0].F[o*row+off:o*row+off+w], t.F[o*w:(o+1)*w])
			}
		}
		off += w
	}
	return nil
}

func (k *concatKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	a, _ := normAxis(k.axis, len(out[0].Shape))
	outer, inner := splitBlocks(out[0].Shape, a)
	row := out[0].Shape[a] * inner
	off := 0
	for i, t := range in {
		w := t.Shape[a] * inner
		if gin[i] != nil {
			for o := range outer {
				addTo(gin[i].F[o*w:(o+1)*w], gout[0].F[o*row+off:o*row+off+w])
			}
		}
		off += w
	}
	return nil
}

// Concat's backward needs only shapes, which the executor keeps for every value.
func (k *concatKernel) Retains() (in, out []bool) {
	return make([]bool, len(k.n.Proto.GetInput())), []bool{false}
}
