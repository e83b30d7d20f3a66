//go:build amd64 && !purego

package engine

import (
	"fmt"
	"math"
	"math/bits"

	"golang.org/x/sys/cpu"
)

// convTileAVX512 is the assembly form of convTileGeneric (see there for the contract),
// for CPUs with AVX-512F.
//
//go:noescape
func convTileAVX512(k int, a, b0, b1 *float32, ldb int, c0, c1 *float32, ldc int, bias *float32, m0, m1 uint64, flags, nrb int, offs *int64, lo, hi int32, sa, sb float32, s0, s1 uint64)

// convTileOK reports whether the CPU and the operating system support AVX-512F
// (x/sys/cpu checks both the CPU flag and that the OS saves the zmm and mask registers).
func convTileOK() bool { return cpu.X86.HasAVX512F }

// convTileRows is convTile for callers that need only the first rows rows of the nrb
// blocks: the rest may be made or left as they were. The AVX2 kernel makes four rows
// at a time, so a block of at most four rows (ResNet-18's 2 × 2 planes on the narrow
// path, a tail of four output channels) costs it half a block and reads the panel once,
// not twice; AVX-512 makes whole blocks.
func convTileRows(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb, rows int, offs *tileOffs, act *tileAct) {
	if !convTileOK() {
		convTileAVX2(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, rows, offs, act)
		return
	}
	convTile(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, act)
}

// convTile computes nrb consecutive 8-row tiles with the assembly kernel.
func convTile(k int, a, b0, b1 []float32, ldb int, c0, c1 []float32, ldc int, bias []float32, m0, m1 uint64, flags, nrb int, offs *tileOffs, act *tileAct) {
	if !convTileOK() {
		convTileAVX2(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, 8*nrb, offs, act)
		return
	}
	convTileCheck(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs)
	if nrb == 0 {
		return
	}
	var bp *float32
	if bias != nil {
		bp = &bias[0]
	}
	var op *int64
	if offs != nil && k > 0 {
		op = &offs.off[0]
	}
	var t tileAct
	if act != nil {
		t = *act
	}
	s0, s1 := m0, m1 // the lanes stored
	if flags&tilePack != 0 {
		s0, s1 = laneMask(bits.OnesCount64(m0)), laneMask(bits.OnesCount64(m1))
	}
	if flags&tileStream != 0 && !(flags&(tilePack|tileAdd) == 0 && s0 == 0xffff && s1 == 0xffff &&
		tileAligned(c0, ldc) && tileAligned(c1, ldc)) {
		flags &^= tileStream
	}
	convTileAVX512(k, &a[0], &b0[0], &b1[0], ldb, &c0[0], &c1[0], ldc, bp, m0, m1, flags|t.flags, nrb, op, t.lo, t.hi, t.a, t.b, s0, s1)
}

// dw3x3AVX512 makes one output plane of a 3×3 "same" depthwise convolution (see
// dw3x3Plane for the contract).
//
//go:noescape
func dw3x3AVX512(x, y *float32, h, wd int, w, bias *float32, flags int, lo, hi int32, a, b float32, masks uint64, np int)

// dw3x3GradWAVX512 adds one plane's contribution to the nine weight gradients.
//
//go:noescape
func dw3x3GradWAVX512(x, gy *float32, h, wd int, gw *float32, masks uint64)

// dw3x3Fast reports whether dw3x3Plane and dw3x3GradW run planes of rows wd wide.
func dw3x3Fast(wd int) bool { return wd >= 1 && wd <= 16 && convTileOK() }

// dw3x3Plane sets the h×wd plane y to act(x ⋆ w + bias) (3×3 cross-correlation, zero
// padding of one pixel; bias nil means none), or with add to y + x ⋆ w, with no bias or
// act. It reports whether it applied act: Clip with a NaN bound is left to the caller.
// Only for dw3x3Fast(wd).
func dw3x3Plane(x, y []float32, h, wd int, w, bias []float32, act *nnClamp, add bool) bool {
	return dw3x3Planes(x, y, h, wd, 1, w, bias, act, add)
}

