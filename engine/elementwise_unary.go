package engine

import (
	"math"
)

// unaryOp is one unary element-wise op whole: its attributes, its forward pass and its
// vector-Jacobian product over a chunk of elements. Each function holds its own loop, so
// the dispatch is one indirect call per chunk and the loops stay specialised.
type unaryOp struct {
	name string
	// init reads the op's attributes into the kernel.
	init func(k *unaryKernel, n *Node) error
	// fwd sets y from x over one chunk.
	fwd func(k *unaryKernel, x, y []float32)
	// fwdInt computes on int64 tensors; nil for ops on float32 only.
	fwdInt func(k *unaryKernel, in []*Tensor, y []int64)
	// vjp adds dy·∂y/∂x into dx over one chunk. It reads x or y as keep says; the
	// other is nil.
	vjp  func(k *unaryKernel, dx, x, y, dy []float32)
	keep keep
	// clip marks Clip, whose bounds are extra inputs with gradients of their own.
	clip bool
}

// Constants of Gelu's tanh approximation: √(2/π) and the cubic coefficient.
const (
	geluC = 0.7978845608028654
	geluA = 0.044715
)

// keep says which forward value an op's vjp reads, so that the executor can release the
// other.
type keep uint8

const (
	keepNone keep = iota
	keepX
	keepY
)

