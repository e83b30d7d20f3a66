package blas

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"

	gblas "gonum.org/v1/gonum/blas"
)

// InstallHint says how to get the OpenBLAS shared library on Debian and Ubuntu.
const InstallHint = "install OpenBLAS with `apt-get install libopenblas0` (or set QTOOL_BLAS=go)"

// DefaultLibraries returns the names tried, in order, when Options.Path is
// empty: the soname first (found through the dynamic loader's search path),
// the development symlink, then Debian's alternatives path on x86-64
// explicitly, in case the loader cache is stale.
func DefaultLibraries() []string {
	return []string{
		"libopenblas.so.0",
		"libopenblas.so",
		"/usr/lib/x86_64-linux-gnu/libopenblas.so.0",
	}
}

// Options control how OpenBLAS is loaded.
type Options struct {
	// Path is the shared library to load; empty tries DefaultLibraries.
	Path string
	// Threads is the number of goroutines one call may spread over; zero
	// means GOMAXPROCS. It changes speed only, never results: see SetThreads.
	Threads int
}

// CBLAS enumerations (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// Sizes below which a routine stays in gonum's Go code. A purego call costs
// about 1.5 µs (reflection plus the switch to the system stack), as much as a
// few thousand multiply-adds in gonum's assembly kernels, so small problems
// are faster without it. The crossovers were measured on 2 cores
// (BenchmarkLevel1, BenchmarkSgemv, BenchmarkSgemmSmall).
const (
	// minLevel1 is the vector length for Saxpy, Sdot and Sscal; OpenBLAS's
	// sdot wins from about 16384 elements, saxpy from about 65536.
	minLevel1 = 1 << 15
	// minGemv is m*n for Sgemv; gonum wins at 128×256, OpenBLAS at 128×784.
	minGemv = 1 << 16
	// minGemm is m*n*k for Sgemm; gonum wins at 8×8×8, OpenBLAS at 16×16×16.
	minGemm = 1 << 11
)

// OpenBLAS is a blas.Float32 whose level-3 and main level-1/2 routines run in
// the OpenBLAS shared library. Every other routine, and every problem too
// small to repay a foreign call, runs in Go.
// An OpenBLAS is safe for concurrent use.
type OpenBLAS struct {
	Go
	lib     *openblasLib
	threads atomic.Int32 // goroutines per call; 0 means GOMAXPROCS
}

var _ gblas.Float32 = (*OpenBLAS)(nil)

