package engine

import "math"

// softmaxKernel runs Softmax and LogSoftmax.
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
	x, y, g, dst []float32
	fwd, bwd     func(lo, hi int)
}

func newSoftmax(log bool) Builder {
	return func(n *Node) (Kernel, error) {
		def := int64(1)
		if n.Opset >= 13 {
			def = -1
		}
		k := &softmaxKernel{n: n, log: log, axis: n.Int("axis", def)}
		k.fwd, k.bwd = k.forward, k.backward
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
	k.x, k.y = in[0].F, out[0].F
	units := k.outer * k.inner
	ctx.Parallel(units, max(1, ewGrain/max(1, k.d)), k.fwd)
	k.x, k.y = nil, nil
	return nil
}

// forward normalises the lanes [lo, hi); lane u is outer index u/inner, inner index
// u%inner, and walks d elements at stride inner.
func (k *softmaxKernel) forward(lo, hi int) {
	d, s := k.d, k.inner
	for u := lo; u < hi; u++ {
		base := (u/s)*d*s + u%s
		x, y := k.x[base:], k.y[base:]
		m := negInf()
		for j := 0; j < d; j++ {
			if v := x[j*s]; v > m {
				m = v
			}
		}
		var sum float64
		for j := 0; j < d; j++ {
			e := expF(x[j*s] - m)
			y[j*s] = e
			sum += float64(e)
		}
		if k.log {
			ls := float32(math.Log(sum))
			for j := 0; j < d; j++ {
				y[j*s] = x[j*s] - m - ls
			}
			continue
		}
		inv := float32(1 / sum)
		for j := 0; j < d; j++ {
			y[j*s] *= inv
		}
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
	ctx.Parallel(k.outer*k.inner, max(1, ewGrain/max(1, k.d)), k.bwd)
	k.y, k.g, k.dst = nil, nil, nil
	return nil
}

func (k *softmaxKernel) backward(lo, hi int) {
	d, s := k.d, k.inner
	for u := lo; u < hi; u++ {
		base := (u/s)*d*s + u%s
		y, g, dst := k.y[base:], k.g[base:], k.dst[base:]
		var dot float64
		if k.log {
			for j := 0; j < d; j++ {
				dot += float64(g[j*s])
			}
			sum := float32(dot)
			for j := 0; j < d; j++ {
				dst[j*s] += g[j*s] - expF(y[j*s])*sum
			}
			continue
		}
		for j := 0; j < d; j++ {
			dot += float64(g[j*s]) * float64(y[j*s])
		}
		p := float32(dot)
		for j := 0; j < d; j++ {
			dst[j*s] += y[j*s] * (g[j*s] - p)
		}
	}
}