// dw3x3Planes is dw3x3Plane for np consecutive planes of x and y, plane p with weights
// w[9p:9p+9] and bias bias[p].
func dw3x3Planes(x, y []float32, h, wd, np int, w, bias []float32, act *nnClamp, add bool) bool {
	n := h * wd * np
	if len(x) < n || len(y) < n || len(w) < 9*np || (bias != nil && len(bias) < np) || !dw3x3Fast(wd) || n == 0 {
		panic(fmt.Sprintf("depthwise planes out of range: %d planes %d×%d, lens %d %d %d", np, h, wd, len(x), len(y), len(w)))
	}
	t, done := dw3x3Flags(act)
	if add {
		t, bias = tileAct{flags: tileAdd}, nil
	}
	var bp *float32
	if bias != nil {
		bp = &bias[0]
	}
	dw3x3AVX512(&x[0], &y[0], h, wd, &w[0], bp, t.flags, t.lo, t.hi, t.a, t.b, dw3x3Masks(wd), np)
	return done
}

// dw3x3GradW adds to gw[3kh+kw] the sum over the h×wd plane of gy[o]·x[o + offset(kh,
// kw)]. Only for dw3x3Fast(wd).
func dw3x3GradW(x, gy []float32, h, wd int, gw []float32) {
	n := h * wd
	if len(x) < n || len(gy) < n || len(gw) < 9 || !dw3x3Fast(wd) || n == 0 {
		panic(fmt.Sprintf("depthwise plane out of range: %d×%d plane, lens %d %d %d", h, wd, len(x), len(gy), len(gw)))
	}
	dw3x3GradWAVX512(&x[0], &gy[0], h, wd, &gw[0], dw3x3Masks(wd))
}

// dw3x3Masks packs the assembly's lane masks for rows of wd values: bits 0-15 the row,
// 16-31 the row without its first lane (left taps), 32-47 without its last (right taps).
func dw3x3Masks(wd int) uint64 {
	row := uint64(1)<<wd - 1
	return row | (row&^1)<<16 | (row&^(1<<(wd-1)))<<32
}

//go:noescape
func maxPool2x2AVX512(x, y *float32, oh, ow, wd int, masks uint64)

// maxPool2x2Fast reports whether maxPool2x2 runs in assembly.
func maxPool2x2Fast() bool { return convTileOK() }

// maxPool2x2Plane is maxPool2x2 in assembly, for maxPool2x2Fast.
func maxPool2x2Plane(g *nnGeom, x, y []float32) {
	oh, ow, wd := g.out[1], g.out[2], g.in[2]
	if oh == 0 || ow == 0 {
		return
	}
	if len(y) < oh*ow || len(x) < (2*oh-1)*wd+2*ow || 2*ow > wd {
		panic(fmt.Sprintf("max pool plane out of range: %d×%d from rows of %d, lens %d %d", oh, ow, wd, len(x), len(y)))
	}
	last := ow - (ow-1)/8*8 // outputs in a row's last chunk, 1..8
	masks := uint64(1)<<(2*last) - 1 | (uint64(1)<<last-1)<<16
	maxPool2x2AVX512(&x[0], &y[0], oh, ow, wd, masks)
}

//go:noescape
func im2colS2AVX512(col, x *float32, plan *s2Entry, n int, ow, srcStride int, out uint64, idx *int32)

// im2colS2Fast reports whether im2colS2 runs g: 2-D windows with column stride 2 and
// output rows of at most 16 values.
func im2colS2Fast(g *nnGeom) bool {
	return convTileOK() && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.s[2] == 2 && g.out[2] <= 16 && g.out[2] > 0
}

// im2colS2 is nnIm2col for im2colS2Fast geometries, by plan p (made by s2Plan for g and
// C channels, with col's always-zero entries cleared): each row of the column matrix is
// made output row by output row from two masked loads and one permutation.
func im2colS2(p *s2Plan, x, col []float32) {
	g := &p.g
	if len(x) < p.C*g.inSize() || len(col) < p.C*g.kSize()*g.outSize() || len(p.e) == 0 {
		panic(fmt.Sprintf("stride-2 im2col out of range: %d channels of %+v, lens %d %d", p.C, *g, len(x), len(col)))
	}
	even := [16]int32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}
	OW := g.out[2]
	im2colS2AVX512(&col[0], &x[0], &p.e[0], len(p.e), OW, 4*g.s[1]*g.in[2], uint64(1)<<OW-1, &even[0])
}

//go:noescape
func maxPool2x2BackAVX512(x, y, gy, gx *float32, oh, ow, wd int, masks uint64, dup *int32)

