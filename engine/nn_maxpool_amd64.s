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
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVAPS Z0, Z2
	VPERMT2PS Z1, Z6, Z0
	VPERMT2PS Z1, Z7, Z2
	VMOVUPS 8(SI), Z3
	VMOVUPS 72(SI), Z4
	VPERMT2PS Z4, Z6, Z3
	FMAX(Z0, Z2, Z8)
	FMAX(Z8, Z3, Z9)
	VMOVUPS Z9, K1, (DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  mcloop
mcdone:
	VZEROUPPER
	RET
