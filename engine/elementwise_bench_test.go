package engine

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// Benchmarks at batch-256 sizes of the networks qtool trains: the paper's MLP (4096
// features) and a CNN's 64-channel 14×14 maps. Run with
//
//	go test ./engine -run '^$' -bench Elementwise -benchmem
//
// The bytes/s column counts the output elements written (4 bytes each).

type benchOp struct {
	name   string
	node   *Node
	shapes [][]int
	intIn  []*Tensor // extra integer inputs
}

func benchOps() []benchOp {
	return []benchOp{
		{"Add/same_256x4096", testNode("Add", 14, names(2)), [][]int{{256, 4096}, {256, 4096}}, nil},
		{"Add/bias_256x4096+4096", testNode("Add", 14, names(2)), [][]int{{256, 4096}, {4096}}, nil},
		{"Add/channel_256x64x14x14+64x1x1", testNode("Add", 14, names(2)), [][]int{{256, 64, 14, 14}, {64, 1, 1}}, nil},
		{"Mul/scalar_256x4096", testNode("Mul", 14, names(2)), [][]int{{256, 4096}, {}}, nil},
		{"Add/general_256x1x4096+1x8x1", testNode("Add", 14, names(2)), [][]int{{256, 1, 4096}, {1, 8, 1}}, nil},
		{"Relu/256x4096", testNode("Relu", 14, names(1)), [][]int{{256, 4096}}, nil},
		{"Relu/256x64x14x14", testNode("Relu", 14, names(1)), [][]int{{256, 64, 14, 14}}, nil},
		{"Softmax/256x10", testNode("Softmax", 13, names(1)), [][]int{{256, 10}}, nil},
		{"Softmax/256x4096", testNode("Softmax", 13, names(1)), [][]int{{256, 4096}}, nil},
		// The attention scores of bench/realnets' transformer at batch 32: 32 × 4 heads,
		// rows of 16 tokens.
		{"Softmax/attention_128x16x16", testNode("Softmax", 13, names(1)), [][]int{{128, 16, 16}}, nil},
		{"LogSoftmax/256x1000", testNode("LogSoftmax", 13, names(1)), [][]int{{256, 1000}}, nil},
		{"ReduceMean/spatial_256x64x14x14", testNode("ReduceMean", 13, names(1), attrInts("axes", 2, 3)), [][]int{{256, 64, 14, 14}}, nil},
	}
}

func benchSetup(b *testing.B, bo benchOp, workers int) (Kernel, *Context, []*Tensor, []*Tensor) {
	r := rand.New(rand.NewPCG(1, 1))
	var in []*Tensor
	for _, s := range bo.shapes {
		in = append(in, randTensor(r, s, uniform(-1, 1)))
	}
	in = append(in, bo.intIn...)
	k := buildKernel(b, bo.node)
	out := runForward(b, k, in, workers)
	return k, &Context{Workers: workers}, in, out
}

func BenchmarkElementwiseForward(b *testing.B) {
	for _, bo := range benchOps() {
		b.Run(bo.name, func(b *testing.B) {
			k, ctx, in, out := benchSetup(b, bo, runtime.GOMAXPROCS(0))
			b.SetBytes(int64(4 * out[0].Len()))
			b.ReportAllocs()
			for b.Loop() {
				if err := k.Forward(ctx, in, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkElementwiseBackward(b *testing.B) {
	for _, bo := range benchOps() {
		b.Run(bo.name, func(b *testing.B) {
			k, ctx, in, out := benchSetup(b, bo, runtime.GOMAXPROCS(0))
			r := rand.New(rand.NewPCG(2, 2))
			g := randTensor(r, out[0].Shape, uniform(-1, 1))
			gin := make([]*Tensor, len(in))
			for i, t := range in {
				if t.DType == Float32 {
					gin[i] = NewFloat(t.Shape, make([]float32, t.Len()))
				}
			}
			d := k.(Differentiable)
			gout := []*Tensor{g}
			b.SetBytes(int64(4 * out[0].Len()))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Backward(ctx, in, out, gout, gin); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestElementwiseSteadyStateAllocs checks that with one worker (no goroutines) repeated
// forward and backward passes allocate nothing once the kernels have sized their scratch.
func TestElementwiseSteadyStateAllocs(t *testing.T) {
	for _, bo := range benchOps() {
		t.Run(bo.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 1))
			var in []*Tensor
			for _, s := range bo.shapes {
				// Small versions of the benchmark shapes keep the test quick.
				small := append([]int(nil), s...)
				if len(small) > 0 && small[0] == 256 {
					small[0] = 2
				}
				in = append(in, randTensor(r, small, uniform(-1, 1)))
			}
			k := buildKernel(t, bo.node)
			out := runForward(t, k, in, 1)
			g := randTensor(r, out[0].Shape, uniform(-1, 1))
			gin := make([]*Tensor, len(in))
			for i, x := range in {
				gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
			}
			ctx := &Context{Workers: 1}
			d := k.(Differentiable)
			gout := []*Tensor{g}
			step := func() {
				if err := k.Forward(ctx, in, out); err != nil {
					t.Fatal(err)
				}
				if err := d.Backward(ctx, in, out, gout, gin); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(20, step); a != 0 {
				t.Errorf("%v allocations per forward+backward step, want 0", a)
			}
		})
	}
}
