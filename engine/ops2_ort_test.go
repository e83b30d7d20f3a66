//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestOpsAgainstOnnxruntime compares ops whose conformance node tests qtool cannot run
// (CumSum's are all in double; Gelu has none in the installed suite) with onnxruntime
// 1.30 on float32 data, in each attribute form exporters emit.
func TestOpsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	axis := func(a int64) *onnxpb.TensorProto { return onnxio.Int64Tensor("a", nil, []int64{a}) }
	cases := []struct {
		name  string
		opset int64
		node  *onnxpb.NodeProto
		shape []int64
		inits []*onnxpb.TensorProto
	}{
		{"CumSum/axis1", 14, gNode("CumSum", []string{"x", "a"}, []string{"y"}), []int64{3, 5, 4}, []*onnxpb.TensorProto{axis(1)}},
		{"CumSum/exclusive", 14, gNode("CumSum", []string{"x", "a"}, []string{"y"}, attrI("exclusive", 1)), []int64{3, 5, 4}, []*onnxpb.TensorProto{axis(-1)}},
		{"CumSum/reverse", 14, gNode("CumSum", []string{"x", "a"}, []string{"y"}, attrI("reverse", 1)), []int64{6, 7}, []*onnxpb.TensorProto{axis(0)}},
		{"CumSum/exclusive-reverse", 11, gNode("CumSum", []string{"x", "a"}, []string{"y"}, attrI("exclusive", 1), attrI("reverse", 1)), []int64{2, 3, 9}, []*onnxpb.TensorProto{axis(2)}},
		{"Gelu/none", 20, gNode("Gelu", []string{"x"}, []string{"y"}), []int64{4, 50}, nil},
		{"Gelu/tanh", 20, gNode("Gelu", []string{"x"}, []string{"y"}, attrS("approximate", "tanh")), []int64{4, 50}, nil},
	}
	r := rand.New(rand.NewPCG(5, 9))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := oneNodeAgainstOnnxruntime(t, r, c.opset, c.node, c.shape, c.inits)
			// Both sum in float32 in the same order and evaluate Gelu in at least
			// float32; what is left is the last bits of erf and tanh.
			if err := closeTensors(got, want, 1e-6, 1e-6); err != nil {
				t.Error(err)
			}
		})
	}
}
