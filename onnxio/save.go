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

	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// maxProtoBytes is the largest message protobuf implementations accept (2 GiB − 1).
// Models above it must keep large tensors in an external file.
const maxProtoBytes = math.MaxInt32

// DefaultExternalThreshold is the serialized size above which Save moves tensors to
// external data: the protobuf limit, less headroom for the external_data entries that
// replace the moved bytes.
const DefaultExternalThreshold = maxProtoBytes - 1<<20

// externalAlign is the alignment of each tensor in a data file Save writes, so that
// runtimes can map the file page by page.
const externalAlign = 4096

// SaveOptions control SaveWith.
type SaveOptions struct {
	// ExternalThreshold is the serialized model size above which tensors are moved to
	// external data. Zero means DefaultExternalThreshold: only when the model would not
	// fit in one protobuf.
	ExternalThreshold int64
	// MinExternalBytes is the smallest tensor moved to the external file when the
	// threshold is crossed (default 1 KiB); small tensors stay inline as converters keep
	// them.
	MinExternalBytes int
}

func (o SaveOptions) threshold() int64 {
	if o.ExternalThreshold <= 0 {
		return DefaultExternalThreshold
	}
	return o.ExternalThreshold
}

func (o SaveOptions) minBytes() int64 {
	if o.MinExternalBytes <= 0 {
		return 1024
	}
	return int64(o.MinExternalBytes)
}

// Save writes the model to path atomically, with default options.
func (m *Model) Save(path string) error { return m.SaveWith(path, SaveOptions{}) }

// SaveWith writes the model to path atomically; the in-memory model is not changed.
//
// A model within the threshold is written as it stands. Its external data, if any,
// stays where it is when path is in the model's folder, and is copied byte for byte to
// the same relative locations when path is elsewhere, so that the saved model is the
// same protobuf either way. A model over the threshold gets its tensors of at least
// MinExternalBytes, and every tensor already external, written to one data file,
// path+".data", next to it.
//
// Each file is written atomically. When external data is written, the data file is
// renamed into place before the model file, so a failure in between leaves the previous
// model beside the new data file.
func (m *Model) SaveWith(path string, opts SaveOptions) error {
	dir := filepath.Dir(path)
	if int64(proto.Size(m.Proto)) > opts.threshold() {
		return m.saveExternal(path, opts.minBytes())
	}
	if m.hasExternal() && !sameFolder(m.Dir, dir) {
		if err := m.copyExternal(dir); err != nil {
			return err
		}
	}
	return m.writeWhole(path)
}

// writeWhole writes the model as it stands to path.
func (m *Model) writeWhole(path string) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return fmt.Errorf("onnxio: %w", err)
	}
	return nil
}

func sameFolder(a, b string) bool {
	if a == "" {
		a = "."
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

func (m *Model) hasExternal() bool {
	found := false
	eachTensor(m.Proto, func(t *onnxpb.TensorProto, _ string) error {
		found = found || isExternal(t)
		return nil
	})
	return found
}

// copyExternal copies every external data file the model refers to into dir, under the
// same relative location.
func (m *Model) copyExternal(dir string) error {
	done := map[string]bool{}
	return eachTensor(m.Proto, func(t *onnxpb.TensorProto, desc string) error {
		if !isExternal(t) {
			return nil
		}
		ref, err := parseExternal(t)
		if err != nil {
			return fmt.Errorf("onnxio: %s: %s: %w", m.Name, desc, err)
		}
		if done[ref.location] {
			return nil
		}
		done[ref.location] = true
		src, err := externalPath(m.Dir, ref.location)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("onnxio: %s: %s: %w", m.Name, desc, err)
		}
		dst := filepath.Join(dir, ref.location)
		in, err := os.Open(src)
		if err != nil {
			return fmt.Errorf("onnxio: %s: %s: external data file %s cannot be opened: %w", m.Name, desc, src, err)
		}
		defer in.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("onnxio: writing %s: %w", dst, err)
		}
		// A linked subfolder in the destination would carry the copy out of it; the file
		// itself is replaced by a rename, which never follows a link.
		if _, err := externalPath(dir, filepath.Dir(ref.location)); err != nil {
			return fmt.Errorf("onnxio: %s: %s: writing %s: %w", m.Name, desc, dst, err)
		}
		if err := atomicfile.Write(dst, func(w io.Writer) error { _, err := io.Copy(w, in); return err }); err != nil {
			return fmt.Errorf("onnxio: %w", err)
		}
		return nil
	})
}

// moved is one tensor written to the data file: the source tensor and where its bytes go.
type moved struct {
	src    *onnxpb.TensorProto
	offset int64
	length int64
}

