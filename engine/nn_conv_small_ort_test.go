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

// TestConvKernelBeyondImageAgainstOnnxruntime runs every third small-map case (and all
// 1-D, 3-D and auto_pad ones) as a one-node model, weight and bias as initializers, in
// onnxruntime 1.30 and in the engine with two workers.
func TestConvKernelBeyondImageAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	cases := smallMapCases()
	for i, c := range cases {
		if i%3 != 0 && len(c.x) == 4 && c.autoPad == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(4, uint64(i)))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			names := []string{"x", "w", "b"}[:len(in)]
			dims := func(s []int) []int64 {
				d := make([]int64, len(s))
				for j, v := range s {
					d[j] = int64(v)
				}
				return d
			}
			var inits []*onnxpb.TensorProto
			for j := 1; j < len(in); j++ {
				inits = append(inits, onnxio.FloatTensor(names[j], dims(in[j].Shape), in[j].F))
			}
			m := gModel(11, []*onnxpb.NodeProto{gNode("Conv", names, []string{"y"}, n.Proto.Attribute...)},
				[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, dims(c.x)...)}, []string{"y"}, inits...)
			m.Proto.Graph.Output[0].Type = gInputAny("y", onnxpb.TensorProto_FLOAT).Type
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: dims(c.x), Data: in[0].F}})
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			got, err := g.Forward(nil, in[0])
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int, len(ref[0].Shape))
			for j, d := range ref[0].Shape {
				want[j] = int(d)
			}
			// Sums of at most 2·25 products of values in [−1, 1], in other orders.
			if err := closeTensors(got[0], NewFloat(want, ref[0].Data), 1e-5, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
