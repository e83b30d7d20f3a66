package engine

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestNNSteadyStateAllocations checks that once a kernel has sized its scratch, a
// forward plus backward step allocates only the handful of closures handed to
// Context.Parallel: the count is small and does not grow with the batch. The products
// stay below the size at which gonum's Sgemm spawns goroutines, so that only the
// kernels' own allocations are counted (gonum's BLAS: calls into OpenBLAS through purego
// allocate on their own).
func TestNNSteadyStateAllocations(t *testing.T) {
	cases := []struct {
		name  string
		op    string
		opset int64
		attrs []*onnxpb.AttributeProto
		nOut  int
		in    func(r *rand.Rand, n int) []*Tensor
	}{
		{"conv", "Conv", 13, []*onnxpb.AttributeProto{attrInts("pads", 1, 1, 1, 1)}, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 4, 4}, -1, 1), nntRand(r, []int{4, 3, 3, 3}, -1, 1), nntRand(r, []int{4}, -1, 1)}
		}},
		{"conv_depthwise", "Conv", 13, []*onnxpb.AttributeProto{attrI("group", 3)}, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 6, 6}, -1, 1), nntRand(r, []int{3, 1, 3, 3}, -1, 1)}
		}},
		{"conv_pointwise", "Conv", 13, nil, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 4, 4}, -1, 1), nntRand(r, []int{4, 3, 1, 1}, -1, 1)}
		}},
		{"convtranspose", "ConvTranspose", 13, []*onnxpb.AttributeProto{attrInts("strides", 2, 2)}, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 2, 4, 4}, -1, 1), nntRand(r, []int{2, 3, 3, 3}, -1, 1)}
		}},
		{"gemm", "Gemm", 13, []*onnxpb.AttributeProto{attrI("transB", 1)}, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 8}, -1, 1), nntRand(r, []int{5, 8}, -1, 1), nntRand(r, []int{5}, -1, 1)}
		}},
		{"matmul_batched", "MatMul", 13, nil, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 4}, -1, 1), nntRand(r, []int{1, 4, 5}, -1, 1)}
		}},
		{"maxpool", "MaxPool", 12, []*onnxpb.AttributeProto{attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2)}, 2, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 6, 6}, -1, 1)}
		}},
		{"averagepool", "AveragePool", 11, []*onnxpb.AttributeProto{attrInts("kernel_shape", 3, 3), attrInts("pads", 1, 1, 1, 1)}, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 6, 6}, -1, 1)}
		}},
		{"globalaveragepool", "GlobalAveragePool", 11, nil, 1, func(r *rand.Rand, n int) []*Tensor {
			return []*Tensor{nntRand(r, []int{n, 3, 6, 6}, -1, 1)}
		}},
		{"batchnorm_training", "BatchNormalization", 15, []*onnxpb.AttributeProto{attrI("training_mode", 1)}, 3, func(r *rand.Rand, n int) []*Tensor {
			return bnInputs(r, []int{n, 3, 4, 4})
		}},
		{"layernorm", "LayerNormalization", 17, nil, 3, func(r *rand.Rand, n int) []*Tensor {
			return lnInputs(r, []int{n, 3, 8}, -1, true)
		}},
		{"instancenorm", "InstanceNormalization", 6, nil, 1, func(r *rand.Rand, n int) []*Tensor {
			C := []int{3}
			return []*Tensor{nntRand(r, []int{n, 3, 5, 5}, -1, 1), nntRand(r, C, 0.5, 1), nntRand(r, C, -1, 1)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var counts []float64
			for _, batch := range []int{2, 6} {
				r := rand.New(rand.NewPCG(41, uint64(batch)))
				in := c.in(r, batch)
				n := nntNode(c.op, c.opset, len(in), c.nOut, c.attrs...)
				k := buildKernel(t, n)
				ctx := nntGoCtx(1)
				outs := nntRun(t, k, ctx, in)
				gout := make([]*Tensor, len(outs))
				for j, o := range outs {
					if o.DType == Float32 {
						gout[j] = nntRand(r, o.Shape, -1, 1)
					}
				}
				gin := make([]*Tensor, len(in))
				for i, x := range in {
					gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
				}
				d := k.(Differentiable)
				step := func() {
					if err := k.Forward(ctx, in, outs); err != nil {
						t.Fatal(err)
					}
					if err := d.Backward(ctx, in, outs, gout, gin); err != nil {
						t.Fatal(err)
					}
				}
				step()
				counts = append(counts, testing.AllocsPerRun(5, step))
			}
			if counts[0] != counts[1] || counts[0] > 16 {
				t.Errorf("allocations per step %v at batch 2 and 6, want equal and at most 16", counts)
			}
			t.Logf("allocations per step: %v", counts[0])
		})
	}
}

// TestContextParallelSplit checks the split that the kernels' determinism rests on:
// Context.Parallel covers [0, n) exactly once, in w = min(Workers, ⌈n/grain⌉)
// contiguous chunks of ⌈n/w⌉ (the last may be shorter), identical from call to call.
func TestContextParallelSplit(t *testing.T) {
	for _, c := range []struct{ n, grain, workers int }{
		{0, 1, 2}, {1, 1, 2}, {2, 1, 2}, {7, 1, 2}, {7, 1, 3}, {10, 4, 3}, {10, 6, 3}, {100, 1, 8}, {5, 1, 1},
	} {
		ctx := &Context{Workers: c.workers}
		split := func() [][2]int {
			var mu sync.Mutex
			var chunks [][2]int
			seen := make([]int, c.n)
			ctx.Parallel(c.n, c.grain, func(lo, hi int) {
				mu.Lock()
				defer mu.Unlock()
				chunks = append(chunks, [2]int{lo, hi})
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("%+v: index %d visited %d times", c, i, s)
				}
			}
			slices.SortFunc(chunks, func(a, b [2]int) int { return a[0] - b[0] })
			return chunks
		}
		chunks := split()
		w := min(c.workers, (c.n+c.grain-1)/c.grain)
		if c.n == 0 {
			if len(chunks) != 0 {
				t.Errorf("%+v: %d calls for an empty range", c, len(chunks))
			}
			continue
		}
		size := (c.n + max(w, 1) - 1) / max(w, 1)
		if len(chunks) > max(w, 1) {
			t.Errorf("%+v: %d chunks, want at most %d", c, len(chunks), max(w, 1))
		}
		for i, ch := range chunks {
			if want := min(size, c.n-ch[0]); ch[1]-ch[0] != want || (i > 0 && ch[0] != chunks[i-1][1]) {
				t.Errorf("%+v: chunks %v, want contiguous chunks of %d", c, chunks, size)
				break
			}
		}
		if again := split(); !slices.Equal(again, chunks) {
			t.Errorf("%+v: split %v, then %v", c, chunks, again)
		}
	}
}
