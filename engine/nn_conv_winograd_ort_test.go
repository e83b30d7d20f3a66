//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestConvWinogradAgainstOnnxruntime runs winoCases as one-node models (convOnnxruntime),
// weight and bias as initializers: frozen, as the Winograd path runs inference.
func TestConvWinogradAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
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
			got, want := convOnnxruntime(t, n, c.x, in)
			// Sums of up to 9·128 products of values in [−1, 1] (outputs of magnitude up to
			// a few tens here), rounded in other orders: onnxruntime's direct sums, the
			// engine's over 16 transformed terms a channel. TestConvWinograd bounds the
			// engine's error per element against float64; this checks the same outputs
			// against an independent runtime.
			if err := closeTensors(got, want, 1e-4, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
