//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestConvNarrowAgainstOnnxruntime runs narrowCases as one-node models (convOnnxruntime:
// weight and bias initializers, frozen) in onnxruntime 1.30 and in the engine. Which of
// them take the narrow path depends on the CPU (with AVX-512 the direct path takes the
// planes of 16 pixels or more at batch 1); on the AVX2 path all do.
func TestConvNarrowAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for i, c := range narrowCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(47, uint64(i)))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			got, want := convOnnxruntime(t, n, c.x, in)
			// Sums of up to 9·24 products of values in [−1, 1] in other orders.
			if err := closeTensors(got, want, 1e-5, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
