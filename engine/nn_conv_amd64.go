//go:build amd64 && !purego

package engine

import "sync"

// convTileAVX512 is the assembly form of convTileGeneric (see there for the contract),
// for CPUs with AVX-512F.
//
//go:noescape
func convTileAVX512(k int, a, b0, b1 *float32, ldb int, c0, c1 *float32, ldc int, bias *float32, m0, m1 uint64, flags, nrb int)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

func xgetbv() (lo uint32)

// convTileOK reports whether the CPU and the operating system support AVX-512F: the
// CPU flag alone is not enough, the OS must also save the zmm and mask registers on
// context switches (XCR0 bits 1, 2, 5, 6 and 7).
var convTileOK = sync.OnceValue(func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const osxsave = 1 << 27
	if c1&osxsave == 0 {
		return false
	}
	const zmmState = 1<<1 | 1<<2 | 1<<5 | 1<<6 | 1<<7
	if xgetbv()&zmmState != zmmState {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	const avx512f = 1 << 16
	return b7&avx512f != 0
})

// convTile computes nrb consecutive 8-row tiles with the assembly kernel.
func convTile(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int) {
	convTileCheck(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, nrb)
	if nrb == 0 {
		return
	}
	var bp *float32
	if bias != nil {
		bp = &bias[0]
	}
	convTileAVX512(k, &a[0], &b0[0], &b1[0], ldb, &c0[0], &c1[0], ldc, bp, m0, m1, flags, nrb)
}
