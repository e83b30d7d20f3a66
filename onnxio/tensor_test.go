package onnxio

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestHalfToFloat32Hand checks float16 widening against values worked out by hand from
// the IEEE 754 binary16 layout (1 sign, 5 exponent bits biased by 15, 10 fraction bits).
func TestHalfToFloat32Hand(t *testing.T) {
	cases := []struct {
		h    uint16
		want float64
	}{
		{0x3C00, 1},
		{0xBC00, -1},
		{0xC000, -2},
		{0x3800, 0.5},
		{0x3555, (1 + 341.0/1024) / 4}, // 0.333251953125, the float16 nearest 1/3
		{0x7BFF, 65504},                // largest finite
		{0xFBFF, -65504},
		{0x0400, 1.0 / 16384},       // smallest normal, 2^-14
		{0x03FF, 1023.0 / 16777216}, // largest subnormal, 1023·2^-24
		{0x0200, 1.0 / 32768},       // subnormal 2^-15
		{0x0001, 1.0 / 16777216},    // smallest subnormal, 2^-24
		{0x8001, -1.0 / 16777216},
		{0x0000, 0},
	}
	for _, c := range cases {
		if got := HalfToFloat32(c.h); float64(got) != c.want {
			t.Errorf("HalfToFloat32(%#04x) = %g, want %g", c.h, got, c.want)
		}
	}
	if got := HalfToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("HalfToFloat32(0x8000) = %g, want -0", got)
	}
	for h, want := range map[uint16]float64{0x7C00: math.Inf(1), 0xFC00: math.Inf(-1)} {
		if got := HalfToFloat32(h); float64(got) != want {
			t.Errorf("HalfToFloat32(%#04x) = %g, want %g", h, got, want)
		}
	}
	// NaNs stay NaN with sign and payload: the fraction moves to the top of float32's.
	for h, want := range map[uint16]uint32{0x7E00: 0x7FC00000, 0x7C01: 0x7F802000, 0xFE00: 0xFFC00000, 0x7FFF: 0x7FFFE000} {
		if got := math.Float32bits(HalfToFloat32(h)); got != want {
			t.Errorf("HalfToFloat32(%#04x) has bits %#08x, want %#08x", h, got, want)
		}
	}
}

