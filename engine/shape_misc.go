package engine

import (
	"math"
	"slices"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// shapeKernel returns its input's shape (a slice of it since opset 15); the value is known
// from the shape alone, so the executor never runs it.
type shapeKernel struct {
	n          *Node
	start, end int64
}

func buildShape(n *Node) (Kernel, error) {
	k := &shapeKernel{n: n, end: math.MaxInt64}
	if n.Opset >= 15 {
		k.start, k.end = n.Int("start", 0), n.Int("end", math.MaxInt64)
	}
	return k, nil
}

func (k *shapeKernel) dims(shape []int) []int64 {
	r := int64(len(shape))
	clamp := func(v int64) int64 {
		if v < 0 {
			v += r
		}
		return min(max(v, 0), r)
	}
	s, e := clamp(k.start), clamp(k.end)
	v := []int64{}
	for i := s; i < e; i++ {
		v = append(v, int64(shape[i]))
	}
	return v
}

func (k *shapeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	v := k.dims(in[0].Shape)
	return []*Tensor{NewInt([]int{len(v)}, v)}, nil
}

func (k *shapeKernel) Forward(_ *Context, in, out []*Tensor) error {
	copy(out[0].I, k.dims(in[0].Shape))
	return nil
}

// castKernel converts between element types. Floating-point targets narrower than
// float32 are rounded to their precision and held as float32; integer targets are
// truncated toward zero and wrapped to their width; BOOL becomes 0 or 1.
type castKernel struct {
	n  *Node
	to onnxpb.TensorProto_DataType
}

func buildCast(n *Node) (Kernel, error) {
	if !n.Has("to") {
		return nil, n.Errorf("attribute to is required")
	}
	to := onnxpb.TensorProto_DataType(n.Int("to", 0))
	if !onnxio.IsFloat(to) && !onnxio.IsInt(to) || to == onnxpb.TensorProto_INT4 || to == onnxpb.TensorProto_UINT4 || to == onnxpb.TensorProto_UINT64 {
		return nil, n.Errorf("casting to %s is not supported (qtool computes in float32 and int64)", to)
	}
	return &castKernel{n: n, to: to}, nil
}

func (k *castKernel) outputTypes() []onnxpb.TensorProto_DataType {
	return []onnxpb.TensorProto_DataType{k.to}
}

func (k *castKernel) dtype() DType {
	if onnxio.IsFloat(k.to) {
		return Float32
	}
	return Int64
}

func (k *castKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	return []*Tensor{{DType: k.dtype(), Shape: slices.Clone(in[0].Shape)}}, nil
}

// roundFloat rounds v to the precision of the float type to.
func roundFloat(v float32, to onnxpb.TensorProto_DataType) float32 {
	switch to {
	case onnxpb.TensorProto_FLOAT16:
		return onnxio.HalfToFloat32(float32ToHalf(v))
	case onnxpb.TensorProto_BFLOAT16:
		return math.Float32frombits(uint32(float32ToBfloat16(v)) << 16)
	}
	return v
}

// wrapInt reduces v to the range of the integer type to, as a two's-complement
// conversion does.
func wrapInt(v int64, to onnxpb.TensorProto_DataType) int64 {
	switch to {
	case onnxpb.TensorProto_BOOL:
		if v != 0 {
			return 1
		}
		return 0
	case onnxpb.TensorProto_INT8:
		return int64(int8(v))
	case onnxpb.TensorProto_UINT8:
		return int64(uint8(v))
	case onnxpb.TensorProto_INT16:
		return int64(int16(v))
	case onnxpb.TensorProto_UINT16:
		return int64(uint16(v))
	case onnxpb.TensorProto_INT32:
		return int64(int32(v))
	case onnxpb.TensorProto_UINT32:
		return int64(uint32(v))
	}
	return v
}

func (k *castKernel) Forward(_ *Context, in, out []*Tensor) error {
	src, dst := in[0], out[0]
	switch {
	case src.DType == Float32 && dst.DType == Float32:
		for i, v := range src.F {
			dst.F[i] = roundFloat(v, k.to)
		}
	case src.DType == Float32:
		for i, v := range src.F {
			switch {
			case k.to == onnxpb.TensorProto_BOOL:
				dst.I[i] = 0
				if v != 0 {
					dst.I[i] = 1
				}
			case v != v:
				dst.I[i] = 0 // NaN has no integer value; ONNX leaves it undefined
			default:
				dst.I[i] = wrapInt(int64(math.Trunc(float64(v))), k.to)
			}
		}
	case dst.DType == Float32:
		for i, v := range src.intValues() {
			dst.F[i] = roundFloat(float32(v), k.to)
		}
	default:
		for i, v := range src.intValues() {
			dst.I[i] = wrapInt(v, k.to)
		}
	}
	return nil
}

// Backward passes the gradient straight through a float-to-float cast: the rounding of a
// narrowing cast has zero derivative almost everywhere, and the identity is what makes
// such casts usable inside a trained graph.
func (k *castKernel) Backward(_ *Context, in, _, gout, gin []*Tensor) error {
	if gin[0] != nil && gout[0] != nil && in[0].DType == Float32 && k.dtype() == Float32 {
		addTo(gin[0].F, gout[0].F)
	}
	return nil
}

func (k *castKernel) Retains() (in, out []bool) { return []bool{false}, []bool{false} }

// expandKernel broadcasts its input to a shape.
type expandKernel struct {
	n *Node
	stridedView
}

func buildExpand(n *Node) (Kernel, error) { return &expandKernel{n: n}, nil }

func (k *expandKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	spec, ok := intsOf(in[1])
	if !ok {
		return nil, k.n.Errorf("the shape input must be known before running (a constant, or computed from shapes)")
	}
	src := in[0].Shape
	r := max(len(src), len(spec))
	s := make([]int, r)
	for i := range r {
		a, b := 1, 1
		if j := i - (r - len(src)); j >= 0 {
			a = src[j]
		}
		if j := i - (r - len(spec)); j >= 0 {
			b = int(spec[j])
		}
		switch {
		case a == b || b == 1:
			s[i] = a
		case a == 1:
			s[i] = b
		default:
			return nil, k.n.Errorf("cannot broadcast shape %v to %v", src, spec)
		}
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

// strides sets k.st to the input's strides along the output axes, zero where the input
// is broadcast, and k.ss to the output's strides.
func (k *expandKernel) strides(src, dst []int) {
	r := len(dst)
	k.ss = stridesOf(k.ss, src)
	k.st = slices.Grow(k.st[:0], r)[:r]
	for i := range r {
		k.st[i] = 0
		if j := i - (r - len(src)); j >= 0 && src[j] == dst[i] && src[j] != 1 {
			k.st[i] = k.ss[j]
		}
	}
	k.ss = stridesOf(k.ss, dst)
	k.idx = slices.Grow(k.idx[:0], r)[:r]
}

func (k *expandKernel) Forward(_ *Context, in, out []*Tensor) error {
	k.strides(in[0].Shape, out[0].Shape)
	k.copyForward(in[0], out[0])
	return nil
}

func (k *expandKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	k.strides(in[0].Shape, out[0].Shape)
	k.addBackward(gin[0], gout[0])
	return nil
}

// stridedView is what Transpose and Expand share: the output is the input read through
// strides st (0 for broadcast axes), so the forward pass is one strided copy and the
// backward pass the same walk in reverse, accumulating. ss holds the output's strides and
// idx is the walk's counter; the kernels fill both per call from the shapes.
type stridedView struct {
	st, ss, idx []int
	base        int // the input's offset of the output's first element (Slice)

	// The arguments of a split copy, for part, which is bound once (fwd) so that
	// passing it to ctx.Parallel does not allocate.
	in, out *Tensor
	fwd     func(lo, hi int)
}

// viewSplit is the fewest elements a strided copy hands to a worker of its own: the
// copies are bound by memory, but the attention heads' transposes of a small
// transformer (32 768 values) were a tenth of its run on one core.
const viewSplit = 8 << 10

// copyForwardOn is copyForward with the output's first axis longer than 1 split over
// ctx's workers.
func (v *stridedView) copyForwardOn(ctx *Context, in, out *Tensor) {
	r := len(out.Shape)
	a := v.splitAxis(out.Shape)
	if r > 8 || a < 0 || out.Len() < 2*viewSplit {
		v.copyForward(in, out)
		return
	}
	if v.fwd == nil {
		v.fwd = v.part
	}
	v.in, v.out = in, out
	ctx.Parallel(out.Shape[a], max(1, viewSplit/(out.Len()/out.Shape[a])), v.fwd)
	v.in, v.out = nil, nil
}

// splitAxis is the first axis of shape longer than 1, or -1.
func (v *stridedView) splitAxis(shape []int) int {
	for a, d := range shape {
		if d > 1 {
			return a
		}
	}
	return -1
}

// part copies rows [lo, hi) of splitAxis's axis of the output.
func (v *stridedView) part(lo, hi int) {
	var shape, idx [8]int
	r := len(v.out.Shape)
	copy(shape[:r], v.out.Shape)
	a := v.splitAxis(shape[:r])
	shape[a] = hi - lo
	db, sb := lo*v.ss[a], v.base+lo*v.st[a]
	if v.in.DType == Int64 {
		viewCopy(false, v.out.I, db, v.ss, v.in.I, sb, v.st, shape[:r], idx[:r])
	} else {
		viewCopy(false, v.out.F, db, v.ss, v.in.F, sb, v.st, shape[:r], idx[:r])
	}
}

func (v *stridedView) copyForward(in, out *Tensor) {
	if in.DType == Int64 {
		viewCopy(false, out.I, 0, v.ss, in.I, v.base, v.st, out.Shape, v.idx)
	} else {
		viewCopy(false, out.F, 0, v.ss, in.F, v.base, v.st, out.Shape, v.idx)
	}
}

func (v *stridedView) addBackward(gin, gout *Tensor) {
	viewCopy(true, gin.F, v.base, v.st, gout.F, 0, v.ss, gout.Shape, v.idx)
}

func (k *expandKernel) Retains() (in, out []bool) { return []bool{false, false}, []bool{false} }

// dropoutKernel is the identity in inference. In training (Context.Training, or a true
// training_mode input) it zeroes each element with probability ratio, drawing from
// Context.Rand in element order, and scales the rest by 1/(1-ratio).
type dropoutKernel struct {
	n     *Node
	ratio float32 // attribute, before opset 12
	keep  []float32
	// dropped records whether the last Forward dropped, which Backward must follow.
	dropped bool
}

func buildDropout(n *Node) (Kernel, error) {
	k := &dropoutKernel{n: n, ratio: 0.5}
	if n.Opset < 12 {
		k.ratio = n.Float("ratio", 0.5)
	}
	if n.Int("is_test", 0) != 0 && n.Opset >= 7 {
		return nil, n.Errorf("attribute is_test was removed in opset 7")
	}
	return k, nil
}

func (k *dropoutKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if in[0].DType != Float32 {
		return nil, k.n.Errorf("data must be floating-point")
	}
	outs := []*Tensor{{DType: Float32, Shape: slices.Clone(in[0].Shape)}}
	if len(k.n.Proto.GetOutput()) > 1 {
		mt := Int64 // bool since opset 10
		if k.n.Opset < 10 {
			mt = Float32
		}
		outs = append(outs, &Tensor{DType: mt, Shape: slices.Clone(in[0].Shape)})
	}
	if present(in, 1) && (in[1].DType != Float32 || in[1].Len() != 1) {
		return nil, k.n.Errorf("ratio must be a float scalar, got %s %v", in[1].DType, in[1].Shape)
	}
	if present(in, 2) && (in[2].DType != Int64 || in[2].Len() != 1) {
		return nil, k.n.Errorf("training_mode must be a bool scalar, got %s %v", in[2].DType, in[2].Shape)
	}
	if r, ok := k.ratioOf(in); ok && (r < 0 || r >= 1) {
		return nil, k.n.Errorf("ratio %g is outside [0, 1)", r)
	}
	return outs, nil
}

// ratioOf returns the drop ratio; ok is false when it comes from an input not yet known.
func (k *dropoutKernel) ratioOf(in []*Tensor) (float32, bool) {
	if k.n.Opset < 12 || !present(in, 1) {
		return k.ratio, true
	}
	if in[1].DType != Float32 || !in[1].Known() || in[1].Len() != 1 {
		return 0, false
	}
	return in[1].F[0], true
}

func (k *dropoutKernel) Forward(ctx *Context, in, out []*Tensor) error {
	training := ctx.Training
	if k.n.Opset >= 12 && present(in, 2) && len(in[2].I) == 1 {
		training = training || in[2].I[0] != 0
	}
	ratio, ok := k.ratioOf(in)
	if !ok || ratio < 0 || ratio >= 1 {
		return k.n.Errorf("ratio must be a scalar in [0, 1)")
	}
	x, y := in[0].F, out[0].F
	k.dropped = training && ratio > 0
	if !k.dropped {
		copy(y, x)
		if len(out) > 1 {
			if out[1].DType == Int64 {
				for i := range out[1].I {
					out[1].I[i] = 1
				}
			} else {
				for i := range out[1].F {
					out[1].F[i] = 1
				}
			}
		}
		return nil
	}
	if cap(k.keep) < len(x) {
		k.keep = make([]float32, len(x))
	}
	k.keep = k.keep[:len(x)]
	scale := 1 / (1 - ratio)
	for i := range x {
		if ctx.Rand.Float32() >= ratio {
			k.keep[i] = scale
		} else {
			k.keep[i] = 0
		}
		y[i] = x[i] * k.keep[i]
	}
	if len(out) > 1 {
		for i, s := range k.keep {
			var m int64
			if s != 0 {
				m = 1
			}
			if out[1].DType == Int64 {
				out[1].I[i] = m
			} else {
				out[1].F[i] = float32(m)
			}
		}
	}
	return nil
}

func (k *dropoutKernel) Backward(_ *Context, _, _, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	if !k.dropped {
		addTo(gin[0].F, gout[0].F)
		return nil
	}
	for i, g := range gout[0].F {
		gin[0].F[i] += g * k.keep[i]
	}
	return nil
}

func (k *dropoutKernel) Retains() (in, out []bool) {
	return []bool{false, false, false}, []bool{false, false}
}

// constKernel produces a constant tensor.
type constKernel struct {
	n *Node
	v *Tensor
}

func buildConstant(n *Node) (Kernel, error) {
	var v *Tensor
	set := 0
	for _, a := range n.Proto.GetAttribute() {
		set++
		switch a.GetName() {
		case "value":
			t, err := onnxio.DecodeTensor(a.GetT(), "")
			if err != nil {
				return nil, n.Errorf("attribute value: %v", err)
			}
			v = fromONNX(t)
		case "value_float":
			v = NewFloat([]int{}, []float32{a.GetF()})
		case "value_floats":
			v = NewFloat([]int{len(a.GetFloats())}, slices.Clone(a.GetFloats()))
		case "value_int":
			v = NewInt([]int{}, []int64{a.GetI()})
		case "value_ints":
			v = NewInt([]int{len(a.GetInts())}, slices.Clone(a.GetInts()))
		default:
			return nil, n.Errorf("attribute %s is not supported (qtool computes in float32 and int64)", a.GetName())
		}
	}
	if set != 1 {
		return nil, n.Errorf("exactly one value attribute must be set, found %d", set)
	}
	return &constKernel{n: n, v: v}, nil
}

func (k *constKernel) Infer([]*Tensor) ([]*Tensor, error) {
	return []*Tensor{k.v}, nil
}

func (k *constKernel) Forward(_ *Context, _, out []*Tensor) error {
	copyData(out[0], k.v)
	return nil
}

// constOfShapeKernel fills a tensor of the given shape with one value.
type constOfShapeKernel struct {
	n *Node
	v *Tensor // one element
}

func buildConstantOfShape(n *Node) (Kernel, error) {
	k := &constOfShapeKernel{n: n, v: NewFloat([]int{1}, []float32{0})}
	if tp := n.TensorAttr("value"); tp != nil {
		t, err := onnxio.DecodeTensor(tp, "")
		if err != nil {
			return nil, n.Errorf("attribute value: %v", err)
		}
		if t.Len() != 1 {
			return nil, n.Errorf("attribute value must hold one element, it holds %d", t.Len())
		}
		k.v = fromONNX(t)
	}
	return k, nil
}

func (k *constOfShapeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	spec, ok := intsOf(in[0])
	if !ok {
		return nil, k.n.Errorf("the shape input must be known before running (a constant, or computed from shapes)")
	}
	s := make([]int, len(spec))
	for i, d := range spec {
		if d < 0 {
			return nil, k.n.Errorf("shape %v has a negative dimension", spec)
		}
		s[i] = int(d)
	}
	return []*Tensor{{DType: k.v.DType, Shape: s}}, nil
}

func (k *constOfShapeKernel) Forward(_ *Context, _, out []*Tensor) error {
	if k.v.DType == Int64 {
		for i := range out[0].I {
			out[0].I[i] = k.v.I[0]
		}
		return nil
	}
	for i := range out[0].F {
		out[0].F[i] = k.v.F[0]
	}
	return nil
}
