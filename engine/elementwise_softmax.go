package engine

import "math"

// softmaxKernel runs Softmax and LogSoftmax.
//
// The exponentials are expNegF32's (x − max ≤ 0), 16 or 8 lanes at a time where the CPU
// allows: the float64 exp held the softmax at a fifth of a small transformer's time. The
// sum stays in float64, in the order of the axis, so that both layouts below agree bit
// for bit.
//
// Both axis semantics reduce to one layout, [outer, d, inner], normalised along d:
// before opset 13 the input is coerced to 2-D at axis (outer = prod(dims < axis),
// d = prod(dims ≥ axis), inner = 1; default axis 1); from opset 13 the op runs along the
// single axis (d = dims[axis], inner = prod(dims > axis); default axis −1).
type softmaxKernel struct {
	n    *Node
	log  bool
	axis int64

	outer, d, inner int

	// Arguments of the current call for the bound functions below.
	x, y, g, dst   []float32
	fwd, bwd       func(lo, hi int)
	fwdBlk, bwdBlk func(lo, hi int)
}

func newSoftmax(log bool) Builder {
	return func(n *Node) (Kernel, error) {
		def := int64(1)
		if n.Opset >= 13 {
			def = -1
		}
		k := &softmaxKernel{n: n, log: log, axis: n.Int("axis", def)}
		k.fwd, k.bwd = k.forward, k.backward
		k.fwdBlk, k.bwdBlk = k.forwardBlocks, k.backwardBlocks
		return k, nil
	}
}

// layout sets outer, d and inner for an input of shape.
func (k *softmaxKernel) layout(shape []int) error {
	r := int64(len(shape))
	ax := k.axis
	if ax < -r || ax >= max(r, 1) {
		return k.n.Errorf("axis %d is out of range for an input of rank %d", k.axis, r)
	}
	if ax < 0 {
		ax += r
	}
	a := int(ax)
	if r == 0 {
		k.outer, k.d, k.inner = 1, 1, 1
		return nil
	}
	if k.n.Opset < 13 {
		k.outer, k.d, k.inner = numel(shape[:a]), numel(shape[a:]), 1
	} else {
		k.outer, k.d, k.inner = numel(shape[:a]), shape[a], numel(shape[a+1:])
	}
	return nil
}

func (k *softmaxKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != 1 {
		return nil, k.n.Errorf("needs 1 input, has %d", len(in))
	}
	x := in[0]
	if x.DType != Float32 {
		return nil, k.n.Errorf("input is %s; this op computes on float32 only", x.DType)
	}
	if err := k.layout(x.Shape); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: append([]int(nil), x.Shape...)}}, nil
}

func (k *softmaxKernel) Forward(ctx *Context, in, out []*Tensor) error {
	if err := k.layout(in[0].Shape); err != nil {
		return err
	}
	if k.outer*k.d*k.inner == 0 {
		return nil // rows of no elements: nothing to normalise (and no row length to divide by)
	}
	k.x, k.y = in[0].F, out[0].F
	if k.inner == 1 {
		ctx.Parallel(k.outer, max(1, softmaxGrain/max(1, k.d)), k.fwd)
	} else {
		ctx.Parallel(k.outer*k.blocks(), max(1, softmaxGrain/max(1, k.d*softmaxBlock)), k.fwdBlk)
	}
	k.x, k.y = nil, nil
	return nil
}

// softmaxGrain is the fewest elements a worker takes: an element costs about ten of an
// Add's (a maximum, a subtraction, an exponential, a float64 sum and a scaling), so
// ewGrain's would leave a transformer's attention scores (32 768 values at batch 32) to
// one worker. Rows never split, so the result is the same for any number of workers.
const softmaxGrain = ewGrain / 8

// softmaxBlock is how many neighbouring lanes the strided layout (inner > 1) normalises
// together, so that every pass reads contiguous rows instead of one element per row.
const softmaxBlock = 256

func (k *softmaxKernel) blocks() int { return (k.inner + softmaxBlock - 1) / softmaxBlock }

