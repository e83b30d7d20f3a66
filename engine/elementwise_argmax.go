package engine

// argMaxKernel is ArgMax: the index of the largest element along axis, as int64, the
// first of ties or, with select_last_index (opset 12), the last. It has no gradient.
type argMaxKernel struct {
	n        *Node
	axis     int64
	keepdims bool
	last     bool
	// best and bestI hold the running maxima of one outer slice, one per inner
	// position, kept between calls so that steady state does not allocate.
	best  []float32
	bestI []int64
}

func buildArgMax(n *Node) (Kernel, error) {
	k := &argMaxKernel{n: n, axis: n.Int("axis", 0), keepdims: n.Int("keepdims", 1) != 0, last: n.Int("select_last_index", 0) != 0}
	if k.last && n.Opset < 12 {
		return nil, n.Errorf("attribute select_last_index is not part of opset %d", n.Opset)
	}
	return k, nil
}

// split returns the axis and the element counts before, along and after it.
func (k *argMaxKernel) split(shape []int) (axis, outer, n, inner int, err error) {
	r := int64(len(shape))
	a := k.axis
	if a < -r || a >= r {
		return 0, 0, 0, 0, k.n.Errorf("axis %d is out of range for an input of rank %d", k.axis, r)
	}
	if a < 0 {
		a += r
	}
	axis = int(a)
	return axis, numel(shape[:axis]), shape[axis], numel(shape[axis+1:]), nil
}

func (k *argMaxKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, _, n, _, err := k.split(x.Shape)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, k.n.Errorf("axis %d of shape %v is empty; it has no maximum", axis, x.Shape)
	}
	var s []int
	for i, d := range x.Shape {
		switch {
		case i != axis:
			s = append(s, d)
		case k.keepdims:
			s = append(s, 1)
		}
	}
	return []*Tensor{{DType: Int64, Shape: s}}, nil
}

// Forward compares whole rows: for each outer slice it sweeps the axis, keeping the
// maxima of the inner positions so far and their indices, so the inner loop runs over
// contiguous memory.
func (k *argMaxKernel) Forward(_ *Context, in, out []*Tensor) error {
	x := in[0]
	_, outer, n, inner, err := k.split(x.Shape)
	if err != nil {
		return err
	}
	y := out[0].I
	if x.DType == Int64 {
		if cap(k.bestI) < inner {
			k.bestI = make([]int64, inner)
		}
		argMaxRows(x.I, y, outer, n, inner, k.last, k.bestI[:inner])
		return nil
	}
	k.best = growF(k.best, inner)
	argMaxRows(x.F, y, outer, n, inner, k.last, k.best)
	return nil
}

// argMaxRows writes into y[o·inner+j] the index along the middle axis of the maximum of
// x[o, ·, j]. best is scratch of inner elements.
func argMaxRows[T elem](x []T, y []int64, outer, n, inner int, last bool, best []T) {
	for o := range outer {
		base := o * n * inner
		idx := y[o*inner : (o+1)*inner]
		copy(best, x[base:base+inner])
		clear(idx)
		for a := 1; a < n; a++ {
			row := x[base+a*inner : base+(a+1)*inner]
			ai := int64(a)
			if last {
				for j, v := range row {
					if v >= best[j] {
						best[j], idx[j] = v, ai
					}
				}
			} else {
				for j, v := range row {
					if v > best[j] {
						best[j], idx[j] = v, ai
					}
				}
			}
		}
	}
}
