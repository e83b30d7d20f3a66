package blas

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmShape is one product C(m×n) = op(A) op(B) with inner dimension k.
type gemmShape struct {
	name    string
	tA, tB  gblas.Transpose
	m, n, k int
}

// mlpShapes are the products of one training step of the paper's MLP
// 784-4096-4096-4096-10 at batch 256, with activations stored batch-major
// (X is 256×in) and weights as in×out: the first layer's forward product,
// and a hidden layer's forward product with its two backward products
// (dX = dY·Wᵀ and dW = Xᵀ·dY).
var mlpShapes = []gemmShape{
	{"fwd_256x784x4096", gblas.NoTrans, gblas.NoTrans, 256, 4096, 784},
	{"fwd_256x4096x4096", gblas.NoTrans, gblas.NoTrans, 256, 4096, 4096},
	{"bwd_dX_256x4096x4096_NT", gblas.NoTrans, gblas.Trans, 256, 4096, 4096},
	{"bwd_dW_4096x4096x256_TN", gblas.Trans, gblas.NoTrans, 4096, 4096, 256},
}

func (s gemmShape) operands() (a, b, c []float32, lda, ldb, ldc int) {
	rng := rand.New(rand.NewPCG(7, 7))
	lda, ldb, ldc = s.k, s.n, s.n
	if s.tA != gblas.NoTrans {
		lda = s.m
	}
	if s.tB != gblas.NoTrans {
		ldb = s.k
	}
	return randSlice(rng, s.m*s.k), randSlice(rng, s.k*s.n), make([]float32, s.m*s.n), lda, ldb, ldc
}

// benchGemm reports GFLOP/s of wall time and, because the benchmarks share
// the machine with other work, GFLOP per second of CPU time used by the
// whole process (all its threads), which contention affects much less.
func benchGemm(b *testing.B, impl gblas.Float32, s gemmShape) {
	a, bm, c, lda, ldb, ldc := s.operands()
	cpu0 := cpuSeconds(b)
	b.ResetTimer()
	for b.Loop() {
		impl.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bm, ldb, 0, c, ldc)
	}
	reportFlops(b, 2*float64(s.m)*float64(s.n)*float64(s.k), cpu0)
}