// LoadOpenBLAS loads the OpenBLAS shared library. The library stays loaded
// for the life of the process; loading it again is cheap and returns a value
// sharing the same library (and the same, process-wide, thread setting).
func LoadOpenBLAS(opts Options) (*OpenBLAS, error) {
	if opts.Threads < 0 {
		return nil, fmt.Errorf("openblas: Threads = %d, want >= 0", opts.Threads)
	}
	if err := platformErr(); err != nil {
		return nil, err
	}
	names := DefaultLibraries()
	if opts.Path != "" {
		names = []string{opts.Path}
	}
	var errs []string
	for _, name := range names {
		lib, err := openLib(name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		// OpenBLAS's own threading splits a product differently for each
		// thread count, and the split changes the bits (measured for sgemm and
		// sgemv, both SkylakeX and Haswell kernels), so OPENBLAS_NUM_THREADS
		// changed qtool's results. Every call is single-threaded; qtool
		// spreads the work itself, in pieces that depend only on the shape.
		lib.setNumThreads(1)
		o := &OpenBLAS{lib: lib}
		o.threads.Store(int32(opts.Threads))
		return o, nil
	}
	return nil, fmt.Errorf("openblas: cannot load %s: %s; %s", strings.Join(names, " or "), strings.Join(errs, "; "), InstallHint)
}

// Info describes the loaded library.
func (o *OpenBLAS) Info() Info {
	return Info{Name: ModeOpenBLAS, Library: o.lib.path, Config: o.lib.config, Core: o.lib.core, CoreChoice: o.lib.chose, Threads: o.Threads()}
}

// Threads returns the number of goroutines one call may spread over.
func (o *OpenBLAS) Threads() int {
	if n := int(o.threads.Load()); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// SetThreads sets the number of goroutines one call of o may spread over
// (n < 1: GOMAXPROCS). Results do not depend on it: a product is cut into
// pieces by its shape alone (splitParts), each piece is one single-threaded
// OpenBLAS call, and the goroutines only decide which core runs which piece.
//
// The default, one goroutine per core, suits qtool: the engine's big products
// (an MLP layer at batch 256) mostly run one at a time, and OpenBLAS then
// spreads each over both cores. Measured on the 2-core machine (which was
// shared, so per CPU-second figures are the reliable ones), a call with two
// threads does 70-80 GFLOP per CPU-second against 85-90 with one thread, so
// two threads nearly halve a lone call's time on an idle machine (a quiet
// moment gave 80 GFLOP/s wall on the 256×784×4096 product). When two
// goroutines call Sgemm at once, one thread per call is up to 15% more
// efficient; an engine that knows it runs two BLAS streams for a long
// stretch may SetThreads(1) for it. Splitting a product's rows over two
// goroutines that each call a single-threaded OpenBLAS was no better than
// OpenBLAS's own threading, which is why qtool can split the work itself and
// keep its results independent of the thread count. BenchmarkThreads and
// BenchmarkSplit measure this.
func (o *OpenBLAS) SetThreads(n int) {
	o.threads.Store(int32(max(n, 0)))
}

// Work, in multiply-adds, below which a call stays in one piece, and the most
// pieces a call is cut into. A piece of 2²¹ multiply-adds takes about 50 µs on
// one core, so the goroutine and the foreign call (a few µs) stay small.
const (
	splitWork = 1 << 21
	maxParts  = 16
	partAlign = 16 // rows or columns per piece are a multiple of this
)

// splitParts cuts dim (the rows or the columns of the result) into pieces for
// a call of work multiply-adds. It depends on nothing but its arguments: that
// is what makes results independent of the thread count.
func splitParts(dim, work int) (size, parts int) {
	parts = min(work/splitWork, maxParts, dim/partAlign)
	if parts <= 1 {
		return dim, 1
	}
	size = (dim + parts - 1) / parts
	size = (size + partAlign - 1) / partAlign * partAlign
	return size, (dim + size - 1) / size
}

// run calls piece(p) for p in [0, parts) over at most Threads goroutines, the caller's
// among them. The caller waits for the parts, not for the goroutines: one that a
// sleeping thread picks up late (tens of microseconds on a virtual machine, longer than
// many products) finds every part taken and returns without touching anything.
func (o *OpenBLAS) run(parts int, piece func(p int)) {
	w := min(o.Threads(), parts)
	if w <= 1 {
		for p := range parts {
			piece(p)
		}
		return
	}
	var next, done atomic.Int32
	var failed atomic.Pointer[any]
	work := func() {
		for p := int(next.Add(1)) - 1; p < parts; p = int(next.Add(1)) - 1 {
			func() {
				defer func() {
					if r := recover(); r != nil {
						failed.CompareAndSwap(nil, &r)
					}
					done.Add(1)
				}()
				piece(p)
			}()
		}
	}
	for range w - 1 {
		go work()
	}
	work()
	for done.Load() < int32(parts) {
		runtime.Gosched()
	}
	if r := failed.Load(); r != nil {
		panic(*r)
	}
}

// fitsCInt reports whether every value fits OpenBLAS's 32-bit C int; larger
// problems (over 2³¹ elements in one dimension or stride) stay in Go rather
// than being silently truncated.
func fitsCInt(v ...int) bool {
	for _, x := range v {
		if x > math.MaxInt32 || x < math.MinInt32 {
			return false
		}
	}
	return true
}

func cblasTransOf(trans bool) int32 {
	if trans {
		return cblasTrans
	}
	return cblasNoTrans
}

// Sgemm computes C = alpha * op(A) * op(B) + beta * C in row-major order with
// the same argument checks and panics as gonum. With beta == 0, C is not read;
// with alpha == 0 or k == 0, A and B are not read.
func (o *OpenBLAS) Sgemm(tA, tB gblas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	aTrans, bTrans, work := checkGemm(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	if !work {
		return
	}
	if alpha == 0 || k == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	if m*n*k < minGemm || !fitsCInt(m, n, k, lda, ldb, ldc) {
		o.Go.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if beta == 0 {
		// OpenBLAS zero-fills too, but doing it here keeps "C is not read"
		// independent of the library version.
		scaleMatrix(m, n, 0, c, ldc)
	}
	ta, tb := cblasTransOf(aTrans), cblasTransOf(bTrans)
	gemm := func(m, n, aOff, bOff, cOff int) {
		o.lib.sgemm(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k),
			alpha, &a[aOff], int32(lda), &b[bOff], int32(ldb), beta, &c[cOff], int32(ldc))
	}
	if m >= n {
		// Pieces of rows of C: rows of op(A), which are columns of A when transposed.
		size, parts := splitParts(m, m*n*k)
		o.run(parts, func(p int) {
			r0 := p * size
			aOff := r0 * lda
			if aTrans {
				aOff = r0
			}
			gemm(min(size, m-r0), n, aOff, 0, r0*ldc)
		})
		return
	}
	// Pieces of columns of C: columns of op(B), which are rows of B when transposed.
	size, parts := splitParts(n, m*n*k)
	o.run(parts, func(p int) {
		j0 := p * size
		bOff := j0
		if bTrans {
			bOff = j0 * ldb
		}
		gemm(m, min(size, n-j0), 0, bOff, j0)
	})
}

// scaleMatrix sets C = beta*C for the m×n matrix C, writing zeros without
// reading C when beta == 0.
func scaleMatrix(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Sgemv computes y = alpha * op(A) * x + beta * y with the same argument
// checks and panics as gonum. With beta == 0, y is not read; with alpha == 0,
// A and x are not read.
func (o *OpenBLAS) Sgemv(tA gblas.Transpose, m, n int, alpha float32, a []float32, lda int, x []float32, incX int, beta float32, y []float32, incY int) {
	_, lenY, work := checkGemv(tA, m, n, a, lda, x, incX, y, incY)
	if !work {
		return
	}
	incAbsY := max(incY, -incY)
	if alpha == 0 {
		o.Implementation.Sscal(lenY, beta, y, incAbsY)
		return
	}
	if m*n < minGemv || !fitsCInt(m, n, lda, incX, incY) {
		o.Go.Sgemv(tA, m, n, alpha, a, lda, x, incX, beta, y, incY)
		return
	}
	if beta == 0 {
		// As in Sgemm: y is not read, whatever the library version does.
		o.Implementation.Sscal(lenY, 0, y, incAbsY)
	}
	trans := isTrans(tA)
	gemv := func(m, n, aOff, yOff int) {
		o.lib.sgemv(cblasRowMajor, cblasTransOf(trans), int32(m), int32(n),
			alpha, &a[aOff], int32(lda), &x[0], int32(incX), beta, &y[yOff], int32(incY))
	}
	if incY < 0 {
		// A negative increment walks y backwards from its end; not worth
		// splitting for, and one piece is as deterministic as any split.
		gemv(m, n, 0, 0)
		return
	}
	if !trans {
		// Pieces of y = pieces of rows of A.
		size, parts := splitParts(m, m*n)
		o.run(parts, func(p int) {
			r0 := p * size
			gemv(min(size, m-r0), n, r0*lda, r0*incY)
		})
		return
	}
	// y = Aᵀx: pieces of y = pieces of columns of A.
	size, parts := splitParts(n, m*n)
	o.run(parts, func(p int) {
		j0 := p * size
		gemv(m, min(size, n-j0), j0, j0*incY)
	})
}

// Saxpy computes y += alpha * x with the same checks and panics as gonum.
func (o *OpenBLAS) Saxpy(n int, alpha float32, x []float32, incX int, y []float32, incY int) {
	if n < minLevel1 || !fitsCInt(n, incX, incY) {
		o.Implementation.Saxpy(n, alpha, x, incX, y, incY)
		return
	}
	if !checkAxpyDot(n, x, incX, y, incY) || alpha == 0 {
		return
	}
	o.lib.saxpy(int32(n), alpha, &x[0], int32(incX), &y[0], int32(incY))
}

// Sdot returns the dot product of x and y with the same checks and panics as
// gonum.
func (o *OpenBLAS) Sdot(n int, x []float32, incX int, y []float32, incY int) float32 {
	if n < minLevel1 || !fitsCInt(n, incX, incY) {
		return o.Implementation.Sdot(n, x, incX, y, incY)
	}
	if !checkAxpyDot(n, x, incX, y, incY) {
		return 0
	}
	return o.lib.sdot(int32(n), &x[0], int32(incX), &y[0], int32(incY))
}

// Sscal computes x = alpha * x with the same checks and panics as gonum: a
// negative increment does nothing, and alpha == 0 writes zeros without
// reading x.
func (o *OpenBLAS) Sscal(n int, alpha float32, x []float32, incX int) {
	if n < minLevel1 || incX < 1 || alpha == 0 || !fitsCInt(n, incX) {
		o.Implementation.Sscal(n, alpha, x, incX)
		return
	}
	if (n-1)*incX >= len(x) {
		panic(shortX)
	}
	o.lib.sscal(int32(n), alpha, &x[0], int32(incX))
}
