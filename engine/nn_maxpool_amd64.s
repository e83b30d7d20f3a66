//go:build amd64 && !purego

#include "textflag.h"

// FMAX sets r to Go's max(x, y) (runtime fmax): y when y is NaN, else x when x is NaN,
// the AND of the bits when x == y (only ±0 differ: +0 wins), else the larger. VMAXPS
// with x as its second source returns x when either is NaN; K5 and K6 are scratch.
#define FMAX(x, y, r) \
	VMAXPS x, y, r ; \
	VCMPPS $0, y, x, K6 ; \
	VPANDD y, x, K6, r ; \
	VCMPPS $3, y, y, K5 ; \
	VMOVAPS y, K5, r

// func maxRowsAVX512(dst, src *float32, n int)
//
// dst[j] = max(dst[j], src[j]) for j < n, 16 at a time, the tail masked.
TEXT ·maxRowsAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
mrloop:
	CMPQ CX, $16
	JLT  mrtail
	VMOVUPS (DI), Z0
	VMOVUPS (SI), Z1
	FMAX(Z0, Z1, Z2)
	VMOVUPS Z2, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  mrloop
mrtail:
	TESTQ CX, CX
	JZ   mrdone
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z1
	FMAX(Z0, Z1, Z2)
	VMOVUPS Z2, K1, (DI)
mrdone:
	VZEROUPPER
	RET

// COLS3S2 stores through K1 at (dst) the 16 outputs max(max(c[2j], c[2j+1]), c[2j+2])
// of the 34 entries c at (src), with VPERMT2PS's even and odd indices in Z6 and Z7;
// Z0-Z4, Z8, Z9, K5 and K6 are scratch.
#define COLS3S2(src, dst) \
	VMOVUPS (src), Z0 ; \
	VMOVUPS 64(src), Z1 ; \
	VMOVAPS Z0, Z2 ; \
	VPERMT2PS Z1, Z6, Z0 ; \
	VPERMT2PS Z1, Z7, Z2 ; \
	VMOVUPS 8(src), Z3 ; \
	VMOVUPS 72(src), Z4 ; \
	VPERMT2PS Z4, Z6, Z3 ; \
	FMAX(Z0, Z2, Z8) ; \
	FMAX(Z8, Z3, Z9) ; \
	VMOVUPS Z9, K1, (dst)

// func maxCols3s2AVX512(col, y *float32, n int, idx *int32)
//
// y[j] = max(max(col[2j], col[2j+1]), col[2j+2]) for j < n, 16 at a time: the even and
// odd entries of col[32q:32q+32] and the even ones of col[32q+2:32q+34] are gathered
// by VPERMT2PS with the indices idx[0:16] (0, 2, …, 30) and idx[16:32] (1, 3, …, 31).
// It reads col up to 32·⌈n/16⌉ + 2 entries; the y tail is a masked store.
TEXT ·maxCols3s2AVX512(SB), NOSPLIT, $0-32
	MOVQ col+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ idx+24(FP), AX
	VMOVDQU32 (AX), Z6
	VMOVDQU32 64(AX), Z7
	MOVL $0xffff, AX
	KMOVW AX, K1
