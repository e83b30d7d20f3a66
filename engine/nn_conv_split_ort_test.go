//go:build cgo

package engine

import (
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	onnxpb "github.com/qtool/qtool/onnxio/onnxpb"
)

// TestBatchOneSplitsAgainstOnnxruntime runs, at batch 1 on two workers, the two splits
// that batch 1 takes since 2026-11-29 in the engine and in onnxruntime 1.30: a projection
// that adds a residual (Conv 1×1 + Add, split by pixels: MobileNetV2's 144 → 24 at
// 56 × 56) and a stem with a fused max pool (Conv 7×7 stride 2 + Relu + MaxPool, split by
// output channels: ResNet-18's at 32 px). The plans must fuse the steps as named.
func TestBatchOneSplitsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(47, 1))
	cases := []struct {
		name  string
		op    string // the fused step's ops
		m     *onnxio.Model
		x     []int
		extra []int // a second input's shape (the residual), or nil
	}{
		{"projection_residual", "Conv+Add", gModel(13, []*onnxpb.NodeProto{
			gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("kernel_shape", 1, 1)),
			gNode("Add", []string{"c", "res"}, []string{"y"}),
		}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 144, 56, 56), gInput("res", onnxpb.TensorProto_FLOAT, -1, 24, 56, 56)}, []string{"y"},
			onnxio.FloatTensor("w", []int64{24, 144, 1, 1}, gFloats(r, 24*144)), onnxio.FloatTensor("b", []int64{24}, gFloats(r, 24))),
			[]int{1, 144, 56, 56}, []int{1, 24, 56, 56}},
		{"stem_pool", "MaxPool", gModel(13, []*onnxpb.NodeProto{
			gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("kernel_shape", 7, 7), attrInts("strides", 2, 2), attrInts("pads", 3, 3, 3, 3)),
			gNode("Relu", []string{"c"}, []string{"a"}),
			gNode("MaxPool", []string{"a"}, []string{"y"}, attrInts("kernel_shape", 3, 3), attrInts("strides", 2, 2), attrInts("pads", 1, 1, 1, 1)),
		}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3, 32, 32)}, []string{"y"},
			onnxio.FloatTensor("w", []int64{64, 3, 7, 7}, gFloats(r, 64*147)), onnxio.FloatTensor("b", []int64{64}, gFloats(r, 64))),
			[]int{1, 3, 32, 32}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := proto.Marshal(c.m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ins := []*Tensor{nntRand(r, c.x, -2, 2)}
			if c.extra != nil {
				ins = append(ins, nntRand(r, c.extra, -2, 2))
			}
			var feeds []ortref.Tensor
			for i, in := range ins {
				dims := make([]int64, len(in.Shape))
				for j, d := range in.Shape {
					dims[j] = int64(d)
				}
				feeds = append(feeds, ortref.Tensor{Name: []string{"x", "res"}[i], Shape: dims, Data: in.F})
			}
			ref, err := ortref.Run(b, feeds)
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			g, err := Build(c.m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			p, err := g.makePlan(ins, false, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.steps) != 1 || !strings.Contains(p.steps[0].node.op, c.op) {
				t.Fatalf("the plan has %d steps, the first %q; want one with %s", len(p.steps), p.steps[0].node.op, c.op)
			}
			got, err := g.Forward(nil, ins...)
			if err != nil {
				t.Fatal(err)
			}
			if convDirectOK() {
				cb, ok := g.last.steps[0].node.k.(*convBNKernel)
				if !ok {
					t.Fatalf("the fused step runs %T", g.last.steps[0].node.k)
				}
				if n := cb.conv.direct.pixSplit + cb.conv.direct.poolParts; n != 1 {
					t.Fatalf("%d passes split by pixels or ahead of the pool, want 1", n)
				}
			}
			shape := make([]int, len(ref[0].Shape))
			for j, d := range ref[0].Shape {
				shape[j] = int(d)
			}
			// Sums of 144 and 147 products in other orders.
			if err := closeTensors(got[0], NewFloat(shape, ref[0].Data), 1e-4, 1e-4); err != nil {
				t.Error(err)
			}
		})
	}
}
