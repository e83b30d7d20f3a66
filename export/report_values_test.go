package export

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestValuesDifferIgnoresRepresentation: a kept tensor rewritten from typed float_data to
// raw_data with the same values is not a change; a different value or shape is.
func TestValuesDifferIgnoresRepresentation(t *testing.T) {
	m := &onnxio.Model{Name: "m.onnx"}
	typed := &onnxpb.TensorProto{Name: proto.String("r"), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), FloatData: []float32{0.5, -2}, Dims: []int64{2}}
	raw := onnxio.FloatTensor("r", []int64{2}, []float32{0.5, -2})
	if valuesDiffer(m, m, typed, raw) {
		t.Error("same values in another representation reported as changed")
	}
	if !valuesDiffer(m, m, typed, onnxio.FloatTensor("r", []int64{2}, []float32{0.5, -2.5})) {
		t.Error("a changed value was not reported")
	}
	if !valuesDiffer(m, m, typed, onnxio.FloatTensor("r", []int64{1, 2}, []float32{0.5, -2})) {
		t.Error("a changed shape was not reported")
	}
}
