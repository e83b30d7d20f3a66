package onnxio

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// The range of models qtool reads. Older IR versions predate opset imports; opsets
// below 7 use broadcasting and attribute conventions that no current exporter writes.
const (
	MinIRVersion = 3
	MaxIRVersion = 10
	MinOpset     = 7
	MaxOpset     = 21
)

// IRVersionOf is the IR version that came with an opset of the default domain: the least
// a model importing that opset should declare.
func IRVersionOf(opset int64) int64 {
	switch {
	case opset >= 21:
		return 10
	case opset >= 19:
		return 9
	case opset >= 15:
		return 8
	case opset >= 12:
		return 7
	case opset >= 11:
		return 6
	case opset >= 10:
		return 5
	}
	return 4
}

// Model is an ONNX model together with where it came from.
type Model struct {
	// Proto is the decoded model. Callers may edit it; Save writes it back as it stands.
	Proto *onnxpb.ModelProto
	// Name identifies the model in error messages, usually the path it was read from.
	Name string
	// Dir is the folder that external-data locations are relative to.
	Dir string
}

// Clone returns a deep copy of m: editing the copy's Proto (training writes weights back,
// export adds nodes) leaves m as it was, so one loaded model can seed many runs.
func (m *Model) Clone() *Model {
	return &Model{Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto), Name: m.Name, Dir: m.Dir}
}

// Load reads and checks the model at path. External data is resolved relative to the
// model's folder.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnxio: %w", err)
	}
	return Parse(data, path, filepath.Dir(path))
}

// Read reads and checks a model from r. Name is used in error messages; dir is the folder
// that external-data locations are relative to.
func Read(r io.Reader, name, dir string) (*Model, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("onnxio: %s: %w", name, err)
	}
	return Parse(data, name, dir)
}

// Parse decodes and checks a serialized model.
func Parse(data []byte, name, dir string) (*Model, error) {
	m, err := Decode(data, name, dir)
	if err != nil {
		return nil, err
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// Decode decodes a serialized model without checking it, for tools that must carry
// models qtool cannot execute (an opset outside the range, say) through unchanged. Use
// Parse for anything that will compute with the model.
func Decode(data []byte, name, dir string) (*Model, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("onnxio: %s: empty file, not an ONNX model", name)
	}
	if err := checkWire(data); err != nil {
		return nil, fmt.Errorf("onnxio: %s: %w", name, err)
	}
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(data, mp); err != nil {
		return nil, fmt.Errorf("onnxio: %s: not an ONNX model: protobuf decoding failed: %v", name, err)
	}
	return &Model{Proto: mp, Name: name, Dir: dir}, nil
}

// checkWire walks the top level of the protobuf wire format so that a truncated file
// and a file that is not a protobuf at all get different, precise messages; the generic
// decoder reports both as "invalid wire-format data". A file is called truncated only
// when every field up to the break is one ModelProto has, with its wire type: random
// bytes, text and images almost never start that way. Unknown fields in a file that
// parses are left to the decoder, which keeps them.
func checkWire(b []byte) error {
	known := true // every field so far is one ModelProto has
	off := 0
	for off < len(b) {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			if known && off > 0 && errors.Is(protowire.ParseError(n), io.ErrUnexpectedEOF) {
				return fmt.Errorf("truncated file: it ends inside a field tag at byte %d of %d", off, len(b))
			}
			return fmt.Errorf("not an ONNX model: no protobuf field tag at byte %d", off)
		}
		known = known && modelField(num, typ)
		m := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if m < 0 {
			if !known {
				return fmt.Errorf("not an ONNX model: malformed protobuf field %d at byte %d", num, off)
			}
			if typ == protowire.BytesType {
				if l, k := protowire.ConsumeVarint(b[off+n:]); k > 0 && uint64(len(b)-off-n-k) < l {
					return fmt.Errorf("truncated file: field %d at byte %d needs %d bytes, only %d remain", num, off, l, len(b)-off-n-k)
				}
			}
			if errors.Is(protowire.ParseError(m), io.ErrUnexpectedEOF) {
				return fmt.Errorf("truncated file: it ends inside field %d at byte %d", num, off)
			}
			return fmt.Errorf("not an ONNX model: malformed protobuf field %d at byte %d", num, off)
		}
		off += n + m
	}
	return nil
}

