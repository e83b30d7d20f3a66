package engine

// minMaxKernel runs the variadic Min and Max with numpy broadcasting over all inputs,
// on float32 (differentiable) or int64.
//
// The forward pass folds the inputs pairwise into the output. The backward pass routes
// each output element's gradient to the inputs that attain the extremum there, split
// equally when several do (PyTorch's rule for torch.maximum and torch.minimum).
type minMaxKernel struct {
	n     *Node
	isMax bool

	plans   []bcastPlan // forward step i combines (in0 or out, in i+1) into out
	bplan   bcastPlan   // backward: (out, in i) at the output's shape
	red     reducer
	redAxes []bool
	cnt     []float32 // per output element, how many inputs attain the extremum
	tmp     []float32

	// Arguments of the current call for the bound functions below.
	o, a, b, g, dst []float32
	oi, ai, bi      []int64
	plan            *bcastPlan
	fwdF, fwdI      func(lo, hi int)
	count, bwd      func(lo, hi int)
	rowF, rowI      func(o, a, b, n, ia, ib int)
	rowCount, rowB  func(o, a, b, n, ia, ib int)
}

func newMinMax(isMax bool) Builder {
	return func(n *Node) (Kernel, error) {
		if n.NumInputs() < 1 {
			return nil, n.Errorf("needs at least one input")
		}
		k := &minMaxKernel{n: n, isMax: isMax}
		k.plans = make([]bcastPlan, max(1, n.NumInputs()-1))
		k.rowF, k.rowI, k.rowCount, k.rowB = k.forwardRowF, k.forwardRowI, k.countRow, k.backwardRow
		k.fwdF = func(lo, hi int) { k.plan.rows(lo, hi, k.rowF) }
		k.fwdI = func(lo, hi int) { k.plan.rows(lo, hi, k.rowI) }
		k.count = func(lo, hi int) { k.plan.rows(lo, hi, k.rowCount) }
		k.bwd = func(lo, hi int) { k.plan.rows(lo, hi, k.rowB) }
		return k, nil
	}
}

func (k *minMaxKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != k.n.NumInputs() {
		return nil, k.n.Errorf("has %d inputs, the node lists %d", len(in), k.n.NumInputs())
	}
	for i, t := range in {
		if t == nil {
			return nil, k.n.Errorf("input %d is empty; every input is required", i)
		}
	}
	dt := in[0].DType
	shape := append([]int(nil), in[0].Shape...)
	for i, t := range in[1:] {
		if t.DType != dt {
			return nil, k.n.Errorf("input %d is %s, input 0 is %s; all must be the same", i+1, t.DType, dt)
		}
		var ok bool
		if shape, ok = broadcastShape(nil, shape, t.Shape); !ok {
			return nil, k.n.Errorf("input %d of shape %v does not broadcast with the others (%v)", i+1, t.Shape, shape)
		}
	}
	return []*Tensor{{DType: dt, Shape: shape}}, nil
}

func (k *minMaxKernel) Forward(ctx *Context, in, out []*Tensor) error {
	o := out[0]
	defer k.release()
	if len(in) == 1 {
		// One input: the result is that input, broadcast to itself.
		if o.DType == Float32 {
			copy(o.F, in[0].F)
		} else {
			copy(o.I, in[0].I)
		}
		return nil
	}
	for i := 1; i < len(in); i++ {
		first := in[0]
		if i > 1 {
			first = o
		}
		p := &k.plans[i-1]
		if err := p.init(o.Shape, first.Shape, in[i].Shape); err != nil {
			return k.n.Errorf("%v", err)
		}
		k.plan = p
		if o.DType == Float32 {
			k.o, k.a, k.b = o.F, first.F, in[i].F
			ctx.Parallel(p.n, ewGrain, k.fwdF)
		} else {
			k.oi, k.ai, k.bi = o.I, first.I, in[i].I
			ctx.Parallel(p.n, ewGrain, k.fwdI)
		}
	}
	return nil
}

func (k *minMaxKernel) release() {
	k.o, k.a, k.b, k.g, k.dst = nil, nil, nil, nil, nil
	k.oi, k.ai, k.bi = nil, nil, nil
	k.plan = nil
}

// forwardRowF combines one run; out may alias a (steps after the first), which is safe
// because each element is read before it is written at the same position.
func (k *minMaxKernel) forwardRowF(o, a, b, n, ia, ib int) {
	out := k.o[o : o+n]
	A, B := k.a, k.b
	if k.isMax {
		for i := range out {
			x, y := A[a+i*ia], B[b+i*ib]
			if y > x || y != y {
				x = y
			}
			out[i] = x
		}
		return
	}
	for i := range out {
		x, y := A[a+i*ia], B[b+i*ib]
		if y < x || y != y {
			x = y
		}
		out[i] = x
	}
}

func (k *minMaxKernel) forwardRowI(o, a, b, n, ia, ib int) {
	out := k.oi[o : o+n]
	A, B := k.ai, k.bi
	for i := range out {
		x, y := A[a+i*ia], B[b+i*ib]
		if k.isMax {
			out[i] = max(x, y)
		} else {
			out[i] = min(x, y)
		}
	}
}

func (k *minMaxKernel) Retains() (inputs, outputs []bool) {
	inputs = make([]bool, k.n.NumInputs())
	for i := range inputs {
		inputs[i] = true
	}
	return inputs, []bool{true}
}

func (k *minMaxKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	g, o := gout[0], out[0]
	if g == nil {
		return nil
	}
	if o.DType != Float32 {
		return k.n.Errorf("no gradient through %s values", o.DType)
	}
	defer k.release()
	n := len(o.F)
	k.cnt = growF(k.cnt, n)
	clear(k.cnt)
	k.o, k.g = o.F, g.F
	for _, t := range in {
		if err := k.bplan.init(o.Shape, o.Shape, t.Shape); err != nil {
			return k.n.Errorf("%v", err)
		}
		k.plan, k.b = &k.bplan, t.F
		ctx.Parallel(n, ewGrain, k.count)
	}
	for i, t := range in {
		if i >= len(gin) || gin[i] == nil {
			continue
		}
		if err := k.bplan.init(o.Shape, o.Shape, t.Shape); err != nil {
			return k.n.Errorf("%v", err)
		}
		k.plan, k.b = &k.bplan, t.F
		if len(gin[i].F) == n {
			k.dst = gin[i].F
			ctx.Parallel(n, ewGrain, k.bwd)
			continue
		}
		k.tmp = growF(k.tmp, n)
		clear(k.tmp)
		k.dst = k.tmp
		ctx.Parallel(n, ewGrain, k.bwd)
		k.redAxes = k.red.reduceTo(ctx, k.tmp, o.Shape, t.Shape, gin[i].F, 1, k.redAxes)
	}
	return nil
}

// countRow counts, per output element, whether input k.b attains it.
func (k *minMaxKernel) countRow(o, _, b, n, _, ib int) {
	out, cnt, B := k.o[o:o+n], k.cnt[o:o+n], k.b
	for i, v := range out {
		if B[b+i*ib] == v {
			cnt[i]++
		}
	}
}

func (k *minMaxKernel) backwardRow(o, _, b, n, _, ib int) {
	out, cnt, g, dst, B := k.o[o:o+n], k.cnt[o:o+n], k.g[o:o+n], k.dst[o:o+n], k.b
	for i, v := range out {
		if B[b+i*ib] == v {
			dst[i] += g[i] / cnt[i]
		}
	}
}