// forwardBlocks normalises lane blocks [lo, hi) of the strided layout; block b covers
// lanes [i0, i0+w) of outer index b/blocks. Per lane it does what forward does, in the
// same order, so both paths give identical results.
func (k *softmaxKernel) forwardBlocks(lo, hi int) {
	d, s, nb := k.d, k.inner, k.blocks()
	var mx, fl, tmp [softmaxBlock]float32
	var sum [softmaxBlock]float64
	for b := lo; b < hi; b++ {
		i0 := (b % nb) * softmaxBlock
		w := min(softmaxBlock, s-i0)
		base := (b/nb)*d*s + i0
		m, sm := mx[:w], sum[:w]
		for i := range m {
			m[i] = negInf()
			sm[i] = 0
		}
		for j := 0; j < d; j++ {
			for i, v := range k.x[base+j*s:][:w] {
				m[i] = max(m[i], v)
			}
		}
		for j := 0; j < d; j++ {
			// LogSoftmax reads x again at the end, and y may be x (in place), so its
			// exponentials go to a scratch row.
			x, e := k.x[base+j*s:][:w], k.y[base+j*s:][:w]
			if k.log {
				e = tmp[:w]
			}
			for i, v := range x {
				e[i] = v - m[i]
			}
			expNegSlice(e, e)
			for i, v := range e {
				sm[i] += float64(v)
			}
		}
		// Per lane: the log of the sum, or its reciprocal, as forward rounds them.
		ls := fl[:w]
		for i, v := range sm {
			if k.log {
				ls[i] = float32(math.Log(v))
			} else {
				ls[i] = float32(1 / v)
			}
		}
		for j := 0; j < d; j++ {
			x, y := k.x[base+j*s:][:w], k.y[base+j*s:][:w]
			if k.log {
				for i, v := range x {
					y[i] = v - m[i] - ls[i]
				}
				continue
			}
			for i := range y {
				y[i] *= ls[i]
			}
		}
	}
}

// softmaxRows is how many elements of short rows forward hands to one call of the vector
// exponential: a small transformer's rows of 16 paid more for one call per row than for
// their exponentials.
const softmaxRows = 2048

// forward normalises rows [lo, hi) of the contiguous layout (inner = 1).
func (k *softmaxKernel) forward(lo, hi int) {
	d := k.d
	if !k.log && d < softmaxRows/4 {
		// Rows in groups: every row's x − max, then the group's exponentials in one
		// call, then each row's sum and scale, the same operations in the same order as
		// below.
		g := softmaxRows / d
		for u0 := lo; u0 < hi; u0 += g {
			u1 := min(u0+g, hi)
			// Four rows' maxima side by side too, without branches: in rows of 16 the
			// compare-and-branch chain of one row at a time was most of the time. max
			// gives the largest value as rowMax does, or NaN where rowMax passes a NaN
			// over; such a row is NaN throughout either way.
			u := u0
			for ; u+4 <= u1; u += 4 {
				x0, x1, x2, x3 := k.x[u*d:][:d], k.x[(u+1)*d:][:d], k.x[(u+2)*d:][:d], k.x[(u+3)*d:][:d]
				m0, m1, m2, m3 := negInf(), negInf(), negInf(), negInf()
				for j := range x0 {
					m0, m1, m2, m3 = max(m0, x0[j]), max(m1, x1[j]), max(m2, x2[j]), max(m3, x3[j])
				}
				subRow(k.y[u*d:][:d], x0, m0)
				subRow(k.y[(u+1)*d:][:d], x1, m1)
				subRow(k.y[(u+2)*d:][:d], x2, m2)
				subRow(k.y[(u+3)*d:][:d], x3, m3)
			}
			for ; u < u1; u++ {
				x := k.x[u*d:][:d]
				subRow(k.y[u*d:][:d], x, rowMax(x))
			}
			e := k.y[u0*d : u1*d]
			expNegSlice(e, e)
			// Four rows' sums side by side: each is still its row's sum in order, but
			// the four chains of float64 additions overlap instead of waiting on each
			// other (a row of 16 was 16 dependent adds).
			u = u0
			for ; u+4 <= u1; u += 4 {
				y0, y1, y2, y3 := k.y[u*d:][:d], k.y[(u+1)*d:][:d], k.y[(u+2)*d:][:d], k.y[(u+3)*d:][:d]
				var s0, s1, s2, s3 float64
				for j := range y0 {
					s0 += float64(y0[j])
					s1 += float64(y1[j])
					s2 += float64(y2[j])
					s3 += float64(y3[j])
				}
				scaleRow(y0, s0)
				scaleRow(y1, s1)
				scaleRow(y2, s2)
				scaleRow(y3, s3)
			}
			for ; u < u1; u++ {
				y := k.y[u*d:][:d]
				var sum float64
				for _, v := range y {
					sum += float64(v)
				}
				scaleRow(y, sum)
			}
		}
		return
	}
	var tmp [softmaxBlock]float32
	for u := lo; u < hi; u++ {
		x, y := k.x[u*d:][:d], k.y[u*d:][:d]
		m := rowMax(x)
		var sum float64
		if k.log {
			// As in forwardBlocks, the exponentials go to scratch: y may be x.
			for j0 := 0; j0 < d; j0 += len(tmp) {
				xs := x[j0:min(d, j0+len(tmp))]
				e := tmp[:len(xs)]
				for i, v := range xs {
					e[i] = v - m
				}
				expNegSlice(e, e)
				for _, v := range e {
					sum += float64(v)
				}
			}
		} else {
			for j, v := range x {
				y[j] = v - m
			}
			expNegSlice(y, y)
			for _, v := range y {
				sum += float64(v)
			}
		}
		if k.log {
			ls := float32(math.Log(sum))
			for j, v := range x {
				y[j] = v - m - ls
			}
			continue
		}
		inv := float32(1 / sum)
		for j := range y {
			y[j] *= inv
		}
	}
}

