//go:build amd64 && !purego

package engine

import (
	"fmt"
	"math"

	"golang.org/x/sys/cpu"
)

// convTile4AVX2 is four rows of one panel of the tile kernel in AVX2 and FMA assembly
// (see the .s file for its arguments): 16 ymm registers hold 4 rows × 16 lanes of
// accumulators, the B row and the broadcast weights, where AVX-512 holds all 8 × 32.
//
//go:noescape
func convTile4AVX2(k int, a, b *float32, ldb int, c *float32, ldc int, bias *float32, mask *int32, full, flags int, offs *int64, lo, hi int32, sa, sb float32)

// convTile6AVX2 is six rows of a panel whose lanes are all valid, with no activation
// but tileRelu and tileClip (see the .s file): 12 accumulators where convTile4AVX2 holds 8.
//
//go:noescape
func convTile6AVX2(k int, a0, a1, a2, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, offs *int64, nt int, clip *int32)

// convTileAVX2OK reports whether the CPU and the operating system support AVX2 and
// FMA (x/sys/cpu checks that the OS saves the ymm registers).
func convTileAVX2OK() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// convDirectOK reports whether the direct convolution path has an assembly tile
// kernel on this CPU: AVX-512, else AVX2 with FMA. The portable kernel is no faster
// than im2col and Sgemm.
func convDirectOK() bool { return convTileOK() || convTileAVX2OK() }

//go:noescape
func sumsSetAVX2(x, gr *float32, n int, mu, inv float32, mode int, out *float64, segs, stride, set int)

// nnSumsAVX2 is nnSums on CPUs with AVX2 but not AVX-512: a call of sumsSetAVX2 for each
// set of 16 lanes that a segment reaches, then the sets and the lanes added as
// nnSumsLanes adds them. The arguments are nnSums' checked ones. In a training step of
// fmnist-resnet on the AVX2 path, nnSumsLanes' per-plane form in Go took 14 % of the time.
func nnSumsAVX2(x, gr *float32, n, segs, stride int, mu, inv float32, mode int) (float64, float64) {
	var sets [4][32]float64
	for set := 0; set < 4 && 16*set < n; set++ {
		sumsSetAVX2(x, gr, n, mu, inv, mode, &sets[set][0], segs, stride, set)
	}
	var a, b [16]float64
	for j := range a {
		a[j] = (sets[0][j] + sets[1][j]) + (sets[2][j] + sets[3][j])
		b[j] = (sets[0][16+j] + sets[1][16+j]) + (sets[2][16+j] + sets[3][16+j])
	}
	return nnLanes16(a), nnLanes16(b)
}

// convTileAVX2 is convTileGeneric (same contract and results, bit for bit: the sums
// take the same FMAs in the same order) with convTile4AVX2 making each panel four
// rows at a time; convTileGeneric itself where the CPU lacks AVX2 or FMA. Only the
// first rows rows (rounded up to a multiple of four) are made: the quads past them are
// left as they were.
func convTileAVX2(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb, rows int, offs *tileOffs, act *tileAct) {
	// Packed lanes (tilePack) have no AVX2 form: the direct path asks for them only
	// with AVX-512.
	if !convTileAVX2OK() || flags&tilePack != 0 {
		convTileGeneric(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, act)
		return
	}
	convTileCheck(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs)
	var t tileAct
	if act != nil {
		t = *act
	}
	var op *int64
	if offs != nil && k > 0 {
		op = &offs.off[0]
	}
	for _, pan := range [2]struct {
		b, c []float32
		m    uint64
	}{{b0, c0, m0}, {b1, c1, m1}} {
		if pan.m == 0 {
			continue
		}
		var mv [16]int32
		for j := range mv {
			mv[j] = -int32(pan.m >> j & 1)
		}
		full := 0
		if pan.m == 0xffff {
			full = 1
			if flags&(tileStream|tileAdd) == tileStream && tileAligned(pan.c, ldc) {
				full = 2
			}
		}
		R, rq := 0, min((rows+3)&^3, 8*nrb)
		// Whole panels: each 12 rows as two sixes (convTile6AVX2 reads each pair of rows
		// from its own pointer, so a six may straddle two blocks of A), and what is left,
		// four or eight rows, as quads: four quads would read B four times with eight
		// accumulators each, and a sixteen as six, six and four left a quarter of the
		// rows to them. Not for HardSwish.
		if full > 0 && k > 0 && (flags|t.flags)&(tileSwish|tilePack) == 0 {
			nt := 0
			if full == 2 {
				nt = 1
			}
			var clip [24]int32
			for j := range 8 {
				clip[j], clip[8+j], clip[16+j] = math.MaxInt32, t.lo, t.hi
			}
			row := func(r int) *float32 { return &a[8*k*(r/8)+r%8] }
			for ; R+12 <= rq; R += 12 {
				for _, r := range [2]int{R, R + 6} {
					var br *float32
					if bias != nil {
						br = &bias[r]
					}
					convTile6AVX2(k, row(r), row(r+2), row(r+4), &pan.b[0], ldb, &pan.c[r*ldc], ldc, br, flags|t.flags, op, nt, &clip[0])
				}
			}
		}
		for ; R < rq; R += 4 {
			var ap, bp *float32
			if k > 0 {
				ap = &a[8*k*(R/8)+R%8]
			}
			if bias != nil {
				bp = &bias[R]
			}
			convTile4AVX2(k, ap, &pan.b[0], ldb, &pan.c[R*ldc], ldc, bp, &mv[0], full, flags|t.flags, op, t.lo, t.hi, t.a, t.b)
		}
	}
}

