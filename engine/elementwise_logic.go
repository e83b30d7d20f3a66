package engine

import (
	"fmt"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Booleans. The engine has two element types, float32 and int64; ONNX bool tensors are
// carried as Int64 holding 0 or 1, and the ONNX type BOOL is recorded on the value (the
// kernels below implement outputTyper), as the quantized integer types are. onnxio
// already decodes BOOL initializers and inputs to 0/1 int64, and Cast to BOOL writes
// 0/1, so every bool the engine sees is 0 or 1; the kernels still read any non-zero
// value as true so that an int64 fed where a bool is declared cannot produce values
// outside {0, 1}. Being Int64, bool values never carry gradients (gradValues tracks
// float values only), which is what the comparisons' and logic ops' zero derivative
// requires.

// logicOp names a comparison or a logical binary op.
type logicOp uint8

const (
	logicEqual logicOp = iota
	logicGreater
	logicLess
	logicGreaterOrEqual
	logicLessOrEqual
	logicAnd
	logicOr
	logicXor
)

// logicOps lists the binary ops with a bool result, in registry order.
var logicOps = []struct {
	name string
	op   logicOp
}{
	{"Equal", logicEqual}, {"Greater", logicGreater}, {"Less", logicLess},
	{"GreaterOrEqual", logicGreaterOrEqual}, {"LessOrEqual", logicLessOrEqual},
	{"And", logicAnd}, {"Or", logicOr}, {"Xor", logicXor},
}

// logicOpDefs returns the rows of the comparison, logical and selection ops. Only Where
// is differentiable: the others have a bool output, whose derivative is zero wherever it
// exists.
func logicOpDefs() []opDef {
	defs := []opDef{
		{name: "Not", build: buildNot, inputs: arity{n: 1}},
		{name: "Where", build: buildWhere, inputs: arity{n: 3}, grad: true},
	}
	for _, l := range logicOps {
		defs = append(defs, opDef{name: l.name, build: newLogic(l.op), inputs: arity{n: 2}})
	}
	return defs
}

// b2i64 is 1 for true and 0 for false; the compiler turns it into a flag move, so the
// loops below have no branches.
func b2i64(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// logicKernel computes a comparison or logical op with numpy broadcasting.
type logicKernel struct {
	n    *Node
	op   logicOp
	plan bcastPlan

	// Arguments of the current call, bound once (see binaryKernel) so that passing the
	// row functions to ctx.Parallel does not allocate.
	o          []int64
	af, bf     []float32
	ai, bi     []int64
	runF, runI func(lo, hi int)
}

func newLogic(op logicOp) Builder {
	return func(n *Node) (Kernel, error) {
		k := &logicKernel{n: n, op: op}
		rowF := func(o, a, b, n, ia, ib int) { logicRun(k.op, k.o[o:o+n], k.af, k.bf, a, b, ia, ib) }
		rowI := func(o, a, b, n, ia, ib int) { logicRun(k.op, k.o[o:o+n], k.ai, k.bi, a, b, ia, ib) }
		k.runF = func(lo, hi int) { k.plan.rows(lo, hi, rowF) }
		k.runI = func(lo, hi int) { k.plan.rows(lo, hi, rowI) }
		return k, nil
	}
}

func (k *logicKernel) outputTypes() []onnxpb.TensorProto_DataType {
	return []onnxpb.TensorProto_DataType{onnxpb.TensorProto_BOOL}
}

func (k *logicKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != 2 {
		return nil, k.n.Errorf("needs 2 inputs, has %d", len(in))
	}
	a, b := in[0], in[1]
	if a.DType != b.DType {
		return nil, k.n.Errorf("inputs have types %s and %s; both must be the same", a.DType, b.DType)
	}
	if k.op >= logicAnd && a.DType != Int64 {
		return nil, k.n.Errorf("inputs are %s; logical ops take bool inputs", a.DType)
	}
	shape, ok := broadcastShape(nil, a.Shape, b.Shape)
	if !ok {
		return nil, k.n.Errorf("input shapes %v and %v do not broadcast", a.Shape, b.Shape)
	}
	return []*Tensor{{DType: Int64, Shape: shape}}, nil
}

func (k *logicKernel) Forward(ctx *Context, in, out []*Tensor) error {
	a, b := in[0], in[1]
	if err := k.plan.init(out[0].Shape, a.Shape, b.Shape); err != nil {
		return k.n.Errorf("%v", err)
	}
	k.o = out[0].I
	if a.DType == Float32 {
		k.af, k.bf = a.F, b.F
		ctx.Parallel(k.plan.n, ewGrain, k.runF)
	} else {
		k.ai, k.bi = a.I, b.I
		ctx.Parallel(k.plan.n, ewGrain, k.runI)
	}
	k.o, k.af, k.bf, k.ai, k.bi = nil, nil, nil, nil, nil
	return nil
}

// logicRun computes one broadcast run: out[i] = x[a+i*ia] op y[b+i*ib]. The switch is
// outside the loops, so each loop is a plain comparison per element. Float comparisons
// follow IEEE 754 as numpy and onnxruntime do: every comparison with NaN is false.
func logicRun[T float32 | int64](op logicOp, out []int64, x, y []T, a, b, ia, ib int) {
	switch op {
	case logicEqual:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] == y[b+i*ib])
		}
	case logicGreater:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] > y[b+i*ib])
		}
	case logicLess:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] < y[b+i*ib])
		}
	case logicGreaterOrEqual:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] >= y[b+i*ib])
		}
	case logicLessOrEqual:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] <= y[b+i*ib])
		}
	case logicAnd:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] != 0 && y[b+i*ib] != 0)
		}
	case logicOr:
		for i := range out {
			out[i] = b2i64(x[a+i*ia] != 0 || y[b+i*ib] != 0)
		}
	case logicXor:
		for i := range out {
			out[i] = b2i64((x[a+i*ia] != 0) != (y[b+i*ib] != 0))
		}
	}
}

