//go:build linux && (amd64 || arm64)

package quadexp

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// openBLASDgemm dlopens OpenBLAS and returns its cblas_dgemm, restricted to one thread per
// call: the experiment runs its own workers, one job per core, which keeps every product
// computed by the same single-threaded kernel and therefore the output independent of the
// number of workers.
func openBLASDgemm() (func() gemmFunc, string, error) {
	var lastErr error
	for _, name := range []string{"libopenblas.so.0", "libopenblas.so", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			lastErr = err
			continue
		}
		var setThreads func(n int32)
		fn, err := purego.Dlsym(h, "openblas_set_num_threads")
		if err != nil {
			return nil, "", fmt.Errorf("%s: openblas_set_num_threads is missing (not an OpenBLAS library?): %w", name, err)
		}
		purego.RegisterFunc(&setThreads, fn)
		dgemm, err := purego.Dlsym(h, "dgemm_")
		if err != nil {
			return nil, "", fmt.Errorf("%s: dgemm_ is missing (not an OpenBLAS library?): %w", name, err)
		}
		setThreads(1)
		return func() gemmFunc { return fortranDgemm(dgemm) }, "OpenBLAS (" + name + ", 1 thread per worker)", nil
	}
	return nil, "", fmt.Errorf("OpenBLAS not found (apt-get install libopenblas0): %w", lastErr)
}

// gemmArgs holds the by-reference scalar arguments of the Fortran dgemm_. It lives on the
// heap, one per gemm function, so that passing its addresses allocates nothing per call.
type gemmArgs struct {
	trans                  [2]byte
	m, n, k, lda, ldb, ldc int32
	alpha, beta            float64
}

// fortranDgemm calls dgemm_ directly through purego.SyscallN: every argument of the Fortran
// interface is a pointer, so no reflection (RegisterFunc's per-call allocation) is needed.
// Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ, so A and B and m and n swap, as cblas_dgemm
// does internally for row-major input. The gemm function is not safe for concurrent use;
// each worker makes its own.
func fortranDgemm(fn uintptr) gemmFunc {
	args := &gemmArgs{trans: [2]byte{'N', 'N'}, alpha: 1}
	return func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
		if m == 0 || n == 0 {
			return
		}
		args.m, args.n, args.k = int32(n), int32(m), int32(k)
		args.lda, args.ldb, args.ldc = int32(ldb), int32(lda), int32(ldc)
		purego.SyscallN(fn,
			uintptr(unsafe.Pointer(&args.trans[0])), uintptr(unsafe.Pointer(&args.trans[1])),
			uintptr(unsafe.Pointer(&args.m)), uintptr(unsafe.Pointer(&args.n)), uintptr(unsafe.Pointer(&args.k)),
			uintptr(unsafe.Pointer(&args.alpha)),
			uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&args.lda)),
			uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&args.ldb)),
			uintptr(unsafe.Pointer(&args.beta)),
			uintptr(unsafe.Pointer(&c[0])), uintptr(unsafe.Pointer(&args.ldc)))
	}
}
