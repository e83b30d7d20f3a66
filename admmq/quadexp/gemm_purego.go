//go:build linux && (amd64 || arm64)

package quadexp

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// openBLASDgemm dlopens OpenBLAS and returns its cblas_dgemm, restricted to one thread per
// call: the experiment runs its own workers, one job per core, which keeps every product
// computed by the same single-threaded kernel and therefore the output independent of the
// number of workers.
func openBLASDgemm() (gemmFunc, string, error) {
	var lastErr error
	for _, name := range []string{"libopenblas.so.0", "libopenblas.so", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			lastErr = err
			continue
		}
		var dgemm func(order, transA, transB, m, n, k int32, alpha float64, a *float64, lda int32, b *float64, ldb int32, beta float64, c *float64, ldc int32)
		var setThreads func(n int32)
		for _, s := range []struct {
			fptr any
			name string
		}{{&dgemm, "cblas_dgemm"}, {&setThreads, "openblas_set_num_threads"}} {
			fn, err := purego.Dlsym(h, s.name)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %s is missing (not an OpenBLAS library?): %w", name, s.name, err)
			}
			purego.RegisterFunc(s.fptr, fn)
		}
		setThreads(1)
		const rowMajor, noTrans = 101, 111
		return func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
			if m == 0 || n == 0 {
				return
			}
			dgemm(rowMajor, noTrans, noTrans, int32(m), int32(n), int32(k), 1, &a[0], int32(lda), &b[0], int32(ldb), 0, &c[0], int32(ldc))
		}, "OpenBLAS (" + name + ", 1 thread per worker)", nil
	}
	return nil, "", fmt.Errorf("OpenBLAS not found (apt-get install libopenblas0): %w", lastErr)
}