// notKernel is the logical Not of a bool tensor.
type notKernel struct{ n *Node }

func buildNot(n *Node) (Kernel, error) { return &notKernel{n: n}, nil }

func (k *notKernel) outputTypes() []onnxpb.TensorProto_DataType {
	return []onnxpb.TensorProto_DataType{onnxpb.TensorProto_BOOL}
}

func (k *notKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if in[0].DType != Int64 {
		return nil, k.n.Errorf("input is %s; Not takes a bool input", in[0].DType)
	}
	return []*Tensor{{DType: Int64, Shape: append([]int(nil), in[0].Shape...)}}, nil
}

func (k *notKernel) Forward(_ *Context, in, out []*Tensor) error {
	y := out[0].I[:len(in[0].I)]
	for i, v := range in[0].I {
		y[i] = b2i64(v == 0)
	}
	return nil
}

// maxWhereRank bounds the merged dimensions of Where's three-way broadcast, as
// maxBcastRank does for binary ops, so that its walk keeps its index on the stack.
const maxWhereRank = maxBcastRank

// bcast3 is bcastPlan for three operands: the output's dimensions with adjacent ones
// merged where every operand is either walked along both or broadcast along both, and
// each operand's element strides per merged dimension (0 where broadcast).
type bcast3 struct {
	out  []int
	in   [3][]int
	n    int
	dims []int
	st   [3][]int
}

func (p *bcast3) init(out []int, in [3][]int) error {
	if p.dims != nil && sameShape(p.out, out) && sameShape(p.in[0], in[0]) && sameShape(p.in[1], in[1]) && sameShape(p.in[2], in[2]) {
		return nil
	}
	p.dims = nil
	p.out = append(p.out[:0], out...)
	p.n = numel(out)
	var dims []int
	var st [3][]int
	var last [3]bool
	r := len(out)
	for j := range 3 {
		p.in[j] = append(p.in[j][:0], in[j]...)
		if len(in[j]) > r {
			return fmt.Errorf("cannot broadcast %v to %v", in[j], out)
		}
	}
	for d := range r {
		if out[d] == 1 {
			continue
		}
		var walk [3]bool
		for j := range 3 {
			dj := 1
			if i := d - (r - len(in[j])); i >= 0 {
				dj = in[j][i]
			}
			if dj != out[d] && dj != 1 {
				return fmt.Errorf("cannot broadcast %v to %v", in[j], out)
			}
			walk[j] = dj != 1
		}
		if len(dims) > 0 && walk == last {
			dims[len(dims)-1] *= out[d]
			continue
		}
		dims = append(dims, out[d])
		for j := range 3 {
			st[j] = append(st[j], int(b2i64(walk[j])))
		}
		last = walk
	}
	if len(dims) == 0 {
		dims = append(dims, 1)
		for j := range 3 {
			st[j] = append(st[j], 0)
		}
	}
	if len(dims) > maxWhereRank {
		return fmt.Errorf("broadcasting %v, %v and %v to %v needs %d merged dimensions, more than the %d supported", in[0], in[1], in[2], out, len(dims), maxWhereRank)
	}
	for j := range 3 {
		acc := 1
		for d := len(dims) - 1; d >= 0; d-- {
			if st[j][d] != 0 {
				st[j][d] = acc
				acc *= dims[d]
			}
		}
	}
	p.dims, p.st = dims, st
	return nil
}

