package engine

import (
	"math"
	"slices"
)

// binOp names a binary op where its type rules differ (Infer, Forward).
type binOp uint8

const (
	opAdd binOp = iota
	opSub
	opMul
	opDiv
	opPow
	opPRelu
)

// binaryOp is one binary element-wise op whole: its forward and its vector-Jacobian
// product over one broadcast run (n elements of the output from offset o; the inputs
// advance from offsets a and b by steps ia and ib, which are 0 or 1). Each function holds
// its own loops, so the dispatch is one indirect call per run.
type binaryOp struct {
	name string
	id   binOp
	fwd  func(k *binaryKernel, o, a, b, n, ia, ib int)
	// fwdInt computes on int64; nil for ops on float32 only.
	fwdInt func(k *binaryKernel, o, a, b, n, ia, ib int)
	// sign, for linear ops (Add, Sub), is each input's derivative: their VJP is the
	// scaled output gradient, summed over broadcast axes, and needs no forward values.
	sign *[2]float32
	// vjp adds one run's contributions to the gradient of input k.wrt into k.dst, which
	// is laid out like the output; nil for linear ops.
	vjp func(k *binaryKernel, o, a, b, n, ia, ib int)
}

// binaryOps returns the binary element-wise ops. Conventions at points where a derivative
// does not exist follow PyTorch.
func binaryOps() []binaryOp {
	return []binaryOp{
		{name: "Add", id: opAdd, sign: &[2]float32{1, 1},
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				switch {
				case ia == 1 && ib == 1:
					addVec(out, k.a[a:a+n], k.b[b:b+n])
				case ia == 1:
					affineVec(out, k.a[a:a+n], 1, k.b[b])
				case ib == 1:
					// s + y as y + s: the same sum, whichever NaN comes back when both are.
					affineVec(out, k.b[b:b+n], 1, k.a[a])
				default:
					fill(out, k.a[a]+k.b[b])
				}
			},
			fwdInt: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.oi[o : o+n]
				for i := range out {
					out[i] = k.ai[a+i*ia] + k.bi[b+i*ib]
				}
			}},
		{name: "Sub", id: opSub, sign: &[2]float32{1, -1},
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				switch {
				case ia == 1 && ib == 1:
					x, y := k.a[a:a+n], k.b[b:b+n]
					for i := range out {
						out[i] = x[i] - y[i]
					}
				case ia == 1:
					x, s := k.a[a:a+n], k.b[b]
					for i := range out {
						out[i] = x[i] - s
					}
				case ib == 1:
					s, y := k.a[a], k.b[b:b+n]
					for i := range out {
						out[i] = s - y[i]
					}
				default:
					fill(out, k.a[a]-k.b[b])
				}
			},
			fwdInt: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.oi[o : o+n]
				for i := range out {
					out[i] = k.ai[a+i*ia] - k.bi[b+i*ib]
				}
			}},
		{name: "Mul", id: opMul,
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				switch {
				case ia == 1 && ib == 1:
					mulVec(out, k.a[a:a+n], k.b[b:b+n])
				case ia == 1:
					// x·s as s·x: the same product, whichever NaN comes back when both are.
					scaleVec(out, k.a[a:a+n], k.b[b])
				case ib == 1:
					scaleVec(out, k.b[b:b+n], k.a[a])
				default:
					fill(out, k.a[a]*k.b[b])
				}
			},
			fwdInt: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.oi[o : o+n]
				for i := range out {
					out[i] = k.ai[a+i*ia] * k.bi[b+i*ib]
				}
			},
			// The other operand scales the gradient: by one value along broadcast runs.
			vjp: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				g, dst := k.g[o:o+n], k.dst[o:o+n]
				other, off, step := k.b, b, ib
				if k.wrt == 1 {
					other, off, step = k.a, a, ia
				}
				if step == 0 {
					v := other[off]
					for i := range dst {
						dst[i] += g[i] * v
					}
					return
				}
				for i, v := range other[off : off+n] {
					dst[i] += g[i] * v
				}
			}},
		{name: "Div", id: opDiv,
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				switch {
				case ia == 1 && ib == 1:
					x, y := k.a[a:a+n], k.b[b:b+n]
					for i := range out {
						out[i] = x[i] / y[i]
					}
				case ia == 1:
					// Dividing, not multiplying by the reciprocal, keeps results bit-exact.
					x, s := k.a[a:a+n], k.b[b]
					for i := range out {
						out[i] = x[i] / s
					}
				case ib == 1:
					s, y := k.a[a], k.b[b:b+n]
					for i := range out {
						out[i] = s / y[i]
					}
				default:
					fill(out, k.a[a]/k.b[b])
				}
			},
			// Go's division truncates toward zero, as C and onnxruntime do; Forward has
			// refused zero divisors.
			fwdInt: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.oi[o : o+n]
				for i := range out {
					out[i] = k.ai[a+i*ia] / k.bi[b+i*ib]
				}
			},
			vjp: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				g, dst := k.g[o:o+n], k.dst[o:o+n]
				A, B := k.a, k.b
				switch {
				case k.wrt == 0 && ib == 0:
					v := B[b]
					for i := range dst {
						dst[i] += g[i] / v
					}
				case k.wrt == 0:
					for i, v := range B[b : b+n] {
						dst[i] += g[i] / v
					}
				default:
					for i := range dst {
						y := B[b+i*ib]
						dst[i] -= (g[i] / y) * (A[a+i*ia] / y)
					}
				}
			}},
		{name: "Pow", id: opPow,
			// The per-element cost of math.Pow dwarfs the indexing, so one strided loop;
			// a scalar exponent of 1 or 2 (LayerNorm exports square) skips math.Pow.
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				if ib == 0 {
					switch k.b[b] {
					case 1:
						for i := range out {
							out[i] = k.a[a+i*ia]
						}
						return
					case 2:
						for i := range out {
							x := k.a[a+i*ia]
							out[i] = x * x
						}
						return
					}
				}
				for i := range out {
					out[i] = float32(math.Pow(float64(k.a[a+i*ia]), float64(k.b[b+i*ib])))
				}
			},
			fwdInt: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.oi[o : o+n]
				for i := range out {
					out[i] = ipow(k.ai[a+i*ia], k.bi[b+i*ib])
				}
			},
			// The base's derivative is 0 where the exponent is 0; the exponent's is 0
			// where the base is 0 and the exponent non-negative (and NaN, from log,
			// where the base is negative).
			vjp: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				g, dst := k.g[o:o+n], k.dst[o:o+n]
				A, B := k.a, k.b
				if k.wrt == 0 {
					for i := range dst {
						x, y := float64(A[a+i*ia]), float64(B[b+i*ib])
						if y == 0 {
							continue
						}
						dst[i] += g[i] * float32(y*math.Pow(x, y-1))
					}
					return
				}
				for i := range dst {
					x, y := float64(A[a+i*ia]), float64(B[b+i*ib])
					if x == 0 && y >= 0 {
						continue
					}
					dst[i] += g[i] * float32(math.Pow(x, y)*math.Log(x))
				}
			}},
		{name: "PRelu", id: opPRelu,
			fwd: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				out := k.o[o : o+n]
				for i := range out {
					x, y := k.a[a+i*ia], k.b[b+i*ib]
					if x < 0 {
						x = y * x
					}
					out[i] = x
				}
			},
			// The derivative at x = 0 is the slope.
			vjp: func(k *binaryKernel, o, a, b, n, ia, ib int) {
				g, dst := k.g[o:o+n], k.dst[o:o+n]
				A, B := k.a, k.b
				if k.wrt == 0 {
					for i := range dst {
						if A[a+i*ia] > 0 {
							dst[i] += g[i]
						} else {
							dst[i] += g[i] * B[b+i*ib]
						}
					}
					return
				}
				for i := range dst {
					if x := A[a+i*ia]; x <= 0 {
						dst[i] += g[i] * x
					}
				}
			}},
	}
}

