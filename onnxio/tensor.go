package onnxio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// DataType is the element type of an ONNX tensor.
type DataType = onnxpb.TensorProto_DataType

// Tensor is a decoded tensor. Floating types are held as float32 in Float; integer types
// and BOOL as int64 in Int. Type keeps the stored type so that a writer can round-trip it.
type Tensor struct {
	Name  string
	Dims  []int64
	Type  DataType
	Float []float32
	Int   []int64
}

// Len returns the number of elements the dims describe.
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// IsFloat reports whether the stored type is a floating-point type.
func IsFloat(dt DataType) bool {
	switch dt {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return true
	}
	return false
}

// IsInt reports whether the stored type decodes to int64 values (integers and BOOL).
func IsInt(dt DataType) bool {
	switch dt {
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16,
		onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32, onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64,
		onnxpb.TensorProto_BOOL, onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		return true
	}
	return false
}

// elemBits is the stored width of one element in raw_data, or 0 for types without a
// fixed width (STRING, UNDEFINED).
func elemBits(dt DataType) int {
	switch dt {
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		return 4
	case onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL,
		onnxpb.TensorProto_FLOAT8E4M3FN, onnxpb.TensorProto_FLOAT8E4M3FNUZ,
		onnxpb.TensorProto_FLOAT8E5M2, onnxpb.TensorProto_FLOAT8E5M2FNUZ:
		return 8
	case onnxpb.TensorProto_INT16, onnxpb.TensorProto_UINT16, onnxpb.TensorProto_FLOAT16, onnxpb.TensorProto_BFLOAT16:
		return 16
	case onnxpb.TensorProto_INT32, onnxpb.TensorProto_UINT32, onnxpb.TensorProto_FLOAT:
		return 32
	case onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64, onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_COMPLEX64:
		return 64
	case onnxpb.TensorProto_COMPLEX128:
		return 128
	}
	return 0
}

// typedField returns the name and length of the typed field that holds a tensor of type
// dt when it has no raw_data, and how many entries n elements take there. The mapping is
// the one onnx.proto documents for each field.
func typedField(t *onnxpb.TensorProto, dt DataType, n int) (field string, have, need int) {
	switch dt {
	case onnxpb.TensorProto_FLOAT:
		return "float_data", len(t.GetFloatData()), n
	case onnxpb.TensorProto_COMPLEX64:
		return "float_data", len(t.GetFloatData()), 2 * n
	case onnxpb.TensorProto_DOUBLE:
		return "double_data", len(t.GetDoubleData()), n
	case onnxpb.TensorProto_COMPLEX128:
		return "double_data", len(t.GetDoubleData()), 2 * n
	case onnxpb.TensorProto_INT64:
		return "int64_data", len(t.GetInt64Data()), n
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		return "uint64_data", len(t.GetUint64Data()), n
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		return "int32_data", len(t.GetInt32Data()), (n + 1) / 2
	}
	return "int32_data", len(t.GetInt32Data()), n
}

// checkStorage reports a tensor whose stored data does not match its shape, from the
// lengths alone, so that a corrupt tensor is refused before anything is allocated for
// it. External data is checked against the length its entry declares; the file itself
// is checked by readExternal and Model.Check.
func checkStorage(t *onnxpb.TensorProto) error {
	n, err := numElements(t.GetDims())
	if err != nil {
		return err
	}
	dt := DataType(t.GetDataType())
	bits := elemBits(dt)
	if bits == 0 || t.GetSegment() != nil {
		return nil // no fixed width, or a segment holding only part of the tensor
	}
	want := (int64(n)*int64(bits) + 7) / 8
	switch {
	case isExternal(t):
		ref, err := parseExternal(t)
		if err != nil {
			return err
		}
		if ref.length >= 0 && ref.length != want {
			return fmt.Errorf("external data length is %d bytes, but shape %v of %s needs %d", ref.length, t.GetDims(), dt, want)
		}
	case t.RawData != nil:
		if int64(len(t.RawData)) != want {
			return fmt.Errorf("raw_data holds %d bytes, but shape %v of %s needs %d", len(t.RawData), t.GetDims(), dt, want)
		}
	default:
		if field, have, need := typedField(t, dt, n); have != need {
			return fmt.Errorf("%s holds %d values, but shape %v of %s needs %d", field, have, t.GetDims(), dt, need)
		}
	}
	return nil
}