// unaryOps returns the unary element-wise ops. Where a derivative jumps, the value
// follows PyTorch.
func unaryOps() []unaryOp {
	return []unaryOp{
		{name: "Sqrt", keep: keepY,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Sqrt(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) {
				for i := range dst {
					dst[i] += g[i] * 0.5 / y[i]
				}
			}},
		// Floor and Ceil are flat between integers: their gradient is zero, as in PyTorch.
		{name: "Floor", keep: keepNone,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Floor(float64(v)))
				}
			},
			vjp: func(*unaryKernel, []float32, []float32, []float32, []float32) {}},
		{name: "Ceil", keep: keepNone,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Ceil(float64(v)))
				}
			},
			vjp: func(*unaryKernel, []float32, []float32, []float32, []float32) {}},
		{name: "Neg", keep: keepNone,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = -v
				}
			},
			fwdInt: func(_ *unaryKernel, in []*Tensor, y []int64) {
				for i, v := range in[0].I {
					y[i] = -v
				}
			},
			vjp: func(_ *unaryKernel, dst, _, _, g []float32) {
				for i := range dst {
					dst[i] -= g[i]
				}
			}},
		{name: "Abs", keep: keepX,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Abs(float64(v)))
				}
			},
			fwdInt: func(_ *unaryKernel, in []*Tensor, y []int64) {
				for i, v := range in[0].I {
					if v < 0 {
						v = -v
					}
					y[i] = v
				}
			},
			// The derivative at 0 is 0 (the sign function), as in PyTorch.
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) {
				for i, v := range x {
					switch {
					case v > 0:
						dst[i] += g[i]
					case v < 0:
						dst[i] -= g[i]
					}
				}
			}},
		{name: "Exp", keep: keepY,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = expF(v)
				}
			},
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) {
				for i := range dst {
					dst[i] += g[i] * y[i]
				}
			}},
		{name: "Log", keep: keepX,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Log(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) {
				for i := range dst {
					dst[i] += g[i] / x[i]
				}
			}},
		{name: "Erf", keep: keepX,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Erf(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) {
				const c = 2 / 1.7724538509055159 // 2/√π
				for i, v := range x {
					dst[i] += g[i] * float32(c*math.Exp(-float64(v)*float64(v)))
				}
			}},
		{name: "Reciprocal", keep: keepY,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = 1 / v
				}
			},
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) {
				for i := range dst {
					dst[i] -= g[i] * y[i] * y[i]
				}
			}},
		{name: "Relu", keep: keepY,
			// Branch-free: clearing every bit of a value whose sign bit is set costs no
			// mispredictions on mixed-sign activations (a branch made this loop 5× slower).
			// Negative values and −0 become +0; NaN passes through unless its sign bit is set.
			fwd: func(_ *unaryKernel, x, y []float32) { reluVec(y[:len(x)], x) },
			// Branch-free like the forward pass: the mask is all ones where y > 0 (its bits
			// are a positive integer), else zero, so y = 0 passes no gradient (PyTorch's
			// derivative at 0).
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) { reluGradVec(dst, y, g) }},
		{name: "LeakyRelu", keep: keepX,
			init: func(k *unaryKernel, n *Node) error {
				k.alpha = n.Float("alpha", 0.01)
				return nil
			},
			fwd: func(k *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				a := k.alpha
				for i, v := range x {
					if v < 0 {
						v *= a
					}
					y[i] = v
				}
			},
			// The derivative at 0 is alpha.
			vjp: func(k *unaryKernel, dst, x, _, g []float32) {
				a := k.alpha
				for i, v := range x {
					if v > 0 {
						dst[i] += g[i]
					} else {
						dst[i] += a * g[i]
					}
				}
			}},
		{name: "Sigmoid", keep: keepY,
			fwd: func(_ *unaryKernel, x, y []float32) { sigmoidSlice(x, y) },
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) {
				for i := range dst {
					dst[i] += g[i] * y[i] * (1 - y[i])
				}
			}},
		// onnxruntime's contrib QuickGelu, x·σ(alpha·x), which the engine also makes of a
		// Sigmoid whose only reader multiplies it by its input (fuseSiLU): SiLU with
		// alpha 1, in one vector pass (EfficientNet's activation after every
		// convolution), keeping x alone for the gradient.
		{name: MSDomain + ".QuickGelu", keep: keepX,
			init: func(k *unaryKernel, n *Node) error {
				k.alpha = n.Float("alpha", 1.702)
				return nil
			},
			fwd: func(k *unaryKernel, x, y []float32) {
				if k.alpha == 1 {
					siluVec(x, y[:len(x)])
					return
				}
				a := k.alpha
				for i, v := range x {
					y[i] = v * sigmoidF32(a*v)
				}
			},
			// d/dx x·σ(ax) = σ(ax) + ax·σ(ax)·(1 − σ(ax)).
			vjp: func(k *unaryKernel, dst, x, _, g []float32) {
				a := k.alpha
				for i, v := range x {
					s := sigmoidF32(a * v)
					dst[i] += g[i] * (s + a*v*s*(1-s))
				}
			}},
		{name: "HardSigmoid", keep: keepX,
			init: func(k *unaryKernel, n *Node) error {
				k.alpha, k.beta = n.Float("alpha", 0.2), n.Float("beta", 0.5)
				return nil
			},
			fwd: func(k *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				a, b := k.alpha, k.beta
				for i, v := range x {
					y[i] = max(0, min(1, a*v+b))
				}
			},
			// alpha strictly inside the linear piece.
			vjp: func(k *unaryKernel, dst, x, _, g []float32) {
				a, b := k.alpha, k.beta
				for i, v := range x {
					if t := a*v + b; t > 0 && t < 1 {
						dst[i] += a * g[i]
					}
				}
			}},
		{name: "HardSwish", keep: keepX,
			init: func(k *unaryKernel, _ *Node) error {
				k.alpha, k.beta = 1.0/6, 0.5
				return nil
			},
			// The clamp of a·v+b to [0, 1] on bit patterns (see clipBits): +0 below, 1
			// above, with a NaN or −∞ argument still giving NaN through the product.
			fwd: func(k *unaryKernel, x, y []float32) {
				a, b := k.alpha, k.beta
				hardSwishVec(y, x, a, b)
			},
			// 0 below −3, x/3+1/2 on [−3, 3] and 1 above.
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) { hardSwishGradVec(dst[:len(x)], x, g) }},
		{name: "Tanh", keep: keepY,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Tanh(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, _, y, g []float32) {
				for i := range dst {
					dst[i] += g[i] * (1 - y[i]*y[i])
				}
			}},
		{name: "Sin", keep: keepX,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Sin(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) {
				for i, v := range x {
					dst[i] += g[i] * float32(math.Cos(float64(v)))
				}
			}},
		{name: "Cos", keep: keepX,
			fwd: func(_ *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				for i, v := range x {
					y[i] = float32(math.Cos(float64(v)))
				}
			},
			vjp: func(_ *unaryKernel, dst, x, _, g []float32) {
				for i, v := range x {
					dst[i] -= g[i] * float32(math.Sin(float64(v)))
				}
			}},
		// Gelu (opset 20): x·Φ(x), or with approximate="tanh" the tanh form. The
		// derivatives are taken in float64: Φ(x)+x·φ(x), and for tanh
		// ½(1+t) + ½x(1−t²)·c(1+3a·x²) with t = tanh(c(x+a·x³)).
		{name: "Gelu", keep: keepX,
			init: func(k *unaryKernel, n *Node) error {
				switch a := n.String("approximate", "none"); a {
				case "none":
				case "tanh":
					k.alpha = 1
				default:
					return n.Errorf("approximate %q is not part of the spec (none or tanh)", a)
				}
				return nil
			},
			fwd: func(k *unaryKernel, x, y []float32) {
				y = y[:len(x)]
				if k.alpha != 0 {
					for i, v := range x {
						u := float64(v)
						y[i] = float32(0.5 * u * (1 + math.Tanh(geluC*(u+geluA*u*u*u))))
					}
					return
				}
				for i, v := range x {
					u := float64(v)
					y[i] = float32(0.5 * u * (1 + math.Erf(u/math.Sqrt2)))
				}
			},
			vjp: func(k *unaryKernel, dst, x, _, g []float32) {
				if k.alpha != 0 {
					for i, v := range x {
						u := float64(v)
						t := math.Tanh(geluC * (u + geluA*u*u*u))
						d := 0.5*(1+t) + 0.5*u*(1-t*t)*geluC*(1+3*geluA*u*u)
						dst[i] += g[i] * float32(d)
					}
					return
				}
				for i, v := range x {
					u := float64(v)
					d := 0.5*(1+math.Erf(u/math.Sqrt2)) + u*math.Exp(-0.5*u*u)/math.Sqrt(2*math.Pi)
					dst[i] += g[i] * float32(d)
				}
			}},
		{name: "Clip", keep: keepX, clip: true,
			init: func(k *unaryKernel, n *Node) error {
				if n.Opset < 11 {
					// Opset 6's defaults are the float32 limits, not infinities.
					k.attrLo = n.Float("min", -math.MaxFloat32)
					k.attrHi = n.Float("max", math.MaxFloat32)
				} else if n.Has("min") || n.Has("max") {
					return n.Errorf("attributes min/max are not part of opset %d Clip; bounds are inputs since opset 11", n.Opset)
				}
				return nil
			},
			fwd: func(k *unaryKernel, x, y []float32) { clipBits(x, y, k.lo, k.hi) },
			fwdInt: func(k *unaryKernel, in []*Tensor, y []int64) {
				lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
				if t := k.clipBound(in, 1); t != nil {
					lo = t.I[0]
				}
				if t := k.clipBound(in, 2); t != nil {
					hi = t.I[0]
				}
				for i, v := range in[0].I {
					y[i] = min(max(v, lo), hi)
				}
			},
			// The gradient passes for min ≤ x ≤ max (inclusive); the rest goes to the
			// bound that was selected (clipBoundGrads), and when min > max every element
			// takes max.
			// Without a branch per element, which mispredicted on activations around
			// the bounds (13 % of fmnist-resnet's training step): outside, g is
			// masked to +0, which leaves dst as it is (a −0 becomes +0).
			vjp: func(k *unaryKernel, dst, x, _, g []float32) {
				clipGradVec(dst[:len(x)], x, g, k.lo, k.hi)
			}},
	}
}