// fill sets every element of out to v.
func fill(out []float32, v float32) {
	for i := range out {
		out[i] = v
	}
}

// binaryKernel runs Add, Sub, Mul, Div, Pow and PRelu. Float32 inputs are differentiable;
// Add, Sub, Mul, Div and Pow also compute on int64 (the shape arithmetic exporters emit),
// and Pow mixes a float32 base with an int64 exponent and the reverse, as ONNX allows.
type binaryKernel struct {
	n  *Node
	op *binaryOp

	plan    bcastPlan
	red     reducer
	redAxes []bool
	tmp     []float32
	bconv   []float32 // an int64 exponent as float32, for Pow's base gradient

	// Arguments of the current call, read by the chunk and row functions below, which
	// are bound once so that passing them to ctx.Parallel does not allocate.
	o, a, b, g, dst  []float32
	oi, ai, bi       []int64
	wrt              int
	sign             float32
	fwdF, fwdI, bwd  func(lo, hi int)
	addG             func(lo, hi int)
	rowF, rowI, rowB func(o, a, b, n, ia, ib int)
}

func newBinary(op *binaryOp) Builder {
	return func(n *Node) (Kernel, error) {
		if n.Opset < 7 && n.Int("broadcast", 0) != 0 && n.Has("axis") {
			return nil, n.Errorf("legacy broadcasting with attribute axis (opset %d) is not supported; re-export the model with opset 7 or later", n.Opset)
		}
		if op.id == opPRelu && n.Opset < 7 {
			return nil, n.Errorf("opset %d PRelu is not supported; re-export the model with opset 7 or later", n.Opset)
		}
		k := &binaryKernel{n: n, op: op}
		k.fwdF = func(lo, hi int) { k.plan.rows(lo, hi, k.rowF) }
		k.fwdI = func(lo, hi int) { k.plan.rows(lo, hi, k.rowI) }
		k.bwd = func(lo, hi int) { k.plan.rows(lo, hi, k.rowB) }
		k.addG = func(lo, hi int) {
			dst, g, s := k.dst[lo:hi], k.g[lo:hi], k.sign
			for i := range dst {
				dst[i] += s * g[i]
			}
		}
		k.rowF = func(o, a, b, n, ia, ib int) { op.fwd(k, o, a, b, n, ia, ib) }
		k.rowI = func(o, a, b, n, ia, ib int) { op.fwdInt(k, o, a, b, n, ia, ib) }
		if op.vjp != nil {
			k.rowB = func(o, a, b, n, ia, ib int) { op.vjp(k, o, a, b, n, ia, ib) }
		}
		return k, nil
	}
}

