package engine

import "slices"

// cumSumKernel is CumSum: running sums along the axis given as its second input,
// optionally exclusive (each sum leaves out its own element) and reversed (summing from
// the end). The VJP is the same scan in the opposite direction: input element i feeds
// every output at or after it (before it when reversed).
type cumSumKernel struct {
	n                  *Node
	exclusive, reverse bool
	acc                []float32 // a running sum per inner position
	accI               []int64
}

func buildCumSum(n *Node) (Kernel, error) {
	return &cumSumKernel{n: n, exclusive: n.Int("exclusive", 0) != 0, reverse: n.Int("reverse", 0) != 0}, nil
}

// split returns the element counts before, along and after the axis in[1] names.
func (k *cumSumKernel) split(in []*Tensor) (outer, n, inner int, err error) {
	a, ok := intsOf(in[1])
	if !ok || len(a) != 1 {
		return 0, 0, 0, k.n.Errorf("axis must be one integer known before running")
	}
	shape := in[0].Shape
	r := int64(len(shape))
	ax := a[0]
	if ax < -r || ax >= r {
		return 0, 0, 0, k.n.Errorf("axis %d is out of range for an input of rank %d", ax, r)
	}
	if ax < 0 {
		ax += r
	}
	return numel(shape[:ax]), shape[ax], numel(shape[ax+1:]), nil
}

func (k *cumSumKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if _, _, _, err := k.split(in); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: in[0].DType, Shape: slices.Clone(in[0].Shape)}}, nil
}

func (k *cumSumKernel) Forward(_ *Context, in, out []*Tensor) error {
	outer, n, inner, err := k.split(in)
	if err != nil {
		return err
	}
	if in[0].DType == Int64 {
		k.accI = slices.Grow(k.accI[:0], inner)[:inner]
		scan(out[0].I, in[0].I, outer, n, inner, k.exclusive, k.reverse, false, k.accI)
		return nil
	}
	k.acc = growF(k.acc, inner)
	scan(out[0].F, in[0].F, outer, n, inner, k.exclusive, k.reverse, false, k.acc)
	return nil
}

func (k *cumSumKernel) Backward(_ *Context, in, _, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	outer, n, inner, err := k.split(in)
	if err != nil {
		return err
	}
	k.acc = growF(k.acc, inner)
	scan(gin[0].F, gout[0].F, outer, n, inner, k.exclusive, !k.reverse, true, k.acc)
	return nil
}

// Retains keeps the axis; the gradient needs no values of x or y.
func (k *cumSumKernel) Retains() (in, out []bool) { return []bool{false, true}, []bool{false} }

// scan writes (with add, adds) into dst the running sums of src, shaped [outer, n,
// inner], along the middle axis: whole rows of inner elements at a time, with acc
// holding the sums so far.
func scan[T elem](dst, src []T, outer, n, inner int, exclusive, reverse, add bool, acc []T) {
	for o := range outer {
		base := o * n * inner
		clear(acc)
		for s := range n {
			a := s
			if reverse {
				a = n - 1 - s
			}
			off := base + a*inner
			x, y := src[off:off+inner], dst[off:off+inner]
			// Inclusive sums add the element first; exclusive ones after writing.
			if !exclusive {
				for i, v := range x {
					acc[i] += v
				}
			}
			if add {
				for i, v := range acc {
					y[i] += v
				}
			} else {
				copy(y, acc)
			}
			if exclusive {
				for i, v := range x {
					acc[i] += v
				}
			}
		}
	}
}
