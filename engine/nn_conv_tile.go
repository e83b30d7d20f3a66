package engine

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// The tile kernel is the inner loop of the direct convolution path (nn_conv_direct.go):
// 8-row blocks of output channels times two panels of up to 16 columns each (output
// pixels, or weight-gradient columns), summed over k. Each panel has its own source and
// destination, so that the two halves of one call may belong to different images:
// planes of 4×4 or 7×7 pixels fill whole registers that way. One call makes nrb row
// blocks one below the other, which saves a call per block on the small k of first
// layers.
//
// Its contract, for row block q in [0, nrb), r in [0, 8), panel p in {0, 1} and lane j in
// [0, 16) with bit j of mask m_p set, with R = 8q + r:
//
//	c_p[R·ldc + j] = init + Σ_{i<k} a[8kq + 8i + r] · b_p[row(i) + j]
//
// where row(i) is i·ldb, or with an offset table offs.off[i]/4 (the table holds byte
// offsets, for the assembly): rows of B anywhere in b_p, as the taps of a convolution
// read them from a padded image without an im2col copy.
// where init is bias[R] (zero when bias is nil), plus c_p[R·ldc + j] itself with tileAdd
// (in that order: c + bias, rounded, then the products); the result then passes through the activation act when it is non-nil, computed
// exactly as the Relu, Clip and HardSwish kernels compute it (see tileAct). Lanes whose
// mask bit is clear are neither read nor written. With tilePack, lane j of C is instead
// c_p[R·ldc + rank(j)], rank(j) the number of mask bits below j: the valid lanes lie
// packed in C, as an output plane's pixels do when the panel runs along padded rows.
// tileStream is a hint that changes no value: the assembly kernels then store rows
// whose lanes are all valid and whose start is 64-byte aligned with non-temporal stores,
// which bypass the cache, and ignore it otherwise. The caller calls storeFence before
// another goroutine may read C. tilePrefetch is another such hint: the assembly kernels
// then also fetch, row by row of B, the panels 256 bytes after the ones they read, which
// is where the panel pair after next starts along a plane, and C's rows there for
// writing.
const (
	tileAdd      = 1
	tileRelu     = 2
	tileClip     = 4
	tileSwish    = 8
	tilePack     = 16
	tileStream   = 32
	tilePrefetch = 64
)

// tileAligned reports whether rows ldc apart from c's start are all 64-byte aligned,
// as the non-temporal stores of tileStream need.
func tileAligned(c []float32, ldc int) bool {
	return ldc%16 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(c)))%64 == 0
}

// tileAct is an activation for the tile kernel and the depthwise planes, as dw3x3Flags
// encodes an nnClamp: tileRelu; tileClip to the order-preserving integer keys lo and hi
// (floatKey of the bounds' bits); or tileSwish, v·clamp(a·v + b) with the clamp to the
// bit patterns lo = 0 and hi = 1.0.
type tileAct struct {
	flags  int
	lo, hi int32
	a, b   float32
}

// apply returns the activation of v.
func (t *tileAct) apply(v float32) float32 {
	switch {
	case t.flags&tileRelu != 0:
		u := int32(math.Float32bits(v))
		return math.Float32frombits(uint32(u &^ (u >> 31)))
	case t.flags&tileClip != 0:
		if v != v {
			return v
		}
		k := floatKey(int32(math.Float32bits(v)))
		return math.Float32frombits(uint32(floatKey(min(max(k, t.lo), t.hi))))
	case t.flags&tileSwish != 0:
		u := int32(math.Float32bits(t.a*v + t.b))
		return v * math.Float32frombits(uint32(min(max(u, t.lo), t.hi)))
	}
	return v
}