// saveExternal writes a copy of the model whose large tensors live in one data file next
// to it. The data file is streamed tensor by tensor, so memory use stays at the size of
// the model plus one tensor.
func (m *Model) saveExternal(path string, minBytes int64) error {
	out := m.Clone().Proto
	var srcs []*onnxpb.TensorProto
	eachTensor(m.Proto, func(t *onnxpb.TensorProto, _ string) error { srcs = append(srcs, t); return nil })
	dataName := filepath.Base(path) + ".data"
	var plan []moved
	var end int64
	i := 0
	err := eachTensor(out, func(t *onnxpb.TensorProto, desc string) error {
		src := srcs[i]
		i++
		n, ok, err := rawLen(src, m.Dir)
		if err != nil {
			return fmt.Errorf("onnxio: %s: %s: %w", m.Name, desc, err)
		}
		if !ok || (n < minBytes && !isExternal(src)) {
			return nil
		}
		off := (end + externalAlign - 1) / externalAlign * externalAlign
		plan = append(plan, moved{src: src, offset: off, length: n})
		end = off + n
		t.RawData = nil
		t.FloatData, t.Int32Data, t.Int64Data, t.DoubleData, t.Uint64Data = nil, nil, nil, nil, nil
		t.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		t.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(dataName)},
			{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(off, 10))},
			{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(n, 10))},
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		// Nothing is large enough to move: the model is written as it stands, without
		// an empty data file.
		return m.writeWhole(path)
	}
	if size := proto.Size(out); int64(size) > maxProtoBytes {
		return fmt.Errorf("onnxio: %s: the model is still %d bytes with its tensors of %d bytes or more moved to external data; lower SaveOptions.MinExternalBytes", m.Name, size, minBytes)
	}
	b, err := (&Model{Proto: out, Name: m.Name}).Marshal()
	if err != nil {
		return err
	}
	dataPath := filepath.Join(filepath.Dir(path), dataName)
	err = atomicfile.Write(dataPath, func(w io.Writer) error {
		var at int64
		for _, mv := range plan {
			if _, err := w.Write(make([]byte, mv.offset-at)); err != nil {
				return err
			}
			raw, err := rawBytes(mv.src, m.Dir)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", mv.src.GetName(), err)
			}
			if int64(len(raw)) != mv.length {
				return fmt.Errorf("tensor %q: its data changed from %d to %d bytes while saving", mv.src.GetName(), mv.length, len(raw))
			}
			if _, err := w.Write(raw); err != nil {
				return err
			}
			at = mv.offset + mv.length
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("onnxio: %s: %w", m.Name, err)
	}
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return fmt.Errorf("onnxio: %w", err)
	}
	return nil
}

// rawWidth is the number of bytes one typed-field entry of type dt takes in raw form,
// or 0 when the type has no fixed-width raw form that Save can produce.
func rawWidth(dt DataType) int {
	switch dt {
	case onnxpb.TensorProto_INT4, onnxpb.TensorProto_UINT4:
		return 1 // one int32_data entry holds a packed pair
	case onnxpb.TensorProto_COMPLEX64:
		return 4 // float_data holds real and imaginary parts in turn
	case onnxpb.TensorProto_COMPLEX128:
		return 8
	}
	return elemBits(dt) / 8
}

// rawLen returns the length of a tensor's little-endian raw form without building it.
// ok is false for tensors that stay as they are (strings and other types without a
// fixed-width raw form).
func rawLen(t *onnxpb.TensorProto, dir string) (n int64, ok bool, err error) {
	if isExternal(t) {
		ref, err := parseExternal(t)
		if err != nil {
			return 0, false, err
		}
		if ref.length >= 0 {
			return ref.length, true, nil
		}
		path, err := externalPath(dir, ref.location)
		if err != nil {
			return 0, false, fmt.Errorf("external data: %w", err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return 0, false, fmt.Errorf("external data: %w", err)
		}
		return max(st.Size()-ref.offset, 0), true, nil
	}
	if t.RawData != nil {
		return int64(len(t.RawData)), true, nil
	}
	dt := DataType(t.GetDataType())
	w := rawWidth(dt)
	if w == 0 || t.GetSegment() != nil {
		return 0, false, nil
	}
	_, have, _ := typedField(t, dt, 0)
	return int64(have * w), true, nil
}

// rawBytes returns the little-endian raw form of a tensor's data, reading external data
// and converting the typed fields, in the layout raw_data would have.
func rawBytes(t *onnxpb.TensorProto, dir string) ([]byte, error) {
	if isExternal(t) {
		return readExternal(t, dir)
	}
	if t.RawData != nil {
		return t.RawData, nil
	}
	le := binary.LittleEndian
	dt := DataType(t.GetDataType())
	w := rawWidth(dt)
	var raw []byte
	switch dt {
	case onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_COMPLEX64:
		raw = make([]byte, 4*len(t.FloatData))
		for i, v := range t.FloatData {
			le.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	case onnxpb.TensorProto_DOUBLE, onnxpb.TensorProto_COMPLEX128:
		raw = make([]byte, 8*len(t.DoubleData))
		for i, v := range t.DoubleData {
			le.PutUint64(raw[8*i:], math.Float64bits(v))
		}
	case onnxpb.TensorProto_INT64:
		raw = make([]byte, 8*len(t.Int64Data))
		for i, v := range t.Int64Data {
			le.PutUint64(raw[8*i:], uint64(v))
		}
	case onnxpb.TensorProto_UINT32, onnxpb.TensorProto_UINT64:
		raw = make([]byte, w*len(t.Uint64Data))
		for i, v := range t.Uint64Data {
			if w == 4 {
				le.PutUint32(raw[4*i:], uint32(v))
			} else {
				le.PutUint64(raw[8*i:], v)
			}
		}
	default:
		if w == 0 {
			return nil, fmt.Errorf("data type %s has no raw form", dt)
		}
		// Every other fixed-width type keeps its values in int32_data, one per entry,
		// truncated to the type's width (float16 and bfloat16 as their bit patterns).
		raw = make([]byte, w*len(t.Int32Data))
		for i, v := range t.Int32Data {
			switch w {
			case 1:
				raw[i] = byte(v)
			case 2:
				le.PutUint16(raw[2*i:], uint16(v))
			case 4:
				le.PutUint32(raw[4*i:], uint32(v))
			}
		}
	}
	return raw, nil
}
