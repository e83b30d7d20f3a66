//go:build cgo

package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestHardSwishPairOnnxruntime: onnxruntime runs the HardSigmoid → Mul pairs as written;
// the engine, which runs them as HardSwish, agrees within float rounding.
func TestHardSwishPairOnnxruntime(t *testing.T) {
	ortref.Require(t)
	x := nntRand(rand.New(rand.NewPCG(5, 5)), []int{4, 3, 9, 9}, -4, 4)
	x.F[0], x.F[1] = -3, 3
	m := hardSwishPairs(1.0 / 6)
	if ops := graphOps(mustBuild(t, m)); ops["HardSwish"] != 2 {
		t.Fatalf("graph runs %v, want two HardSwish", ops)
	}
	// Normwise, as TestMatMulNBitsAgainstOnnxruntime: the outputs are sums of 54 products
	// of values up to about a hundred (max |y| is 132), and float32 summation order moves an
	// output near zero by a few ulps of the layer's scale, not of its own (2.1e-5 on 0.727
	// with the portable kernels, -tags purego).
	compareWithOrtNormwise(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{4, 3, 9, 9}, Data: x.F}}, []*Tensor{x}, 1e-5)
}

// compareWithOrtNormwise is compareWithOrt with each output's absolute tolerance tol times
// its largest magnitude in onnxruntime's result (and the relative tolerance tol).
func compareWithOrtNormwise(t *testing.T, m *onnxio.Model, ref []ortref.Tensor, ours []*Tensor, tol float64) {
	t.Helper()
	compareWithOrtTol(t, m, ref, ours, func(want []float32) (float64, float64) {
		norm := 0.0
		for _, v := range want {
			norm = max(norm, math.Abs(float64(v)))
		}
		return tol * norm, tol
	})
}

// TestLayerNormPatternOnnxruntime: onnxruntime runs the decomposed layer normalisations;
// the engine, which runs them as LayerNormalization, agrees within float rounding.
func TestLayerNormPatternOnnxruntime(t *testing.T) {
	ortref.Require(t)
	x := nntRand(rand.New(rand.NewPCG(4, 4)), []int{3, 5, 12}, -3, 5)
	m := layerNormPattern(false)
	if ops := graphOps(mustBuild(t, m)); ops["LayerNormalization"] != 2 {
		t.Fatalf("graph runs %v, want two LayerNormalization", ops)
	}
	compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{3, 5, 12}, Data: x.F}}, []*Tensor{x}, 1e-5)
}

// TestSiLUPairOnnxruntime: onnxruntime runs PyTorch's SiLU as written (Sigmoid, then Mul
// by its input, in either operand order) and com.microsoft QuickGelu itself; the engine,
// which runs the pairs as QuickGelu, agrees within float rounding. A Sigmoid with a
// second reader stays a pair.
func TestSiLUPairOnnxruntime(t *testing.T) {
	ortref.Require(t)
	x := nntRand(rand.New(rand.NewPCG(5, 6)), []int{4, 3, 9, 9}, -9, 9)
	nodes := []*onnxpb.NodeProto{
		gNode("Sigmoid", []string{"x"}, []string{"s1"}), gNode("Mul", []string{"x", "s1"}, []string{"h1"}),
		gNode("Sigmoid", []string{"h1"}, []string{"s2"}), gNode("Mul", []string{"s2", "h1"}, []string{"h2"}),
		gNode("Sigmoid", []string{"h2"}, []string{"s3"}), gNode("Mul", []string{"h2", "s3"}, []string{"h3"}),
		gNode("Add", []string{"h3", "s3"}, []string{"y"}),
	}
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 4, 3, 9, 9)}, []string{"y"})
	if ops := graphOps(mustBuild(t, m)); ops["QuickGelu"] != 2 || ops["Sigmoid"] != 1 {
		t.Fatalf("graph runs %v, want two QuickGelu and one Sigmoid", ops)
	}
	compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{4, 3, 9, 9}, Data: x.F}}, []*Tensor{x}, 1e-5)
	for _, alpha := range []float32{1, 1.702} {
		q := gNode("QuickGelu", []string{"x"}, []string{"y"}, attrF("alpha", alpha))
		q.Domain = proto.String(MSDomain)
		qm := gModel(13, []*onnxpb.NodeProto{q}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 4, 3, 9, 9)}, []string{"y"})
		qm.Proto.OpsetImport = append(qm.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(MSDomain), Version: proto.Int64(1)})
		recordPassed(t, opsCovered.ort, qm.Proto)
		compareWithOrt(t, qm, []ortref.Tensor{{Name: "x", Shape: []int64{4, 3, 9, 9}, Data: x.F}}, []*Tensor{x}, 1e-5)
	}
}
