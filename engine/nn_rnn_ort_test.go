//go:build cgo

package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestRNNAgainstOnnxruntime compares LSTM, GRU and RNN with onnxruntime 1.30 in the
// configurations the conformance node tests leave out: bidirectional and reverse runs
// with sequence_lens and initial states, peepholes, clip, input_forget, alternative
// activations and layout 1. onnxruntime's CPU kernels refuse layout 1, so its reference
// for a layout-1 node is the same node in layout 0 between Transposes; qtool runs the
// layout-1 node itself.
func TestRNNAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	acts := func(a ...string) *onnxpb.AttributeProto { return attrStrings("activations", a...) }
	cases := []rnnCase{
		{op: "LSTM", dir: "bidirectional", layout: 1, T: 5, N: 3, I: 4, H: 3, lens: []int64{5, 2, 4}, peephole: true},
		{op: "LSTM", dir: "bidirectional", T: 5, N: 3, I: 4, H: 3, lens: []int64{5, 0, 3}, peephole: true},
		{op: "LSTM", dir: "reverse", T: 6, N: 2, I: 3, H: 4, lens: []int64{3, 6},
			attrs: []*onnxpb.AttributeProto{attrF("clip", 0.7), attrI("input_forget", 1)}},
		{op: "LSTM", dir: "forward", layout: 1, T: 4, N: 2, I: 3, H: 2, noB: true,
			attrs: []*onnxpb.AttributeProto{acts("HardSigmoid", "LeakyRelu", "Softsign"), attrFloats("activation_alpha", 0.3, 0.05), attrFloats("activation_beta", 0.45)}},
		{op: "GRU", dir: "bidirectional", layout: 1, T: 5, N: 3, I: 4, H: 3, lens: []int64{1, 5, 3}},
		{op: "GRU", dir: "bidirectional", layout: 1, T: 5, N: 3, I: 4, H: 3, lens: []int64{4, 5, 2}, attrs: []*onnxpb.AttributeProto{attrI("linear_before_reset", 1)}},
		{op: "GRU", dir: "reverse", T: 4, N: 2, I: 3, H: 3, lens: []int64{2, 4},
			attrs: []*onnxpb.AttributeProto{attrF("clip", 0.5), acts("Sigmoid", "Relu")}},
		{op: "RNN", dir: "bidirectional", layout: 1, T: 5, N: 3, I: 4, H: 3, lens: []int64{5, 3, 1}},
		{op: "RNN", dir: "bidirectional", T: 4, N: 2, I: 3, H: 3, lens: []int64{4, 2},
			attrs: []*onnxpb.AttributeProto{acts("Affine", "Elu"), attrFloats("activation_alpha", 0.8, 0.5), attrFloats("activation_beta", 0.1)}},
	}
	r := rand.New(rand.NewPCG(11, 3))
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			in := c.inputs(r)
			qm, om := rnnModels(c, in)
			recordPassed(t, opsCovered.ort, qm.Proto)
			b, err := proto.Marshal(om.Proto)
			if err != nil {
				t.Fatal(err)
			}
			x := in[0]
			xs := []int64{int64(x.Shape[0]), int64(x.Shape[1]), int64(x.Shape[2])}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: xs, Data: x.F}})
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			got, err := mustBuild(t, qm).Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			for j, g := range got {
				shape := make([]int, len(ref[j].Shape))
				for i, d := range ref[j].Shape {
					shape[i] = int(d)
				}
				// Both evaluate the same float32 arithmetic; onnxruntime's sigmoid and
				// tanh are vectorised approximations accurate to a few ulps.
				if err := closeTensors(g, NewFloat(shape, ref[j].Data), 1e-5, 1e-5); err != nil {
					t.Errorf("output %d: %v", j, err)
				}
			}
		})
	}
}

// rnnModels returns the single-node model qtool runs, with every input but X an
// initializer, and onnxruntime's equivalent (in layout 0 between Transposes when the case
// uses layout 1).
func rnnModels(c rnnCase, in []*Tensor) (qtool, ort *onnxio.Model) {
	names := []string{"x", "w", "r", "b", "lens", "h0", "c0", "p"}
	var inits []*onnxpb.TensorProto
	nodeIn := make([]string, len(in))
	for i, v := range in {
		if v == nil {
			continue
		}
		nodeIn[i] = names[i]
		if i == 0 {
			continue
		}
		dims := make([]int64, len(v.Shape))
		for j, d := range v.Shape {
			dims[j] = int64(d)
		}
		if v.DType == Int64 {
			l := make([]int32, len(v.I))
			for j, e := range v.I {
				l[j] = int32(e)
			}
			inits = append(inits, &onnxpb.TensorProto{Name: proto.String(names[i]), Dims: dims,
				DataType: proto.Int32(int32(onnxpb.TensorProto_INT32)), Int32Data: l})
			continue
		}
		inits = append(inits, onnxio.FloatTensor(names[i], dims, v.F))
	}
	outs := []string{"y", "yh"}
	if c.op == "LSTM" {
		outs = append(outs, "yc")
	}
	x := in[0].Shape
	xIn := gInput("x", onnxpb.TensorProto_FLOAT, int64(x[0]), int64(x[1]), int64(x[2]))
	node := gNode(c.op, nodeIn, outs, c.node()...)
	qtool = gModel(14, []*onnxpb.NodeProto{node}, []*onnxpb.ValueInfoProto{xIn}, outs, inits...)
	if c.layout == 0 {
		return qtool, qtool
	}
	// Layout 0 between Transposes: X, initial_h and initial_c in, Y, Y_h and Y_c out.
	c0 := c
	c0.layout = 0
	perm := func(p ...int64) *onnxpb.AttributeProto { return attrInts("perm", p...) }
	var nodes []*onnxpb.NodeProto
	in0 := append([]string(nil), nodeIn...)
	for _, i := range []int{0, 5, 6} {
		if i < len(in0) && in0[i] != "" {
			in0[i] += "_t"
			nodes = append(nodes, gNode("Transpose", []string{nodeIn[i]}, []string{in0[i]}, perm(1, 0, 2)))
		}
	}
	out0 := make([]string, len(outs))
	for j, o := range outs {
		out0[j] = o + "_t"
	}
	nodes = append(nodes, gNode(c.op, in0, out0, c0.node()...))
	for j, o := range outs {
		p := []int64{1, 0, 2}
		if j == 0 {
			p = []int64{2, 0, 1, 3}
		}
		nodes = append(nodes, gNode("Transpose", []string{out0[j]}, []string{o}, perm(p...)))
	}
	ort = gModel(14, nodes, []*onnxpb.ValueInfoProto{xIn}, outs, inits...)
	ort.Name = fmt.Sprintf("%s-layout0", c.op)
	return qtool, ort
}