// convTileGeneric is the portable statement of the tile kernel's contract; the assembly
// kernel is tested against it.
func convTileGeneric(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int, offs *tileOffs, act *tileAct) {
	convTileCheck(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs)
	for _, pan := range [2]struct {
		b, c []float32
		m    uint64
	}{{b0, c0, m0}, {b1, c1, m1}} {
		for R := 0; R < 8*nrb; R++ {
			q, r := R/8, R%8
			for j := 0; j < 16; j++ {
				if pan.m&(1<<j) == 0 {
					continue
				}
				cj := R*ldc + j
				if flags&tilePack != 0 {
					cj = R*ldc + bits.OnesCount64(pan.m&(1<<j-1))
				}
				var s float32
				switch {
				case flags&tileAdd != 0 && bias != nil:
					s = pan.c[cj] + bias[R]
				case flags&tileAdd != 0:
					s = pan.c[cj]
				case bias != nil:
					s = bias[R]
				}
				for i := 0; i < k; i++ {
					row := i * ldb
					if offs != nil {
						row = int(offs.off[i] / 4)
					}
					s = float32(math.FMA(float64(a[8*k*q+8*i+r]), float64(pan.b[row+j]), float64(s)))
				}
				if act != nil {
					s = act.apply(s)
				}
				pan.c[cj] = s
			}
		}
	}
}

// tileOffs is an offset table for the tile kernel: off[i] is the byte offset of row i
// of B, and max the largest of them, for the bounds check.
type tileOffs struct {
	off []int64
	max int64
}

// convTileCheck panics (the executor turns that into an error naming the node) when a
// tile would reach outside one of its slices: the assembly kernel works on raw pointers.
func convTileCheck(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int, offs *tileOffs) {
	bOK := tileFits(b0, k, ldb, m0) && tileFits(b1, k, ldb, m1)
	if offs != nil {
		bOK = len(offs.off) >= k && len(b0) > 0 && len(b1) > 0 && offs.max%4 == 0 &&
			(m0 == 0 || k == 0 || int(offs.max/4)+bits.Len64(m0) <= len(b0)) &&
			(m1 == 0 || k == 0 || int(offs.max/4)+bits.Len64(m1) <= len(b1))
	}
	if k < 0 || nrb < 0 || m0>>16 != 0 || m1>>16 != 0 || len(a) < 8*k*nrb || (bias != nil && len(bias) < 8*nrb) ||
		!bOK || !tileFits(c0, 8*nrb, ldc, tileStored(m0, flags)) || !tileFits(c1, 8*nrb, ldc, tileStored(m1, flags)) {
		panic(fmt.Sprintf("conv tile out of range: k=%d nrb=%d len(a)=%d ldb=%d ldc=%d masks %#x %#x lens %d %d %d %d",
			k, nrb, len(a), ldb, ldc, m0, m1, len(b0), len(b1), len(c0), len(c1)))
	}
}

// tileStored is the lanes of C that a panel of mask m reads and writes: m, or with
// tilePack as many lanes from the first.
func tileStored(m uint64, flags int) uint64 {
	if flags&tilePack != 0 {
		return laneMask(bits.OnesCount64(m))
	}
	return m
}

// tileFits reports whether rows 0..rows-1 at stride ld of the lanes in mask lie inside
// s; an empty mask touches nothing, but the pointer taken from s must still exist.
func tileFits(s []float32, rows, ld int, mask uint64) bool {
	if len(s) == 0 {
		return false
	}
	if mask == 0 || rows == 0 {
		return true
	}
	return ld >= 0 && (rows-1)*ld+bits.Len64(mask) <= len(s)
}

// dw3x3Flags encodes act for the assembly as a tileAct; ok is false for a Clip with a
// NaN bound and for SiLU, which the caller applies itself.
func dw3x3Flags(act *nnClamp) (t tileAct, ok bool) {
	switch {
	case act == nil:
		return tileAct{}, true
	case act.silu:
		return tileAct{}, false
	case act.relu:
		return tileAct{flags: tileRelu}, true
	case act.swish:
		return tileAct{flags: tileSwish, hi: 0x3f800000, a: act.a, b: act.b}, true
	case act.lo != act.lo || act.hi != act.hi:
		return tileAct{}, false
	}
	return tileAct{flags: tileClip, lo: floatKey(int32(math.Float32bits(act.lo))), hi: floatKey(int32(math.Float32bits(act.hi)))}, true
}
