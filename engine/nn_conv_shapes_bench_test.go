package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The convolution shapes that dominate the CPU profiles of bench/realnets (ResNet-18 at
// 224 px: 3×3 unit-stride layers; SqueezeNet 1.1: the fire modules' 1×1 squeeze and
// expand layers and 3×3 expand layers; MobileNetV2: the 1×1 expansions and projections
// that hold its batch-32 rows near the AVX2 path's target), at batch 4, forward only, bias and Relu fused as
// the exported models run them, the weights frozen. Compare runs of two builds back to back:
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
		{"mb1x1_96to576@14", 96, 576, 14, 1},
		{"mb1x1_576to96@14", 576, 96, 14, 1},
		{"mb1x1_960to160@7", 960, 160, 7, 1},
		{"mb1x1_320to1280@7", 320, 1280, 7, 1},
		{"mb1x1_192to32@28", 192, 32, 28, 1},
	} {
		b.Run(fmt.Sprintf("%s", s.name), func(b *testing.B) {
			r := rand.New(rand.NewPCG(2, 2))
			x, w := []int{4, s.C, s.HW, s.HW}, []int{s.M, s.C, s.K, s.K}
			in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
			// Frozen weights, as inference runs them: packed (or transformed) once.
			in[1].param = &Param{Name: "w", Value: in[1]}
			p := int64(s.K / 2)
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", p, p, p, p), attrInts("kernel_shape", int64(s.K), int64(s.K)))
			benchKernel(b, n, in, 2*float64(x[0]*s.M*s.C*s.K*s.K*s.HW*s.HW), false)
		})
	}
}

// BenchmarkConvTileKernel times the AVX-512 (or AVX2) tile kernel alone on ResNet-18's
// 64@56 layer: 8 row blocks, k = 576, the weights streaming from L2 as in the layer.
// "contiguous" reads B's rows one after the other (in L1); "taps" reads them through the
// offset table from a padded 58-wide image, panel pair after panel pair along its rows,
// as the implicit im2col does, the taps at column offsets 1 and 2 crossing cache lines;
// "taps_aligned" gives every tap column offset 0, to price those split loads. GFLOP per
// CPU-second counts all 32 lanes.
func BenchmarkConvTileKernel(b *testing.B) {
	const nrb, C, pw = 8, 64, 58
	size, k := pw*58, C*9
	for _, mode := range []string{"contiguous", "taps", "taps_aligned"} {
		b.Run(mode, func(b *testing.B) {
			if !convDirectOK() {
				b.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU")
			}
			a := make([]float32, 8*k*nrb)
			for i := range a {
				a[i] = 1e-3
			}
			src := make([]float32, C*size+64)
			var offs *tileOffs
			if mode != "contiguous" {
				offs = &tileOffs{off: make([]int64, k)}
				for i := range offs.off {
					ch, k1, k2 := i/9, i/3%3, i%3
					if mode == "taps_aligned" {
						k2 = 0
					}
					offs.off[i] = int64(4 * (ch*size + k1*pw + k2))
					offs.max = max(offs.max, offs.off[i])
				}
			}
			c := make([]float32, 8*nrb*32)
			cpu := benchCPU()
			for i := 0; b.Loop(); i++ {
				po := 0
				if offs != nil {
					j := i % 112
					po = j/2*pw + j%2*32
				}
				convTile(k, a, src[po:], src[po+16:], 32, c, c[16:], 32, nil, 0xffff, 0xffff, 0, nrb, offs, nil)
			}
			b.ReportMetric(float64(2*8*nrb*32*k)*float64(b.N)/(benchCPU()-cpu)/1e9, "GFLOP/cpu-s")
		})
	}
}