// numElements multiplies dims, refusing negative dims and products that overflow, which
// a corrupt file can otherwise turn into an enormous allocation.
func numElements(dims []int64) (int, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, dims)
		}
		if d != 0 && n > math.MaxInt32*int64(64)/d {
			return 0, fmt.Errorf("shape %v is too large", dims)
		}
		n *= d
	}
	return int(n), nil
}

// DecodeTensor decodes t. External data is read relative to dir.
func DecodeTensor(t *onnxpb.TensorProto, dir string) (*Tensor, error) {
	out, err := decodeTensor(t, dir)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.GetName(), err)
	}
	return out, nil
}

// Tensor decodes t, reading external data relative to the model's folder. Errors name
// the model file and the tensor.
func (m *Model) Tensor(t *onnxpb.TensorProto) (*Tensor, error) {
	out, err := DecodeTensor(t, m.Dir)
	if err != nil {
		return nil, fmt.Errorf("onnxio: %s: %w", m.Name, err)
	}
	return out, nil
}

func decodeTensor(t *onnxpb.TensorProto, dir string) (*Tensor, error) {
	dt := DataType(t.GetDataType())
	if !IsFloat(dt) && !IsInt(dt) {
		return nil, fmt.Errorf("data type %s is not supported (qtool computes in float32 and int64)", dt)
	}
	if t.GetSegment() != nil {
		return nil, fmt.Errorf("segmented tensors are not supported")
	}
	if err := checkStorage(t); err != nil {
		return nil, err
	}
	n, _ := numElements(t.GetDims()) // checked by checkStorage
	out := &Tensor{Name: t.GetName(), Dims: append([]int64(nil), t.GetDims()...), Type: dt}
	switch {
	case isExternal(t):
		raw, err := readExternal(t, dir)
		if err != nil {
			return nil, err
		}
		if want := (n*elemBits(dt) + 7) / 8; len(raw) != want {
			return nil, fmt.Errorf("external data holds %d bytes, but shape %v of %s needs %d", len(raw), t.GetDims(), dt, want)
		}
		decodeRaw(out, raw, n)
	case t.RawData != nil:
		decodeRaw(out, t.RawData, n)
	default:
		decodeTyped(out, t, n)
	}
	return out, nil
}