func (k *binaryKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != 2 {
		return nil, k.n.Errorf("needs 2 inputs, has %d", len(in))
	}
	a, b := in[0], in[1]
	dt := a.DType
	switch k.op.id {
	case opPow:
		// The result has the base's type; the exponent may be of either type.
	case opPRelu:
		if a.DType != Float32 || b.DType != Float32 {
			return nil, k.n.Errorf("inputs are %s and %s; PRelu computes on float32 only", a.DType, b.DType)
		}
	default:
		if a.DType != b.DType {
			return nil, k.n.Errorf("inputs have types %s and %s; both must be the same", a.DType, b.DType)
		}
	}
	shape, ok := broadcastShape(nil, a.Shape, b.Shape)
	if !ok {
		return nil, k.n.Errorf("input shapes %v and %v do not broadcast", a.Shape, b.Shape)
	}
	if k.op.id == opPRelu && !sameShape(shape, a.Shape) {
		return nil, k.n.Errorf("slope of shape %v does not broadcast to the input's shape %v", b.Shape, a.Shape)
	}
	return []*Tensor{{DType: dt, Shape: shape}}, nil
}

func (k *binaryKernel) Forward(ctx *Context, in, out []*Tensor) error {
	a, b, o := in[0], in[1], out[0]
	if err := k.plan.init(o.Shape, a.Shape, b.Shape); err != nil {
		return k.n.Errorf("%v", err)
	}
	defer k.release()
	switch {
	case a.DType == Float32 && b.DType == Float32:
		k.o, k.a, k.b = o.F, a.F, b.F
		ctx.Parallel(k.plan.n, ewGrain, k.fwdF)
	case a.DType == Int64 && b.DType == Int64:
		if k.op.id == opDiv {
			for _, v := range b.I {
				if v == 0 {
					return k.n.Errorf("integer division by zero")
				}
			}
		}
		k.oi, k.ai, k.bi = o.I, a.I, b.I
		ctx.Parallel(k.plan.n, ewGrain, k.fwdI)
	default:
		// Pow with mixed types: rare and small, so one plain loop.
		k.plan.rows(0, k.plan.n, func(oo, ao, bo, n, ia, ib int) {
			for i := 0; i < n; i++ {
				var x, y float64
				if a.DType == Float32 {
					x = float64(a.F[ao+i*ia])
				} else {
					x = float64(a.I[ao+i*ia])
				}
				if b.DType == Float32 {
					y = float64(b.F[bo+i*ib])
				} else {
					y = float64(b.I[bo+i*ib])
				}
				if o.DType == Float32 {
					o.F[oo+i] = float32(math.Pow(x, y))
				} else {
					o.I[oo+i] = int64(math.Pow(x, y))
				}
			}
		})
	}
	return nil
}

// release drops the references to the caller's buffers, which a kernel must not keep.
func (k *binaryKernel) release() {
	k.o, k.a, k.b, k.g, k.dst = nil, nil, nil, nil, nil
	k.oi, k.ai, k.bi = nil, nil, nil
}

// ipow is x**y in integers; a negative exponent gives the truncated real result.
func ipow(x, y int64) int64 {
	if y < 0 {
		switch x {
		case 1:
			return 1
		case -1:
			if y%2 == 0 {
				return 1
			}
			return -1
		}
		return 0
	}
	r := int64(1)
	for y > 0 {
		if y&1 == 1 {
			r *= x
		}
		x *= x
		y >>= 1
	}
	return r
}

