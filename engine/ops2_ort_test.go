//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

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
			m := gModel(c.opset, []*onnxpb.NodeProto{c.node}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, c.shape...)}, []string{"y"}, c.inits...)
			m.Proto.Graph.Output[0].Type = gInputAny("y", onnxpb.TensorProto_FLOAT).Type
			recordPassed(t, opsCovered.ort, m.Proto)
			x := make([]float32, numel64(c.shape))
			for i := range x {
				x[i] = float32(4 * (r.Float64() - 0.5))
			}
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: c.shape, Data: x}})
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			shape := make([]int, len(c.shape))
			for i, d := range c.shape {
				shape[i] = int(d)
			}
			got, err := mustBuild(t, m).Forward(nil, NewFloat(shape, x))
			if err != nil {
				t.Fatal(err)
			}
			// Both sum in float32 in the same order and evaluate Gelu in at least
			// float32; what is left is the last bits of erf and tanh.
			if err := closeTensors(got[0], NewFloat(shape, ref[0].Data), 1e-6, 1e-6); err != nil {
				t.Error(err)
			}
		})
	}
}
