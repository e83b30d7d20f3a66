//go:build !(linux && (amd64 || arm64))

package blas

import "fmt"

// openblasLib is never created on platforms without purego loading support;
// the fields keep the shared code compiling.
type openblasLib struct {
	path   string
	config string

	sgemm func(order, transA, transB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	sgemv func(order, trans, m, n int32, alpha float32, a *float32, lda int32, x *float32, incX int32, beta float32, y *float32, incY int32)
	saxpy func(n int32, alpha float32, x *float32, incX int32, y *float32, incY int32)
	sdot  func(n int32, x *float32, incX int32, y *float32, incY int32) float32
	sscal func(n int32, alpha float32, x *float32, incX int32)

	setNumThreads func(n int32)
	getNumThreads func() int32
}

// openLib fails: purego loads libraries without cgo only on the platforms
// selected by lib_purego.go's build constraint.
func openLib(name string) (*openblasLib, error) {
	return nil, fmt.Errorf("%s: loading OpenBLAS without cgo is supported on linux/amd64 and linux/arm64 only", name)
}
