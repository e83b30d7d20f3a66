package export

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// internalize reads the tensors the model keeps in external data files into the model
// itself. An export drops the big weights, so what stays external is small; and saving
// the model elsewhere would otherwise copy the whole original data file, weights
// included, next to it. Models still over the protobuf limit are split again by
// onnxio's Save, into a data file that holds only what the export uses.
func internalize(m *onnxio.Model) error {
	for _, p := range m.Params() {
		t := p.Tensor
		if t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			continue
		}
		b, err := readExternal(t, m.Dir)
		if err != nil {
			return fmt.Errorf("export: %s: tensor %q: %w", m.Name, p.Name, err)
		}
		t.RawData = b
		t.ExternalData = nil
		t.DataLocation = nil
	}
	return nil
}

// readExternal reads a tensor's bytes from its external data file, per the ONNX spec's
// location, offset and length keys.
func readExternal(t *onnxpb.TensorProto, dir string) ([]byte, error) {
	var loc string
	offset, length := int64(0), int64(-1)
	for _, kv := range t.GetExternalData() {
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset", "length":
			v, err := strconv.ParseInt(kv.GetValue(), 10, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("external data %s %q is not a byte count", kv.GetKey(), kv.GetValue())
			}
			if kv.GetKey() == "offset" {
				offset = v
			} else {
				length = v
			}
		}
	}
	// The loader checked this already; a model built in memory has not been.
	if loc == "" || !filepath.IsLocal(loc) {
		return nil, fmt.Errorf("external data location %q is not a path inside the model's folder", loc)
	}
	f, err := os.Open(filepath.Join(dir, loc))
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("external data: %w", err)
	}
	if length < 0 && offset <= st.Size() {
		length = st.Size() - offset
	}
	if offset > st.Size() || length > st.Size()-offset {
		return nil, fmt.Errorf("external data %s has %d bytes, the tensor needs %d from offset %d", loc, st.Size(), length, offset)
	}
	b := make([]byte, length)
	if _, err := f.ReadAt(b, offset); err != nil && !(err == io.EOF && length == 0) {
		return nil, fmt.Errorf("external data %s: %w", loc, err)
	}
	return b, nil
}
