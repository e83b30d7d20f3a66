//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestResizeAgainstOnnxruntime compares every case of resizeCases with onnxruntime 1.30.
// The conformance suite has no test of the forms PyTorch emits (asymmetric + floor,
// pytorch_half_pixel with scales), of opsets 18–19 or of Upsample-7.
func TestResizeAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(3, 17))
	for _, c := range resizeCases() {
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
			want := make([]int, len(ref[0].Shape))
			for i, d := range ref[0].Shape {
				want[i] = int(d)
			}
			// onnxruntime computes coordinates and weights in float32, qtool in float64
			// rounded once to float32: what is left is a few ulps of |x| ≤ 2.
			if err := closeTensors(got[0], NewFloat(want, ref[0].Data), 1e-6, 1e-6); err != nil {
				t.Error(err)
			}
		})
	}
}