// maxPool2x2BackPlane is maxPool2x2Back in assembly, for maxPool2x2Fast.
func maxPool2x2BackPlane(g *nnGeom, x, y, gy, gx []float32) {
	oh, ow, wd := g.out[1], g.out[2], g.in[2]
	if oh == 0 || ow == 0 {
		return
	}
	if len(y) < oh*ow || len(gy) < oh*ow || len(x) < (2*oh-1)*wd+2*ow || len(gx) < (2*oh-1)*wd+2*ow || 2*ow > wd {
		panic(fmt.Sprintf("max pool plane out of range: %d×%d from rows of %d, lens %d %d %d %d", oh, ow, wd, len(x), len(y), len(gy), len(gx)))
	}
	last := ow - (ow-1)/8*8
	masks := uint64(1)<<(2*last) - 1 | (uint64(1)<<last-1)<<16
	dup := [16]int32{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7}
	maxPool2x2BackAVX512(&x[0], &y[0], &gy[0], &gx[0], oh, ow, wd, masks, &dup[0])
}

//go:noescape
func transposeAVX512(t, a *float32, R, C int, idx *int32, tail uint64)

// transpose writes the transpose of the R × C matrix a into t (C × R): rows of a
// scattered down columns of t in assembly where the CPU allows, else transposeGo.
func transpose(t, a []float32, R, C int) {
	if R*C == 0 {
		return
	}
	if R == 8 && (convTileOK() && C >= 16 || !convTileOK() && convTileAVX2OK() && C >= 8) {
		// packRows' 8 × K blocks: whole chunks of 16 (AVX-512) or 8 (AVX2) columns in
		// registers, the rest by hand.
		if len(a) < R*C || len(t) < R*C {
			panic(fmt.Sprintf("transpose of %d×%d out of range: lens %d %d", R, C, len(a), len(t)))
		}
		var done int
		if convTileOK() {
			done = C / 16 * 16
			transpose8AVX512(&t[0], &a[0], C/16, C)
		} else {
			done = C / 8 * 8
			transpose8AVX2(&t[0], &a[0], C/8, C, 8)
		}
		for c := done; c < C; c++ {
			for r := range 8 {
				t[c*8+r] = a[r*C+c]
			}
		}
		return
	}
	if !convTileOK() && convTileAVX2OK() && R >= 8 && C >= 8 {
		transposeAVX2(t, a, R, C)
		return
	}
	if !convTileOK() || 15*R > math.MaxInt32 {
		transposeGo(t, a, R, C)
		return
	}
	if len(a) < R*C || len(t) < R*C {
		panic(fmt.Sprintf("transpose of %d×%d out of range: lens %d %d", R, C, len(a), len(t)))
	}
	var idx [16]int32
	for q := range idx {
		idx[q] = int32(q * R)
	}
	transposeAVX512(&t[0], &a[0], R, C, &idx[0], uint64(1)<<((C-1)%16+1)-1)
}

//go:noescape
func transpose8AVX512(t, a *float32, chunks, lda int)

//go:noescape
func transpose8AVX2(t, a *float32, chunks, lda, ldt int)

// transposeAVX2 is transpose on CPUs with AVX2 but not AVX-512, R and C at least 8:
// 8 × 8 blocks in registers (transpose8AVX2, a row of blocks a call), the last R mod 8
// rows and C mod 8 columns by hand. transposeGo's scalar stores, one value a column of t,
// took 8 % of a training step of fmnist-resnet on the AVX2 path.
func transposeAVX2(t, a []float32, R, C int) {
	if len(a) < R*C || len(t) < R*C {
		panic(fmt.Sprintf("transpose of %d×%d out of range: lens %d %d", R, C, len(a), len(t)))
	}
	R8, C8 := R/8*8, C/8*8
	for r0 := 0; r0 < R8; r0 += 8 {
		transpose8AVX2(&t[r0], &a[r0*C], C/8, C, R)
		for c := C8; c < C; c++ {
			for r := r0; r < r0+8; r++ {
				t[c*R+r] = a[r*C+c]
			}
		}
	}
	for r := R8; r < R; r++ {
		for c, v := range a[r*C : (r+1)*C] {
			t[c*R+r] = v
		}
	}
}

//go:noescape
func copyPlanAVX512(dst, src *float32, plan *cpEntry, n int)

// colTPlanFast reports whether colTPlan runs in assembly.
func colTPlanFast() bool { return convTileOK() }

