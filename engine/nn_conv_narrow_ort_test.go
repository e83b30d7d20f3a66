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
	// Sums of up to 9·24 products of values in [−1, 1] in other orders.
	convCasesAgainstOnnxruntime(t, narrowCases, 47, 1e-5, nil)
}

// convCasesAgainstOnnxruntime runs each case as a one-node model (convOnnxruntime) on
// inputs from the seed, and checks the engine's output against onnxruntime's within atol
// (absolute; 1e-5 relative). check, when not nil, is called first with the case and its
// inputs, to assert which path takes it.
func convCasesAgainstOnnxruntime(t *testing.T, cases []convCase, seed uint64, atol float64, check func(*testing.T, convCase, *Node, []*Tensor)) {
	ortref.Require(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			if check != nil {
				check(t, c, n, in)
			}
			got, want := convOnnxruntime(t, n, c.x, in)
			if err := closeTensors(got, want, atol, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
