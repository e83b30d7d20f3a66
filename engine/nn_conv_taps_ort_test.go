//go:build cgo

package engine

import "testing"

// TestConvTapsAgainstOnnxruntime runs ResNet-18's small-plane layers at 32 px and batch
// 32 (2 × 2 planes of 256 channels, 4 × 4 of 128, the stride-2 4 × 4 → 2 × 2 one), and
// tapsCases, as one-node models (convOnnxruntime: weight and bias initializers, frozen,
// so the taps path runs) in onnxruntime 1.30 and in the engine.
func TestConvTapsAgainstOnnxruntime(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the taps path does not run")
	}
	cases := []convCase{
		{name: "resnet18_layer3_2x2", x: []int{32, 256, 2, 2}, w: []int{256, 256, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "resnet18_layer2_4x4", x: []int{32, 128, 4, 4}, w: []int{128, 128, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
		{name: "resnet18_layer3_down", x: []int{32, 128, 4, 4}, w: []int{256, 128, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true},
	}
	for _, tc := range tapsCases {
		cases = append(cases, tc.convCase)
	}
	// Sums of up to 9·256 products of values in [−1, 1], rounded in other orders
	// (onnxruntime's over every tap, padding included).
	convCasesAgainstOnnxruntime(t, cases, 43, 1e-4, func(t *testing.T, c convCase, n *Node, in []*Tensor) {
		k := buildKernel(t, n).(*convKernel)
		d, err := k.dims(c.x, c.w, n.Optional(in, 2))
		if err != nil {
			t.Fatal(err)
		}
		w := *in[1]
		w.param = &Param{Name: "w", Value: &w}
		if d, wt := k.trimmed(d, &w); !k.tapsOK(&d, wt) {
			t.Fatal("the taps path does not take this case")
		}
	})
}
