package engine

import (
	"slices"
)

// gatherKernel picks entries of its data along an axis.
type gatherKernel struct {
	n    *Node
	axis int64
}

func buildGather(n *Node) (Kernel, error) {
	return &gatherKernel{n: n, axis: n.Int("axis", 0)}, nil
}

func (k *gatherKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	data, ind := in[0], in[1]
	a, ok := normAxis(k.axis, len(data.Shape))
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for data of shape %v", k.axis, data.Shape)
	}
	if ind.DType != Int64 {
		return nil, k.n.Errorf("indices must be integers")
	}
	s := slices.Concat(data.Shape[:a], ind.Shape, data.Shape[a+1:])
	return []*Tensor{{DType: data.DType, Shape: s}}, nil
}

func (k *gatherKernel) Forward(_ *Context, in, out []*Tensor) error {
	data, ind := in[0], in[1]
	a, _ := normAxis(k.axis, len(data.Shape))
	outer, inner := splitBlocks(data.Shape, a)
	dim := data.Shape[a]
	for j, ix := range ind.I {
		if ix < -int64(dim) || ix >= int64(dim) {
			return k.n.Errorf("index %d (entry %d) is out of range for axis %d of size %d", ix, j, a, dim)
		}
	}
	m := len(ind.I)
	for o := range outer {
		for j, ix := range ind.I {
			if ix < 0 {
				ix += int64(dim)
			}
			src := (o*dim + int(ix)) * inner
			dst := (o*m + j) * inner
			if data.DType == Int64 {
				copy(out[0].I[dst:dst+inner], data.I[src:src+inner])
			} else {
				copy(out[0].F[dst:dst+inner], data.F[src:src+inner])
			}
		}
	}
	return nil
}

func (k *gatherKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	data, ind := in[0], in[1]
	a, _ := normAxis(k.axis, len(data.Shape))
	outer, inner := splitBlocks(data.Shape, a)
	dim := data.Shape[a]
	m := len(ind.I)
	for o := range outer {
		for j, ix := range ind.I {
			if ix < 0 {
				ix += int64(dim)
			}
			dst := (o*dim + int(ix)) * inner
			src := (o*m + j) * inner
			addTo(gin[0].F[dst:dst+inner], gout[0].F[src:src+inner])
		}
	}
	return nil
}

// Gather's backward reads the indices, and of the data only its shape.
func (k *gatherKernel) Retains() (in, out []bool) { return []bool{false, true}, []bool{false} }