// b2u is 1 for true and 0 for false, without a branch.
func b2u(b bool) uint32 {
	var u uint32
	if b {
		u = 1
	}
	return u
}

// unaryKernel runs the element-wise math and activation ops and Clip, one unaryOp each.
// Neg, Abs and Clip also compute on int64; the rest on float32 only.
type unaryKernel struct {
	n           *Node
	op          *unaryOp
	alpha, beta float32 // LeakyRelu's slope; HardSigmoid's and HardSwish's line

	// Clip's bounds as attributes (before opset 11); from 11 they are inputs.
	attrLo, attrHi float32

	// Arguments of the current call, read by fwd and bwd, bound once so that passing
	// them to ctx.Parallel does not allocate.
	x, y, g, dst []float32
	lo, hi       float32
	fwd, bwd     func(lo, hi int)
}

func newUnary(op *unaryOp) Builder {
	return func(n *Node) (Kernel, error) {
		k := &unaryKernel{n: n, op: op}
		if op.init != nil {
			if err := op.init(k, n); err != nil {
				return nil, err
			}
		}
		k.fwd = k.forward
		k.bwd = k.backward
		return k, nil
	}
}

func (k *unaryKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) < 1 {
		return nil, k.n.Errorf("needs an input")
	}
	x := in[0]
	if x.DType != Float32 && k.op.fwdInt == nil {
		return nil, k.n.Errorf("input is %s; this op computes on float32 only", x.DType)
	}
	if k.op.clip {
		if len(in) > 1 && k.n.Opset < 11 {
			return nil, k.n.Errorf("opset %d Clip takes one input, has %d", k.n.Opset, len(in))
		}
		for i := 1; i < len(in) && i < 3; i++ {
			if !k.n.HasInput(i) || in[i] == nil {
				continue
			}
			if in[i].DType != x.DType || numel(in[i].Shape) != 1 {
				return nil, k.n.Errorf("bound %d must be a single %s, is %s of shape %v", i, x.DType, in[i].DType, in[i].Shape)
			}
		}
	} else if len(in) != 1 {
		return nil, k.n.Errorf("needs 1 input, has %d", len(in))
	}
	return []*Tensor{{DType: x.DType, Shape: append([]int(nil), x.Shape...)}}, nil
}

// clipBound returns Clip's optional input i, or nil when absent.
func (k *unaryKernel) clipBound(in []*Tensor, i int) *Tensor {
	if i < len(in) && k.n.HasInput(i) && in[i] != nil {
		return in[i]
	}
	return nil
}

