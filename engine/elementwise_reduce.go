package engine

import "math"

// reduceKernel runs ReduceSum, ReduceMean, ReduceMax, ReduceProd and ReduceL2 on float32.
//
// Axes come from the attribute, or from the optional second input from opset 13
// (ReduceSum) or 18 (the others); that input must be known when the graph is
// planned, since it decides the output's shape. No axes reduce everything, unless
// noop_with_empty_axes is set, which makes the op an identity.
type reduceKernel struct {
	n        *Node
	op       reduceOp
	mean     bool
	l2       bool // the square root of the sum of squares (op is reduceSum)
	keepdims bool
	noop     bool
	axesIn   bool // axes are the second input (else the attribute)
	axesAttr []int64
	// identity is set by resolve when noop_with_empty_axes applies. Every other op
	// reduces each element alone to itself then, but ReduceL2 would give |x|; the
	// spec says the output is the input.
	identity bool

	mask    []bool // reduced axes of the current input
	kept    []int  // the output's shape with reduced axes kept as 1
	oshape  []int  // scratch for the output shape
	red     reducer
	cnt     []float32
	tmp     []float32
	zero    []float32 // ReduceProd's backward: 1 where x is 0
	nz      []float32 // ReduceProd's backward: the product of the nonzero elements
	plan    bcastPlan
	scale   float32
	x, y, g []float32
	dst     []float32

	mask1, bwdSum, bwdMax func(lo, hi int)
	rowMask, rowSum       func(o, a, b, n, ia, ib int)
	rowMax                func(o, a, b, n, ia, ib int)
	bwdL2, bwdProd        func(lo, hi int)
	rowL2, rowProd        func(o, a, b, n, ia, ib int)
}

func newReduce(op reduceOp, mean, l2 bool) Builder {
	return func(n *Node) (Kernel, error) {
		k := &reduceKernel{n: n, op: op, mean: mean, l2: l2, keepdims: n.Int("keepdims", 1) != 0}
		since := int64(18)
		if op == reduceSum && !mean && !l2 {
			since = 13
		}
		k.axesIn = n.Opset >= since
		if k.axesIn {
			if n.Has("axes") {
				return nil, n.Errorf("attribute axes is not part of opset %d; axes are an input since opset %d", n.Opset, since)
			}
			k.noop = n.Int("noop_with_empty_axes", 0) != 0
		} else {
			if n.NumInputs() > 1 {
				return nil, n.Errorf("opset %d takes axes as an attribute, not an input", n.Opset)
			}
			k.axesAttr = n.Ints("axes", nil)
		}
		k.rowMask, k.rowSum, k.rowMax = k.maskRow, k.sumRow, k.maxRow
		k.mask1 = func(lo, hi int) { k.plan.rows(lo, hi, k.rowMask) }
		k.bwdSum = func(lo, hi int) { k.plan.rows(lo, hi, k.rowSum) }
		k.bwdMax = func(lo, hi int) { k.plan.rows(lo, hi, k.rowMax) }
		k.rowL2, k.rowProd = k.l2Row, k.prodRow
		k.bwdL2 = func(lo, hi int) { k.plan.rows(lo, hi, k.rowL2) }
		k.bwdProd = func(lo, hi int) { k.plan.rows(lo, hi, k.rowProd) }
		return k, nil
	}
}

