//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestFuseProjectionAgainstOnnxruntime runs projections joined to depthwise bands
// (projectModel: MobileNetV2's first two blocks at 112 × 112, with and without the
// expansion, folded BatchNormalizations, and with the bands lowered to a few rows of a
// smaller plane, SiLU before a Relu projection) in the engine with two workers and in
// onnxruntime 1.30, which runs its own kernels on the same graph.
func TestFuseProjectionAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for i, c := range []struct {
		name                string
		b                   projectBlock
		bandAbove, bandRows int
	}{
		{"mv2_block1", projectBlock{x: []int{2, 32, 112, 112}, M: 32, K: 3, stride: 1, act: "Clip", P: 16, bn: true}, 0, 0},
		{"mv2_block2", projectBlock{x: []int{2, 16, 112, 112}, E: true, M: 96, K: 3, stride: 2, act: "Clip", P: 24}, 0, 0},
		{"rows3_5x5_stride2_silu_relu", projectBlock{x: []int{3, 8, 43, 38}, E: true, M: 32, K: 5, stride: 2, act: "SiLU", pact: "Relu", P: 20, bn: true}, 256, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(61, uint64(i)))
			m := projectModel(r, c.b)
			x := nntRand(r, c.b.x, -2, 2)
			ref := ortOutputs(t, m, x)
			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			g.expandBandAbove, g.expandBandRows = c.bandAbove, c.bandRows
			got, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			if convDirectOK() && dwPlaneFast() && g.last.project != 1 {
				t.Fatalf("%d projections joined, want 1", g.last.project)
			}
			// Sums of up to 25 + 96 products in other orders, BatchNormalizations folded
			// into the weights.
			if err := closeTensors(got[0], ref[0], 1e-4, 1e-4); err != nil {
				t.Error(err)
			}
		})
	}
}
