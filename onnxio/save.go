package onnxio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
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

// SaveOptions control Save.
type SaveOptions struct {
	// ExternalThreshold is the serialized size above which tensors go to external data.
	// Zero means: only when the model would not fit in one protobuf (2 GiB).
	ExternalThreshold int64
	// MinExternalBytes is the smallest tensor moved to the external file (default 1 KiB);
	// small tensors stay inline as converters keep them.
	MinExternalBytes int
}

// Save writes the model to path atomically, with default options.
func (m *Model) Save(path string) error { return m.SaveWith(path, SaveOptions{}) }

// SaveWith writes the model to path atomically. Tensors already held in external files
// stay external (their files are copied when the model moves to another folder); when
// the model exceeds the threshold, its large tensors are written to path+".data".
func (m *Model) SaveWith(path string, opts SaveOptions) error {
	limit := opts.ExternalThreshold
	if limit <= 0 {
		limit = maxProtoBytes - 1<<20 // headroom for the external_data entries themselves
	}
	minBytes := opts.MinExternalBytes
	if minBytes <= 0 {
		minBytes = 1024
	}
	dir := filepath.Dir(path)
	sameDir := m.Dir != "" && sameFolder(m.Dir, dir)
	hasExternal := m.hasExternal()
	if int64(proto.Size(m.Proto)) <= limit && (!hasExternal || sameDir) {
		b, err := m.Marshal()
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(path, b); err != nil {
			return fmt.Errorf("onnxio: %w", err)
		}
		return nil
	}
	return m.saveExternal(path, minBytes)
}

func sameFolder(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

func (m *Model) hasExternal() bool {
	for _, p := range m.Params() {
		if isExternal(p.Tensor) {
			return true
		}
	}
	return false
}

// saveExternal writes a copy of the model whose large tensors live in one data file
// next to it. The in-memory model is not changed.
func (m *Model) saveExternal(path string, minBytes int) error {
	out := proto.Clone(m.Proto).(*onnxpb.ModelProto)
	dataName := filepath.Base(path) + ".data"
	var data bytes.Buffer
	move := func(t *onnxpb.TensorProto) error {
		raw, ok, err := rawBytes(t, m.Dir)
		if err != nil {
			return fmt.Errorf("onnxio: %s: tensor %q: %w", m.Name, t.GetName(), err)
		}
		if !ok || (len(raw) < minBytes && !isExternal(t)) {
			return nil
		}
		// Align each tensor to 4 KiB so that runtimes can map the file page by page.
		if pad := (4096 - data.Len()%4096) % 4096; pad > 0 {
			data.Write(make([]byte, pad))
		}
		off := data.Len()
		data.Write(raw)
		t.RawData = nil
		t.FloatData, t.Int32Data, t.Int64Data, t.DoubleData, t.Uint64Data = nil, nil, nil, nil, nil
		t.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		t.ExternalData = []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(dataName)},
			{Key: proto.String("offset"), Value: proto.String(strconv.Itoa(off))},
			{Key: proto.String("length"), Value: proto.String(strconv.Itoa(len(raw)))},
		}
		return nil
	}
	tmp := &Model{Proto: out, Name: m.Name, Dir: m.Dir}
	for _, p := range tmp.Params() {
		if err := move(p.Tensor); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteBytes(filepath.Join(filepath.Dir(path), dataName), data.Bytes()); err != nil {
		return fmt.Errorf("onnxio: %w", err)
	}
	b, err := tmp.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("onnxio: %w", err)
	}
	return nil
}

// rawBytes returns the little-endian raw form of a tensor's data, reading external data
// and converting the typed fields that have a fixed-width raw form. ok is false for
// tensors that are kept as they are (strings, empty tensors).
func rawBytes(t *onnxpb.TensorProto, dir string) (raw []byte, ok bool, err error) {
	if isExternal(t) {
		b, err := readExternal(t, dir)
		return b, err == nil, err
	}
	if t.RawData != nil {
		return t.RawData, true, nil
	}
	le := binary.LittleEndian
	switch DataType(t.GetDataType()) {
	case onnxpb.TensorProto_FLOAT:
		raw = make([]byte, 4*len(t.FloatData))
		for i, v := range t.FloatData {
			le.PutUint32(raw[4*i:], math.Float32bits(v))
		}
	case onnxpb.TensorProto_DOUBLE:
		raw = make([]byte, 8*len(t.DoubleData))
		for i, v := range t.DoubleData {
			le.PutUint64(raw[8*i:], math.Float64bits(v))
		}
	case onnxpb.TensorProto_INT64:
		raw = make([]byte, 8*len(t.Int64Data))
		for i, v := range t.Int64Data {
			le.PutUint64(raw[8*i:], uint64(v))
		}
	case onnxpb.TensorProto_INT32:
		raw = make([]byte, 4*len(t.Int32Data))
		for i, v := range t.Int32Data {
			le.PutUint32(raw[4*i:], uint32(v))
		}
	default:
		return nil, false, nil
	}
	return raw, len(raw) > 0, nil
}