// resolve sets k.mask and k.kept for an input of shape, with axes from the attribute or
// from in[1], and returns the output shape appended to dst.
func (k *reduceKernel) resolve(shape []int, in []*Tensor, dst []int) ([]int, error) {
	axes := k.axesAttr
	given := axes != nil
	if k.axesIn && len(in) > 1 && k.n.HasInput(1) && in[1] != nil {
		t := in[1]
		if t.DType != Int64 {
			return nil, k.n.Errorf("axes input is %s, must be integers", t.DType)
		}
		if !t.Known() && t.Len() > 0 {
			return nil, k.n.Errorf("axes input is computed at run time; qtool needs it constant to plan shapes")
		}
		axes, given = t.I, true
	}
	r := len(shape)
	k.identity = false
	k.mask = k.mask[:0]
	for range r {
		k.mask = append(k.mask, false)
	}
	switch {
	case given && len(axes) == 0 && k.noop, !given && k.noop:
		k.identity = true
	case len(axes) == 0:
		for i := range k.mask {
			k.mask[i] = true
		}
	default:
		for _, a := range axes {
			if a < -int64(r) || a >= int64(r) {
				return nil, k.n.Errorf("axis %d is out of range for an input of rank %d", a, r)
			}
			if a < 0 {
				a += int64(r)
			}
			if k.mask[a] {
				return nil, k.n.Errorf("axis %d is listed twice", a)
			}
			k.mask[a] = true
		}
	}
	k.kept = k.kept[:0]
	dst = dst[:0]
	for i, s := range shape {
		if k.mask[i] {
			k.kept = append(k.kept, 1)
			if k.keepdims {
				dst = append(dst, 1)
			}
			continue
		}
		k.kept = append(k.kept, s)
		dst = append(dst, s)
	}
	return dst, nil
}

func (k *reduceKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) < 1 {
		return nil, k.n.Errorf("needs an input")
	}
	if in[0].DType != Float32 {
		return nil, k.n.Errorf("input is %s; this op computes on float32 only", in[0].DType)
	}
	shape, err := k.resolve(in[0].Shape, in, nil)
	if err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

func (k *reduceKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x := in[0]
	var err error
	if k.oshape, err = k.resolve(x.Shape, in, k.oshape); err != nil {
		return err
	}
	k.red.plan(x.Shape, k.mask)
	scale := float32(1)
	if k.mean {
		scale = 1 / float32(k.red.count)
	}
	if !k.l2 {
		k.red.run(ctx, k.op, x.F, out[0].F, scale, false)
		return nil
	}
	if k.identity {
		copy(out[0].F, x.F)
		return nil
	}
	k.tmp = growF(k.tmp, len(x.F))
	for i, v := range x.F {
		k.tmp[i] = v * v
	}
	y := out[0].F
	k.red.run(ctx, reduceSum, k.tmp, y, 1, false)
	for i, v := range y {
		y[i] = float32(math.Sqrt(float64(v)))
	}
	return nil
}

// Retains keeps the axes input (its values decide the layout) and what each gradient
// reads: ReduceMax the input and output that locate the maxima, ReduceL2 both (x/y),
// ReduceProd the input; a sum's gradient needs only shapes.
func (k *reduceKernel) Retains() (inputs, outputs []bool) {
	inputs = make([]bool, max(1, k.n.NumInputs()))
	for i := 1; i < len(inputs); i++ {
		inputs[i] = true
	}
	inputs[0] = k.op != reduceSum || k.l2
	return inputs, []bool{k.op == reduceMax || k.l2}
}

