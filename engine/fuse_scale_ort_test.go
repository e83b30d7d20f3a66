//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestFuseScaleProjectAgainstOnnxruntime runs squeeze-excitation scalings joined to the
// projection after them (scaleModel: EfficientNet-B0's 1 152 → 320 at 7 × 7, 112 → 112
// at 14 × 14 with a residual and a BatchNormalization, a per-channel parameter scale in
// chunks of 48 pixels with Clip) in the engine with two workers and in onnxruntime 1.30.
func TestFuseScaleProjectAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for i, c := range []struct {
		name  string
		b     scaleBlock
		chunk int
	}{
		{"effnet_1152to320_7x7", scaleBlock{x: []int{2, 1152, 7, 7}, M: 320, se: true}, 0},
		{"effnet_112_14x14_res_bn", scaleBlock{x: []int{3, 112, 14, 14}, M: 112, se: true, res: true, bn: true}, 0},
		{"param_scale_clip_chunks", scaleBlock{x: []int{2, 24, 13, 17}, M: 20, act: "Clip", sFirst: true}, 48},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(79, uint64(i)))
			m := scaleModel(r, c.b)
			x := nntRand(r, c.b.x, -2, 2)
			ref := ortOutputs(t, m, x)
			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			g.scaleChunk = c.chunk
			got, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			if convDirectOK() && g.last.scaleProject != 1 {
				t.Fatalf("%d Muls joined, want 1", g.last.scaleProject)
			}
			// Sums of up to 1 152 products in other orders.
			if err := closeTensors(got[0], ref[0], 1e-4, 1e-4); err != nil {
				t.Error(err)
			}
		})
	}
}