// storeFence orders the non-temporal stores before it (SFENCE), which x86 does not
// order with the stores after it, such as the one that tells another goroutine that the
// tiles are done.
func storeFence()

//go:noescape
func expVecAVX2(x, y *float32, n int, consts *[15][8]float32, mode int)

// sigmoidAVX2Consts are the rows the AVX2 sigmoid reads as memory operands (16 ymm
// registers cannot hold them and the scratch): sigConsts up to 1, the sign bit, the
// exponent bias plus 64 (as int32), 2^−64 and the smallest normal, each repeated over 8
// lanes.
var sigmoidAVX2Consts = func() (t [15][8]float32) {
	row := append(sigConsts[:11:11], math.Float32frombits(1<<31), math.Float32frombits(127+64), 0x1p-64, sigMin)
	for i, v := range row {
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return t
}()

// expVecAVX2Slice is expNegVec, sigmoidVec or siluVec (mode 0, 1, 2) in AVX2, bit for bit
// their definitions, 8 lanes at a time; a tail under 8 goes through a stack buffer so
// that nothing past x or y is touched.
func expVecAVX2Slice(x, y []float32, mode int) {
	y = y[:len(x)]
	n := len(x) &^ 7
	if n > 0 {
		expVecAVX2(&x[0], &y[0], n, &sigmoidAVX2Consts, mode)
	}
	if n < len(x) {
		var buf [8]float32
		copy(buf[:], x[n:])
		expVecAVX2(&buf[0], &buf[0], 8, &sigmoidAVX2Consts, mode)
		copy(y[n:], buf[:len(x)-n])
	}
}

//go:noescape
func siluRowsAVX2(src *float32, lds int, dst *float32, rows, ldc int, consts *[15][8]float32)

//go:noescape
func dwPlaneAVX2(xp, y *float32, oh, ow, rowStep, s2 int, w *float32, k int, offs *int64, tail *int32, bias float32, flags int, lo, hi int32, a, b float32)

// dwPlaneAsmAVX2 is dwPlaneAsm (same arguments, same bits: dwPlaneGo's sum, then by
// t.flags y added, the bias and the activation) in AVX2 assembly.
func dwPlaneAsmAVX2(p *dwPlan, xp, y, w []float32, bias float32, t tileAct) {
	g := &p.g
	oh, ow := g.out[1], g.out[2]
	if len(xp) < p.size || len(y) < oh*ow || len(w) < len(p.offs) || len(p.offs) == 0 || oh*ow == 0 {
		panic(fmt.Sprintf("depthwise plane out of range: %+v, lens %d %d %d", p.g, len(xp), len(y), len(w)))
	}
	dwPlaneAVX2(&xp[0], &y[0], oh, ow, 4*g.s[1]*p.pw, p.cs, &w[0], len(p.offs), &p.offs[0], &p.tail[0],
		bias, t.flags, t.lo, t.hi, t.a, t.b)
}

//go:noescape
func dwLanesAVX2(xp, y *float32, ldy int, pix *int64, groups, tail int, taps *int64, w, bias *float32, flags int, lo, hi int32, a, b float32)

// dwLanesFast reports whether the lanes path has its kernel: AVX2 with FMA (with AVX-512
// too; see dwLanesOK for where it then runs).
func dwLanesFast() bool { return convTileAVX2OK() }

// dwLanesRun is dwLanesGo in AVX2 assembly, bit for bit (dwLanesGo itself where the CPU
// lacks AVX2 or FMA): p is the padded buffer of 8 channels a pixel, y's 8 planes ldy
// values apart.
func dwLanesRun(l *dwLanes, p, y []float32, ldy int, w, bias []float32, t tileAct) {
	O := l.g.out[1] * l.g.out[2]
	K := len(l.taps) - 1
	if O == 0 || K <= 0 || len(l.pix) < (O+7)/8*8 || len(w) < 8*K || (bias != nil && len(bias) < 8) ||
		len(y) < 7*ldy+O || len(p) < 8*l.pw*l.ph {
		panic(fmt.Sprintf("depthwise lanes out of range: %+v, lens %d %d %d", l.g, len(p), len(y), len(w)))
	}
	if !convTileAVX2OK() {
		dwLanesGo(l, p, y, ldy, w, bias, t)
		return
	}
	var bp *float32
	if bias != nil {
		bp = &bias[0]
	}
	dwLanesAVX2(&p[0], &y[0], 4*ldy, &l.pix[0], (O+7)/8, l.tail, &l.taps[0], &w[0], bp, t.flags, t.lo, t.hi, t.a, t.b)
}
