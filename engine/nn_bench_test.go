package engine

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	qblas "github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Benchmarks of the nn kernels at the shapes of the fmnist CNN and the paper's MLP, batch
// 256, and of whole models. They use the BLAS that QTOOL_BLAS selects (auto: OpenBLAS
// when installed) and GOMAXPROCS workers, and report GFLOP/s of the matrix work (MB/s of
// the input for the memory-bound pooling and BatchNorm kernels) and CPU ms per operation,
// which on a machine shared with other jobs is steadier than the wall time:
//
//	go test ./engine -run '^$' -bench 'Conv|Gemm|MaxPool|BatchNorm' -benchmem
//	QTOOL_BLAS=go go test ./engine -run '^$' -bench 'Conv|Gemm|MaxPool|BatchNorm' -benchmem
//	go test ./engine -run '^$' -bench 'Infer(CNN|ResNet)|Train(CNN|ResNet)'  # with onnxruntime (cgo)

func benchCtx(b testing.TB) *Context {
	bl, info, err := qblas.Select(qblas.ModeFromEnv())
	if err != nil {
		b.Fatalf("blas: %v", err)
	}
	b.Logf("blas: %s", info)
	return &Context{BLAS: bl, Workers: runtime.GOMAXPROCS(0)}
}

// benchKernel runs forward (and backward when back is set) b.N times after one warm-up
// call that sizes the scratch buffers, and reports flops per call as GFLOP/s.
func benchKernel(b *testing.B, n *Node, in []*Tensor, flops float64, back bool) {
	ctx := benchCtx(b)
	k := buildKernel(b, n)
	outs := nntRun(b, k, ctx, in)
	r := rand.New(rand.NewPCG(1, 1))
	gout := []*Tensor{nntRand(r, outs[0].Shape, -1, 1)}
	gin := make([]*Tensor, len(in))
	for i, x := range in {
		gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
	}
	d := k.(Differentiable)
	run := func() {
		if back {
			if err := d.Backward(ctx, in, outs, gout, gin); err != nil {
				b.Fatal(err)
			}
			return
		}
		if err := k.Forward(ctx, in, outs); err != nil {
			b.Fatal(err)
		}
	}
	run()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchCPU()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric((benchCPU()-cpu)*1e3/float64(b.N), "cpu-ms/op")
}

func benchConv(b *testing.B, x, w []int, back bool) {
	r := rand.New(rand.NewPCG(2, 2))
	in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1), nntRand(r, w[:1], -1, 1)}
	n := nntNode("Conv", 13, 3, 1, attrInts("pads", 1, 1, 1, 1), attrInts("kernel_shape", 3, 3))
	// Y = W·col per item: 2·M·(C·9)·(H·W) flops; backward does it twice (input, weight).
	flops := 2 * float64(x[0]*w[0]*w[1]*w[2]*w[3]*x[2]*x[3])
	if back {
		flops *= 2
	}
	benchKernel(b, n, in, flops, back)
}

func BenchmarkConv1to32Forward(b *testing.B) {
	benchConv(b, []int{256, 1, 28, 28}, []int{32, 1, 3, 3}, false)
}

func BenchmarkConv1to32Backward(b *testing.B) {
	benchConv(b, []int{256, 1, 28, 28}, []int{32, 1, 3, 3}, true)
}

func BenchmarkConv32to64Forward(b *testing.B) {
	benchConv(b, []int{256, 32, 14, 14}, []int{64, 32, 3, 3}, false)
}

func BenchmarkConv32to64Backward(b *testing.B) {
	benchConv(b, []int{256, 32, 14, 14}, []int{64, 32, 3, 3}, true)
}

// The stride-2 and depthwise layers of fmnist-resnet at batch 256.

func benchConvAttrs(b *testing.B, x, w []int, stride, group int, back bool) {
	r := rand.New(rand.NewPCG(2, 2))
	in := []*Tensor{nntRand(r, x, -1, 1), nntRand(r, w, -1, 1)}
	n := nntNode("Conv", 13, 2, 1, attrInts("pads", 1, 1, 1, 1), attrInts("strides", int64(stride), int64(stride)),
		attrI("group", int64(group)))
	oh, ow := (x[2]+2-3)/stride+1, (x[3]+2-3)/stride+1
	flops := 2 * float64(x[0]*w[0]*w[1]*w[2]*w[3]*oh*ow)
	if back {
		flops *= 2
	}
	benchKernel(b, n, in, flops, back)
}

func BenchmarkConvStride2Forward(b *testing.B) {
	benchConvAttrs(b, []int{256, 16, 14, 14}, []int{32, 16, 3, 3}, 2, 1, false)
}

func BenchmarkConvStride2Backward(b *testing.B) {
	benchConvAttrs(b, []int{256, 16, 14, 14}, []int{32, 16, 3, 3}, 2, 1, true)
}

func BenchmarkConvDepthwiseForward(b *testing.B) {
	benchConvAttrs(b, []int{256, 32, 7, 7}, []int{32, 1, 3, 3}, 1, 32, false)
}

func BenchmarkConvDepthwiseBackward(b *testing.B) {
	benchConvAttrs(b, []int{256, 32, 7, 7}, []int{32, 1, 3, 3}, 1, 32, true)
}

