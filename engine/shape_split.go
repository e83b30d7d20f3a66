package engine

import (
	"slices"
)

// splitKernel cuts its input into parts along an axis.
type splitKernel struct {
	n     *Node
	axis  int64
	attr  []int64 // split sizes from the attribute (before opset 13)
	parts int
	sizes []int // per output, set by Infer
}

func buildSplit(n *Node) (Kernel, error) {
	k := &splitKernel{n: n, axis: n.Int("axis", 0), parts: len(n.Proto.GetOutput())}
	if n.Opset < 13 {
		k.attr = n.Ints("split", nil)
	}
	if n.Opset >= 18 && n.Has("num_outputs") {
		if no := n.Int("num_outputs", 0); no != int64(k.parts) {
			return nil, n.Errorf("num_outputs is %d but the node has %d outputs", no, k.parts)
		}
	}
	if k.parts == 0 {
		return nil, n.Errorf("no outputs")
	}
	return k, nil
}

func (k *splitKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	shape := in[0].Shape
	a, ok := normAxis(k.axis, len(shape))
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for an input of shape %v", k.axis, shape)
	}
	dim := shape[a]
	sizes := k.attr
	if k.n.Opset >= 13 && present(in, 1) {
		v, known := intsOf(in[1])
		if !known {
			return nil, k.n.Errorf("the split input must be known before running (a constant)")
		}
		sizes = v
	}
	k.sizes = make([]int, k.parts)
	switch {
	case sizes != nil:
		if len(sizes) != k.parts {
			return nil, k.n.Errorf("split %v has %d entries, the node has %d outputs", sizes, len(sizes), k.parts)
		}
		sum := 0
		for i, s := range sizes {
			if s < 0 {
				return nil, k.n.Errorf("split %v has a negative size", sizes)
			}
			k.sizes[i] = int(s)
			sum += int(s)
		}
		if sum != dim {
			return nil, k.n.Errorf("split %v sums to %d, but axis %d has size %d", sizes, sum, a, dim)
		}
	case k.n.Opset >= 18:
		// Equal parts; since opset 18 the last part may be smaller.
		c := (dim + k.parts - 1) / k.parts
		for i := range k.sizes {
			k.sizes[i] = max(0, min(c, dim-i*c))
		}
		if c*(k.parts-1) >= dim && dim > 0 {
			return nil, k.n.Errorf("cannot split size %d into %d non-empty parts", dim, k.parts)
		}
	default:
		if dim%k.parts != 0 {
			return nil, k.n.Errorf("axis %d of size %d does not split into %d equal parts", a, dim, k.parts)
		}
		for i := range k.sizes {
			k.sizes[i] = dim / k.parts
		}
	}
	outs := make([]*Tensor, k.parts)
	for i, s := range k.sizes {
		sh := slices.Clone(shape)
		sh[a] = s
		outs[i] = &Tensor{DType: in[0].DType, Shape: sh}
	}
	return outs, nil
}

func (k *splitKernel) Forward(_ *Context, in, out []*Tensor) error {
	a, _ := normAxis(k.axis, len(in[0].Shape))
	outer, inner := splitBlocks(in[0].Shape, a)
	row := in[0].Shape[a] * inner
	off := 0
	for _, t := range out {
		w := t.Shape[a] * inner
		for o := range outer {
			if t.DType == Int64 {
				copy(t.I[o*w:(o+1)*w], in[0].I[o*row+off:o*row+off+w])
			} else {
				copy(t.F[o*w:(o+1)*w], in[0].F[o*row+off:o*row+off+w])
			}
		}
		off += w
	}
	return nil
}

func (k *splitKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil {
		return nil
	}
	a, _ := normAxis(k.axis, len(in[0].Shape))
	outer, inner := splitBlocks(in[0].Shape, a)
	row := in[0].Shape[a] * inner
	off := 0
	for j, t := range out {
		w := t.Shape[a] * inner
		if gout[j] != nil {
			for o := range outer {
				addTo(gin[0].F[o*row+off:o*row+off+w], gout[j].F[o*w:(o+1)*w])
			}
		}
		off += w
	}
	return nil
}

func (k *splitKernel) Retains() (in, out []bool) {
	return []bool{false, false}, make([]bool, k.parts)
}