// rows walks output elements [lo, hi) as runs along the innermost merged dimension,
// calling f with the run's output offset, the operands' offsets, its length and the
// operands' inner strides (0 or 1).
func (p *bcast3) rows(lo, hi int, f func(o int, off [3]int, n int, inc [3]int)) {
	if lo >= hi {
		return
	}
	k := len(p.dims) - 1
	inner := p.dims[k]
	inc := [3]int{p.st[0][k], p.st[1][k], p.st[2][k]}
	var idx [maxWhereRank]int
	var off [3]int
	rem := lo
	for d := k; d >= 0; d-- {
		i := rem % p.dims[d]
		rem /= p.dims[d]
		idx[d] = i
		for j := range 3 {
			off[j] += i * p.st[j][d]
		}
	}
	for pos := lo; pos < hi; {
		m := min(inner-idx[k], hi-pos)
		f(pos, off, m, inc)
		pos += m
		idx[k] += m
		for j := range 3 {
			off[j] += m * inc[j]
		}
		if idx[k] < inner {
			continue
		}
		for j := range 3 {
			off[j] -= inner * inc[j]
		}
		idx[k] = 0
		for d := k - 1; d >= 0; d-- {
			idx[d]++
			for j := range 3 {
				off[j] += p.st[j][d]
			}
			if idx[d] < p.dims[d] {
				break
			}
			for j := range 3 {
				off[j] -= p.dims[d] * p.st[j][d]
			}
			idx[d] = 0
		}
	}
}

// whereKernel selects X where the condition holds and Y elsewhere, broadcasting all
// three. Its gradient routes the output gradient to X where the condition holds and to
// Y elsewhere, summed over the axes each was broadcast on; the condition has none.
type whereKernel struct {
	n       *Node
	plan    bcast3
	red     reducer
	redAxes []bool
	tmp     []float32

	// Arguments of the current call, bound once (see binaryKernel).
	c          []int64
	xf, yf, of []float32
	xi, yi, oi []int64
	g, dst     []float32
	wrt        int // 1 for X, 2 for Y
	runF, runI func(lo, hi int)
	runB       func(lo, hi int)
}

func buildWhere(n *Node) (Kernel, error) {
	k := &whereKernel{n: n}
	rowF := func(o int, off [3]int, n int, inc [3]int) {
		whereRun(k.of[o:o+n], k.c, k.xf, k.yf, off, inc)
	}
	rowI := func(o int, off [3]int, n int, inc [3]int) {
		whereRun(k.oi[o:o+n], k.c, k.xi, k.yi, off, inc)
	}
	// The gradient of X (or Y) at the output's shape: g where the condition selects it.
	rowB := func(o int, off [3]int, n int, inc [3]int) {
		g, dst := k.g[o:o+n], k.dst[o:o+n]
		c, ci, ic := k.c, off[0], inc[0]
		want := k.wrt == 1
		for i := range dst {
			if (c[ci+i*ic] != 0) == want {
				dst[i] += g[i]
			}
		}
	}
	k.runF = func(lo, hi int) { k.plan.rows(lo, hi, rowF) }
	k.runI = func(lo, hi int) { k.plan.rows(lo, hi, rowI) }
	k.runB = func(lo, hi int) { k.plan.rows(lo, hi, rowB) }
	return k, nil
}

