//go:build amd64 && !purego

package engine

import "math"

// maxRowsAVX512 sets dst[j] to max(dst[j], src[j]) for j < n, as Go's max does.
//
//go:noescape
func maxRowsAVX512(dst, src *float32, n int)

// maxCols3s2AVX512 sets y[j] to max(max(col[2j], col[2j+1]), col[2j+2]) for j < n,
// reading col up to 32·⌈n/16⌉ + 2 entries; idx holds VPERMT2PS's even and odd indices.
//
//go:noescape
func maxCols3s2AVX512(col, y *float32, n int, idx *int32)

// maxPoolRowsAVX512 is maxRowsAVX512 and maxCols3s2AVX512 for rows output rows whose
// windows hold all their kh input rows, in one call (see the assembly).
//
//go:noescape
func maxPoolRowsAVX512(x *float32, w, step, kh, rows int, col *float32, pb int, y *float32, ow int, idx *int32)

// maxPoolEvenOdd are maxCols3s2AVX512's indices: the even entries of two registers, then
// the odd ones.
var maxPoolEvenOdd = func() (t [32]int32) {
	for i := range 16 {
		t[i], t[16+i] = int32(2*i), int32(2*i+1)
	}
	return t
}()

// maxPoolRowsFast is maxPoolRows in AVX-512 for windows 3 wide at column stride 2 (the
// 3×3 stride-2 pools of ResNet, ShuffleNet and SqueezeNet), any number of rows: the
// window rows' maxima column by column, 16 at a time, into a row that starts with pb
// entries of −Inf and continues with −Inf past the input, then three of its entries
// per output, gathered 16 outputs at a time. A window that the table clips at the
// edges takes −Inf for its clipped columns, which is exactly what max over the rest
// gives (−Inf loses to every value, NaN included). Without AVX-512, the same in AVX2
// (8 values at a time, maxPoolRowsAVX2Plane). It reports false for the geometries it
// does not take.
func maxPoolRowsFast(g *nnGeom, t *poolTables, x, y []float32, oa, ob, row0 int) bool {
	W, ow, pb := g.in[2], g.out[2], g.pb[2]
	var buf [maxPoolRowsMax + 96]float32
	n := max(32*((ow+15)/16)+2, pb+W)
	if !(convTileOK() || convTileAVX2OK()) || g.k[2] != 3 || g.s[2] != 2 || pb > 2 || n > len(buf) || ow == 0 || W == 0 {
		return false
	}
	if oa < ob && (len(x) < (maxPoolEnd(g, t, ob-1)-row0)*W || len(y) < (ob-oa)*ow ||
		oa*g.s[1]-g.pb[1]+t.lo[1][oa] < row0) {
		panic("max pool rows out of range")
	}
	col := buf[:n]
	inf := float32(math.Inf(-1))
	for i := range col {
		col[i] = inf
	}
	if !convTileOK() {
		maxPoolRowsAVX2Plane(g, t, x, y, oa, ob, row0, col)
		return true
	}
	for o1 := oa; o1 < ob; o1++ {
		a1, b1 := t.lo[1][o1], t.hi[1][o1]
		if a1 == 0 && b1 == g.k[1] {
			// A run of unclipped windows in one call.
			e := o1 + 1
			for e < ob && t.lo[1][e] == 0 && t.hi[1][e] == g.k[1] {
				e++
			}
			s1 := o1*g.s[1] - g.pb[1] - row0
			maxPoolRowsAVX512(&x[s1*W], W, 4*g.s[1]*W, g.k[1], e-o1, &col[0], pb, &y[(o1-oa)*ow], ow, &maxPoolEvenOdd[0])
			o1 = e - 1
			continue
		}
		yr := y[(o1-oa)*ow : (o1-oa+1)*ow]
		if a1 >= b1 {
			for i := range yr {
				yr[i] = inf
			}
			continue
		}
		s1 := o1*g.s[1] - g.pb[1] - row0
		copy(col[pb:pb+W], x[(s1+a1)*W:(s1+a1+1)*W])
		for k1 := a1 + 1; k1 < b1; k1++ {
			maxRowsAVX512(&col[pb], &x[(s1+k1)*W], W)
		}
		maxCols3s2AVX512(&col[0], &yr[0], ow, &maxPoolEvenOdd[0])
	}
	return true
}

//go:noescape
func maxPoolRowsAVX2(x *float32, w, step, kh, rows int, col *float32, pb int, y *float32, ow int, masks *int32)

// maxPoolRowsAVX2Plane is maxPoolRowsFast's loop on AVX2: runs of unclipped windows in
// one call each, and each clipped window as a run of one with its own rows, from the
// −Inf-padded row col.
func maxPoolRowsAVX2Plane(g *nnGeom, t *poolTables, x, y []float32, oa, ob, row0 int, col []float32) {
	W, ow, pb := g.in[2], g.out[2], g.pb[2]
	var masks [16]int32
	copy(masks[:8], avx2LaneMasks[8-W%8:16-W%8])
	copy(masks[8:], avx2LaneMasks[8-ow%8:16-ow%8])
	for o1 := oa; o1 < ob; o1++ {
		a1, b1 := t.lo[1][o1], t.hi[1][o1]
		if a1 >= b1 {
			yr := y[(o1-oa)*ow : (o1-oa+1)*ow]
			for i := range yr {
				yr[i] = float32(math.Inf(-1))
			}
			continue
		}
		e := o1 + 1
		if a1 == 0 && b1 == g.k[1] {
			for e < ob && t.lo[1][e] == 0 && t.hi[1][e] == g.k[1] {
				e++
			}
		}
		s1 := o1*g.s[1] - g.pb[1] - row0
		maxPoolRowsAVX2(&x[(s1+a1)*W], W, 4*g.s[1]*W, b1-a1, e-o1, &col[0], pb, &y[(o1-oa)*ow], ow, &masks[0])
		o1 = e - 1
	}
}
