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

// TestConvWinogradAgainstOnnxruntime runs winoCases as one-node models, weight and bias as
// initializers (frozen, as the Winograd path runs inference), in onnxruntime 1.30 and in
// the engine with two workers.
func TestConvWinogradAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	dims := func(s []int) []int64 {
		d := make([]int64, len(s))
		for j, v := range s {
			d[j] = int64(v)
		}
		return d
	}
	for i, c := range winoCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(41, uint64(i)))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			k := buildKernel(t, n).(*convKernel)
			d, err := k.dims(c.x, c.w, n.Optional(in, 2))
			if err != nil {
				t.Fatal(err)
			}
			if !k.winogradOK(&d, nil) {
				t.Fatal("the Winograd path does not take this case")
			}
			names := []string{"x", "w", "b"}[:len(in)]
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
			// Sums of up to 9·64 products of values in [−1, 1] (outputs of magnitude up to
			// about 10 here), rounded in other orders: onnxruntime's direct sums, the
			// engine's over 16 transformed terms a channel. TestConvWinograd bounds the
			// engine's error per element against float64; this checks the same outputs
			// against an independent runtime.
			if err := closeTensors(got[0], NewFloat(want, ref[0].Data), 1e-4, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
