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
			got, want := oneNodeAgainstOnnxruntime(t, r, c.opset, c.node, c.shape, c.inits)
			// onnxruntime computes coordinates and weights in float32, qtool in float64
			// rounded once to float32: what is left is a few ulps of |x| ≤ 2.
			if err := closeTensors(got, want, 1e-6, 1e-6); err != nil {
				t.Error(err)
			}
		})
	}
}

// oneNodeAgainstOnnxruntime runs the one-node model node(x) (opset, initializers inits) on
// random x of shape in [−2, 2) in qtool and in onnxruntime, records the node's op as
// covered by onnxruntime if t passes, and returns qtool's output and onnxruntime's.
func oneNodeAgainstOnnxruntime(t *testing.T, r *rand.Rand, opset int64, node *onnxpb.NodeProto, shape []int64, inits []*onnxpb.TensorProto) (got, want *Tensor) {
	t.Helper()
	m := gModel(opset, []*onnxpb.NodeProto{node}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, shape...)}, []string{"y"}, inits...)
	m.Proto.Graph.Output[0].Type = gInputAny("y", onnxpb.TensorProto_FLOAT).Type
	recordPassed(t, opsCovered.ort, m.Proto)
	x := make([]float32, numel64(shape))
	for i := range x {
		x[i] = float32(4 * (r.Float64() - 0.5))
	}
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: shape, Data: x}})
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	in := make([]int, len(shape))
	for i, d := range shape {
		in[i] = int(d)
	}
	outs, err := mustBuild(t, m).Forward(nil, NewFloat(in, x))
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]int, len(ref[0].Shape))
	for i, d := range ref[0].Shape {
		ws[i] = int(d)
	}
	return outs[0], NewFloat(ws, ref[0].Data)
}