// modelField reports whether ModelProto has field num with wire type typ (onnx.proto,
// IR version 10).
func modelField(num protowire.Number, typ protowire.Type) bool {
	switch num {
	case 1, 5: // ir_version, model_version
		return typ == protowire.VarintType
	case 2, 3, 4, 6, 7, 8, 14, 20, 25: // strings and messages
		return typ == protowire.BytesType
	}
	return false
}

// Check verifies that the model is one qtool can work with: a graph, an IR version and
// default-domain opset in range, tensors whose stored data matches their shape, and
// external data files that exist and are long enough. It reads no tensor data.
func (m *Model) Check() error {
	mp := m.Proto
	if mp.IrVersion == nil {
		return fmt.Errorf("onnxio: %s: not an ONNX model: it has no ir_version", m.Name)
	}
	if mp.GetGraph() == nil {
		// Exporters write the graph after the header fields, so a file cut at a field
		// boundary typically loses it.
		return fmt.Errorf("onnxio: %s: the model has no graph; the file is truncated or was not written by an ONNX exporter", m.Name)
	}
	if v := mp.GetIrVersion(); v < MinIRVersion || v > MaxIRVersion {
		return fmt.Errorf("onnxio: %s: IR version %d is outside the supported range %d to %d; re-export the model with a supported version", m.Name, v, MinIRVersion, MaxIRVersion)
	}
	if len(mp.GetOpsetImport()) == 0 {
		// Exporters write opset_import after the graph, so a file cut at a field
		// boundary typically loses it.
		return fmt.Errorf("onnxio: %s: the model has no opset_import; the file is truncated or was not written by an ONNX exporter", m.Name)
	}
	op := m.Opset("")
	if op == 0 {
		return fmt.Errorf("onnxio: %s: the model imports no default-domain (ai.onnx) opset; qtool reads only models built from standard ONNX operators", m.Name)
	}
	if op < MinOpset || op > MaxOpset {
		return fmt.Errorf("onnxio: %s: opset %d is outside the supported range %d to %d; convert it with onnx.version_converter or re-export", m.Name, op, MinOpset, MaxOpset)
	}
	return eachTensor(mp, func(t *onnxpb.TensorProto, desc string) error {
		if err := checkStorage(t); err != nil {
			return fmt.Errorf("onnxio: %s: %s: %w; the file is corrupt or its exporter is broken", m.Name, desc, err)
		}
		return m.checkExternal(t, desc)
	})
}

func (m *Model) checkExternal(t *onnxpb.TensorProto, desc string) error {
	if !isExternal(t) {
		return nil
	}
	ext, err := parseExternal(t)
	if err != nil {
		return fmt.Errorf("onnxio: %s: %s: %w", m.Name, desc, err)
	}
	path, err := externalPath(m.Dir, ext.location)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("onnxio: %s: %s: %w", m.Name, desc, err)
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("onnxio: %s: %s: external data file %s is missing; keep it next to the model", m.Name, desc, path)
	}
	if err != nil {
		return fmt.Errorf("onnxio: %s: %s: external data: %w", m.Name, desc, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("onnxio: %s: %s: external data %s is not a regular file", m.Name, desc, path)
	}
	if ext.offset > st.Size() || ext.length > st.Size()-ext.offset {
		return fmt.Errorf("onnxio: %s: %s: external data %s has %d bytes, the tensor needs %d bytes from offset %d; the data file is truncated or belongs to another model", m.Name, desc, path, st.Size(), max(ext.length, 0), ext.offset)
	}
	return nil
}

// Opset returns the version the model imports for domain; "" and "ai.onnx" both name the
// default domain. It returns 0 when the domain is not imported.
func (m *Model) Opset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	for _, o := range m.Proto.GetOpsetImport() {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		if d == domain {
			return o.GetVersion()
		}
	}
	return 0
}

// Marshal serializes the model deterministically, so that the same model always gives
// the same bytes.
func (m *Model) Marshal() ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Proto)
	if err != nil {
		return nil, fmt.Errorf("onnxio: %s: encoding: %w", m.Name, err)
	}
	return b, nil
}

// Write serializes the model to w.
func (m *Model) Write(w io.Writer) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("onnxio: %s: %w", m.Name, err)
	}
	return nil
}