// TestHalfToFloat32All compares every one of the 65536 float16 values with the value
// the binary16 formula gives in float64 arithmetic, which is exact for all of them.
func TestHalfToFloat32All(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		sign := 1.0
		if h>>15 == 1 {
			sign = -1
		}
		e := int(h>>10) & 0x1F
		f := float64(h & 0x3FF)
		var want float64
		switch e {
		case 0:
			want = sign * math.Ldexp(f, -24)
		case 31:
			if f != 0 {
				if got := HalfToFloat32(h); !math.IsNaN(float64(got)) {
					t.Fatalf("%#04x: got %g, want NaN", h, got)
				}
				continue
			}
			want = math.Inf(int(sign))
		default:
			want = sign * math.Ldexp(1+f/1024, e-15)
		}
		got := HalfToFloat32(h)
		if float64(got) != want || math.Signbit(float64(got)) != (sign < 0) {
			t.Fatalf("HalfToFloat32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

func TestBFloat16Hand(t *testing.T) {
	cases := []struct {
		b    uint16
		want float64
	}{
		{0x3F80, 1},
		{0xBF80, -1},
		{0x4049, 3.140625}, // 1.5703125·2
		{0xC2F7, -123.5},
		{0x7F7F, (2 - 1.0/128) * math.Ldexp(1, 127)}, // largest finite bfloat16
		{0x0080, math.Ldexp(1, -126)},                // smallest normal
		{0x0001, math.Ldexp(1, -133)},                // smallest subnormal
		{0x7F80, math.Inf(1)},
		{0xFF80, math.Inf(-1)},
	}
	for _, c := range cases {
		if got := BFloat16ToFloat32(c.b); float64(got) != c.want {
			t.Errorf("BFloat16ToFloat32(%#04x) = %g, want %g", c.b, got, c.want)
		}
	}
	if got := BFloat16ToFloat32(0x7FC0); !math.IsNaN(float64(got)) {
		t.Errorf("BFloat16ToFloat32(0x7FC0) = %g, want NaN", got)
	}
}

// TestHalfTensorsAgainstNumpy decodes float16 and bfloat16 tensors stored by onnx's
// Python helper in raw_data and in int32_data, and compares them bit for bit with the
// float32 values numpy widened them to (testdata/make.py).
func TestHalfTensorsAgainstNumpy(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "halfs.onnx"))
	got := decodeAll(t, m)
	for _, pair := range [][3]string{{"f16_raw", "f16_typed", "f16_want"}, {"bf16_raw", "bf16_typed", "bf16_want"}} {
		want := got[pair[2]].Float
		if len(want) < 10 {
			t.Fatalf("%s has %d values", pair[2], len(want))
		}
		for _, name := range pair[:2] {
			if !sameBits(got[name].Float, want) {
				t.Errorf("%s = %v, numpy gives %v", name, got[name].Float, want)
			}
		}
	}
}

// TestIntegerTypesRawAndTyped encodes the same values of every integer type in
// raw_data (by hand, little-endian) and in the typed field onnx.proto assigns the type,
// and checks both decode to the values, and that rawBytes (the external-data writer)
// turns the typed form into exactly the raw form.
func TestIntegerTypesRawAndTyped(t *testing.T) {
	le := binary.LittleEndian
	type enc struct {
		dt     onnxpb.TensorProto_DataType
		values []int64
		raw    []byte
		typed  func(tp *onnxpb.TensorProto)
	}
	cases := []enc{
		{onnxpb.TensorProto_INT8, []int64{-128, -1, 0, 127}, []byte{0x80, 0xFF, 0, 0x7F},
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{-128, -1, 0, 127} }},
		{onnxpb.TensorProto_UINT8, []int64{0, 1, 200, 255}, []byte{0, 1, 200, 255},
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{0, 1, 200, 255} }},
		{onnxpb.TensorProto_BOOL, []int64{1, 0, 0, 1}, []byte{1, 0, 0, 1},
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{1, 0, 0, 1} }},
		{onnxpb.TensorProto_INT16, []int64{-32768, -2, 3, 32767}, le.AppendUint16(le.AppendUint16(le.AppendUint16(le.AppendUint16(nil, 0x8000), 0xFFFE), 3), 0x7FFF),
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{-32768, -2, 3, 32767} }},
		{onnxpb.TensorProto_UINT16, []int64{0, 65535, 7, 256}, le.AppendUint16(le.AppendUint16(le.AppendUint16(le.AppendUint16(nil, 0), 65535), 7), 256),
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{0, 65535, 7, 256} }},
		{onnxpb.TensorProto_INT32, []int64{math.MinInt32, -1, 5, math.MaxInt32}, le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0x80000000), 0xFFFFFFFF), 5), 0x7FFFFFFF),
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{math.MinInt32, -1, 5, math.MaxInt32} }},
		{onnxpb.TensorProto_UINT32, []int64{0, math.MaxUint32, 9, 1 << 31}, le.AppendUint32(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0), math.MaxUint32), 9), 1<<31),
			func(tp *onnxpb.TensorProto) { tp.Uint64Data = []uint64{0, math.MaxUint32, 9, 1 << 31} }},
		{onnxpb.TensorProto_INT64, []int64{math.MinInt64, -3, 4, math.MaxInt64}, le.AppendUint64(le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 1<<63), math.MaxUint64-2), 4), math.MaxInt64),
			func(tp *onnxpb.TensorProto) { tp.Int64Data = []int64{math.MinInt64, -3, 4, math.MaxInt64} }},
		{onnxpb.TensorProto_UINT64, []int64{0, 1, 1 << 40, math.MaxInt64}, le.AppendUint64(le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 0), 1), 1<<40), math.MaxInt64),
			func(tp *onnxpb.TensorProto) { tp.Uint64Data = []uint64{0, 1, 1 << 40, math.MaxInt64} }},
		// 4-bit types pack the first element in the low nibble: -8, 7 → 0x78; -1, 0 → 0x0F.
		{onnxpb.TensorProto_INT4, []int64{-8, 7, -1, 0}, []byte{0x78, 0x0F},
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{0x78, 0x0F} }},
		{onnxpb.TensorProto_UINT4, []int64{15, 0, 3, 9}, []byte{0x0F, 0x93},
			func(tp *onnxpb.TensorProto) { tp.Int32Data = []int32{0x0F, 0x93} }},
	}
	for _, c := range cases {
		raw := &onnxpb.TensorProto{Name: proto.String("raw"), Dims: []int64{2, 2}, DataType: proto.Int32(int32(c.dt)), RawData: c.raw}
		typed := &onnxpb.TensorProto{Name: proto.String("typed"), Dims: []int64{2, 2}, DataType: proto.Int32(int32(c.dt))}
		c.typed(typed)
		for _, tp := range []*onnxpb.TensorProto{raw, typed} {
			got, err := DecodeTensor(tp, "")
			if err != nil {
				t.Fatalf("%s %s: %v", c.dt, tp.GetName(), err)
			}
			if len(got.Int) != 4 || got.Float != nil {
				t.Fatalf("%s %s: decoded to %v / %v", c.dt, tp.GetName(), got.Int, got.Float)
			}
			for i := range c.values {
				if got.Int[i] != c.values[i] {
					t.Errorf("%s %s: got %v, want %v", c.dt, tp.GetName(), got.Int, c.values)
					break
				}
			}
		}
		b, err := rawBytes(typed, "")
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(c.raw) {
			t.Errorf("%s: rawBytes of the typed form = %x, want %x", c.dt, b, c.raw)
		}
		if n, ok, err := rawLen(typed, ""); !ok || err != nil || n != int64(len(c.raw)) {
			t.Errorf("%s: rawLen = %d, %v, %v; want %d", c.dt, n, ok, err, len(c.raw))
		}
	}
}