// bounds returns Clip's float bounds for this call.
func (k *unaryKernel) bounds(in []*Tensor) (lo, hi float32) {
	if k.n.Opset < 11 {
		return k.attrLo, k.attrHi
	}
	lo, hi = negInf(), posInf()
	if t := k.clipBound(in, 1); t != nil {
		lo = t.F[0]
	}
	if t := k.clipBound(in, 2); t != nil {
		hi = t.F[0]
	}
	return lo, hi
}

func (k *unaryKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x, y := in[0], out[0]
	if x.DType == Int64 {
		k.op.fwdInt(k, in, y.I)
		return nil
	}
	if k.op.clip {
		k.lo, k.hi = k.bounds(in)
	}
	k.x, k.y = x.F, y.F
	ctx.Parallel(len(y.F), ewGrain, k.fwd)
	k.x, k.y = nil, nil
	return nil
}

func (k *unaryKernel) forward(lo, hi int) { k.op.fwd(k, k.x[lo:hi], k.y[lo:hi]) }

// floatKey maps the bits of a float32 to an int32 with the same order as the floats
// (−0 just below +0; NaNs outside every number); it is its own inverse.
func floatKey(u int32) int32 { return u ^ (u >> 31 & 0x7fffffff) }

// clipBits sets y = min(max(x, lo), hi) (hi wherever lo > hi; NaN stays NaN). Compare
// branches mispredict on values scattered around the bounds, and the float min and max
// builtins cost a dozen instructions each for their NaN and signed-zero rules; integer
// min and max of order-preserving bit patterns (floatKey) are one vector instruction
// each (clipKeysVec).
func clipBits(x, y []float32, lo, hi float32) {
	y = y[:len(x)]
	if lo != lo || hi != hi {
		for i, v := range x {
			y[i] = min(max(v, lo), hi)
		}
		return
	}
	kl, kh := floatKey(int32(math.Float32bits(lo))), floatKey(int32(math.Float32bits(hi)))
	clipKeysVec(y, x, kl, kh)
}

// sigmoid is 1/(1+e^-v), evaluated so that neither branch overflows.
func sigmoid(v float32) float32 {
	if v >= 0 {
		return 1 / (1 + expF(-v))
	}
	e := expF(v)
	return e / (1 + e)
}

func (k *unaryKernel) Retains() (inputs, outputs []bool) {
	inputs = []bool{k.op.keep == keepX}
	if k.op.clip {
		// The input and both bounds decide where the gradient goes.
		inputs = make([]bool, max(1, k.n.NumInputs()))
		for i := range inputs {
			inputs[i] = true
		}
	}
	return inputs, []bool{k.op.keep == keepY}
}

// Backward adds the vector-Jacobian product of the op's vjp.
func (k *unaryKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	g := gout[0]
	if g == nil {
		return nil
	}
	if g.DType != Float32 {
		return k.n.Errorf("no gradient through %s values", g.DType)
	}
	if k.op.clip {
		k.lo, k.hi = k.bounds(in)
		k.clipBoundGrads(in, g, gin)
	}
	if len(gin) == 0 || gin[0] == nil {
		return nil
	}
	switch k.op.keep {
	case keepY:
		k.y = out[0].F
	case keepX:
		k.x = in[0].F
	}
	k.g, k.dst = g.F, gin[0].F
	ctx.Parallel(len(k.dst), ewGrain, k.bwd)
	k.x, k.y, k.g, k.dst = nil, nil, nil, nil
	return nil
}

// clipBoundGrads adds the gradients of Clip's min and max inputs: the sums of the
// output gradient over the elements each bound replaced.
func (k *unaryKernel) clipBoundGrads(in []*Tensor, g *Tensor, gin []*Tensor) {
	var gLo, gHi *Tensor
	if len(gin) > 1 {
		gLo = gin[1]
	}
	if len(gin) > 2 {
		gHi = gin[2]
	}
	if gLo == nil && gHi == nil {
		return
	}
	var sLo, sHi float64
	l, h := k.lo, k.hi
	for i, v := range in[0].F {
		switch {
		case h < v || h < l:
			sHi += float64(g.F[i])
		case v < l:
			sLo += float64(g.F[i])
		}
	}
	if gLo != nil {
		gLo.F[0] += float32(sLo)
	}
	if gHi != nil {
		gHi.F[0] += float32(sHi)
	}
}

func (k *unaryKernel) backward(lo, hi int) {
	var x, y []float32
	switch k.op.keep {
	case keepY:
		y = k.y[lo:hi]
	case keepX:
		x = k.x[lo:hi]
	}
	k.op.vjp(k, k.dst[lo:hi], x, y, k.g[lo:hi])
}