// decodeRaw decodes n little-endian elements from raw, whose length checkStorage has
// checked. Each type has its own loop: one switch per element would dominate the cost.
func decodeRaw(out *Tensor, raw []byte, n int) {
	le := binary.LittleEndian
	if IsFloat(out.Type) {
		f := make([]float32, n)
		out.Float = f
		switch out.Type {
		case onnxpb.TensorProto_FLOAT:
			for i := range f {
				f[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
			}
		case onnxpb.TensorProto_DOUBLE:
			for i := range f {
				f[i] = float32(math.Float64frombits(le.Uint64(raw[8*i:])))
			}
		case onnxpb.TensorProto_FLOAT16:
			for i := range f {
				f[i] = HalfToFloat32(le.Uint16(raw[2*i:]))
			}
		case onnxpb.TensorProto_BFLOAT16:
			for i := range f {
				f[i] = BFloat16ToFloat32(le.Uint16(raw[2*i:]))
			}
		}
		return
	}
	v := make([]int64, n)
	out.Int = v
	switch out.Type {
	case onnxpb.TensorProto_INT8:
		for i := range v {
			v[i] = int64(int8(raw[i]))
		}
	case onnxpb.TensorProto_UINT8, onnxpb.TensorProto_BOOL:
		for i := range v {
			v[i] = int64(raw[i])
		}
	case onnxpb.TensorProto_INT16:
		for i := range v {
			v[i] = int64(int16(le.Uint16(raw[2*i:])))
		}
	case onnxpb.TensorProto_UINT16:
		for i := range v {
			v[i] = int64(le.Uint16(raw[2*i:]))
		}
	case onnxpb.TensorProto_INT32:
		for i := range v {
			v[i] = int64(int32(le.Uint32(raw[4*i:])))
		}
	case onnxpb.TensorProto_UINT32:
		for i := range v {
			v[i] = int64(le.Uint32(raw[4*i:]))
		}
	case onnxpb.TensorProto_INT64, onnxpb.TensorProto_UINT64:
		for i := range v {
			v[i] = int64(le.Uint64(raw[8*i:]))
		}
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		for i := range v {
			v[i] = nibble(out.Type, raw[i/2], i)
		}
	}
}

// nibble extracts element i of a 4-bit tensor; ONNX packs the first element of each pair
// in the low nibble.
func nibble(dt DataType, b byte, i int) int64 {
	v := b & 0x0F
	if i%2 == 1 {
		v = b >> 4
	}
	if dt == onnxpb.TensorProto_INT4 {
		return int64(int8(v<<4) >> 4)
	}
	return int64(v)
}

// decodeTyped decodes the typed fields of a tensor whose lengths checkStorage accepted.
func decodeTyped(out *Tensor, t *onnxpb.TensorProto, n int) {
	switch dt := out.Type; dt {
	case onnxpb.TensorProto_FLOAT:
		out.Float = append([]float32(nil), t.GetFloatData()...)
	case onnxpb.TensorProto_DOUBLE:
		out.Float = make([]float32, n)
		for i, v := range t.GetDoubleData() {
			out.Float[i] = float32(v)
		}
	case onnxpb.TensorProto_FLOAT16:
		out.Float = make([]float32, n)
		for i, v := range t.GetInt32Data() {
			out.Float[i] = HalfToFloat32(uint16(v))
		}
	case onnxpb.TensorProto_BFLOAT16:
		out.Float = make([]float32, n)
		for i, v := range t.GetInt32Data() {
			out.Float[i] = BFloat16ToFloat32(uint16(v))
		}
	case onnxpb.TensorProto_INT64:
		out.Int = append([]int64(nil), t.GetInt64Data()...)
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		out.Int = make([]int64, n)
		for i, v := range t.GetUint64Data() {
			out.Int[i] = int64(v)
		}
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		out.Int = make([]int64, n)
		for i := range out.Int {
			out.Int[i] = nibble(dt, byte(t.GetInt32Data()[i/2]), i)
		}
	default: // the remaining integer types and BOOL are stored in int32_data
		out.Int = make([]int64, n)
		for i, v := range t.GetInt32Data() {
			out.Int[i] = int64(v)
		}
	}
	if out.Float == nil && IsFloat(out.Type) {
		out.Float = []float32{} // an empty tensor decodes to an empty, non-nil slice
	}
	if out.Int == nil && IsInt(out.Type) {
		out.Int = []int64{}
	}
}

// BFloat16ToFloat32 converts a bfloat16 value, the upper half of a float32, to float32
// exactly.
func BFloat16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// HalfToFloat32 converts an IEEE 754 binary16 value to float32 exactly.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1F
	frac := uint32(h) & 0x3FF
	switch {
	case exp == 0x1F: // inf or NaN
		return math.Float32frombits(sign | 0xFF<<23 | frac<<13)
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal half: value = frac · 2^-24, exactly representable in float32.
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

func isExternal(t *onnxpb.TensorProto) bool {
	return t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL
}

type externalRef struct {
	location       string
	offset, length int64 // length -1: to the end of the file
}

func parseExternal(t *onnxpb.TensorProto) (externalRef, error) {
	ref := externalRef{length: -1}
	for _, kv := range t.GetExternalData() {
		switch kv.GetKey() {
		case "location":
			ref.location = kv.GetValue()
		case "offset", "length":
			v, err := strconv.ParseInt(kv.GetValue(), 10, 64)
			if err != nil || v < 0 {
				return ref, fmt.Errorf("external data %s %q is not a byte count", kv.GetKey(), kv.GetValue())
			}
			if kv.GetKey() == "offset" {
				ref.offset = v
			} else {
				ref.length = v
			}
		}
	}
	if ref.location == "" {
		return ref, fmt.Errorf("external data has no location")
	}
	// Locations are relative to the model's folder by the ONNX spec; refusing escapes keeps a
	// hostile model from reading arbitrary files.
	if filepath.IsAbs(ref.location) || !filepath.IsLocal(ref.location) {
		return ref, fmt.Errorf("external data location %q must be a path inside the model's folder", ref.location)
	}
	return ref, nil
}

// externalPath returns the file holding external data at location, relative to dir, with
// every symbolic link resolved. The lexical check of parseExternal cannot see links: a
// link inside the folder may point anywhere, so containment is decided on the resolved
// paths. A file that does not exist is returned unresolved with an error wrapping
// fs.ErrNotExist, for the callers' "missing" messages.
func externalPath(dir, location string) (string, error) {
	if dir == "" {
		dir = "."
	}
	path := filepath.Join(dir, location)
	root, err := resolve(dir)
	if err != nil {
		return path, fmt.Errorf("model folder %s: %w", dir, err)
	}
	real, err := resolve(path)
	if err != nil {
		return path, err
	}
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return path, fmt.Errorf("external data file %s links to %s, outside the model's folder %s; copy the data into the folder instead of linking to it", path, real, root)
	}
	return real, nil
}

// resolve returns path absolute, with symbolic links resolved.
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	return filepath.Abs(real)
}

