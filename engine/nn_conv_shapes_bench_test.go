package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The convolution shapes that dominate the CPU profiles of bench/realnets (ResNet-18 at
// 224 px: 3×3 unit-stride layers; SqueezeNet 1.1: the fire modules' 1×1 squeeze and
// expand layers and 3×3 expand layers), at batch 4, forward only, bias and Relu fused as
// the exported models run them. Compare runs of two builds back to back:
//
//	go test ./engine -run '^$' -bench ConvShape -benchtime 20x
func BenchmarkConvShape(b *testing.B) {
	for _, s := range []struct {
		name        string
		C, M, HW, K int
	}{
		{"resnet3x3_64@56", 64, 64, 56, 3},
		{"resnet3x3_128@28", 128, 128, 28, 3},
		{"resnet3x3_256@14", 256, 256, 14, 3},
		{"squeeze3x3_16to64@55", 16, 64, 55, 3},
		{"squeeze3x3_32to128@27", 32, 128, 27, 3},
		{"squeeze3x3_64to256@13", 64, 256, 13, 3},
		{"squeeze1x1_128to16@55", 128, 16, 55, 1},
		{"squeeze1x1_16to64@55", 16, 64, 55, 1},
		{"squeeze1x1_512to64@13", 512, 64, 13, 1},
	} {
		b.Run(fmt.Sprintf("%s", s.name), func(b *testing.B) {
			r := rand.New(rand.NewPCG(2, 2))
			x, w := []int{4, s.C, s.HW, s.HW}, []int{s.M, s.C, s.K, s.K}
			in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
			p := int64(s.K / 2)
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", p, p, p, p), attrInts("kernel_shape", int64(s.K), int64(s.K)))
			benchKernel(b, n, in, 2*float64(x[0]*s.M*s.C*s.K*s.K*s.HW*s.HW), false)
		})
	}
}
