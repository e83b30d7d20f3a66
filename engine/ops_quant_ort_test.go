//go:build cgo

package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestQuantizeLinearAgainstOnnxruntime runs every qdqCase in the engine and in
// onnxruntime 1.30: per-tensor (opset 10 and later), per-axis with positive, negative and
// default axes, uint8 with zero points, int4/uint4 stored packed (opset 21), output_dtype
// without a zero point, blocked quantization with a short last block, and int16. The
// quantized integers must be equal, and the dequantized floats bit-identical: both
// runtimes compute round-half-even(x / scale) + zp with a float32 division and
// (q − zp) · scale with one float32 rounding.
func TestQuantizeLinearAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(12, 2))
	for _, c := range qdqCases() {
		t.Run(c.name, func(t *testing.T) {
			x, w := c.inputs(r)
			m := c.model(w)
			recordPassed(t, opsCovered.ort, m.Proto)
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: c.shape, Data: x}})
			if err != nil {
				t.Fatalf("%v: onnxruntime: %v", c, err)
			}
			g := mustBuild(t, m)
			shape := make([]int, len(c.shape))
			for i, d := range c.shape {
				shape[i] = int(d)
			}
			got, err := g.Forward(nil, NewFloat(shape, x))
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range ref {
				var want *Tensor
				if o.Int64 != nil {
					want = NewInt(shape, o.Int64)
				} else {
					want = NewFloat(shape, o.Data)
				}
				if err := closeTensors(got[i], want, 0, 0); err != nil {
					t.Errorf("%v: output %s: %v", c, o.Name, err)
				}
			}
			// The stored weight must come back as its levels: onnxruntime read the same
			// bytes, so this checks onnxio's packed 4-bit decoding too.
			lo, hi, _, _ := quantRange(c.qtype)
			if q := got[1].I; slices.Min(q) < int64(lo) || slices.Max(q) > int64(hi) {
				t.Errorf("%v: quantized values %d..%d outside %v..%v", c, slices.Min(q), slices.Max(q), lo, hi)
			}
		})
	}
}

// TestBlockedInt4MatMulAgainstOnnxruntime: y = x · DequantizeLinear(w) with w INT4 in
// blocks of 16 along the reduction axis, the pattern onnxruntime fuses into MatMulNBits.
// With session.qdq_matmulnbits_accuracy_level=1 onnxruntime keeps the activations in
// float32 and must agree with the engine within float32 summation order; its default
// level quantizes the activations to int8 too, and must not.
func TestBlockedInt4MatMulAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	const k, n, batch, block = 64, 8, 3, 16
	r := rand.New(rand.NewPCG(21, 4))
	w := make([]int64, k*n)
	for i := range w {
		w[i] = int64(r.IntN(16)) - 8
	}
	scale := make([]float32, k/block*n)
	for i := range scale {
		scale[i] = float32(0.01 + 0.1*r.Float64())
	}
	x := make([]float32, batch*k)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	f := onnxpb.TensorProto_FLOAT
	m := &onnxio.Model{Name: "matmulnbits.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(10),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(21)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("matmulnbits"),
			Node: []*onnxpb.NodeProto{
				gNode("DequantizeLinear", []string{"w", "s"}, []string{"wf"}, attrI("axis", 0), attrI("block_size", block)),
				gNode("MatMul", []string{"x", "wf"}, []string{"y"}),
			},
			Initializer: []*onnxpb.TensorProto{intTensor("w", onnxpb.TensorProto_INT4, []int64{k, n}, w), onnxio.FloatTensor("s", []int64{k / block, n}, scale)},
			Input:       []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{batch, k})},
			Output:      []*onnxpb.ValueInfoProto{typedValue("y", f, []int64{batch, n})},
		},
	}}
	recordPassed(t, opsCovered.ort, m.Proto)
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mustBuild(t, m).Forward(nil, NewFloat([]int{batch, k}, x))
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range []string{"", "1"} {
		opts := ortref.Options{}
		if level != "" {
			opts.Config = map[string]string{"session.qdq_matmulnbits_accuracy_level": level}
		}
		s, err := ortref.NewSession(b, opts)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := s.Run([]ortref.Tensor{{Name: "x", Shape: []int64{batch, k}, Data: x}})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		err = closeTensors(got[0], NewFloat([]int{batch, n}, ref[0].Data), 1e-5, 1e-5)
		if level == "" {
			// What the README says of onnxruntime 1.30, and the proof that the Config
			// entry reaches the session: without it the fused kernel rounds x to int8.
			if err == nil {
				t.Error("onnxruntime's default accuracy level computes the float product; the README's advice to set accuracy level 1 is out of date")
			}
			t.Logf("onnxruntime's default accuracy level against the engine: %v", err)
			continue
		}
		if err != nil {
			t.Errorf("accuracy level %s: %v", level, err)
		}
	}
}