func benchGemm(b *testing.B, back bool) {
	r := rand.New(rand.NewPCG(3, 3))
	const m, k, n = 256, 784, 4096
	in := []*Tensor{nntRand(r, []int{m, k}, -1, 1), nntRand(r, []int{k, n}, -1, 1), nntRand(r, []int{n}, -1, 1)}
	node := nntNode("Gemm", 13, 3, 1, []*onnxpb.AttributeProto{}...)
	flops := 2.0 * m * k * n
	if back {
		flops *= 2
	}
	benchKernel(b, node, in, flops, back)
}

func BenchmarkGemm256x784x4096Forward(b *testing.B) { benchGemm(b, false) }

func BenchmarkGemm256x784x4096Backward(b *testing.B) { benchGemm(b, true) }

// benchElementwise runs a memory-bound kernel (pooling, normalisation) forward or
// backward and reports the bytes of its main tensor streamed per second.
func benchElementwise(b *testing.B, n *Node, in []*Tensor, back, training bool) {
	ctx := benchCtx(b)
	ctx.Training = training
	k := buildKernel(b, n)
	outs := nntRun(b, k, ctx, in)
	r := rand.New(rand.NewPCG(4, 4))
	gout := make([]*Tensor, len(outs))
	for j, o := range outs {
		if o.DType == Float32 && j == 0 {
			gout[j] = nntRand(r, o.Shape, -1, 1)
		}
	}
	gin := make([]*Tensor, len(in))
	for i, x := range in {
		gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
	}
	d := k.(Differentiable)
	run := func() {
		var err error
		if back {
			err = d.Backward(ctx, in, outs, gout, gin)
		} else {
			err = k.Forward(ctx, in, outs)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	run()
	b.SetBytes(int64(4 * in[0].Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}

func benchMaxPool(b *testing.B, back bool) {
	r := rand.New(rand.NewPCG(5, 5))
	n := nntNode("MaxPool", 12, 1, 1, attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2))
	benchElementwise(b, n, []*Tensor{nntRand(r, []int{256, 32, 28, 28}, -1, 1)}, back, false)
}

func BenchmarkMaxPool2x2Forward(b *testing.B)  { benchMaxPool(b, false) }
func BenchmarkMaxPool2x2Backward(b *testing.B) { benchMaxPool(b, true) }

// benchBatchNorm is a training-mode BatchNormalization after a 4096-wide Gemm, the
// paper's MLP layer.
func benchBatchNorm(b *testing.B, back bool) {
	r := rand.New(rand.NewPCG(6, 6))
	n := nntNode("BatchNormalization", 15, 5, 1)
	benchElementwise(b, n, bnInputs(r, []int{256, 4096}), back, true)
}

func BenchmarkBatchNormTrainingForward(b *testing.B)  { benchBatchNorm(b, false) }
func BenchmarkBatchNormTrainingBackward(b *testing.B) { benchBatchNorm(b, true) }

// benchModel runs a test model at batch 256 (the shipped samples, repeated as needed):
// inference, or with train set a training-mode forward and backward pass of every float
// parameter but BatchNormalization's running statistics, as bench/train's step without
// the optimizer. It reports samples/s and CPU ms per batch.
func benchModel(b *testing.B, name string, train bool) {
	path := filepath.Join(testmodelsDir, name+".onnx")
	if _, err := os.Stat(path); err != nil {
		b.Skipf("%s: %v (%s)", path, err, testmodelsInstall)
	}
	m, err := onnxio.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := benchCtx(b)
	ctx.Training, ctx.NoGrad = train, !train
	g, err := Build(m, Options{BLAS: ctx.BLAS, Workers: ctx.Workers})
	if err != nil {
		b.Fatal(err)
	}
	if train {
		var names []string
		for _, p := range g.Params() {
			if p.Value.DType == Float32 && !strings.Contains(p.Name, "running") {
				names = append(names, p.Name)
			}
		}
		if err := g.SetTrainable(names...); err != nil {
			b.Fatal(err)
		}
	}
	var x []float32
	if _, err := npzArray(filepath.Join(testmodelsDir, "fmnist-calib.npz"), "x", &x); err != nil {
		b.Fatal(err)
	}
	const batch = 256
	xb := make([]float32, batch*784)
	for i := range xb {
		xb[i] = x[i%len(x)]
	}
	in := NewFloat([]int{batch, 1, 28, 28}, xb)
	var gy *Tensor
	step := func() {
		outs, err := g.Forward(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		if !train {
			return
		}
		if gy == nil {
			gy = nntRand(rand.New(rand.NewPCG(8, 8)), outs[0].Shape, -0.01, 0.01)
		}
		if err := g.Backward(ctx, gy); err != nil {
			b.Fatal(err)
		}
	}
	step()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchCPU()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric((benchCPU()-cpu)*1e3/float64(b.N), "cpu-ms/op")
}

// The fmnist CNNs at batch 256, the shapes of issues 3 and 4:
//
//	go test ./engine -run '^$' -bench 'Model(Infer|Train)' -benchmem
func BenchmarkModelInferCNN(b *testing.B)    { benchModel(b, "fmnist-cnn", false) }
func BenchmarkModelInferResNet(b *testing.B) { benchModel(b, "fmnist-resnet", false) }
func BenchmarkModelTrainCNN(b *testing.B)    { benchModel(b, "fmnist-cnn", true) }
func BenchmarkModelTrainResNet(b *testing.B) { benchModel(b, "fmnist-resnet", true) }