func readExternal(t *onnxpb.TensorProto, dir string) ([]byte, error) {
	ref, err := parseExternal(t)
	if err != nil {
		return nil, err
	}
	path, err := externalPath(dir, ref.location)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("external data file %s cannot be opened; keep it next to the model: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("external data %s is not a regular file", path)
	}
	size := st.Size()
	length := ref.length
	if length < 0 && ref.offset <= size {
		length = size - ref.offset
	}
	// Compared without adding, so that a hostile offset cannot overflow past the check
	// into a huge allocation.
	if ref.offset > size || length > size-ref.offset {
		return nil, fmt.Errorf("external data %s has %d bytes, the tensor needs %d bytes from offset %d", path, size, length, ref.offset)
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, ref.offset); err != nil && !(err == io.EOF && length == 0) {
		return nil, fmt.Errorf("external data %s: %w", path, err)
	}
	return buf, nil
}

// ReadTensorFile reads a file holding one serialized TensorProto, the format of the ONNX
// conformance data (input_N.pb, output_N.pb).
func ReadTensorFile(path string) (*Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnxio: %w", err)
	}
	tp := &onnxpb.TensorProto{}
	if err := proto.Unmarshal(b, tp); err != nil {
		return nil, fmt.Errorf("onnxio: %s: not a TensorProto: %v", path, err)
	}
	t, err := DecodeTensor(tp, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("onnxio: %s: %w", path, err)
	}
	return t, nil
}

// FloatTensor encodes float32 data as a FLOAT TensorProto in raw_data, the compact form
// every exporter uses.
func FloatTensor(name string, dims []int64, data []float32) *onnxpb.TensorProto {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return &onnxpb.TensorProto{
		Name:     proto.String(name),
		Dims:     append([]int64(nil), dims...),
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)),
		RawData:  raw,
	}
}

// Int64Tensor encodes int64 data as an INT64 TensorProto in raw_data.
func Int64Tensor(name string, dims []int64, data []int64) *onnxpb.TensorProto {
	raw := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
	}
	return &onnxpb.TensorProto{
		Name:     proto.String(name),
		Dims:     append([]int64(nil), dims...),
		DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)),
		RawData:  raw,
	}
}

// BytesTensor stores bytes as a UINT8 tensor, the container for bit-packed weights.
func BytesTensor(name string, dims []int64, data []byte) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{
		Name:     proto.String(name),
		Dims:     append([]int64(nil), dims...),
		DataType: proto.Int32(int32(onnxpb.TensorProto_UINT8)),
		RawData:  append([]byte(nil), data...),
	}
}

// TensorBytes returns the size of a tensor's data in raw form: its element count times
// the element width (4-bit types packed two to a byte), or the total string length for
// a STRING tensor. It reads no data, and assumes dims the loader has checked.
func TensorBytes(t *onnxpb.TensorProto) int64 {
	dt := DataType(t.GetDataType())
	if dt == onnxpb.TensorProto_STRING {
		var n int64
		for _, s := range t.GetStringData() {
			n += int64(len(s))
		}
		return n
	}
	n := int64(1)
	for _, d := range t.GetDims() {
		n *= d
	}
	return (n*int64(elemBits(dt)) + 7) / 8
}