// TestFloatTypesRawAndTyped does the same for the floating types, with values exact in
// each type.
func TestFloatTypesRawAndTyped(t *testing.T) {
	le := binary.LittleEndian
	vals := []float64{-2.5, 0, 1, 1024}
	var f32raw, f64raw, f16raw, bf16raw []byte
	for _, v := range vals {
		f32raw = le.AppendUint32(f32raw, math.Float32bits(float32(v)))
		f64raw = le.AppendUint64(f64raw, math.Float64bits(v))
		bf16raw = le.AppendUint16(bf16raw, uint16(math.Float32bits(float32(v))>>16))
	}
	f16bits := []uint16{0xC100, 0x0000, 0x3C00, 0x6400} // -2.5, 0, 1, 1024 in binary16
	for _, h := range f16bits {
		f16raw = le.AppendUint16(f16raw, h)
	}
	cases := []struct {
		dt    onnxpb.TensorProto_DataType
		raw   []byte
		typed func(tp *onnxpb.TensorProto)
	}{
		{onnxpb.TensorProto_FLOAT, f32raw, func(tp *onnxpb.TensorProto) { tp.FloatData = []float32{-2.5, 0, 1, 1024} }},
		{onnxpb.TensorProto_DOUBLE, f64raw, func(tp *onnxpb.TensorProto) { tp.DoubleData = vals }},
		{onnxpb.TensorProto_FLOAT16, f16raw, func(tp *onnxpb.TensorProto) {
			for _, h := range f16bits {
				tp.Int32Data = append(tp.Int32Data, int32(h))
			}
		}},
		{onnxpb.TensorProto_BFLOAT16, bf16raw, func(tp *onnxpb.TensorProto) {
			for _, v := range vals {
				tp.Int32Data = append(tp.Int32Data, int32(math.Float32bits(float32(v))>>16))
			}
		}},
	}
	for _, c := range cases {
		raw := &onnxpb.TensorProto{Name: proto.String("raw"), Dims: []int64{4}, DataType: proto.Int32(int32(c.dt)), RawData: c.raw}
		typed := &onnxpb.TensorProto{Name: proto.String("typed"), Dims: []int64{4}, DataType: proto.Int32(int32(c.dt))}
		c.typed(typed)
		for _, tp := range []*onnxpb.TensorProto{raw, typed} {
			got, err := DecodeTensor(tp, "")
			if err != nil {
				t.Fatalf("%s %s: %v", c.dt, tp.GetName(), err)
			}
			for i, v := range vals {
				if float64(got.Float[i]) != v {
					t.Errorf("%s %s: got %v, want %v", c.dt, tp.GetName(), got.Float, vals)
					break
				}
			}
		}
		if b, err := rawBytes(typed, ""); err != nil || string(b) != string(c.raw) {
			t.Errorf("%s: rawBytes of the typed form = %x (%v), want %x", c.dt, b, err, c.raw)
		}
	}
}

func TestDecodeRefusesUnsupported(t *testing.T) {
	for _, tp := range []*onnxpb.TensorProto{
		{Name: proto.String("s"), Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_STRING)), StringData: [][]byte{[]byte("a")}},
		{Name: proto.String("c"), Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_COMPLEX64)), FloatData: []float32{1, 2}},
		{Name: proto.String("seg"), Dims: []int64{1}, DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: []float32{1},
			Segment: &onnxpb.TensorProto_Segment{Begin: proto.Int64(0), End: proto.Int64(1)}},
	} {
		if _, err := DecodeTensor(tp, ""); err == nil {
			t.Errorf("tensor %s decoded", tp.GetName())
		}
	}
}

// TestConstructors checks FloatTensor, Int64Tensor and BytesTensor against DecodeTensor
// and checkStorage.
func TestConstructors(t *testing.T) {
	f := FloatTensor("f", []int64{2, 3}, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, 6})
	i := Int64Tensor("i", []int64{3}, []int64{-1, 0, 1 << 50})
	b := BytesTensor("b", []int64{2}, []byte{0xAA, 0x55})
	for _, tp := range []*onnxpb.TensorProto{f, i, b} {
		if err := checkStorage(tp); err != nil {
			t.Fatal(err)
		}
	}
	ft, _ := DecodeTensor(f, "")
	if !sameBits(ft.Float, []float32{1, -2, 3.5, float32(math.Inf(1)), 0, 6}) || ft.Len() != 6 {
		t.Errorf("FloatTensor round trip: %v", ft.Float)
	}
	it, _ := DecodeTensor(i, "")
	if it.Int[2] != 1<<50 || it.Int[0] != -1 {
		t.Errorf("Int64Tensor round trip: %v", it.Int)
	}
	bt, _ := DecodeTensor(b, "")
	if bt.Int[0] != 0xAA || bt.Int[1] != 0x55 || bt.Type != onnxpb.TensorProto_UINT8 {
		t.Errorf("BytesTensor round trip: %v", bt.Int)
	}
}
