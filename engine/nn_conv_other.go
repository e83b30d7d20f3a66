//go:build !amd64 || purego

package engine

// convTileOK is false without the assembly kernel: the portable convTileGeneric is no
// faster than the BLAS path, so convolutions keep using im2col and Sgemm.
func convTileOK() bool { return false }

func convTile(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int) {
	convTileGeneric(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb)
}
