//go:build !amd64 || purego

package engine

// convDirectOK is convTileOK without the assembly: the portable tile kernel is no
// faster than im2col and Sgemm.
func convDirectOK() bool { return convTileOK() }