// colTPlan writes the transposed column matrix of p's geometry (as colT2D does) from
// xp, the image channel-last and zero-padded as p lays it out.
func colTPlan(p *cpPlan, xp, colT []float32) {
	if len(xp) < p.srcLen || len(colT) < p.dstLen || len(p.e) == 0 {
		panic(fmt.Sprintf("colᵀ plan out of range: %+v with %d channels, lens %d %d", p.g, p.C, len(xp), len(colT)))
	}
	copyPlanAVX512(&colT[0], &xp[0], &p.e[0], len(p.e))
}

//go:noescape
func dwPlaneAVX512(xp, y *float32, oh, ow, rowStep int, w *float32, k int, offs *int64, tail uint64, bias float32, flags int, lo, hi int32, a, b float32)

// dwBias and dwAdd tell dwPlaneAVX512 to add its bias, and to add the sum to y rather
// than set y to it (beside the tile kernel's activation flags); dwStream to store whole
// chunks of 16 that start 64-byte aligned non-temporally (the caller calls storeFence).
const (
	dwBias   = 16
	dwAdd    = 32
	dwStream = 64
)

// dwPlaneFast reports whether dwPlane runs in assembly.
func dwPlaneFast() bool { return convTileOK() || convTileAVX2OK() }

// dwSplit reports whether dwPlan splits stride-2 rows into even and odd columns: where
// dwPlaneAVX512 runs, whose unit-step loads then serve both strides.
func dwSplit() bool { return convTileOK() }

// dwPlane sets the output plane y to act(dwPlaneGo's sum + bias[0]) (bias and act nil
// for none), from the padded plane xp laid out by p and the taps w, in assembly where
// the CPU allows: the bias and activation in the same pass, computed as planeBiasAct
// computes them. With stream, it may store y non-temporally (AVX-512; the caller calls
// storeFence), SiLU from tmp, a scratch plane, then.
func dwPlane(p *dwPlan, xp, y, w, bias []float32, act *nnClamp, stream bool, tmp []float32) {
	if act != nil && act.silu && dwPlaneFast() {
		// SiLU is no activation of the assembly: on the plane just made, in the cache.
		O := p.g.outSize()
		if stream && convTileOK() && len(tmp) >= O {
			dwPlane(p, xp, tmp, w, bias, nil, false, nil)
			n := O &^ 15
			siluRowsTo(y, 16, tmp, 16, n/16, 16, true)
			siluRowsTo(y[n:], 16, tmp[n:], 16, 1, O-n, false)
			return
		}
		dwPlane(p, xp, y, w, bias, nil, false, nil)
		o := y[:O]
		siluVec(o, o)
		return
	}
	t, ok := dw3x3Flags(act)
	if !dwPlaneFast() || !ok {
		dwPlaneGo(p, xp, y, w, false)
		planeBiasAct(y[:p.g.outSize()], bias, act)
		return
	}
	var bv float32
	if bias != nil {
		t.flags |= dwBias
		bv = bias[0]
	}
	if stream {
		t.flags |= dwStream
	}
	dwPlaneAsm(p, xp, y, w, bv, t)
}

// dwPlaneAdd adds dwPlaneGo's sum to y (dwPlaneGo with add).
func dwPlaneAdd(p *dwPlan, xp, y, w []float32) {
	if !dwPlaneFast() {
		dwPlaneGo(p, xp, y, w, true)
		return
	}
	dwPlaneAsm(p, xp, y, w, 0, tileAct{flags: dwAdd})
}

func dwPlaneAsm(p *dwPlan, xp, y, w []float32, bias float32, t tileAct) {
	if !convTileOK() {
		dwPlaneAsmAVX2(p, xp, y, w, bias, t)
		return
	}
	g := &p.g
	oh, ow := g.out[1], g.out[2]
	if len(xp) < p.size || len(y) < oh*ow || len(w) < len(p.offs) || len(p.offs) == 0 || oh*ow == 0 {
		panic(fmt.Sprintf("depthwise plane out of range: %+v, lens %d %d %d", p.g, len(xp), len(y), len(w)))
	}
	dwPlaneAVX512(&xp[0], &y[0], oh, ow, 4*g.s[1]*p.pw, &w[0], len(p.offs), &p.offs[0], laneMask(ow%16),
		bias, t.flags, t.lo, t.hi, t.a, t.b)
}

//go:noescape
func dwGradWAVX512(xp, gy *float32, oh, ow, rowStep, k int, offs *int64, tail uint64, gw *float32)

