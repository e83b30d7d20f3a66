// Package papermlp builds the paper's MNIST network as an ONNX model, at any width:
// Dropout 0.2, then 3 × [Gemm, BatchNormalization, Relu, Dropout 0.5], then Gemm and
// BatchNormalization, the architecture of testmodels/fmnist-mlp.onnx (width 256) and of
// the paper's experiment (width 4096, 36.8 M parameters). Benchmarks and tests use it to
// get the full-size network without shipping a 147 MB file.
package papermlp

import (
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// PaperWidth is the hidden width of the paper's MNIST network.
const PaperWidth = 4096

// New returns the network at the given hidden width with PyTorch's default
// initialisation of Linear layers, U(−1/√in, 1/√in) for weights and biases, drawn from a
// stream seeded with seed; BatchNorm starts at scale 1, shift 0, mean 0, variance 1.
// Input "input" is [batch, 784], output "logits" is [batch, 10]; opset 15, IR 8.
func New(width int, seed uint64) *onnxio.Model {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var nodes []*onnxpb.NodeProto
	var inits []*onnxpb.TensorProto
	node := func(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) {
		nodes = append(nodes, &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(op + "_" + out), Input: in, Output: []string{out}, Attribute: attrs})
	}
	fill := func(n int, v float32) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	uniform := func(n int, bound float64) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32((2*r.Float64() - 1) * bound)
		}
		return s
	}
	dropout := func(in, out string, ratio float32) {
		inits = append(inits, onnxio.FloatTensor(out+"_ratio", nil, []float32{ratio}))
		node("Dropout", []string{in, out + "_ratio"}, out)
	}
	dropout("input", "drop0", 0.2)
	x := "drop0"
	sizes := []int{784, width, width, width, 10}
	for l := 1; l < len(sizes); l++ {
		in, out := sizes[l-1], sizes[l]
		bound := 1 / math.Sqrt(float64(in))
		fc, bn := fmt.Sprintf("fc%d", l), fmt.Sprintf("bn%d", l)
		inits = append(inits,
			onnxio.FloatTensor(fc+".weight", []int64{int64(out), int64(in)}, uniform(in*out, bound)),
			onnxio.FloatTensor(fc+".bias", []int64{int64(out)}, uniform(out, bound)))
		node("Gemm", []string{x, fc + ".weight", fc + ".bias"}, fc,
			&onnxpb.AttributeProto{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)})
		inits = append(inits,
			onnxio.FloatTensor(bn+".weight", []int64{int64(out)}, fill(out, 1)),
			onnxio.FloatTensor(bn+".bias", []int64{int64(out)}, fill(out, 0)),
			onnxio.FloatTensor(bn+".running_mean", []int64{int64(out)}, fill(out, 0)),
			onnxio.FloatTensor(bn+".running_var", []int64{int64(out)}, fill(out, 1)))
		y := bn
		if l == len(sizes)-1 {
			y = "logits"
		}
		node("BatchNormalization", []string{fc, bn + ".weight", bn + ".bias", bn + ".running_mean", bn + ".running_var"}, y,
			floatAttr("epsilon", 1e-5), floatAttr("momentum", 0.9))
		if l < len(sizes)-1 {
			relu, drop := fmt.Sprintf("relu%d", l), fmt.Sprintf("drop%d", l)
			node("Relu", []string{y}, relu)
			dropout(relu, drop, 0.5)
			x = drop
		}
	}
	return &onnxio.Model{Name: fmt.Sprintf("paper-mlp-%d.onnx", width), Proto: &onnxpb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("qtool papermlp"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("mlp"), Node: nodes, Initializer: inits,
			Input: []*onnxpb.ValueInfoProto{batchInput("input", 784)}, Output: []*onnxpb.ValueInfoProto{batchInput("logits", 10)}},
	}}
}

func floatAttr(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

// batchInput declares a float tensor [batch, d] with a symbolic batch dimension.
func batchInput(name string, d int64) *onnxpb.ValueInfoProto {
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: &onnxpb.TensorShapeProto{
			Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}},
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}},
			}}}}}}
}
