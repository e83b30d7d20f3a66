package engine

import (
	"fmt"
	"testing"
)

// TestSliceSplit checks Slice on windows large enough to be split over the workers
// (along the output's first axis longer than 1) against index arithmetic, for 1 to 3
// workers, float32 and int64: ShuffleNetV2's channel halves at batch 4 and 1, a stepped
// window, and a reversed one.
func TestSliceSplit(t *testing.T) {
	cases := []struct {
		shape                     []int
		starts, ends, axes, steps []int64
	}{
		{[]int{4, 116, 28, 28}, []int64{58}, []int64{116}, []int64{1}, []int64{1}},
		{[]int{1, 116, 28, 28}, []int64{0}, []int64{58}, []int64{1}, []int64{1}},
		{[]int{1, 64, 40, 30}, []int64{1, 3}, []int64{60, 30}, []int64{1, 3}, []int64{2, 1}},
		{[]int{3, 50, 40, 20}, []int64{-1, 5}, []int64{-100, 35}, []int64{1, 2}, []int64{-1, 1}},
	}
	for _, c := range cases {
		n := numel(c.shape)
		f, iv := make([]float32, n), make([]int64, n)
		for i := range n {
			f[i], iv[i] = float32(i), int64(i)
		}
		ints := func(v []int64) *Tensor { return NewInt([]int{len(v)}, v) }
		for _, workers := range []int{1, 2, 3} {
			for _, x := range []*Tensor{NewFloat(c.shape, f), NewInt(c.shape, iv)} {
				t.Run(fmt.Sprint(c.shape, c.starts, workers, x.DType), func(t *testing.T) {
					in := []*Tensor{x, ints(c.starts), ints(c.ends), ints(c.axes), ints(c.steps)}
					out := runForward(t, buildKernel(t, testNode("Slice", 13, names(5))), in, workers)[0]
					if numel(out.Shape) < 2*viewSplit {
						t.Fatal("case too small to split")
					}
					// The expected start and step per axis, written out from the spec.
					start, step := make([]int, 4), []int{1, 1, 1, 1}
					for i, a := range c.axes {
						s, d := int(c.starts[i]), c.shape[a]
						if s < 0 {
							s += d
						}
						start[a], step[a] = min(max(s, 0), d-1), int(c.steps[i])
					}
					in0 := stridesOf(nil, c.shape)
					var o [4]int
					for k := range numel(out.Shape) {
						r := k
						for d := 3; d >= 0; d-- {
							o[d] = r % out.Shape[d]
							r /= out.Shape[d]
						}
						src := 0
						for d := range 4 {
							src += (start[d] + o[d]*step[d]) * in0[d]
						}
						if got := elemFloat(out, k); got != float64(src) {
							t.Fatalf("output %v (shape %v) is %v, want input element %d", o, out.Shape, got, src)
						}
					}
				})
			}
		}
	}
}

// elemFloat is element k of a float32 or int64 tensor, as a float64.
func elemFloat(t *Tensor, k int) float64 {
	if t.DType == Int64 {
		return float64(t.I[k])
	}
	return float64(t.F[k])
}
