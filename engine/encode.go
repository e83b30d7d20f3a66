package engine

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// encodeFloat encodes data as a TensorProto of the floating-point type dt (FLOAT for any
// other type), rounding to nearest even where dt is narrower than float32.
func encodeFloat(name string, dims []int64, data []float32, dt onnxpb.TensorProto_DataType) *onnxpb.TensorProto {
	var raw []byte
	switch dt {
	case onnxpb.TensorProto_FLOAT16:
		raw = make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(raw[2*i:], float32ToHalf(v))
		}
	case onnxpb.TensorProto_BFLOAT16:
		raw = make([]byte, 2*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint16(raw[2*i:], float32ToBfloat16(v))
		}
	case onnxpb.TensorProto_DOUBLE:
		raw = make([]byte, 8*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint64(raw[8*i:], math.Float64bits(float64(v)))
		}
	default:
		return onnxio.FloatTensor(name, dims, data)
	}
	return &onnxpb.TensorProto{
		Name:     proto.String(name),
		Dims:     append([]int64(nil), dims...),
		DataType: proto.Int32(int32(dt)),
		RawData:  raw,
	}
}

// float32ToBfloat16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func float32ToBfloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// float32ToHalf rounds to the nearest IEEE 754 binary16 value, ties to even, with
// overflow to infinity and gradual underflow to subnormals.
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // too large even before rounding
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 1 {
		// Normal half: keep 10 mantissa bits and round the 13 dropped ones. A carry out
		// of the mantissa correctly bumps the exponent, up to infinity.
		h := uint32(e)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	// Subnormal half (or zero): value = m * 2^-24 with the implicit bit restored.
	if e < -10 {
		return sign
	}
	m := man | 0x800000
	shift := uint(14 - e) // 13 bits plus the missing exponent steps
	h := m >> shift
	rest := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}
