package engine

import (
	"slices"
)

// transposeKernel permutes the axes.
type transposeKernel struct {
	n    *Node
	perm []int64
	stridedView
}

func buildTranspose(n *Node) (Kernel, error) {
	return &transposeKernel{n: n, perm: n.Ints("perm", nil)}, nil
}

// permOf returns the permutation for an input of rank r.
func (k *transposeKernel) permOf(r int) ([]int, error) {
	p := make([]int, r)
	if k.perm == nil {
		for i := range p {
			p[i] = r - 1 - i
		}
		return p, nil
	}
	if len(k.perm) != r {
		return nil, k.n.Errorf("perm %v has %d entries, the input has rank %d", k.perm, len(k.perm), r)
	}
	seen := make([]bool, r)
	for i, a := range k.perm {
		j, ok := normAxis(a, r)
		if !ok || seen[j] {
			return nil, k.n.Errorf("perm %v is not a permutation of 0..%d", k.perm, r-1)
		}
		seen[j] = true
		p[i] = j
	}
	return p, nil
}

func (k *transposeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	p, err := k.permOf(len(in[0].Shape))
	if err != nil {
		return nil, err
	}
	s := make([]int, len(p))
	for i, j := range p {
		s[i] = in[0].Shape[j]
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

// strides sets k.st to the input strides seen along the output axes and k.ss to the
// output's own strides.
func (k *transposeKernel) strides(inShape, outShape []int) {
	r := len(inShape)
	k.ss = stridesOf(k.ss, inShape)
	k.st = slices.Grow(k.st[:0], r)[:r]
	for i := range r {
		j := i
		if k.perm == nil {
			j = r - 1 - i
		} else {
			j, _ = normAxis(k.perm[i], r)
		}
		k.st[i] = k.ss[j]
	}
	k.ss = stridesOf(k.ss, outShape)
	k.idx = slices.Grow(k.idx[:0], r)[:r]
}

func (k *transposeKernel) Forward(ctx *Context, in, out []*Tensor) error {
	k.strides(in[0].Shape, out[0].Shape)
	k.copyForwardOn(ctx, in[0], out[0])
	return nil
}

func (k *transposeKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	k.strides(in[0].Shape, out[0].Shape)
	k.addBackward(gin[0], gout[0])
	return nil
}

func (k *transposeKernel) Retains() (in, out []bool) { return []bool{false}, []bool{false} }
