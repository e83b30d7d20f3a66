//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
)

// TestEinsumAgainstOnnxruntime compares every case of einsumCases with onnxruntime
// 1.30: the conformance suite's Einsum tests are all in double, which qtool skips.
func TestEinsumAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(8, 21))
	for _, c := range einsumCases() {
		if c.noORT {
			continue
		}
		t.Run(c.eq, func(t *testing.T) {
			m, names := c.model()
			if c.scalar() {
				// ortref cannot return rank-0 outputs: both runtimes reshape to [1].
				gp := m.Proto.Graph
				gp.Node = append(gp.Node, gNode("Reshape", []string{"y", "one"}, []string{"z"}))
				gp.Initializer = append(gp.Initializer, ints("one", 1))
				gp.Output[0].Name = proto.String("z")
			}
			recordPassed(t, opsCovered.ort, m.Proto)
			var feeds []ortref.Tensor
			var ins []*Tensor
			for i, sh := range c.shapes {
				x := make([]float32, numel64(sh))
				for j := range x {
					x[j] = float32(4 * (r.Float64() - 0.5))
				}
				feeds = append(feeds, ortref.Tensor{Name: names[i], Shape: sh, Data: x})
				shape := make([]int, len(sh))
				for j, d := range sh {
					shape[j] = int(d)
				}
				ins = append(ins, NewFloat(shape, x))
			}
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ortref.Run(b, feeds)
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			got, err := mustBuild(t, m).Forward(nil, ins...)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int, len(ref[0].Shape))
			for i, d := range ref[0].Shape {
				want[i] = int(d)
			}
			// Sums of at most 12 products of |x| ≤ 2 in float32, in different orders.
			if err := closeTensors(got[0], NewFloat(want, ref[0].Data), 1e-5, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