// reportFlops stops the timer and reports GFLOP/s and GFLOP/cpu-s for b.N
// operations of flops each, cpu0 being cpuSeconds before the loop.
func reportFlops(b *testing.B, flops float64, cpu0 float64) {
	b.StopTimer()
	total := flops * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu0 >= 0 {
		b.ReportMetric(total/(cpuSeconds(b)-cpu0)/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkSgemm compares pure Go and OpenBLAS on the MLP training shapes.
//
//	go test -run '^$' -bench Sgemm ./engine/blas
func BenchmarkSgemm(b *testing.B) {
	for _, s := range mlpShapes {
		b.Run("go/"+s.name, func(b *testing.B) { benchGemm(b, gonum.Implementation{}, s) })
	}
	o := requireOpenBLAS(b)
	for _, s := range mlpShapes {
		b.Run("openblas/"+s.name, func(b *testing.B) { benchGemm(b, o, s) })
	}
}

// BenchmarkThreads measures OpenBLAS's thread setting on the largest MLP
// product, called from one goroutine and from two at once (each goroutine
// with its own operands), reporting the combined GFLOP/s. It backs the
// default documented on SetThreads.
func BenchmarkThreads(b *testing.B) {
	o := requireOpenBLAS(b)
	old := o.Threads()
	defer o.SetThreads(old)
	s := mlpShapes[1]
	for _, threads := range []int{1, 2} {
		for _, callers := range []int{1, 2} {
			b.Run(fmt.Sprintf("threads%d/callers%d", threads, callers), func(b *testing.B) {
				o.SetThreads(threads)
				type ops struct {
					a, bm, c      []float32
					lda, ldb, ldc int
				}
				work := make([]ops, callers)
				for i := range work {
					w := &work[i]
					w.a, w.bm, w.c, w.lda, w.ldb, w.ldc = s.operands()
				}
				cpu0 := cpuSeconds(b)
				b.ResetTimer()
				for b.Loop() {
					var wg sync.WaitGroup
					for _, w := range work {
						wg.Go(func() {
							o.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, w.a, w.lda, w.bm, w.ldb, 0, w.c, w.ldc)
						})
					}
					wg.Wait()
				}
				reportFlops(b, 2*float64(s.m)*float64(s.n)*float64(s.k)*float64(callers), cpu0)
			})
		}
	}
}

// BenchmarkLevel1 compares gonum's assembly kernels with direct OpenBLAS
// calls (bypassing minLevel1) to locate the length where the foreign call
// pays off.
func BenchmarkLevel1(b *testing.B) {
	o := requireOpenBLAS(b)
	g := gonum.Implementation{}
	rng := rand.New(rand.NewPCG(8, 8))
	for _, n := range []int{256, 1024, 4096, 16384, 65536} {
		x, y := randSlice(rng, n), randSlice(rng, n)
		b.Run(fmt.Sprintf("sdot/go/n%d", n), func(b *testing.B) {
			for b.Loop() {
				g.Sdot(n, x, 1, y, 1)
			}
		})
		b.Run(fmt.Sprintf("sdot/openblas/n%d", n), func(b *testing.B) {
			for b.Loop() {
				o.lib.sdot(int32(n), &x[0], 1, &y[0], 1)
			}
		})
		b.Run(fmt.Sprintf("saxpy/go/n%d", n), func(b *testing.B) {
			for b.Loop() {
				g.Saxpy(n, 1e-3, x, 1, y, 1)
			}
		})
		b.Run(fmt.Sprintf("saxpy/openblas/n%d", n), func(b *testing.B) {
			for b.Loop() {
				o.lib.saxpy(int32(n), 1e-3, &x[0], 1, &y[0], 1)
			}
		})
	}
}

// BenchmarkSgemv compares gonum and OpenBLAS matrix-vector products (the
// batch-1 inference shapes of the small models and of the paper's MLP).
func BenchmarkSgemv(b *testing.B) {
	o := requireOpenBLAS(b)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, sz := range [][2]int{{32, 32}, {64, 128}, {64, 256}, {128, 256}, {128, 784}, {512, 512}, {4096, 784}, {4096, 4096}} {
		m, n := sz[0], sz[1]
		a, x, y := randSlice(rng, m*n), randSlice(rng, n), make([]float32, m)
		for _, impl := range []struct {
			name string
			f    gblas.Float32
		}{{"go", gonum.Implementation{}}, {"openblas", o}} {
			b.Run(fmt.Sprintf("%s/%dx%d", impl.name, m, n), func(b *testing.B) {
				cpu0 := cpuSeconds(b)
				for b.Loop() {
					impl.f.Sgemv(gblas.NoTrans, m, n, 1, a, n, x, 1, 0, y, 1)
				}
				reportFlops(b, 2*float64(m)*float64(n), cpu0)
			})
		}
	}
}

// BenchmarkSgemmSmall locates the product size below which a foreign call
// costs more than gonum's Go kernels.
func BenchmarkSgemmSmall(b *testing.B) {
	o := requireOpenBLAS(b)
	for _, s := range []gemmShape{
		{"8x8x8", gblas.NoTrans, gblas.NoTrans, 8, 8, 8},
		{"16x16x16", gblas.NoTrans, gblas.NoTrans, 16, 16, 16},
		{"32x32x32", gblas.NoTrans, gblas.NoTrans, 32, 32, 32},
		{"64x64x64", gblas.NoTrans, gblas.NoTrans, 64, 64, 64},
		{"1x128x784", gblas.NoTrans, gblas.NoTrans, 1, 128, 784},
		{"1x10x128", gblas.NoTrans, gblas.NoTrans, 1, 10, 128},
		{"256x10x128", gblas.NoTrans, gblas.NoTrans, 256, 10, 128},
	} {
		b.Run("go/"+s.name, func(b *testing.B) { benchGemm(b, gonum.Implementation{}, s) })
		b.Run("openblas/"+s.name, func(b *testing.B) { benchGemm(b, o, s) })
	}
}

// splitSgemm computes C = A·B (row-major, beta 0) by splitting C's rows into
// parts blocks, each computed by its own goroutine with one OpenBLAS call.
func splitSgemm(o *OpenBLAS, parts int, s gemmShape, a, bm, c []float32, lda, ldb, ldc int) {
	var wg sync.WaitGroup
	for p := range parts {
		i0, i1 := p*s.m/parts, (p+1)*s.m/parts
		wg.Go(func() {
			aOff := i0 * lda
			if s.tA != gblas.NoTrans {
				aOff = i0
			}
			o.lib.sgemm(cblasRowMajor, cblasTransOf(s.tA != gblas.NoTrans), cblasTransOf(s.tB != gblas.NoTrans),
				int32(i1-i0), int32(s.n), int32(s.k), 1, &a[aOff], int32(lda), &bm[0], int32(ldb), 0, &c[i0*ldc], int32(ldc))
		})
	}
	wg.Wait()
}

// BenchmarkSplit compares OpenBLAS's own threading (threads2) with a
// single-threaded OpenBLAS whose work is split over two goroutines
// (split2), on every MLP shape.
func BenchmarkSplit(b *testing.B) {
	o := requireOpenBLAS(b)
	old := o.Threads()
	defer o.SetThreads(old)
	for _, s := range mlpShapes {
		a, bm, c, lda, ldb, ldc := s.operands()
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		b.Run("threads2/"+s.name, func(b *testing.B) {
			// OpenBLAS's own threading, which qtool no longer uses (it changes the
			// bits with the thread count); kept to compare against.
			o.lib.setNumThreads(2)
			defer o.lib.setNumThreads(1)
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				splitSgemm(o, 1, s, a, bm, c, lda, ldb, ldc)
			}
			reportFlops(b, flops, cpu0)
		})
		b.Run("split2/"+s.name, func(b *testing.B) {
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				splitSgemm(o, 2, s, a, bm, c, lda, ldb, ldc)
			}
			reportFlops(b, flops, cpu0)
		})
	}
}
