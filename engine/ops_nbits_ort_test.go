//go:build cgo

package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// nbitsCase is one MatMulNBits node: widths, optional inputs, a K that does or does not
// fill its last block, and A of rank 2 or 3.
type nbitsCase struct {
	bits, k, block int
	zp, bias       bool
	a              []int64 // A's shape; its last dimension is K
}

func (c nbitsCase) String() string {
	return fmt.Sprintf("bits=%d K=%d block=%d zp=%v bias=%v A=%v", c.bits, c.k, c.block, c.zp, c.bias, c.a)
}

// model builds the node with random codes, scales, zero points and bias; B and the zero
// points are packed as the contrib spec says: row n, block b, code j at bits j·bits of
// the block's bytes, least significant first.
func (c nbitsCase) model(r *rand.Rand) *onnxio.Model {
	const n = 5
	kb, blob := (c.k+c.block-1)/c.block, c.block*c.bits/8
	b := make([]int64, n*kb*blob)
	for row := range n {
		for k := range c.k {
			q := int64(r.IntN(1 << c.bits))
			bit := (k % c.block) * c.bits
			b[(row*kb+k/c.block)*blob+bit/8] |= q << (bit % 8)
		}
	}
	scales := make([]float32, n*kb)
	for i := range scales {
		scales[i] = float32(0.01 + r.Float64())
	}
	f := onnxpb.TensorProto_FLOAT
	inputs := []string{"a", "b", "s"}
	inits := []*onnxpb.TensorProto{intTensor("b", onnxpb.TensorProto_UINT8, []int64{n, int64(kb), int64(blob)}, b),
		onnxio.FloatTensor("s", []int64{n, int64(kb)}, scales)}
	if c.zp {
		row := (kb*c.bits + 7) / 8
		z := make([]int64, n*row)
		for i := range n {
			for blk := range kb {
				bit := blk * c.bits
				z[i*row+bit/8] |= int64(r.IntN(1<<c.bits)) << (bit % 8)
			}
		}
		inits = append(inits, intTensor("z", onnxpb.TensorProto_UINT8, []int64{n, int64(row)}, z))
		inputs = append(inputs, "z")
	}
	if c.bias {
		bias := make([]float32, n)
		for i := range bias {
			bias[i] = float32(r.NormFloat64())
		}
		for len(inputs) < 5 {
			inputs = append(inputs, "")
		}
		inits = append(inits, onnxio.FloatTensor("bias", []int64{n}, bias))
		inputs = append(inputs, "bias")
	}
	node := gNode("MatMulNBits", inputs, []string{"y"}, attrI("K", int64(c.k)), attrI("N", n), attrI("bits", int64(c.bits)),
		attrI("block_size", int64(c.block)), attrI("accuracy_level", 1))
	node.Domain = proto.String(MSDomain)
	out := append([]int64(nil), c.a...)
	out[len(out)-1] = n
	return &onnxio.Model{Name: "matmulnbits.onnx", Proto: &onnxpb.ModelProto{
		IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)},
			{Domain: proto.String(MSDomain), Version: proto.Int64(1)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("matmulnbits"), Node: []*onnxpb.NodeProto{node}, Initializer: inits,
			Input:  []*onnxpb.ValueInfoProto{typedValue("a", f, c.a)},
			Output: []*onnxpb.ValueInfoProto{typedValue("y", f, out)}},
	}}
}

// TestMatMulNBitsAgainstOnnxruntime runs MatMulNBits at every width onnxruntime's CPU
// kernel takes (2, 4, 8 bits), with and without zero points and bias, with a short last
// block, and on rank-3 A, in the engine and in onnxruntime 1.30 at accuracy level 1
// (float32 activations). They must agree within float32 summation order, normwise: 8-bit
// codes make sums of terms in the hundreds whose rounding is relative to the output's
// largest magnitude, not to a small entry's.
func TestMatMulNBitsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(16, 1))
	var cases []nbitsCase
	for _, bits := range []int{2, 4, 8} {
		for _, opt := range []struct{ zp, bias bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			cases = append(cases, nbitsCase{bits, 64, 16, opt.zp, opt.bias, []int64{3, 64}},
				nbitsCase{bits, 100, 32, opt.zp, opt.bias, []int64{2, 3, 100}})
		}
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			m := c.model(r)
			recordPassed(t, opsCovered.ort, m.Proto)
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			n := 1
			shape := make([]int, len(c.a))
			for i, d := range c.a {
				shape[i] = int(d)
				n *= int(d)
			}
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "a", Shape: c.a, Data: x}})
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			got, err := mustBuild(t, m).Forward(nil, NewFloat(shape, x))
			if err != nil {
				t.Fatal(err)
			}
			outShape := append([]int(nil), shape...)
			outShape[len(outShape)-1] = 5
			norm := 1.0
			for _, v := range ref[0].Data {
				norm = max(norm, math.Abs(float64(v)))
			}
			if err := closeTensors(got[0], NewFloat(outShape, ref[0].Data), 1e-5*norm, 0); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMatMulNBitsWidthsOnnxruntimeRefuses: the contrib spec allows 2 to 8 bits, but
// onnxruntime 1.30's CPU kernel takes only 2, 4 and 8; the engine refuses the others
// too, so that qtool never reports the accuracy of a file onnxruntime cannot load.
func TestMatMulNBitsWidthsOnnxruntimeRefuses(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(16, 2))
	for _, bits := range []int{3, 5, 6, 7} {
		m := nbitsCase{bits, 64, 16, false, false, []int64{3, 64}}.model(r)
		b, err := proto.Marshal(m.Proto)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ortref.NewSession(b, ortref.Options{}); err == nil {
			t.Errorf("bits=%d: onnxruntime loads it; the engine's refusal is out of date", bits)
		}
		if _, err := Build(m, Options{}); err == nil || !strings.Contains(err.Error(), "bits") {
			t.Errorf("bits=%d: Build gives %v, want a refusal naming bits", bits, err)
		}
	}
}
