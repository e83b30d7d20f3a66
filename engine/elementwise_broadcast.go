package engine

import (
	"fmt"
	"math"
)

// ewGrain is the smallest number of elements an element-wise kernel hands to one worker:
// below it the cost of starting a goroutine outweighs the work.
const ewGrain = 32 << 10

// maxBcastRank bounds the rank of a broadcast after merging dimensions, so that the
// iteration state lives in a fixed array on the stack instead of the heap.
const maxBcastRank = 16

// broadcastShape returns the numpy multidirectional broadcast of shapes a and b, appended
// to dst[:0], or false when a dimension pair is neither equal nor 1.
func broadcastShape(dst, a, b []int) ([]int, bool) {
	r := max(len(a), len(b))
	dst = dst[:0]
	for d := 0; d < r; d++ {
		da, db := 1, 1
		if i := d - (r - len(a)); i >= 0 {
			da = a[i]
		}
		if i := d - (r - len(b)); i >= 0 {
			db = b[i]
		}
		switch {
		case da == db, db == 1:
			dst = append(dst, da)
		case da == 1:
			dst = append(dst, db)
		default:
			return dst, false
		}
	}
	return dst, true
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bcastPlan maps two operands onto an output shape they broadcast to. Adjacent output
// dimensions along which both operands behave alike (each either walks or stays put)
// are merged, so the common cases reduce to very few dimensions: equal shapes to one,
// a per-channel [1,C,1,1] against [N,C,H,W] to [N,C,HW], a bias row to [N,F]. The last
// merged dimension is walked by a tight loop, where each operand's stride is 0 or 1.
type bcastPlan struct {
	out, a, b []int // the shapes the plan was made for, to reuse it while they hold
	n         int   // output elements
	dims      []int // merged output dimensions, innermost last; never empty
	sa, sb    []int // element strides of a and b per merged dimension, 0 where broadcast
}

// init makes the plan for operands of shapes a and b broadcast to out; it keeps the
// previous plan when the shapes are unchanged, so steady-state calls do not allocate.
func (p *bcastPlan) init(out, a, b []int) error {
	if p.dims != nil && sameShape(p.out, out) && sameShape(p.a, a) && sameShape(p.b, b) {
		return nil
	}
	if err := p.build(out, a, b); err != nil {
		// A failed plan must not be mistaken for a valid one on the next call.
		p.dims = nil
		return err
	}
	return nil
}

func (p *bcastPlan) build(out, a, b []int) error {
	p.out = append(p.out[:0], out...)
	p.a = append(p.a[:0], a...)
	p.b = append(p.b[:0], b...)
	p.dims, p.sa, p.sb = p.dims[:0], p.sa[:0], p.sb[:0]
	p.n = numel(out)
	if len(a) > len(out) || len(b) > len(out) {
		return fmt.Errorf("cannot broadcast %v and %v to %v", a, b, out)
	}
	r := len(out)
	lastA, lastB, have := false, false, false
	for d := 0; d < r; d++ {
		od := out[d]
		da, db := 1, 1
		if i := d - (r - len(a)); i >= 0 {
			da = a[i]
		}
		if i := d - (r - len(b)); i >= 0 {
			db = b[i]
		}
		if (da != od && da != 1) || (db != od && db != 1) {
			return fmt.Errorf("cannot broadcast %v and %v to %v", a, b, out)
		}
		if od == 1 {
			continue
		}
		wa, wb := da != 1, db != 1
		if have && wa == lastA && wb == lastB {
			p.dims[len(p.dims)-1] *= od
			continue
		}
		p.dims = append(p.dims, od)
		p.sa = append(p.sa, b2i(wa))
		p.sb = append(p.sb, b2i(wb))
		lastA, lastB, have = wa, wb, true
	}
	if len(p.dims) == 0 {
		p.dims = append(p.dims, 1)
		p.sa = append(p.sa, 0)
		p.sb = append(p.sb, 0)
	}
	if len(p.dims) > maxBcastRank {
		return fmt.Errorf("broadcasting %v and %v to %v needs %d merged dimensions, more than the %d supported", a, b, out, len(p.dims), maxBcastRank)
	}
	// Turn the walk flags into contiguous strides, innermost first.
	accA, accB := 1, 1
	for d := len(p.dims) - 1; d >= 0; d-- {
		if p.sa[d] != 0 {
			p.sa[d] = accA
			accA *= p.dims[d]
		}
		if p.sb[d] != 0 {
			p.sb[d] = accB
			accB *= p.dims[d]
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rows walks output elements [lo, hi) as runs along the innermost merged dimension and
// calls f once per run with the run's output offset o, the operands' offsets a and b,
// its length n and the operands' inner strides ia and ib (0 or 1).
func (p *bcastPlan) rows(lo, hi int, f func(o, a, b, n, ia, ib int)) {
	if lo >= hi {
		return
	}
	k := len(p.dims) - 1
	inner := p.dims[k]
	ia, ib := p.sa[k], p.sb[k]
	var idx [maxBcastRank]int
	offA, offB := 0, 0
	rem := lo
	for d := k; d >= 0; d-- {
		i := rem % p.dims[d]
		rem /= p.dims[d]
		idx[d] = i
		offA += i * p.sa[d]
		offB += i * p.sb[d]
	}
	for pos := lo; pos < hi; {
		m := min(inner-idx[k], hi-pos)
		f(pos, offA, offB, m, ia, ib)
		pos += m
		idx[k] += m
		offA += m * ia
		offB += m * ib
		if idx[k] < inner {
			continue
		}
		offA -= inner * ia
		offB -= inner * ib
		idx[k] = 0
		for d := k - 1; d >= 0; d-- {
			idx[d]++
			offA += p.sa[d]
			offB += p.sb[d]
			if idx[d] < p.dims[d] {
				break
			}
			offA -= p.dims[d] * p.sa[d]
			offB -= p.dims[d] * p.sb[d]
			idx[d] = 0
		}
	}
}

// reduceOp selects what a reducer computes over each group of elements.
type reduceOp uint8

const (
	reduceSum reduceOp = iota
	reduceMax
	// reduceProd multiplies; it ignores scale and acc, which only sums need.
	reduceProd
)

// reducer reduces a tensor over a set of axes into the tensor of the kept axes. Axes of
// size 1 are dropped and neighbouring axes that are both kept or both reduced are merged,
// so that the work becomes one of two loops: when the innermost merged axis is reduced,
// each output element sums contiguous runs; when it is kept, each output row accumulates
// contiguous input rows. Work is split over output elements (or rows), so that no two
// workers write the same element and the result does not depend on the worker count.
type reducer struct {
	shape []int  // input shape the plan was made for
	red   []bool // which input axes are reduced

	kSize, kStride []int // kept merged axes: sizes and input strides
	rSize, rStride []int // reduced merged axes: sizes and input strides
	innerReduced   bool  // the innermost merged axis is reduced (else kept)
	inner          int   // length of the innermost merged axis
	units          int   // output elements (innerReduced) or output rows (otherwise)
	outer          int   // reduced-axis combinations per unit, excluding the inner run
	count          int   // input elements per output element

	// Arguments of the current run, read by chunk.
	op    reduceOp
	src   []float32
	dst   []float32
	scale float32
	acc   bool
	chunk func(lo, hi int)

	cols     int       // column blocks per output row (innermost axis kept)
	blocks   int       // blocks per output element (innermost axis reduced)
	partials []float64 // per-block results when blocks > 1
}

// plan prepares the reducer for an input of shape with the axes marked in red reduced;
// it keeps the previous plan while both are unchanged.
func (r *reducer) plan(shape []int, red []bool) {
	if r.kSize != nil && sameShape(r.shape, shape) && sameBools(r.red, red) {
		return
	}
	r.shape = append(r.shape[:0], shape...)
	r.red = append(r.red[:0], red...)
	r.kSize, r.kStride, r.rSize, r.rStride = r.kSize[:0], r.kStride[:0], r.rSize[:0], r.rStride[:0]
	// Merge from the innermost axis outwards, tracking the contiguous input stride.
	stride := 1
	lastRed, have := false, false
	r.count = 1
	for d := len(shape) - 1; d >= 0; d-- {
		s := shape[d]
		if red[d] {
			r.count *= s
		}
		if s == 1 {
			continue
		}
		if have && red[d] == lastRed {
			if red[d] {
				r.rSize[len(r.rSize)-1] *= s
			} else {
				r.kSize[len(r.kSize)-1] *= s
			}
		} else if red[d] {
			r.rSize = append(r.rSize, s)
			r.rStride = append(r.rStride, stride)
		} else {
			r.kSize = append(r.kSize, s)
			r.kStride = append(r.kStride, stride)
		}
		if !have {
			r.innerReduced = red[d]
		}
		lastRed, have = red[d], true
		stride *= s
	}
	if r.kSize == nil {
		r.kSize = []int{}
	}
	// The slices were filled innermost first; the walks below index them that way.
	r.inner = 1
	if have {
		if r.innerReduced {
			r.inner = r.rSize[0]
		} else {
			r.inner = r.kSize[0]
		}
	} else {
		r.innerReduced = true
	}
	r.units, r.outer = 1, 1
	for i, s := range r.kSize {
		if i == 0 && !r.innerReduced {
			continue
		}
		r.units *= s
	}
	for i, s := range r.rSize {
		if i == 0 && r.innerReduced {
			continue
		}
		r.outer *= s
	}
	if r.chunk == nil {
		r.chunk = r.work
	}
}

func sameBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reduceColumns is how many kept columns one task of an inner-kept reduction handles.
// Splitting by columns leaves every output element's summation order unchanged, so the
// result does not depend on the worker count.
const reduceColumns = 4096

// run reduces src into dst (the kept elements in row-major order) with op. A sum is
// multiplied by scale; with acc it is added to dst instead of overwriting it.
func (r *reducer) run(ctx *Context, op reduceOp, src, dst []float32, scale float32, acc bool) {
	r.op, r.src, r.dst, r.scale, r.acc = op, src, dst, scale, acc
	defer r.release()
	if len(src) == 0 {
		// Reducing an empty axis: the sum is 0, the product 1 and the maximum -inf, as
		// in numpy.
		for i := range dst {
			v := 0 * scale // 0 for a sum, NaN for the mean of nothing, as in numpy
			switch op {
			case reduceMax:
				v = negInf()
			case reduceProd:
				v = 1
			}
			if acc {
				dst[i] += v
			} else {
				dst[i] = v
			}
		}
		return
	}
	per := r.outer * r.inner
	if !r.innerReduced {
		r.cols = (r.inner + reduceColumns - 1) / reduceColumns
		ctx.Parallel(r.units*r.cols, max(1, ewGrain/(r.outer*min(r.inner, reduceColumns))), r.chunk)
		return
	}
	if r.units >= 8 || per < 2*ewGrain {
		r.blocks = 1
		ctx.Parallel(r.units, max(1, ewGrain/per), r.chunk)
		return
	}
	// Few long reductions (a scalar's gradient, a whole-tensor mean): split each into
	// blocks of a fixed size, reduce the blocks in parallel and combine them in order.
	// The split depends only on the shape, so the result does not depend on Workers.
	r.blocks = (per + ewGrain - 1) / ewGrain
	r.partials = growF64(r.partials, r.units*r.blocks)
	ctx.Parallel(r.units*r.blocks, 1, r.chunk)
	for u := 0; u < r.units; u++ {
		part := r.partials[u*r.blocks : (u+1)*r.blocks]
		switch op {
		case reduceMax:
			m := part[0]
			for _, v := range part[1:] {
				if v > m || v != v {
					m = v
				}
			}
			dst[u] = float32(m)
			continue
		case reduceProd:
			p := 1.0
			for _, v := range part {
				p *= v
			}
			dst[u] = float32(p)
			continue
		}
		var s float64
		for _, v := range part {
			s += v
		}
		r.store(u, s)
	}
}

func (r *reducer) release() { r.src, r.dst = nil, nil }

// store writes the sum s of output element u.
func (r *reducer) store(u int, s float64) {
	v := float32(s) * r.scale
	if r.acc {
		r.dst[u] += v
	} else {
		r.dst[u] = v
	}
}

func growF64(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// work runs tasks [lo, hi): output rows split into column blocks when the innermost
// axis is kept; otherwise output elements, or blocks of them when r.blocks > 1.
func (r *reducer) work(lo, hi int) {
	per := r.outer * r.inner
	switch {
	case !r.innerReduced:
		for task := lo; task < hi; task++ {
			u, c := task/r.cols, task%r.cols
			r.reduceRows(u, c*reduceColumns, min(r.inner, (c+1)*reduceColumns))
		}
	case r.blocks > 1:
		for task := lo; task < hi; task++ {
			u, b := task/r.blocks, task%r.blocks
			from, to := b*ewGrain, min(per, (b+1)*ewGrain)
			switch r.op {
			case reduceMax:
				r.partials[task] = float64(r.maxRange(u, from, to))
			case reduceProd:
				r.partials[task] = r.prodRange(u, from, to)
			default:
				r.partials[task] = r.sumRange(u, from, to)
			}
		}
	default:
		for u := lo; u < hi; u++ {
			switch r.op {
			case reduceMax:
				r.dst[u] = r.maxRange(u, 0, per)
			case reduceProd:
				r.dst[u] = float32(r.prodRange(u, 0, per))
			default:
				r.store(u, r.sumRange(u, 0, per))
			}
		}
	}
}

// keptBase returns the input offset of output unit u (outer kept axes only when the
// innermost axis is kept).
func (r *reducer) keptBase(u int) int {
	base := 0
	start := 0
	if !r.innerReduced {
		start = 1
	}
	for i := start; i < len(r.kSize); i++ {
		s := r.kSize[i]
		base += (u % s) * r.kStride[i]
		u /= s
	}
	return base
}

// outerOffset returns the input offset of reduced combination t (excluding the inner run
// when the innermost axis is reduced).
func (r *reducer) outerOffset(t int) int {
	off := 0
	start := 0
	if r.innerReduced {
		start = 1
	}
	for i := start; i < len(r.rSize); i++ {
		s := r.rSize[i]
		off += (t % s) * r.rStride[i]
		t /= s
	}
	return off
}

// sumRange sums the elements [from, to) of output element u's reduction, numbered run by
// run. Each run's piece is summed in float32 and the pieces in float64: reductions over
// whole feature maps are long.
func (r *reducer) sumRange(u, from, to int) float64 {
	src, n, base := r.src, r.inner, r.keptBase(u)
	var s float64
	for f := from; f < to; {
		t, i := f/n, f%n
		m := min(n-i, to-f)
		s += float64(sum32(src[base+r.outerOffset(t)+i:][:m]))
		f += m
	}
	return s
}

// maxRange is sumRange's counterpart for the maximum; NaN wins, as in numpy.
func (r *reducer) maxRange(u, from, to int) float32 {
	src, n, base := r.src, r.inner, r.keptBase(u)
	m := negInf()
	for f := from; f < to; {
		t, i := f/n, f%n
		l := min(n-i, to-f)
		for _, v := range src[base+r.outerOffset(t)+i:][:l] {
			if v > m || v != v {
				m = v
			}
		}
		f += l
	}
	return m
}

// prodRange is sumRange's counterpart for the product, accumulated in float64 so that
// long products do not underflow or overflow before the end.
func (r *reducer) prodRange(u, from, to int) float64 {
	src, n, base := r.src, r.inner, r.keptBase(u)
	p := 1.0
	for f := from; f < to; {
		t, i := f/n, f%n
		l := min(n-i, to-f)
		for _, v := range src[base+r.outerOffset(t)+i:][:l] {
			p *= float64(v)
		}
		f += l
	}
	return p
}

// reduceRows reduces columns [c0, c1) of output row u by accumulating input rows.
func (r *reducer) reduceRows(u, c0, c1 int) {
	src, n := r.src, r.inner
	base := r.keptBase(u) + c0
	out := r.dst[u*n+c0 : u*n+c1]
	w := c1 - c0
	if r.op == reduceMax {
		copy(out, src[base:base+w])
		for t := 1; t < r.outer; t++ {
			for i, v := range src[base+r.outerOffset(t):][:w] {
				if v > out[i] || v != v {
					out[i] = v
				}
			}
		}
		return
	}
	if r.op == reduceProd {
		copy(out, src[base:base+w])
		for t := 1; t < r.outer; t++ {
			for i, v := range src[base+r.outerOffset(t):][:w] {
				out[i] *= v
			}
		}
		return
	}
	if !r.acc {
		clear(out)
	}
	sc := r.scale
	for t := 0; t < r.outer; t++ {
		row := src[base+r.outerOffset(t):][:w]
		if sc == 1 {
			for i, v := range row {
				out[i] += v
			}
		} else {
			for i, v := range row {
				out[i] += sc * v
			}
		}
	}
}

// reduceTo adds src, shaped like out, into dst, shaped like shape, which broadcasts to
// out, times scale: the gradient of a broadcast operand is the sum over the axes it was broadcast on.
func (r *reducer) reduceTo(ctx *Context, src []float32, out, shape []int, dst []float32, scale float32, red []bool) []bool {
	red = red[:0]
	off := len(out) - len(shape)
	for d := range out {
		red = append(red, d < off || (shape[d-off] == 1 && out[d] != 1))
	}
	r.plan(out, red)
	r.run(ctx, reduceSum, src, dst, scale, true)
	return red
}

// growF returns buf resized to n, reallocating only when its capacity is too small.
func growF(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// negInf returns float32 negative infinity, the identity of a maximum.
func negInf() float32 { return float32(math.Inf(-1)) }

// posInf returns float32 positive infinity.
func posInf() float32 { return float32(math.Inf(1)) }

// sum32 sums x with four independent accumulators, which breaks the chain of dependent
// additions (about 4× faster than one accumulator) and rounds less.
func sum32(x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// sum32Prod is sum32 of the products g[i]·x[i], each rounded to float32 before it is
// added, as sum32 of the products written out would sum them.
func sum32Prod(g, x []float32) float32 {
	x = x[:len(g)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(g); i += 4 {
		s0 += float32(g[i] * x[i])
		s1 += float32(g[i+1] * x[i+1])
		s2 += float32(g[i+2] * x[i+2])
		s3 += float32(g[i+3] * x[i+3])
	}
	for ; i < len(g); i++ {
		s0 += float32(g[i] * x[i])
	}
	return (s0 + s1) + (s2 + s3)
}
