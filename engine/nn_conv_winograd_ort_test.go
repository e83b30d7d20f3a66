//go:build cgo

package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestConvWinogradAgainstOnnxruntime runs winoCasesHere as one-node models (convOnnxruntime),
// weight and bias as initializers: frozen, as the Winograd path runs inference.
func TestConvWinogradAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for i, c := range winoCasesHere() {
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
			if k.wino4OK(&d, weightKey{p: &Param{}}) {
				// Frozen as initializers, this case runs in 4 × 4 tiles: their bound.
				wino4AgainstOnnxruntime(t, c, n, in)
				return
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

// TestConvWinograd4AgainstOnnxruntime runs wino4Cases as one-node models against
// onnxruntime, whose direct sums round differently: each output within the F(4×4)
// path's bound (wino4Mag, as in TestConvWinograd4) plus the direct sum's own
// (9·C products and sums, 2⁻²⁴ each, of Σ|w|·|x| over the window).
func TestConvWinograd4AgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for i, c := range wino4Cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(43, uint64(i)))
			n, _, _, _ := c.node(11)
			wino4AgainstOnnxruntime(t, c, n, c.inputs(r))
		})
	}
}

// wino4AgainstOnnxruntime runs c against onnxruntime and checks every output within the
// F(4×4) path's bound (wino4Mag) plus the direct sum's own.
func wino4AgainstOnnxruntime(t *testing.T, c convCase, n *Node, in []*Tensor) {
	t.Helper()
	_, strides, dil, pads := c.node(11)
	got, want := convOnnxruntime(t, n, c.x, in)
	mag := wino4Mag(to64(in[0].F), c.x, to64(in[1].F), c.w, pads)
	direct, _ := refConv(absAll(to64(in[0].F)), c.x, absAll(to64(in[1].F)), c.w, nil, 1, strides, dil, pads)
	C := float64(c.x[1])
	bad := 0
	for j, v := range got.F {
		tol := (C+16)*0x1p-24*mag[j] + 9*C*0x1p-24*direct[j] + 4*0x1p-24*(math.Abs(float64(want.F[j]))+1)
		if d := math.Abs(float64(v) - float64(want.F[j])); !(d <= tol) {
			if bad < 5 {
				t.Errorf("Y[%d] = %v, onnxruntime %v (tolerance %.3g)", j, v, want.F[j], tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d values differ", bad, len(got.F))
	}
}
