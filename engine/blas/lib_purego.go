//go:build linux && (amd64 || arm64) && !noopenblas

package blas

import (
	"fmt"
	"os"

	"github.com/ebitengine/purego"
)

// threadTimeoutEnv is read by OpenBLAS once, when the library loads. Its default lets
// idle worker threads spin for a long time after each call; on qtool's 2-core target
// they then steal the cores from the engine's own kernels that run between BLAS calls.
// Measured on fmnist-cnn and fmnist-resnet forward passes, a timeout of 4 (2^4 cycles
// of spinning before sleeping) cut CPU time per pass by 25-60 %.
const (
	threadTimeoutEnv     = "OPENBLAS_THREAD_TIMEOUT"
	defaultThreadTimeout = "4"
)

// setLibcEnv sets an environment variable in the C library's environment, which is
// where OpenBLAS reads it: without cgo, os.Setenv changes only Go's copy. A value the
// user already set is kept.
func setLibcEnv(name, value string) {
	if os.Getenv(name) != "" {
		return
	}
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return // not glibc: OpenBLAS keeps its default, which is correct, only slower
	}
	fn, err := purego.Dlsym(h, "setenv")
	if err != nil {
		return
	}
	var setenv func(name, value string, overwrite int32) int32
	purego.RegisterFunc(&setenv, fn)
	setenv(name, value, 0)
}

// openblasLib holds the entry points of one dlopen'ed OpenBLAS. CBLAS ints
// are C int (32 bits): Debian's libopenblas0 uses the LP64 interface, the
// 64-bit-index variant is a different package (libopenblas64-0) and soname.
type openblasLib struct {
	path   string
	handle uintptr
	config string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	sgemv func(order, trans, m, n int32, alpha float32, a *float32, lda int32, x *float32, incX int32, beta float32, y *float32, incY int32)
	saxpy func(n int32, alpha float32, x *float32, incX int32, y *float32, incY int32)
	sdot  func(n int32, x *float32, incX int32, y *float32, incY int32) float32
	sscal func(n int32, alpha float32, x *float32, incX int32)

	setNumThreads func(n int32)
	getNumThreads func() int32
}

// platformErr is nil: this build can load OpenBLAS.
func platformErr() error { return nil }

// openLib dlopens name and resolves every symbol qtool uses, so that a
// library missing one fails here rather than at the first call.
func openLib(name string) (*openblasLib, error) {
	setLibcEnv(threadTimeoutEnv, defaultThreadTimeout)
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %w", name, err)
	}
	l := &openblasLib{path: name, handle: h}
	syms := []struct {
		fptr any
		name string
	}{
		{&l.sgemm, "cblas_sgemm"},
		{&l.sgemv, "cblas_sgemv"},
		{&l.saxpy, "cblas_saxpy"},
		{&l.sdot, "cblas_sdot"},
		{&l.sscal, "cblas_sscal"},
		{&l.setNumThreads, "openblas_set_num_threads"},
		{&l.getNumThreads, "openblas_get_num_threads"},
	}
	for _, s := range syms {
		fn, err := purego.Dlsym(h, s.name)
		if err != nil {
			_ = purego.Dlclose(h)
			return nil, fmt.Errorf("%s: %s is missing (not an OpenBLAS library?): %w", name, s.name, err)
		}
		purego.RegisterFunc(s.fptr, fn)
	}
	// openblas_get_config is informational only, so its absence is not an error.
	if fn, err := purego.Dlsym(h, "openblas_get_config"); err == nil {
		var getConfig func() string
		purego.RegisterFunc(&getConfig, fn)
		l.config = getConfig()
	}
	return l, nil
}
