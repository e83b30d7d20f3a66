package engine

import (
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// qdqCase describes a model that quantizes its input and dequantizes it again, and
// dequantizes a stored integer weight, with one set of quantization parameters:
//
//	q  = QuantizeLinear(x, scale, zp)      (output "q" cast to INT64, so any runtime returns it)
//	y  = DequantizeLinear(q, scale, zp)
//	wd = DequantizeLinear(w, scale, zp)    (w an initializer of x's shape and q's type)
type qdqCase struct {
	name       string
	opset      int64
	shape      []int64
	axis       *int64 // nil: attribute absent
	blockSize  int64
	scaleShape []int64
	scale      []float32
	qtype      onnxpb.TensorProto_DataType // element type of q, w and zp
	zp         []int64                     // nil: no zero point input
	outDtype   bool                        // set output_dtype = qtype (opset 21, usually without zp)
}

func ptr(v int64) *int64 { return &v }

// intTensor stores integer values as a TensorProto of type dt, 4-bit types packed two per
// byte with the first element in the low nibble, as the ONNX spec lays them out.
func intTensor(name string, dt onnxpb.TensorProto_DataType, dims []int64, v []int64) *onnxpb.TensorProto {
	t := &onnxpb.TensorProto{Name: proto.String(name), Dims: dims, DataType: proto.Int32(int32(dt))}
	switch dt {
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		raw := make([]byte, (len(v)+1)/2)
		for i, x := range v {
			raw[i/2] |= byte(x&0xf) << (4 * (i % 2))
		}
		t.RawData = raw
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8:
		raw := make([]byte, len(v))
		for i, x := range v {
			raw[i] = byte(x)
		}
		t.RawData = raw
	default:
		for _, x := range v {
			t.Int32Data = append(t.Int32Data, int32(x))
		}
	}
	return t
}

func typedValue(name string, dt onnxpb.TensorProto_DataType, dims []int64) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: sh}}}}
}