// whereRun computes one broadcast run of Where.
func whereRun[T float32 | int64](out []T, c []int64, x, y []T, off, inc [3]int) {
	ci, xi, yi := off[0], off[1], off[2]
	ic, ix, iy := inc[0], inc[1], inc[2]
	for i := range out {
		if c[ci+i*ic] != 0 {
			out[i] = x[xi+i*ix]
		} else {
			out[i] = y[yi+i*iy]
		}
	}
}

// outputTypes: the result has X's declared type (Y's when X's is not stated), not the
// condition's, which is why Where is not a sameType row.
func (k *whereKernel) outputTypes() []onnxpb.TensorProto_DataType {
	t := k.n.InputType(1)
	if t == onnxpb.TensorProto_UNDEFINED {
		t = k.n.InputType(2)
	}
	return []onnxpb.TensorProto_DataType{t}
}

func (k *whereKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != 3 {
		return nil, k.n.Errorf("needs 3 inputs, has %d", len(in))
	}
	c, x, y := in[0], in[1], in[2]
	if c.DType != Int64 {
		return nil, k.n.Errorf("condition is %s; it must be bool", c.DType)
	}
	if x.DType != y.DType {
		return nil, k.n.Errorf("X and Y have types %s and %s; both must be the same", x.DType, y.DType)
	}
	shape, ok := broadcastShape(nil, x.Shape, y.Shape)
	if ok {
		shape, ok = broadcastShape(nil, c.Shape, shape)
	}
	if !ok {
		return nil, k.n.Errorf("shapes %v, %v and %v do not broadcast", c.Shape, x.Shape, y.Shape)
	}
	return []*Tensor{{DType: x.DType, Shape: shape}}, nil
}

func (k *whereKernel) Forward(ctx *Context, in, out []*Tensor) error {
	c, x, y, o := in[0], in[1], in[2], out[0]
	if err := k.plan.init(o.Shape, [3][]int{c.Shape, x.Shape, y.Shape}); err != nil {
		return k.n.Errorf("%v", err)
	}
	k.c = c.I
	if o.DType == Float32 {
		k.of, k.xf, k.yf = o.F, x.F, y.F
		ctx.Parallel(k.plan.n, ewGrain, k.runF)
	} else {
		k.oi, k.xi, k.yi = o.I, x.I, y.I
		ctx.Parallel(k.plan.n, ewGrain, k.runI)
	}
	k.release()
	return nil
}

// release drops the references to the caller's buffers, which a kernel must not keep.
func (k *whereKernel) release() {
	k.c, k.xf, k.yf, k.of, k.xi, k.yi, k.oi, k.g, k.dst = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// Retains: the backward pass reads only the condition (X's and Y's shapes stay known).
func (k *whereKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, false, false}, []bool{false}
}

func (k *whereKernel) Backward(ctx *Context, in, _, gout, gin []*Tensor) error {
	g := gout[0]
	if g == nil {
		return nil
	}
	defer k.release()
	for wrt := 1; wrt <= 2; wrt++ {
		if wrt >= len(gin) || gin[wrt] == nil {
			continue
		}
		gi := gin[wrt]
		if gi.DType != Float32 || g.DType != Float32 {
			return k.n.Errorf("no gradient for %s input %d", gi.DType, wrt)
		}
		if err := k.plan.init(g.Shape, [3][]int{in[0].Shape, in[1].Shape, in[2].Shape}); err != nil {
			return k.n.Errorf("%v", err)
		}
		k.c, k.g, k.wrt = in[0].I, g.F, wrt
		if numel(gi.Shape) == k.plan.n {
			k.dst = gi.F
			ctx.Parallel(k.plan.n, ewGrain, k.runB)
			continue
		}
		// A broadcast operand: route at the output's shape, then sum over its broadcast axes.
		k.tmp = growF(k.tmp, k.plan.n)
		clear(k.tmp)
		k.dst = k.tmp
		ctx.Parallel(k.plan.n, ewGrain, k.runB)
		k.redAxes = k.red.reduceTo(ctx, k.tmp, g.Shape, gi.Shape, gi.F, 1, k.redAxes)
	}
	return nil
}