// BenchmarkConvStream times the direct path's non-temporal stores against ordinary ones
// on the largest outputs of MobileNetV2 and EfficientNet-B0 at batch 32 (the stride-2
// stem, 32 × 112 × 112, 51 MB; the first block's 96-channel expansion, 154 MB, with
// ReLU6 and with SiLU), the two kernels alternating within the benchmark so that both
// see the same machine; "streamed/ordinary" is the ratio of their times (below 1:
// streaming is faster), on-ms the streamed kernel's time a run and off-ms the ordinary one's.
func BenchmarkConvStream(b *testing.B) {
	for _, s := range []struct {
		name      string
		x, w      []int
		stride, p int64
		act       *nnClamp
	}{
		{"mbv2_stem_3to32@224s2", []int{32, 3, 224, 224}, []int{32, 3, 3, 3}, 2, 1, &nnClamp{lo: 0, hi: 6}},
		{"mbv2_1x1_16to96@112", []int{32, 16, 112, 112}, []int{96, 16, 1, 1}, 1, 0, &nnClamp{lo: 0, hi: 6}},
		{"effnet_1x1_16to96@112_silu", []int{32, 16, 112, 112}, []int{96, 16, 1, 1}, 1, 0, &nnClamp{silu: true}},
	} {
		b.Run(s.name, func(b *testing.B) {
			if !convDirectOK() {
				b.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the direct path does not run")
			}
			r := rand.New(rand.NewPCG(3, 3))
			in := []*Tensor{nntRand(r, s.x, -1, 1), nntRand(r, s.w, -1, 1), nntRand(r, s.w[:1], -1, 1)}
			in[1].param = &Param{Name: "w", Value: in[1]}
			k := int64(s.w[2])
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", s.p, s.p, s.p, s.p), attrInts("kernel_shape", k, k), attrInts("strides", s.stride, s.stride))
			ctx := benchCtx(b)
			var kernels [2]*convKernel
			var outs [2]*Tensor
			run := func(j int) {
				if err := kernels[j].run(ctx, in[0], in[1], in[2], outs[j], s.act, nil, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			for i, min := range []int{-1, 0} {
				kernels[i] = buildKernel(b, n).(*convKernel)
				kernels[i].streamMin = min
				outs[i] = nntRun(b, kernels[i], ctx, in)[0]
				kernels[i].direct.streamed = 0 // that run had no activation
				run(i)
			}
			if kernels[1].direct.streamed == 0 {
				b.Skip("the layer does not stream on this CPU")
			}
			abTime(b, func() { run(1) }, func() { run(0) }, "streamed/ordinary")
		})
	}
}

// BenchmarkPointwisePrefetch times the pointwise layers of few output channels on large
// planes that take tilePrefetch (MobileNetV2's and EfficientNet's projections, SqueezeNet's
// squeeze and expansion), at batch 32, with the hint and without, in one process: the
// measurements behind forwardDirect's rule. Compare the two sub-benchmarks of each shape,
// with AVX-512 and under GODEBUG=cpu.avx512f=off:
//
//	go test ./engine -run '^$' -bench PointwisePrefetch -benchtime 20x
func BenchmarkPointwisePrefetch(b *testing.B) {
	prefetchBench(b, 32, nil, []struct{ C, M, HW int }{
		{32, 16, 112}, {16, 16, 112}, {96, 24, 56}, {144, 24, 56}, {64, 16, 55}, {16, 64, 55}, {96, 64, 56},
	})
}

// BenchmarkPointwisePrefetchCold times batch 1's expansions (MobileNetV2's and
// EfficientNet's, up to convPrefetchRows output channels) with the hint and without, as
// they run inside a network: a 64 MB buffer walked before every run, the timer stopped,
// leaves the input and the output rows out of the caches. The measurements behind
// convPrefetchRows; with warm caches the two are level.
//
//	go test ./engine -run '^$' -bench PointwisePrefetchCold -benchtime 200x
func BenchmarkPointwisePrefetchCold(b *testing.B) {
	prefetchBench(b, 1, make([]float32, 16<<20), []struct{ C, M, HW int }{{16, 96, 112}, {24, 144, 56}, {32, 192, 28}, {40, 240, 28}})
}

// prefetchBench times N images of each 1×1 layer (C → M channels on HW × HW planes) with
// tilePrefetch and without; with junk, the buffer is walked before each run, the timer
// stopped.
func prefetchBench(b *testing.B, N int, junk []float32, shapes []struct{ C, M, HW int }) {
	for _, s := range shapes {
		for _, on := range []bool{true, false} {
			name := fmt.Sprintf("%dto%d@%d/", s.C, s.M, s.HW)
			if on {
				name += "prefetch"
			} else {
				name += "none"
			}
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(2, 2))
				x, w := []int{N, s.C, s.HW, s.HW}, []int{s.M, s.C, 1, 1}
				in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
				in[1].param = &Param{Name: "w", Value: in[1]}
				ctx := benchCtx(b)
				k := buildKernel(b, nntNode("Conv", 13, 3, 1, attrInts("kernel_shape", 1, 1))).(*convKernel)
				k.noPrefetch = !on
				outs := nntRun(b, k, ctx, in)
				b.ResetTimer()
				for range b.N {
					if junk != nil {
						b.StopTimer()
						for i := 0; i < len(junk); i += 16 {
							junk[i]++
						}
						b.StartTimer()
					}
					if err := k.Forward(ctx, in, outs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConvTaps times ResNet-18's small-plane layers at 32 px and batch 32 (frozen
// weights, bias and Relu) on the taps path and off it (noTaps: forwardGemmTile's chunks
// for 2 × 2 planes, the direct path for 4 × 4), the two alternating within the benchmark;
// "taps/off" is the ratio of their times (below 1: the taps path is faster); with AVX-512
// and under GODEBUG=cpu.avx512f=off:
//
//	go test ./engine -run '^$' -bench ConvTaps -benchtime 50x
func BenchmarkConvTaps(b *testing.B) {
	for _, s := range []struct {
		name   string
		x, w   []int
		stride int64
	}{
		{"256@2", []int{32, 256, 2, 2}, []int{256, 256, 3, 3}, 1},
		{"128@4", []int{32, 128, 4, 4}, []int{128, 128, 3, 3}, 1},
		{"128to256@4s2", []int{32, 128, 4, 4}, []int{256, 128, 3, 3}, 2},
	} {
		b.Run(s.name, func(b *testing.B) {
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", 1, 1, 1, 1), attrInts("kernel_shape", 3, 3), attrInts("strides", s.stride, s.stride))
			abConvBench(b, n, s.x, s.w, "taps/off", func(k *convKernel) { k.noTaps = true }, func(k *convKernel) bool { return k.taps.taken > 0 })
		})
	}
}

// BenchmarkConvNarrowWide times ResNet-18's 7 × 7 layers at 224 px and batch 1 on the
// narrow path and off it (noNarrow: forwardGemmTile's panels of pixels), alternating;
// they take forwardGemmTile only on the AVX2 path, so run it under
// GODEBUG=cpu.avx512f=off:
//
//	GODEBUG=cpu.avx512f=off go test ./engine -run '^$' -bench ConvNarrowWide -benchtime 100x
func BenchmarkConvNarrowWide(b *testing.B) {
	for _, s := range []struct {
		name   string
		x, w   []int
		stride int64
	}{
		{"512@7", []int{1, 512, 7, 7}, []int{512, 512, 3, 3}, 1},
		{"256to512@14s2", []int{1, 256, 14, 14}, []int{512, 256, 3, 3}, 2},
	} {
		b.Run(s.name, func(b *testing.B) {
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", 1, 1, 1, 1), attrInts("kernel_shape", 3, 3), attrInts("strides", s.stride, s.stride))
			abConvBench(b, n, s.x, s.w, "narrow/off", func(k *convKernel) { k.noNarrow = true }, func(k *convKernel) bool {
				d, err := k.dims(s.x, s.w, nil)
				return err == nil && !k.forwardDirectOK(&d) && k.narrowOK(&d)
			})
		})
	}
}

// abConvBench times the Conv node n on random inputs of shapes x and w (frozen weight,
// bias, Relu) with two kernels, the second changed by off, alternating within the
// benchmark, and reports the ratio of the first's time to the second's as metric; it
// skips when taken reports, after a run, that the first kernel did not take the path.
func abConvBench(b *testing.B, n *Node, x, w []int, metric string, off func(*convKernel), taken func(*convKernel) bool) {
	if !convDirectOK() {
		b.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 5))
	in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
	in[1].param = &Param{Name: "w", Value: in[1]}
	ctx := benchCtx(b)
	act := &nnClamp{relu: true}
	var kernels [2]*convKernel
	var outs [2]*Tensor
	run := func(j int) {
		if err := kernels[j].run(ctx, in[0], in[1], in[2], outs[j], act, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := range kernels {
		kernels[i] = buildKernel(b, n).(*convKernel)
		if i == 1 {
			off(kernels[i])
		}
		outs[i] = nntRun(b, kernels[i], ctx, in)[0]
		run(i)
	}
	if !taken(kernels[0]) {
		b.Skip("the path does not take this layer on this CPU")
	}
	abTime(b, func() { run(0) }, func() { run(1) }, metric)
}

// abTime runs on and off alternately b.N times each, so that both see the same machine,
// and reports the ratio of on's time to off's as metric, and each one's milliseconds a run.
func abTime(b *testing.B, on, off func(), metric string) {
	var took [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, f := range [2]func(){on, off} {
			t0 := time.Now()
			f()
			took[j] += time.Since(t0)
		}
	}
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), metric)
	b.ReportMetric(took[0].Seconds()*1e3/float64(b.N), "on-ms")
	b.ReportMetric(took[1].Seconds()*1e3/float64(b.N), "off-ms")
}

// BenchmarkConvPhased times stride-2 layers at batch 32 (frozen weights, bias and Relu)
// with the phase planes and through their column matrix (noPhased), alternating:
// MobileNet's and EfficientNet's 3×3 stem, a 7×7 stem without a pool, and a 3×3 layer of
// 16 input channels. The measurements behind convPhasedMaxK; with AVX-512 and under
// GODEBUG=cpu.avx512f=off:
//
//	go test ./engine -run '^$' -bench ConvPhased -benchtime 10x
func BenchmarkConvPhased(b *testing.B) {
	for _, s := range []struct {
		name string
		x, w []int
	}{
		{"stem3x3_3to32@224", []int{32, 3, 224, 224}, []int{32, 3, 3, 3}},
		{"stem7x7_3to64@224", []int{32, 3, 224, 224}, []int{64, 3, 7, 7}},
		{"3x3_16to32@112", []int{32, 16, 112, 112}, []int{32, 16, 3, 3}},
	} {
		b.Run(s.name, func(b *testing.B) {
			k, p := int64(s.w[2]), int64(s.w[2]/2)
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", p, p, p, p), attrInts("kernel_shape", k, k), attrInts("strides", 2, 2))
			abConvBench(b, n, s.x, s.w, "phased/off", func(k *convKernel) { k.direct.noPhased = true }, func(k *convKernel) bool { return k.direct.phasedRuns > 0 })
		})
	}
}

// BenchmarkConvWinogradFew times small planes with few tiles (ResNet-18's 7 × 7 layers at
// 224 px, batch 1 and 2) on the Winograd path and off it (noWinograd: the direct or
// narrow path), alternating: the numbers winoFewCols, winoFewCh and winoAVX2Ch rest on
// (the 64- and 128-channel shapes at batches 1 to 32: ResNet-18's first stages at 32 px
// and the like, which only the AVX2 path sends to the Winograd path). Run it with
// AVX-512 and under GODEBUG=cpu.avx512f=off:
//
//	go test ./engine -run '^$' -bench ConvWinogradFew -benchtime 100x
func BenchmarkConvWinogradFew(b *testing.B) {
	for _, s := range []struct {
		name string
		x, w []int
	}{
		{"512@7b1", []int{1, 512, 7, 7}, []int{512, 512, 3, 3}},
		{"512@7b2", []int{2, 512, 7, 7}, []int{512, 512, 3, 3}},
		{"256@7b1", []int{1, 256, 7, 7}, []int{256, 256, 3, 3}},
		{"256@8b1", []int{1, 256, 8, 8}, []int{256, 256, 3, 3}},
		{"512@10b1", []int{1, 512, 10, 10}, []int{512, 512, 3, 3}},
		{"64@8b1", []int{1, 64, 8, 8}, []int{64, 64, 3, 3}},
		{"64@7b1", []int{1, 64, 7, 7}, []int{64, 64, 3, 3}},
		{"64@8b2", []int{2, 64, 8, 8}, []int{64, 64, 3, 3}},
		{"64@8b3", []int{3, 64, 8, 8}, []int{64, 64, 3, 3}},
		{"64@8b4", []int{4, 64, 8, 8}, []int{64, 64, 3, 3}},
		{"64@8b32", []int{32, 64, 8, 8}, []int{64, 64, 3, 3}},
		{"64@7b8", []int{8, 64, 7, 7}, []int{64, 64, 3, 3}},
		{"128@8b2", []int{2, 128, 8, 8}, []int{128, 128, 3, 3}},
		{"32@8b1", []int{1, 32, 8, 8}, []int{32, 32, 3, 3}},
		{"16to64@55b4", []int{4, 16, 55, 55}, []int{64, 16, 3, 3}},
		{"16to64@55b1", []int{1, 16, 55, 55}, []int{64, 16, 3, 3}},
		{"16to16@28b8", []int{8, 16, 28, 28}, []int{16, 16, 3, 3}},
		{"8to32@28b8", []int{8, 8, 28, 28}, []int{32, 8, 3, 3}},
		{"16to32@14b32", []int{32, 16, 14, 14}, []int{32, 16, 3, 3}},
		{"24to64@28b4", []int{4, 24, 28, 28}, []int{64, 24, 3, 3}},
		{"128@8b1", []int{1, 128, 8, 8}, []int{128, 128, 3, 3}},
		{"128@7b1", []int{1, 128, 7, 7}, []int{128, 128, 3, 3}},
	} {
		b.Run(s.name, func(b *testing.B) {
			n := nntNode("Conv", 13, 3, 1, attrInts("pads", 1, 1, 1, 1), attrInts("kernel_shape", 3, 3))
			abConvBench(b, n, s.x, s.w, "wino/off", func(k *convKernel) { k.noWinograd = true }, func(k *convKernel) bool { return k.direct.wu != nil })
		})
	}
}

// BenchmarkConvWinograd4 times ResNet-18's 3×3 layers in 4 × 4 tiles (F(4×4, 3×3)) and in
// 2 × 2 tiles (noWino4), alternating, at batch 1 and 8: the numbers wino4MinPlane rests on.
// Run it with AVX-512 and under GODEBUG=cpu.avx512f=off:
//
//	go test ./engine -run '^$' -bench ConvWinograd4 -benchtime 50x
func BenchmarkConvWinograd4(b *testing.B) {
	for _, s := range []struct {
		name  string
		C, HW int
	}{
		{"64@56", 64, 56}, {"128@28", 128, 28}, {"256@14", 256, 14}, {"512@7", 512, 7},
	} {
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/b%d", s.name, batch), func(b *testing.B) {
				n := nntNode("Conv", 13, 3, 1, attrInts("pads", 1, 1, 1, 1), attrInts("kernel_shape", 3, 3))
				x, w := []int{batch, s.C, s.HW, s.HW}, []int{s.C, s.C, 3, 3}
				abConvBench(b, n, x, w, "f4/f2", func(k *convKernel) { k.noWino4 = true }, func(k *convKernel) bool {
					return len(k.direct.wu) == winoWeightsLen(&convDims{Mg: s.C, Cg: s.C}, 4)
				})
			})
		}
	}
}
