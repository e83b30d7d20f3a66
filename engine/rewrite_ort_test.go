//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestHardSwishPairOnnxruntime: onnxruntime runs the HardSigmoid → Mul pairs as written;
// the engine, which runs them as HardSwish, agrees within float rounding.
func TestHardSwishPairOnnxruntime(t *testing.T) {
	ortref.Require(t)
	x := nntRand(rand.New(rand.NewPCG(5, 5)), []int{4, 3, 9, 9}, -4, 4)
	x.F[0], x.F[1] = -3, 3
	m := hardSwishPairs(1.0 / 6)
	if ops := graphOps(mustBuild(t, m)); ops["HardSwish"] != 2 {
		t.Fatalf("graph runs %v, want two HardSwish", ops)
	}
	compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{4, 3, 9, 9}, Data: x.F}}, []*Tensor{x}, 1e-5)
}

// TestLayerNormPatternOnnxruntime: onnxruntime runs the decomposed layer normalisations;
// the engine, which runs them as LayerNormalization, agrees within float rounding.
func TestLayerNormPatternOnnxruntime(t *testing.T) {
	ortref.Require(t)
	x := nntRand(rand.New(rand.NewPCG(4, 4)), []int{3, 5, 12}, -3, 5)
	m := layerNormPattern(false)
	if ops := graphOps(mustBuild(t, m)); ops["LayerNormalization"] != 2 {
		t.Fatalf("graph runs %v, want two LayerNormalization", ops)
	}
	compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{3, 5, 12}, Data: x.F}}, []*Tensor{x}, 1e-5)
}
