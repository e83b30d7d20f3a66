package engine

import (
	"fmt"
	"testing"
)

// TestTransposeSplit checks Transpose on outputs large enough to be split over the
// workers (the first output axis in chunks) against index arithmetic, for 1 to 3
// workers, float32 and int64, with the last axis moved and kept.
func TestTransposeSplit(t *testing.T) {
	shape := []int{6, 40, 30, 20}
	n := numel(shape)
	f, iv := make([]float32, n), make([]int64, n)
	for i := range n {
		f[i], iv[i] = float32(i), int64(i)
	}
	for _, perm := range [][]int64{{1, 0, 2, 3}, {3, 2, 0, 1}, {0, 2, 1, 3}} {
		for _, workers := range []int{1, 2, 3} {
			for _, x := range []*Tensor{NewFloat(shape, f), {DType: Int64, Shape: shape, I: iv}} {
				t.Run(fmt.Sprint(perm, workers, x.DType), func(t *testing.T) {
					out := runForward(t, buildKernel(t, testNode("Transpose", 13, names(1), attrInts("perm", perm...))), []*Tensor{x}, workers)[0]
					os := out.Shape
					if numel(os) < 2*viewSplit {
						t.Fatal("case too small to split")
					}
					in := stridesOf(nil, shape)
					var o [4]int
					for k := range n {
						r := k
						for d := 3; d >= 0; d-- {
							o[d] = r % os[d]
							r /= os[d]
						}
						src := 0
						for d, p := range perm {
							src += o[d] * in[p]
						}
						if got := elemFloat(out, k); got != float64(src) {
							t.Fatalf("output %v is %v, want input element %d", o, got, src)
						}
					}
				})
			}
		}
	}
}
