//go:build amd64 && !purego

package engine

import (
	"fmt"
	"math"
)

// winoInAVX512 is winoInGo for CPUs with AVX-512F; mlast holds the lanes of a row's
// last block of 16 tiles.
//
//go:noescape
func winoInAVX512(q *float32, qp, S, tw, rows int, v *float32, ldv int, mlast uint64)

// winoOutAVX512 is winoOutGo for CPUs with AVX-512F; mlast holds the tiles of a row's
// last block, olo and ohi its output pixels (the first and second 16), and idx the
// two interleaving permutations (winoInterleave).
//
//go:noescape
func winoOutAVX512(m *float32, ldm, tw, rows int, y *float32, ow, ohr int, bias float32, res *float32, flags int, mlast, olo, ohi uint64, idx *int32)

// winoInAVX2 is winoInGo for CPUs with AVX2 and FMA, 8 tiles to a block; mlast is
// VMASKMOVPS's mask (avx2LaneMasks) of a row's last block.
//
//go:noescape
func winoInAVX2(q *float32, qp, S, tw, rows int, v *float32, ldv int, mlast *int32)

// winoOutAVX2 is winoOutGo for CPUs with AVX2 and FMA, 8 tiles to a block: mlast, olo
// and ohi are the masks of a row's last block (its tiles, its first and second 8 output
// pixels), ones that of the others.
//
//go:noescape
func winoOutAVX2(m *float32, ldm, tw, rows int, y *float32, ow, ohr int, bias float32, res *float32, flags int, mlast, olo, ohi, ones *int32)

// winoInterleave holds the permutations that interleave two vectors of 16: lanes 0-7
// of both, then lanes 8-15.
var winoInterleave = [32]int32{
	0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
	8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31,
}

// winoFast reports whether the Winograd path has its assembly transforms.
func winoFast() bool { return convTileOK() || convTileAVX2OK() }

// winoIn is the input transform (winoInGo) in AVX-512 or AVX2.
func winoIn(q []float32, qp, S, tw, rows int, v []float32, ldv int) {
	winoCheck(q, qp, S, tw, rows, v, ldv)
	switch {
	case convTileOK():
		winoInAVX512(&q[0], qp, S, tw, rows, &v[0], ldv, laneMask(tw-(tw-1)/16*16))
	case convTileAVX2OK():
		last := tw - (tw-1)/8*8
		winoInAVX2(&q[0], qp, S, tw, rows, &v[0], ldv, &avx2LaneMasks[8-last])
	default:
		winoInGo(q, qp, S, tw, rows, v, ldv)
	}
}

// winoOut is the output transform (winoOutGo) in AVX-512 or AVX2.
func winoOut(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int) {
	if tw < 1 || rows < 1 || ohr < 2*rows-1 || ohr > 2*rows || ow > 2*tw || ow < 2*tw-1 ||
		ldm < rows*tw || len(m) < 15*ldm+rows*tw || len(y) < ohr*ow || (flags&winoRes != 0 && len(res) < ohr*ow) {
		panic(fmt.Sprintf("winograd output transform out of range: %d rows of %d tiles, ld %d of %d, output %d×%d of %d", rows, tw, ldm, len(m), ohr, ow, len(y)))
	}
	var rp *float32
	if flags&winoRes != 0 {
		rp = &res[0]
	}
	switch {
	case convTileOK():
		last := tw - (tw-1)/16*16
		n := ow - (tw-last)*2 // output pixels of the last block
		winoOutAVX512(&m[0], ldm, tw, rows, &y[0], ow, ohr, bias, rp, flags, laneMask(last), laneMask(n), laneMask(max(n-16, 0)), &winoInterleave[0])
	case convTileAVX2OK():
		last := tw - (tw-1)/8*8
		n := ow - (tw-last)*2
		lo, hi := min(n, 8), max(n-8, 0)
		winoOutAVX2(&m[0], ldm, tw, rows, &y[0], ow, ohr, bias, rp, flags, &avx2LaneMasks[8-last], &avx2LaneMasks[8-lo], &avx2LaneMasks[8-hi], &avx2LaneMasks[0])
	default:
		winoOutGo(m, ldm, tw, rows, y, ow, ohr, bias, res, flags)
	}
}

// winoIn4AVX2 is winoIn4Go in AVX2, 8 tiles to a block (see nn_wino4_amd64.s).
//
//go:noescape
func winoIn4AVX2(p *float32, offs *[36]int64, rows, tw, rowStep int, v *float32, voffs *[36]int64, mlast *int32)

// winoOut4AVX2 is winoOut4Go in AVX2, 8 tiles to a block (see nn_wino4_amd64.s).
//
//go:noescape
func winoOut4AVX2(m *float32, moffs *[36]int64, tw, rows int, y *float32, ow, ohr int, bias float32, res *float32, flags int, mlast, ones, masks *int32)

// wino4Fast reports whether the F(4×4) transforms have their AVX2 form.
func wino4Fast() bool { return convTileAVX2OK() }

// winoOnes is winoOut4AVX2's mask of a whole block's 32 pixels.
var winoOnes = [32]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// winoIn4 is the input transform (winoIn4Go), in AVX2 where the CPU has it (AVX-512
// CPUs too: the transforms are a few per cent of the path's time).
func winoIn4(p []float32, pp, S, tw, rows int, v []float32, ldv int, tabs *wino4Tabs) {
	wino4Check(p, pp, S, tw, rows, v, ldv)
	if !convTileAVX2OK() {
		winoIn4Go(p, pp, S, tw, rows, v, ldv)
		return
	}
	t := tabs.in(pp, S, ldv)
	last := tw - (tw-1)/8*8
	winoIn4AVX2(&p[0], &t.offs, rows, tw, 8*S, &v[0], &t.voffs, &avx2LaneMasks[8-last])
}

// winoOut4 is the output transform (winoOut4Go), in AVX2 where the CPU has it.
func winoOut4(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int, tabs *wino4Tabs) {
	wino4OutCheck(m, ldm, tw, rows, y, ow, ohr, res, flags)
	if !convTileAVX2OK() {
		winoOut4Go(m, ldm, tw, rows, y, ow, ohr, bias, res, flags)
		return
	}
	t := tabs.out(ldm)
	if flags&winoBias == 0 {
		bias = float32(math.Copysign(0, -1)) // x + (−0) is x, −0 included
	}
	rp := &y[0]
	if flags&winoRes != 0 {
		rp = &res[0]
	}
	last := tw - (tw-1)/8*8
	n := ow - 32*((tw-1)/8) // pixels of a row's last block
	var masks [32]int32
	for i := range n {
		masks[i] = -1
	}
	winoOut4AVX2(&m[0], &t.moffs, tw, rows, &y[0], ow, ohr, bias, rp, flags, &avx2LaneMasks[8-last], &winoOnes[0], &masks[0])
}