// rowMax is the largest value of x, −Inf for none; a NaN is passed over, and its row
// comes out NaN throughout through its sum. Long rows rarely meet a new maximum, so the
// branch is predicted; short rows take the branch-free form in forward.
func rowMax(x []float32) float32 {
	m := negInf()
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// subRow sets y to x − m.
func subRow(y, x []float32, m float32) {
	for j, v := range x[:len(y)] {
		y[j] = v - m
	}
}

// scaleRow divides the row y by its sum as forward does: times float32(1/sum).
func scaleRow(y []float32, sum float64) {
	inv := float32(1 / sum)
	for j := range y {
		y[j] *= inv
	}
}

func (k *softmaxKernel) Retains() (inputs, outputs []bool) {
	return []bool{false}, []bool{true}
}

// Backward adds the vector-Jacobian product, computed from the output alone:
// Softmax: gx = y ⊙ (g − ⟨g, y⟩); LogSoftmax: gx = g − exp(y)·Σg, along each lane.
func (k *softmaxKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil || len(gin) == 0 || gin[0] == nil {
		return nil
	}
	if err := k.layout(out[0].Shape); err != nil {
		return err
	}
	k.y, k.g, k.dst = out[0].F, gout[0].F, gin[0].F
	if k.inner == 1 {
		ctx.Parallel(k.outer, max(1, ewGrain/max(1, k.d)), k.bwd)
	} else {
		ctx.Parallel(k.outer*k.blocks(), max(1, ewGrain/max(1, k.d*softmaxBlock)), k.bwdBlk)
	}
	k.y, k.g, k.dst = nil, nil, nil
	return nil
}

// backward is the vector-Jacobian product for rows [lo, hi) of the contiguous layout.
func (k *softmaxKernel) backward(lo, hi int) {
	d := k.d
	for u := lo; u < hi; u++ {
		y, g, dst := k.y[u*d:][:d], k.g[u*d:][:d], k.dst[u*d:][:d]
		var dot float64
		if k.log {
			for _, v := range g {
				dot += float64(v)
			}
			sum := float32(dot)
			for j, v := range g {
				dst[j] += v - expF(y[j])*sum
			}
			continue
		}
		for j, v := range g {
			dot += float64(v) * float64(y[j])
		}
		p := float32(dot)
		for j, v := range g {
			dst[j] += y[j] * (v - p)
		}
	}
}

// backwardBlocks is backward for lane blocks [lo, hi) of the strided layout.
func (k *softmaxKernel) backwardBlocks(lo, hi int) {
	d, s, nb := k.d, k.inner, k.blocks()
	var acc [softmaxBlock]float64
	var red [softmaxBlock]float32
	for b := lo; b < hi; b++ {
		i0 := (b % nb) * softmaxBlock
		w := min(softmaxBlock, s-i0)
		base := (b/nb)*d*s + i0
		a := acc[:w]
		clear(a)
		for j := 0; j < d; j++ {
			g, y := k.g[base+j*s:][:w], k.y[base+j*s:][:w]
			if k.log {
				for i, v := range g {
					a[i] += float64(v)
				}
				continue
			}
			for i, v := range g {
				a[i] += float64(v) * float64(y[i])
			}
		}
		r := red[:w]
		for i, v := range a {
			r[i] = float32(v)
		}
		for j := 0; j < d; j++ {
			g, y, dst := k.g[base+j*s:][:w], k.y[base+j*s:][:w], k.dst[base+j*s:][:w]
			if k.log {
				for i, v := range g {
					dst[i] += v - expF(y[i])*r[i]
				}
				continue
			}
			for i, v := range g {
				dst[i] += y[i] * (v - r[i])
			}
		}
	}
}
