package engine

import (
	"math"
	"slices"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// quantOpDefs returns the rows of the linear (de)quantization ops.
//
// Quantized tensors are Int64 tensors holding the exact integer values, the engine's one
// representation of every ONNX integer type: onnxio decodes INT8, UINT8, INT4 (packed two
// per byte) and the rest to int64, so a quantized initializer feeds DequantizeLinear
// unchanged, and QuantizeLinear's result can be compared with, or cast like, any other
// integer tensor. The width of the integer type is not part of the tensor: QuantizeLinear
// reads it from the zero point's declared type (Node.InputTypes) or its output_dtype
// attribute, and remembers it for later nodes through outputTypes.
//
// Neither op has a backward pass: they appear in inference graphs (qtool's qdq export),
// and the executor refuses a training plan in which a trainable parameter's gradient
// would have to cross one.
func quantOpDefs() []opDef {
	return []opDef{
		{name: "DequantizeLinear", build: buildDequantizeLinear, inputs: arity{n: 2}},
		{name: "QuantizeLinear", build: buildQuantizeLinear, inputs: arity{n: 2}},
	}
}

// quantRange returns the saturation range of an integer type QuantizeLinear produces
// and the first opset that allows it; ok is false for the types it cannot produce.
func quantRange(dt onnxpb.TensorProto_DataType) (lo, hi float64, opset int64, ok bool) {
	switch dt {
	case onnxpb.TensorProto_UINT8:
		return 0, 255, 10, true
	case onnxpb.TensorProto_INT8:
		return -128, 127, 10, true
	case onnxpb.TensorProto_UINT16:
		return 0, 65535, 21, true
	case onnxpb.TensorProto_INT16:
		return -32768, 32767, 21, true
	case onnxpb.TensorProto_UINT4:
		return 0, 15, 21, true
	case onnxpb.TensorProto_INT4:
		return -8, 7, 21, true
	}
	return 0, 0, 0, false
}

// quantParams is what both ops share: the axis and block size attributes and how scale
// and zero point are laid out against the data.
type quantParams struct {
	n         *Node
	axis      int64
	blockSize int64
}

func newQuantParams(n *Node) (quantParams, error) {
	q := quantParams{n: n, axis: 1}
	if n.Opset >= 13 {
		q.axis = n.Int("axis", 1)
	}
	if n.Opset >= 21 {
		q.blockSize = n.Int("block_size", 0)
		if q.blockSize < 0 {
			return q, n.Errorf("block_size %d is negative; it must be 0 (per-tensor or per-axis) or a positive block length", q.blockSize)
		}
	}
	return q, nil
}

// quantLayout locates the scale of every element: the scale of flat element
// (o, a, i) — o over the dimensions before the axis, a along it, i over those after —
// is at o*so + (a/block)*sa + i*si. Per-tensor has all strides 0; per-axis has sa = 1
// and block = 1; blocked scales have x's rank with the axis dimension divided into
// blocks.
type quantLayout struct {
	outer, dim, inner int
	so, sa, si, block int
}

// layout checks the shapes of x, scale and zero point (nil when absent) against each
// other and the attributes.
func (q *quantParams) layout(x, scale, zp *Tensor) (quantLayout, error) {
	n := q.n
	if zp != nil && !slices.Equal(zp.Shape, scale.Shape) {
		return quantLayout{}, n.Errorf("the zero point's shape %v differs from the scale's %v; they must be equal", zp.Shape, scale.Shape)
	}
	if scale.DType != Float32 {
		return quantLayout{}, n.Errorf("the scale must be a floating-point tensor, not %s", scale.DType)
	}
	total := x.Len()
	if q.blockSize == 0 && scale.Len() == 1 && len(scale.Shape) <= 1 {
		return quantLayout{outer: 1, dim: total, inner: 1, block: 1}, nil
	}
	if n.Opset < 13 {
		return quantLayout{}, n.Errorf("the scale has shape %v, but before opset 13 it must be a scalar (per-axis scales need opset 13)", scale.Shape)
	}
	r := len(x.Shape)
	ax, ok := normAxis(q.axis, r)
	if !ok {
		return quantLayout{}, n.Errorf("axis %d is outside [%d, %d] for an input of shape %v", q.axis, -r, r-1, x.Shape)
	}
	l := quantLayout{outer: numel(x.Shape[:ax]), dim: x.Shape[ax], inner: numel(x.Shape[ax+1:])}
	if q.blockSize == 0 {
		if len(scale.Shape) != 1 || scale.Shape[0] != l.dim {
			return quantLayout{}, n.Errorf("the scale has shape %v; per-axis quantization along axis %d of input %v needs a 1-D scale of %d elements", scale.Shape, q.axis, x.Shape, l.dim)
		}
		l.sa, l.block = 1, 1
		return l, nil
	}
	// Blocked: every dimension but the axis matches x, and the axis holds one scale per
	// block of block_size elements, the last block possibly shorter.
	want := slices.Clone(x.Shape)
	want[ax] = (x.Shape[ax] + int(q.blockSize) - 1) / int(q.blockSize)
	if !slices.Equal(scale.Shape, want) {
		return quantLayout{}, n.Errorf("the scale has shape %v; blocked quantization of input %v along axis %d with block_size %d needs shape %v", scale.Shape, x.Shape, q.axis, q.blockSize, want)
	}
	l.block = int(q.blockSize)
	l.si = 1
	l.sa = l.inner
	l.so = want[ax] * l.inner
	return l, nil
}

// each calls fn(e, s) for every element e of x with its scale index s, over the element
// range the Parallel chunk [lo, hi) of outer×dim rows covers.
func (l *quantLayout) each(lo, hi int, fn func(e, s int)) {
	for row := lo; row < hi; row++ {
		o, a := row/l.dim, row%l.dim
		base := o*l.so + (a/l.block)*l.sa
		e := row * l.inner
		for i := range l.inner {
			fn(e+i, base+i*l.si)
		}
	}
}

// quantGrain is the smallest number of rows a worker takes; (de)quantization is a few
// operations per element, so only large tensors are split.
const quantGrain = 1 << 12

type dequantizeKernel struct {
	quantParams
}

func buildDequantizeLinear(n *Node) (Kernel, error) {
	if n.Opset < 10 {
		return nil, n.Errorf("DequantizeLinear needs opset 10 or later; the model imports opset %d", n.Opset)
	}
	q, err := newQuantParams(n)
	if err != nil {
		return nil, err
	}
	return &dequantizeKernel{q}, nil
}

func (k *dequantizeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if x.DType != Int64 {
		return nil, k.n.Errorf("input x holds %s values; DequantizeLinear needs an integer tensor", x.DType)
	}
	zp := k.n.Optional(in, 2)
	if zp != nil && zp.DType != Int64 {
		return nil, k.n.Errorf("the zero point holds %s values; it must have x's integer type", zp.DType)
	}
	if _, err := k.layout(x, in[1], zp); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: slices.Clone(x.Shape)}}, nil
}

