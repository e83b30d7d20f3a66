//go:build !(linux && (amd64 || arm64)) || noopenblas

package blas

import "errors"

// openblasLib is never created on platforms without purego loading support;
// the fields keep the shared code compiling.
type openblasLib struct {
	path   string
	config string
	core   string
	chose  string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	sgemv func(order, trans, m, n int32, alpha float32, a *float32, lda int32, x *float32, incX int32, beta float32, y *float32, incY int32)
	saxpy func(n int32, alpha float32, x *float32, incX int32, y *float32, incY int32)
	sdot  func(n int32, x *float32, incX int32, y *float32, incY int32) float32
	sscal func(n int32, alpha float32, x *float32, incX int32)

	setNumThreads func(n int32)
	getNumThreads func() int32
}

// platformErr explains why this build cannot load OpenBLAS: purego loads
// libraries without cgo only on linux/amd64 and linux/arm64, and the
// noopenblas build tag leaves it out on purpose so that a CGO_ENABLED=0
// binary is fully static (purego makes it depend on the system's dynamic
// loader and libc).
func platformErr() error {
	return errors.New("openblas: this build of qtool cannot load OpenBLAS (built with the noopenblas tag, or not for linux/amd64 or linux/arm64); use QTOOL_BLAS=go")
}

func openLib(name string) (*openblasLib, error) { return nil, platformErr() }