// Retains: Add and Sub need only the shapes (taken from the gradient buffers); the
// other ops need both inputs and never the output.
func (k *binaryKernel) Retains() (inputs, outputs []bool) {
	need := k.op.sign == nil
	return []bool{need, need}, []bool{false}
}

// Backward adds the vector-Jacobian products of the op's vjp. For an input that was
// broadcast, the product is computed at the output's shape and then summed over the
// broadcast axes.
func (k *binaryKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	g := gout[0]
	if g == nil {
		return nil
	}
	for i := 0; i < 2; i++ {
		if i >= len(gin) || gin[i] == nil {
			continue
		}
		if gin[i].DType != Float32 || g.DType != Float32 {
			return k.n.Errorf("no gradient for %s input %d", gin[i].DType, i)
		}
		if err := k.backwardInput(ctx, in, g, gin[i], i); err != nil {
			return err
		}
	}
	return nil
}

func (k *binaryKernel) backwardInput(ctx *Context, in []*Tensor, g, gi *Tensor, wrt int) error {
	defer k.release()
	full := numel(gi.Shape) == numel(g.Shape)
	if k.op.sign != nil {
		sign := k.op.sign[wrt]
		if full {
			k.dst, k.g, k.sign = gi.F, g.F, sign
			ctx.Parallel(len(gi.F), ewGrain, k.addG)
			return nil
		}
		k.redAxes = k.red.reduceTo(ctx, g.F, g.Shape, gi.Shape, gi.F, sign, k.redAxes)
		return nil
	}
	a, b := in[0], in[1]
	bf := b.F
	if k.op.id == opPow && b.DType == Int64 && wrt == 0 {
		// An integer exponent (x ** 2 from some exporters): the base's gradient only.
		k.bconv = growF(k.bconv, len(b.I))
		for i, v := range b.I {
			k.bconv[i] = float32(v)
		}
		bf = k.bconv
	} else if a.DType != Float32 || b.DType != Float32 {
		return k.n.Errorf("no gradient through %s and %s inputs", a.DType, b.DType)
	}
	if err := k.plan.init(g.Shape, a.Shape, b.Shape); err != nil {
		return k.n.Errorf("%v", err)
	}
	k.a, k.b, k.g, k.wrt = a.F, bf, g.F, wrt
	if full {
		k.dst = gi.F
		ctx.Parallel(k.plan.n, ewGrain, k.bwd)
		return nil
	}
	if k.op.id == opMul && mulScaleGrad(ctx, g, in[1-wrt], gi) {
		return nil
	}
	k.tmp = growF(k.tmp, k.plan.n)
	clear(k.tmp)
	k.dst = k.tmp
	ctx.Parallel(k.plan.n, ewGrain, k.bwd)
	k.redAxes = k.red.reduceTo(ctx, k.tmp, g.Shape, gi.Shape, gi.F, 1, k.redAxes)
	return nil
}

// mulScaleGrad adds to gi, when it is the operand of a Mul that scales whole trailing
// blocks of the other operand x (squeeze-and-excitation's channel scales, [N, C, 1, 1]
// against [N, C, H, W]), the gradient Σ g·x over each block, and reports whether it
// did. The sums are the reduction's (sum32 of each block's products, added to gi) without
// the products written out, cleared and read back first: in the SE blocks of
// MobileNetV3-small and the OCR classifier that clearing alone took 3 % of a training
// step.
func mulScaleGrad(ctx *Context, g, x, gi *Tensor) bool {
	if x.DType != Float32 || !slices.Equal(x.Shape, g.Shape) || len(gi.Shape) != len(g.Shape) {
		return false
	}
	p := len(g.Shape)
	for p > 0 && gi.Shape[p-1] == 1 {
		p--
	}
	if !slices.Equal(gi.Shape[:p], g.Shape[:p]) {
		return false
	}
	units, inner := numel(gi.Shape), numel(g.Shape[p:])
	// The reducer's own split of such sums: whole blocks, unless there are few long ones.
	if inner <= 1 || units < 8 && inner >= 2*ewGrain || len(gi.F) < units || len(g.F) < units*inner || len(x.F) < units*inner {
		return false
	}
	ctx.Parallel(units, max(1, ewGrain/inner), func(lo, hi int) {
		for u := lo; u < hi; u++ {
			gi.F[u] += sum32Prod(g.F[u*inner:(u+1)*inner], x.F[u*inner:(u+1)*inner])
		}
	})
	return true
}