//go:noescape
func dwGradWAVX2(xp, gy *float32, oh, ow, rowStep, k int, offs *int64, tail *int32, gw *float32)

// dwGradW is dwGradWGo (see there) in assembly where the CPU allows: AVX-512, or AVX2
// (which had run the Go definition, half of a training step of the OCR classifier on a
// Zen 3).
func dwGradW(p *dwPlan, xp, gy, gw []float32) {
	g := &p.g
	oh, ow := g.out[1], g.out[2]
	avx2 := !convTileOK() && convTileAVX2OK() && p.cs == 1 // a stride-2 plane unsplit has cs 2
	if !convTileOK() && !avx2 {
		dwGradWGo(p, xp, gy, gw)
		return
	}
	if len(xp) < p.size || len(gy) < oh*ow || len(gw) < len(p.offs) || len(p.offs) == 0 || oh*ow == 0 {
		panic(fmt.Sprintf("depthwise weight gradient out of range: %+v, lens %d %d %d", p.g, len(xp), len(gy), len(gw)))
	}
	if avx2 {
		dwGradWAVX2(&xp[0], &gy[0], oh, ow, 4*g.s[1]*p.pw, len(p.offs), &p.offs[0], &p.tail[0], &gw[0])
		return
	}
	dwGradWAVX512(&xp[0], &gy[0], oh, ow, 4*g.s[1]*p.pw, len(p.offs), &p.offs[0], laneMask(ow%16), &gw[0])
}

//go:noescape
func expVecAVX512(x, y *float32, n int, consts *float32, mode int)

//go:noescape
func siluRowsAVX512(src *float32, lds int, dst *float32, rows, ldc int, mask uint64, consts *float32, stream int)

// siluRows sets c[r·ldc + j] = siluF32(c[r·ldc + j]) for r < rows and j < n (n ≤ 16): in
// one AVX-512 call where the CPU allows, else row by row through siluVec.
func siluRows(c []float32, rows, ldc, n int) { siluRowsTo(c, ldc, c, ldc, rows, n, false) }

// siluRowsTo sets dst[r·ldc + j] = siluF32(src[r·lds + j]) for r < rows and j < n
// (n ≤ 16). With stream, whole rows (n = 16) that start 64-byte aligned in dst are
// stored non-temporally, on AVX-512 (the caller calls storeFence, as for tileStream).
func siluRowsTo(dst []float32, ldc int, src []float32, lds, rows, n int, stream bool) {
	if rows <= 0 || n <= 0 {
		return
	}
	if n > 16 || len(src) < (rows-1)*lds+n || len(dst) < (rows-1)*ldc+n {
		panic(fmt.Sprintf("SiLU of %d rows of %d values %d and %d apart in %d and %d", rows, n, lds, ldc, len(src), len(dst)))
	}
	if !convTileOK() {
		if n == 16 && convTileAVX2OK() {
			// One call for the rows: a call of siluVec a row took half of EfficientNet-B0's
			// stem on the AVX2 path, in its calls more than in its sums.
			siluRowsAVX2(&src[0], lds, &dst[0], rows, ldc, &sigmoidAVX2Consts)
			return
		}
		for r := range rows {
			siluVec(src[r*lds:r*lds+n], dst[r*ldc:r*ldc+n])
		}
		return
	}
	nt := 0
	if stream && n == 16 && tileAligned(dst, ldc) {
		nt = 1
	}
	siluRowsAVX512(&src[0], lds, &dst[0], rows, ldc, uint64(1)<<n-1, &sigConsts[0], nt)
}

// The modes of expVecAVX512 and expVecAVX2.
const (
	vecExpNeg = iota
	vecSigmoid
	vecSiLU
)

// sigmoidFast reports whether sigmoidVec runs in assembly.
func sigmoidFast() bool { return convTileOK() || convTileAVX2OK() }

// sigmoidVec sets y[i] = sigmoidF32(x[i]) (len(y) ≥ len(x)), in assembly where the CPU
// allows.
func sigmoidVec(x, y []float32) { expVec(x, y, vecSigmoid, sigmoidF32) }

// expNegVec sets y[i] = expNegF32(x[i]) (len(y) ≥ len(x), every x[i] ≤ 0 or NaN), in
// assembly where the CPU allows.
func expNegVec(x, y []float32) { expVec(x, y, vecExpNeg, expNegF32) }

