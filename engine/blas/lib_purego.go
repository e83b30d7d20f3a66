//go:build linux && (amd64 || arm64) && !noopenblas

package blas

import (
	"fmt"

	"github.com/ebitengine/purego"
)

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