// Backward adds the vector-Jacobian product: a sum spreads its gradient over the
// reduced elements (a mean divides it by their count); a maximum sends it to the
// elements equal to the maximum, split equally among ties (PyTorch's rule for amax).
func (k *reduceKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	g := gout[0]
	if g == nil || len(gin) == 0 || gin[0] == nil {
		return nil
	}
	gi := gin[0]
	var err error
	if k.oshape, err = k.resolve(gi.Shape, in, k.oshape); err != nil {
		return err
	}
	if err := k.plan.init(gi.Shape, gi.Shape, k.kept); err != nil {
		return k.n.Errorf("%v", err)
	}
	k.g, k.dst = g.F, gi.F
	defer func() { k.x, k.y, k.g, k.dst = nil, nil, nil, nil }()
	n := len(gi.F)
	switch {
	case k.l2 && k.identity:
		addTo(gi.F, g.F)
		return nil
	case k.l2:
		k.x, k.y = in[0].F, out[0].F
		ctx.Parallel(n, ewGrain, k.bwdL2)
		return nil
	case k.op == reduceProd:
		// PyTorch's rule, which stays exact with zeros: with no zero in a lane the
		// gradient is g·y/x; with one zero only that element gets g times the product
		// of the others; with more, none gets any. nz is the product of a lane's
		// nonzero elements and cnt its count of zeros.
		x := in[0].F
		k.tmp, k.zero = growF(k.tmp, n), growF(k.zero, n)
		for i, v := range x {
			if v == 0 {
				k.tmp[i], k.zero[i] = 1, 1
			} else {
				k.tmp[i], k.zero[i] = v, 0
			}
		}
		k.nz, k.cnt = growF(k.nz, len(g.F)), growF(k.cnt, len(g.F))
		k.red.plan(gi.Shape, k.mask)
		k.red.run(ctx, reduceProd, k.tmp, k.nz, 1, false)
		k.red.run(ctx, reduceSum, k.zero, k.cnt, 1, false)
		k.x = x
		ctx.Parallel(n, ewGrain, k.bwdProd)
		return nil
	}
	if k.op == reduceSum {
		k.scale = 1
		if k.mean {
			k.scale = float32(numel(k.kept)) / float32(max(1, n))
		}
		ctx.Parallel(n, ewGrain, k.bwdSum)
		return nil
	}
	k.x, k.y = in[0].F, out[0].F
	k.tmp = growF(k.tmp, n)
	ctx.Parallel(n, ewGrain, k.mask1)
	k.cnt = growF(k.cnt, len(g.F))
	k.red.plan(gi.Shape, k.mask)
	k.red.run(ctx, reduceSum, k.tmp, k.cnt, 1, false)
	ctx.Parallel(n, ewGrain, k.bwdMax)
	return nil
}

func (k *reduceKernel) sumRow(o, _, b, n, _, ib int) {
	dst, g, s := k.dst[o:o+n], k.g, k.scale
	if ib == 0 {
		// A run along reduced axes: one gradient value spread over it.
		v := s * g[b]
		for i := range dst {
			dst[i] += v
		}
		return
	}
	for i, v := range g[b : b+n] {
		dst[i] += s * v
	}
}

// l2Row adds g·x/y; where y is 0 (a lane of zeros) the gradient is 0, PyTorch's
// subgradient of the norm there.
func (k *reduceKernel) l2Row(o, _, b, n, _, ib int) {
	x, dst, g, y := k.x[o:o+n], k.dst[o:o+n], k.g, k.y
	for i, v := range x {
		if yy := y[b+i*ib]; yy != 0 {
			dst[i] += g[b+i*ib] * v / yy
		}
	}
}

func (k *reduceKernel) prodRow(o, _, b, n, _, ib int) {
	x, dst, g, nz, c := k.x[o:o+n], k.dst[o:o+n], k.g, k.nz, k.cnt
	for i, v := range x {
		j := b + i*ib
		switch {
		case c[j] == 0:
			dst[i] += g[j] * nz[j] / v
		case c[j] == 1 && v == 0:
			dst[i] += g[j] * nz[j]
		}
	}
}

// maskRow marks the input elements equal to their lane's maximum.
func (k *reduceKernel) maskRow(o, _, b, n, _, ib int) {
	x, m, y := k.x[o:o+n], k.tmp[o:o+n], k.y
	for i, v := range x {
		if v == y[b+i*ib] {
			m[i] = 1
		} else {
			m[i] = 0
		}
	}
}

func (k *reduceKernel) maxRow(o, _, b, n, _, ib int) {
	m, dst, g, c := k.tmp[o:o+n], k.dst[o:o+n], k.g, k.cnt
	for i, v := range m {
		if v != 0 {
			dst[i] += g[b+i*ib] / c[b+i*ib]
		}
	}
}