// siluVec sets y[i] = siluF32(x[i]) (len(y) ≥ len(x)), in assembly where the CPU allows.
func siluVec(x, y []float32) { expVec(x, y, vecSiLU, siluF32) }

// expVec runs mode of the exp loop over x into y: in AVX-512 or AVX2 where the CPU
// allows, else def, the scalar definition the assembly follows bit for bit.
func expVec(x, y []float32, mode int, def func(float32) float32) {
	if len(y) < len(x) {
		panic(fmt.Sprintf("exp loop (mode %d) over %d values into %d", mode, len(x), len(y)))
	}
	switch {
	case convTileOK():
		if len(x) > 0 {
			expVecAVX512(&x[0], &y[0], len(x), &sigConsts[0], mode)
		}
	case convTileAVX2OK():
		expVecAVX2Slice(x, y, mode)
	default:
		for i, v := range x {
			y[i] = def(v)
		}
	}
}

//go:noescape
func sumsAVX512(x, gr *float32, n int, mu, inv float32, mode int, out *float64, segs, stride int)

// nnSumsFast reports whether nnSums runs in assembly.
func nnSumsFast() bool { return convTileOK() || convTileAVX2OK() }

// nnSums is nnSumsLanes (see there) in assembly where the CPU allows: the sums over segs
// segments of n elements, stride apart in x (and g).
func nnSums(x, g []float32, n, segs, stride int, mu, inv float32, mode int) (float64, float64) {
	if !nnSumsFast() {
		return nnSumsLanes(x, g, n, segs, stride, mu, inv, mode)
	}
	if n <= 0 || segs <= 0 {
		return 0, 0
	}
	end := (segs-1)*stride + n
	if len(x) < end || stride < 0 || (mode == 2 && len(g) < end) {
		panic(fmt.Sprintf("sums of %d segments of %d values %d apart out of %d values, %d gradients", segs, n, stride, len(x), len(g)))
	}
	gp := &x[0]
	if mode == 2 {
		gp = &g[0]
	}
	if !convTileOK() {
		return nnSumsAVX2(&x[0], gp, n, segs, stride, mu, inv, mode)
	}
	var out [2]float64
	sumsAVX512(&x[0], gp, n, mu, inv, mode, &out[0], segs, stride)
	return out[0], out[1]
}

//go:noescape
func dwBackS2AVX512(gx *float32, ldx int, gy *float32, ldy, n, rows int, w float32, tail uint64)

//go:noescape
func dwBackS2AVX2(gx *float32, ldx int, gy *float32, ldy, blocks, rows int, w float32, masks *[32]int32)

// dwBackS2 is dwBackS2Go in AVX-512 or AVX2 where the CPU allows.
func dwBackS2(gx []float32, ldx int, gy []float32, ldy, n, rows int, w float32) {
	if n <= 0 || rows <= 0 {
		return
	}
	if !convTileOK() && !convTileAVX2OK() {
		dwBackS2Go(gx, ldx, gy, ldy, n, rows, w)
		return
	}
	if ldx < 2*n-1 || ldy < n || len(gx) < (rows-1)*ldx+2*n-1 || len(gy) < (rows-1)*ldy+n {
		panic(fmt.Sprintf("stride-2 depthwise gradient of %d rows of %d values (%d and %d apart) into %d from %d", rows, n, ldx, ldy, len(gx), len(gy)))
	}
	if !convTileOK() {
		// Whole blocks of 8 but the last, which takes the 1 to 8 values left: gy's lanes
		// of them, and gx's even lanes below 2t − 1 in its two registers.
		blocks := (n - 1) / 8
		t := n - 8*blocks
		var masks [32]int32
		for j := range 8 {
			if j < t {
				masks[j] = -1
			}
			if j%2 == 0 && j < 2*t-1 {
				masks[8+j] = -1
			}
			if j%2 == 0 && 8+j < 2*t-1 {
				masks[16+j] = -1
			}
		}
		dwBackS2AVX2(&gx[0], ldx, &gy[0], ldy, blocks, rows, w, &masks)
		return
	}
	// The last n mod 8 values: the even lanes below 2·(n mod 8) − 1.
	var tail uint64
	if t := n % 8; t > 0 {
		tail = 0x5555 & (1<<(2*t-1) - 1)
	}
	dwBackS2AVX512(&gx[0], ldx, &gy[0], ldy, n, rows, w, tail)
}