mcloop:
	TESTQ CX, CX
	JZ   mcdone
	CMPQ CX, $16
	JGE  mcfull
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVQ $16, CX
mcfull:
	COLS3S2(SI, DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  mcloop
mcdone:
	VZEROUPPER
	RET

// func maxPoolRowsAVX512(x *float32, w, step, kh, rows int, col *float32, pb int, y *float32, ow int, idx *int32)
//
// maxRowsAVX512 and maxCols3s2AVX512 for rows output rows in one call, each of whose
// windows has all its kh input rows: output row r takes the column maxima of the kh
// rows of w values from x + r·step bytes on (the first row as it is, then FMAX with
// each next one, the order of the two calls), stored from col + pb on, then three
// entries of col a output into the ow values of y + r·ow. The calls per row cost more
// than the work on the 13- to 27-wide rows of SqueezeNet's pools.
TEXT ·maxPoolRowsAVX512(SB), NOSPLIT, $0-80
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	MOVQ step+16(FP), R9
	MOVQ kh+24(FP), R10
	MOVQ rows+32(FP), R11
	MOVQ col+40(FP), R12
	MOVQ pb+48(FP), R13
	LEAQ (R12)(R13*4), R13
	MOVQ y+56(FP), DI
	MOVQ ow+64(FP), R14
	MOVQ idx+72(FP), AX
	VMOVDQU32 (AX), Z6
	VMOVDQU32 64(AX), Z7
	TESTQ R11, R11
	JLE  mpdone

mprow:
	// The column maxima: BX walks the first input row, DX the col row, CX counts.
	MOVQ SI, BX
	MOVQ R13, DX
	MOVQ R8, CX

mpcol:
	MOVL $0xffff, AX
	CMPQ CX, $16
	JGE  mpmask
	MOVL $1, AX
	SHLL CX, AX
	DECL AX

mpmask:
	KMOVW AX, K1
	VMOVUPS.Z (BX), K1, Z0
	LEAQ (BX)(R8*4), R15
	MOVQ R10, AX
	DECQ AX
	JZ   mpcolput

mpkrow:
	VMOVUPS.Z (R15), K1, Z1
	FMAX(Z0, Z1, Z2)
	VMOVAPS Z2, Z0
	LEAQ (R15)(R8*4), R15
	DECQ AX
	JNZ  mpkrow

mpcolput:
	VMOVUPS Z0, K1, (DX)
	ADDQ $64, BX
	ADDQ $64, DX
	SUBQ $16, CX
	JG   mpcol

	// Three entries of col an output (maxCols3s2AVX512): BX walks col, DX the output row.
	MOVQ R12, BX
	MOVQ DI, DX
	MOVQ R14, CX
	MOVL $0xffff, AX
	KMOVW AX, K1

mpout:
	CMPQ CX, $16
	JGE  mpoutfull
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1

mpoutfull:
	COLS3S2(BX, DX)
	ADDQ $128, BX
	ADDQ $64, DX
	SUBQ $16, CX
	JG   mpout

	ADDQ R9, SI
	LEAQ (DI)(R14*4), DI
	DECQ R11
	JNZ  mprow

mpdone:
	VZEROUPPER
	RET

// FMAX2 is FMAX in AVX2: r = Go's max(x, y), with Y10 and Y11 as scratch; r is neither
// x nor y.
#define FMAX2(x, y, r) \
	VMAXPS x, y, r ; \
	VCMPPS $0, y, x, Y10 ; \
	VANDPS y, x, Y11 ; \
	VBLENDVPS Y10, Y11, r, r ; \
	VCMPPS $3, y, y, Y10 ; \
	VBLENDVPS Y10, y, r, r

// COLS3S2AVX2 sets Y9 to the 8 outputs max(max(c[2j], c[2j+1]), c[2j+2]) of the 18
// entries c at (src): the even and odd entries of c[0:16] and the even ones of c[2:18]
// put in order by VSHUFPS (within each 128-bit half) and VPERMPD (the halves); Y0-Y5,
// Y8, Y10 and Y11 are scratch.
#define COLS3S2AVX2(src) \
	VMOVUPS (src), Y0 ; \
	VMOVUPS 32(src), Y1 ; \
	VSHUFPS $0x88, Y1, Y0, Y2 ; \
	VSHUFPS $0xDD, Y1, Y0, Y3 ; \
	VPERMPD $0xD8, Y2, Y2 ; \
	VPERMPD $0xD8, Y3, Y3 ; \
	VMOVUPS 8(src), Y4 ; \
	VMOVUPS 40(src), Y5 ; \
	VSHUFPS $0x88, Y5, Y4, Y4 ; \
	VPERMPD $0xD8, Y4, Y4 ; \
	FMAX2(Y2, Y3, Y8) ; \
	FMAX2(Y8, Y4, Y9)

// func maxPoolRowsAVX2(x *float32, w, step, kh, rows int, col *float32, pb int, y *float32, ow int, masks *int32)
//
// maxPoolRowsAVX512 in AVX2, 8 values at a time: masks[0:8] is VMASKMOVPS's mask of the
// last w mod 8 columns of a row (loaded and stored through it, so that nothing past the
// row is read), masks[8:16] that of the last ow mod 8 outputs.
TEXT ·maxPoolRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), R8
	MOVQ    step+16(FP), R9
	MOVQ    kh+24(FP), R10
	MOVQ    rows+32(FP), R11
	MOVQ    col+40(FP), R12
	MOVQ    pb+48(FP), R13
	LEAQ    (R12)(R13*4), R13
	MOVQ    y+56(FP), DI
	MOVQ    ow+64(FP), R14
	MOVQ    masks+72(FP), AX
	VMOVDQU (AX), Y15
	VMOVDQU 32(AX), Y14
	TESTQ   R11, R11
	JLE     m2done

m2row:
	MOVQ SI, BX
	MOVQ R13, DX
	MOVQ R8, CX

m2col:
	CMPQ    CX, $8
	JL      m2coltail
	VMOVUPS (BX), Y0
	LEAQ    (BX)(R8*4), R15
	MOVQ    R10, AX
	DECQ    AX
	JZ      m2colput

m2krow:
	VMOVUPS (R15), Y1
	FMAX2(Y0, Y1, Y2)
	VMOVAPS Y2, Y0
	LEAQ    (R15)(R8*4), R15
	DECQ    AX
	JNZ     m2krow

m2colput:
	VMOVUPS Y0, (DX)
	ADDQ    $32, BX
	ADDQ    $32, DX
	SUBQ    $8, CX
	JG      m2col
	JMP     m2out

m2coltail:
	VMASKMOVPS (BX), Y15, Y0
	LEAQ       (BX)(R8*4), R15
	MOVQ       R10, AX
	DECQ       AX
	JZ         m2tailput

m2tkrow:
	VMASKMOVPS (R15), Y15, Y1
	FMAX2(Y0, Y1, Y2)
	VMOVAPS    Y2, Y0
	LEAQ       (R15)(R8*4), R15
	DECQ       AX
	JNZ        m2tkrow

m2tailput:
	VMASKMOVPS Y0, Y15, (DX)

m2out:
	MOVQ R12, BX
	MOVQ DI, DX
	MOVQ R14, CX

m2outloop:
	COLS3S2AVX2(BX)
	CMPQ    CX, $8
	JL      m2outtail
	VMOVUPS Y9, (DX)
	ADDQ    $64, BX
	ADDQ    $32, DX
	SUBQ    $8, CX
	JG      m2outloop
	JMP     m2next

m2outtail:
	VMASKMOVPS Y9, Y14, (DX)

m2next:
	ADDQ R9, SI
	LEAQ (DI)(R14*4), DI
	DECQ R11
	JNZ  m2row

m2done:
	VZEROUPPER
	RET