// model builds the case's model around the stored weight w.
func (c qdqCase) model(w []int64) *onnxio.Model {
	var attrs []*onnxpb.AttributeProto
	if c.axis != nil {
		attrs = append(attrs, attrI("axis", *c.axis))
	}
	if c.blockSize != 0 {
		attrs = append(attrs, attrI("block_size", c.blockSize))
	}
	qattrs := attrs
	if c.outDtype {
		qattrs = append(qattrs[:len(qattrs):len(qattrs)], attrI("output_dtype", int64(c.qtype)))
	}
	params := []string{"scale"}
	inits := []*onnxpb.TensorProto{
		onnxio.FloatTensor("scale", c.scaleShape, c.scale),
		intTensor("w", c.qtype, c.shape, w),
	}
	if c.zp != nil {
		params = append(params, "zp")
		inits = append(inits, intTensor("zp", c.qtype, c.scaleShape, c.zp))
	}
	nodes := []*onnxpb.NodeProto{
		gNode("QuantizeLinear", append([]string{"x"}, params...), []string{"q"}, qattrs...),
		gNode("DequantizeLinear", append([]string{"q"}, params...), []string{"y"}, attrs...),
		gNode("Cast", []string{"q"}, []string{"qi"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("DequantizeLinear", append([]string{"w"}, params...), []string{"wd"}, attrs...),
	}
	f := onnxpb.TensorProto_FLOAT
	gp := &onnxpb.GraphProto{
		Name: proto.String(c.name), Node: nodes, Initializer: inits,
		Input:  []*onnxpb.ValueInfoProto{typedValue("x", f, c.shape)},
		Output: []*onnxpb.ValueInfoProto{typedValue("y", f, c.shape), typedValue("qi", onnxpb.TensorProto_INT64, c.shape), typedValue("wd", f, c.shape)},
	}
	return &onnxio.Model{Name: c.name + ".onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(onnxio.IRVersionOf(c.opset)),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(c.opset)}},
		Graph:       gp,
	}}
}

// inputs draws x with values inside, at the edges of and beyond the quantized range,
// including exact ties x/scale = k + ½ (the scales below are powers of two where the case
// tests ties) and, for w, every level of the type in turn.
func (c qdqCase) inputs(r *rand.Rand) (x []float32, w []int64) {
	n := 1
	for _, d := range c.shape {
		n *= int(d)
	}
	lo, hi, _, _ := quantRange(c.qtype)
	// The scale each element of x meets, to place ties and saturating values.
	x = make([]float32, n)
	for i := range x {
		s := c.scale[0]
		switch r.IntN(4) {
		case 0: // a tie
			x[i] = (float32(r.IntN(int(hi-lo+1))+int(lo)) + 0.5) * s
		case 1: // beyond the range
			x[i] = float32(r.NormFloat64()*4*(hi-lo)) * s
		default:
			x[i] = float32(r.NormFloat64()*(hi-lo)/4) * s
		}
	}
	w = make([]int64, n)
	for i := range w {
		w[i] = int64(lo) + int64(i)%int64(hi-lo+1)
	}
	return x, w
}

func (c qdqCase) String() string { return fmt.Sprintf("%s (opset %d, %s)", c.name, c.opset, c.qtype) }

// qdqCases are the granularities and types the engine supports.
func qdqCases() []qdqCase {
	i8, u8, i4, u4, i16 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4, onnxpb.TensorProto_INT16
	return []qdqCase{
		{name: "per-tensor uint8 zero point, opset 10", opset: 10, shape: []int64{2, 3, 4}, scale: []float32{0.5}, qtype: u8, zp: []int64{128}},
		{name: "per-tensor, no zero point (uint8), opset 10", opset: 10, shape: []int64{2, 3, 4}, scale: []float32{0.037}, qtype: u8},
		{name: "per-tensor int8, scale of shape [1], opset 13", opset: 13, shape: []int64{3, 5}, scaleShape: []int64{1}, scale: []float32{0.25}, qtype: i8, zp: []int64{-3}},
		{name: "per-axis int8, axis -2", opset: 13, shape: []int64{2, 3, 4}, axis: ptr(-2), scaleShape: []int64{3}, scale: []float32{0.5, 0.0123, 2}, qtype: i8, zp: []int64{-3, 0, 5}},
		{name: "per-axis uint8 zero point, axis 0", opset: 13, shape: []int64{4, 5}, axis: ptr(0), scaleShape: []int64{4}, scale: []float32{0.125, 0.37, 1, 4}, qtype: u8, zp: []int64{0, 17, 128, 255}},
		{name: "per-axis uint8, default axis 1", opset: 19, shape: []int64{2, 3, 2}, scaleShape: []int64{3}, scale: []float32{0.5, 0.25, 0.3}, qtype: u8, zp: []int64{1, 2, 3}},
		{name: "per-axis int4, odd element count", opset: 21, shape: []int64{3, 5}, axis: ptr(1), scaleShape: []int64{5}, scale: []float32{0.5, 0.25, 1, 0.3, 2}, qtype: i4, zp: []int64{0, -1, 3, -8, 7}},
		{name: "per-tensor uint4", opset: 21, shape: []int64{7}, axis: ptr(0), scale: []float32{0.5}, qtype: u4, zp: []int64{8}},
		{name: "per-axis int4 from output_dtype", opset: 21, shape: []int64{4, 3}, axis: ptr(1), scaleShape: []int64{3}, scale: []float32{0.5, 0.25, 0.0625}, qtype: i4, outDtype: true},
		{name: "blocked int8, axis 1, short last block", opset: 21, shape: []int64{4, 5}, axis: ptr(1), blockSize: 2, scaleShape: []int64{4, 3},
			scale: []float32{0.5, 0.25, 1, 2, 0.125, 0.3, 0.5, 0.5, 0.5, 1, 1, 1}, qtype: i8, zp: []int64{0, 1, 2, 3, 4, 5, -6, -7, -8, 9, 10, -11}},
		{name: "blocked int4, axis 0, output_dtype", opset: 21, shape: []int64{5, 3}, axis: ptr(0), blockSize: 2, scaleShape: []int64{3, 3},
			scale: []float32{0.5, 0.25, 1, 2, 0.125, 0.3, 0.5, 0.0625, 4}, qtype: i4, outDtype: true},
		{name: "per-tensor int16", opset: 21, shape: []int64{6}, scale: []float32{0.5}, qtype: i16, zp: []int64{-300}},
	}
}
