package export

import (
	"fmt"
	"slices"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// QuantizedTensor describes one tensor of an exported file as the file stores it, each
// with its own grid: a file of mixed grids reads back weight by weight.
type QuantizedTensor struct {
	Name   string
	Format string // "packed", "qdq" or "float"
	// Bits is the code width of a packed tensor (0 otherwise); Levels its grid's levels,
	// read from the lookup table; Scales the number of scales (0: none).
	Bits   int
	Levels []int
	Scales int
}

// Grid describes the tensor's grid, e.g. "{-1,1}×α per channel (32)" or "{-7..7}×α": its levels and how
// many scales; the format alone when the file does not say the levels.
func (q QuantizedTensor) Grid() string {
	if q.Levels == nil {
		return q.Format
	}
	s := "{" + levelsKey(q.Levels) + "}"
	switch {
	case q.Scales == 1:
		s += "×α"
	case q.Scales > 1:
		s += fmt.Sprintf("×α per channel (%d)", q.Scales)
	}
	return s
}

// Quantized lists the tensors an export of qtool quantized (the names its metadata
// records), in that order, with what the unpacking subgraph behind each says of its grid.
// A file qtool did not write has none.
func Quantized(m *onnxio.Model) ([]QuantizedTensor, error) {
	names, err := quantizedList(m)
	if err != nil {
		return nil, err
	}
	params := map[string]onnxio.Param{}
	for _, p := range m.Params() {
		params[p.Name] = p
	}
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	var out []QuantizedTensor
	for _, name := range names {
		q := QuantizedTensor{Name: name, Format: "float"}
		if n, ok := producer[name]; ok {
			if err := describeUnpack(m, n, producer, params, &q); err != nil {
				return nil, fmt.Errorf("export: %s: tensor %q: %w", m.Name, name, err)
			}
		}
		out = append(out, q)
	}
	return out, nil
}

// describeUnpack reads a quantized tensor's format, code width, levels and scales from
// the constants its unpacking subgraph reads.
func describeUnpack(m *onnxio.Model, n *onnxpb.NodeProto, producer map[string]*onnxpb.NodeProto, params map[string]onnxio.Param, q *QuantizedTensor) error {
	return walkUnpack(n, producer, params, func(op string, i int, _ string, p onnxio.Param) error {
		switch {
		case op == "Cast" && i == 0:
			q.Format = "packed"
		case op == "DequantizeLinear":
			q.Format = "qdq"
			if i == 1 {
				q.Scales = int(count(p.Tensor.GetDims()))
			}
		case op == "Gather" && i == 0:
			t, err := m.Tensor(p.Tensor)
			if err != nil {
				return err
			}
			if dims := p.Tensor.GetDims(); len(dims) == 2 && dims[1] > 0 {
				q.Bits = int(8 / dims[1])
			}
			for _, v := range t.Float {
				if l := int(v); !slices.Contains(q.Levels, l) {
					q.Levels = append(q.Levels, l)
				}
			}
			slices.Sort(q.Levels)
		case op == "Mul":
			q.Scales = int(count(p.Tensor.GetDims()))
		}
		return nil
	})
}