// Forward computes (x − zero point) · scale. The difference is an exact integer and
// converts to float32 exactly for every type up to 16 bits, so the only rounding is
// the product's, as in the ONNX reference and onnxruntime.
func (k *dequantizeKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x, scale, zp := in[0], in[1], k.n.Optional(in, 2)
	l, err := k.layout(x, scale, zp)
	if err != nil {
		return err
	}
	y, xs, s := out[0].F, x.intValues(), scale.F
	var z []int64
	if zp != nil {
		z = zp.intValues()
	}
	ctx.Parallel(l.outer*l.dim, max(1, quantGrain/max(l.inner, 1)), func(lo, hi int) {
		if zp == nil {
			l.each(lo, hi, func(e, si int) { y[e] = float32(xs[e]) * s[si] })
			return
		}
		l.each(lo, hi, func(e, si int) { y[e] = float32(xs[e]-z[si]) * s[si] })
	})
	return nil
}

type quantizeKernel struct {
	quantParams
	to     onnxpb.TensorProto_DataType
	lo, hi float64
}

func buildQuantizeLinear(n *Node) (Kernel, error) {
	if n.Opset < 10 {
		return nil, n.Errorf("QuantizeLinear needs opset 10 or later; the model imports opset %d", n.Opset)
	}
	q, err := newQuantParams(n)
	if err != nil {
		return nil, err
	}
	// The output type is the zero point's; without one, output_dtype (opset 21) or uint8.
	to := onnxpb.TensorProto_UINT8
	attr := onnxpb.TensorProto_UNDEFINED
	if n.Opset >= 21 {
		attr = onnxpb.TensorProto_DataType(n.Int("output_dtype", 0))
	}
	if n.HasInput(2) {
		to = n.InputType(2)
		if to == onnxpb.TensorProto_UNDEFINED {
			return nil, n.Errorf("the type of zero point %q is not stated in the model; declare it (value_info) or make it an initializer", n.Proto.GetInput()[2])
		}
		if attr != onnxpb.TensorProto_UNDEFINED && attr != to {
			return nil, n.Errorf("output_dtype %s differs from the zero point's type %s; they must agree", attr, to)
		}
	} else if attr != onnxpb.TensorProto_UNDEFINED {
		to = attr
	}
	lo, hi, since, ok := quantRange(to)
	switch {
	case !ok:
		return nil, n.Errorf("quantizing to %s is not supported (qtool quantizes to int8, uint8, int16, uint16, int4 and uint4)", to)
	case n.Opset < since:
		return nil, n.Errorf("quantizing to %s needs opset %d; the model imports opset %d", to, since, n.Opset)
	}
	return &quantizeKernel{quantParams: q, to: to, lo: lo, hi: hi}, nil
}

func (k *quantizeKernel) outputTypes() []onnxpb.TensorProto_DataType {
	return []onnxpb.TensorProto_DataType{k.to}
}

func (k *quantizeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	zp := k.n.Optional(in, 2)
	if zp != nil && zp.DType != Int64 {
		return nil, k.n.Errorf("the zero point holds %s values; it must be an integer tensor", zp.DType)
	}
	if _, err := k.layout(x, in[1], zp); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Int64, Shape: slices.Clone(x.Shape)}}, nil
}

// Forward computes saturate(round(x / scale) + zero point). The division is done in
// float32, as the ONNX reference and onnxruntime do, and rounds half to even; NaN, which
// has no quantized value, gives the zero point.
func (k *quantizeKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x, scale, zp := in[0], in[1], k.n.Optional(in, 2)
	l, err := k.layout(x, scale, zp)
	if err != nil {
		return err
	}
	y, s := out[0].I, scale.F
	lo, hi := k.lo, k.hi
	ctx.Parallel(l.outer*l.dim, max(1, quantGrain/max(l.inner, 1)), func(lo2, hi2 int) {
		l.each(lo2, hi2, func(e, si int) {
			var v float32
			if x.DType == Int64 {
				v = float32(x.I[e])
			} else {
				v = x.F[e]
			}
			r := math.RoundToEven(float64(v / s[si]))
			if zp != nil {
				r += float64(zp.I[si])
			}
			switch {
			case r != r:
				r = 0
				if zp != nil {
					r = float64(zp.I[si])
				}
			case r < lo:
				r = lo
			case r > hi:
				r = hi
			}
			y[e] = int64(r)
		})
	})
	return nil
}
