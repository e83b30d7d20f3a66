//go:build amd64 && !purego

#include "textflag.h"

// func normRowAVX512(x, y, s, b *float32, n int, mu, inv float32)
//
// y[i] = ((x[i] − mu)·inv)·s[i] (+ b[i] when b is not nil) for i < n, 16 at a time, the
// tail masked, each operation rounded on its own as normRowGo computes it.
TEXT ·normRowAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ s+16(FP), R8
	MOVQ b+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS mu+40(FP), Z4
	VBROADCASTSS inv+44(FP), Z5
	TESTQ CX, CX
	JLE   nrdone

nrloop:
	KXNORW K1, K1, K1
	CMPQ   CX, $16
	JGE    nrbody
	MOVL   $1, AX
	SHLL   CX, AX
	DECL   AX
	KMOVW  AX, K1

nrbody:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (R8), K1, Z1
	VSUBPS Z4, Z0, Z0
	VMULPS Z5, Z0, Z0
	VMULPS Z1, Z0, Z0
	TESTQ R9, R9
	JZ    nrstore
	VMOVUPS.Z (R9), K1, Z2
	VADDPS Z2, Z0, Z0
	ADDQ  $64, R9

nrstore:
	VMOVUPS Z0, K1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R8
	SUBQ $16, CX
	JG   nrloop

nrdone:
	VZEROUPPER
	RET

// func normRowAVX2(x, y, s, b *float32, n int, mu, inv float32)
//
// normRowAVX512 for n a multiple of 8, 8 at a time in AVX.
TEXT ·normRowAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ s+16(FP), R8
	MOVQ b+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS mu+40(FP), Y4
	VBROADCASTSS inv+44(FP), Y5
	SHRQ $3, CX
	JZ   n2done

n2loop:
	VMOVUPS (SI), Y0
	VSUBPS Y4, Y0, Y0
	VMULPS Y5, Y0, Y0
	VMULPS (R8), Y0, Y0
	TESTQ R9, R9
	JZ    n2store
	VADDPS (R9), Y0, Y0
	ADDQ  $32, R9

n2store:
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNZ  n2loop

n2done:
	VZEROUPPER
	RET

// func gatherRowAVX512(dst, src *float32, idx *int32, n int)
//
// dst[p] = src[idx[p]] where idx[p] ≥ 0, else 0, for p < n, 16 at a time with
// VGATHERDPS, the tail masked (gatherRowGo).
TEXT ·gatherRowAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ idx+16(FP), DX
	MOVQ n+24(FP), CX
	VPXORD Z3, Z3, Z3
	TESTQ CX, CX
	JLE   grdone

grloop:
	KXNORW K1, K1, K1
	CMPQ   CX, $16
	JGE    grbody
	MOVL   $1, AX
	SHLL   CX, AX
	DECL   AX
	KMOVW  AX, K1

grbody:
	VMOVDQU32.Z (DX), K1, Z1
	VPCMPD $5, Z3, Z1, K1, K2
	VPXORD Z0, Z0, Z0
	VGATHERDPS (SI)(Z1*4), K2, Z0
	VMOVUPS Z0, K1, (DI)
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, CX
	JG   grloop

grdone:
	VZEROUPPER
	RET

// func s2RowsAVX512(dst *float32, ldd int, src *float32, lds, n, rows int, even *int32)
//
// dst[j] = src[2j] for j < n on rows rows, row i of dst ldd values after row i − 1 and row
// i of src lds after its: 16 at a time from two registers of src (VPERMI2PS with the
// indices 0, 2, …, 30 at even); the last block of a row reads only the 2·cnt − 1 values it
// needs, through masks made once for all rows.
TEXT ·s2RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R9
	SHLQ $2, R9
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R10
	SHLQ $2, R10
	MOVQ n+32(FP), R8
	MOVQ rows+40(FP), R11
	MOVQ even+48(FP), AX
	VMOVDQU32 (AX), Z3
	// The last block: cnt = n − 16·⌈n/16 − 1⌉ values (1 to 16), reading 2·cnt − 1.
	MOVQ R8, R12
	DECQ R12
	ANDQ $15, R12
	INCQ R12 // cnt
	LEAQ -1(R12)(R12*1), CX
	MOVL $1, AX
	CMPQ CX, $16
	JGE  srstwo
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	KXORW K2, K2, K2
	JMP  srsmask

srstwo:
	SUBQ $16, CX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K2
	KXNORW K1, K1, K1

srsmask:
	MOVQ R12, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K3
	TESTQ R11, R11
	JLE  srsdone
	TESTQ R8, R8
	JLE  srsdone

srsrow:
	MOVQ DI, DX
	MOVQ SI, BX
	MOVQ R8, CX

srsloop:
	CMPQ CX, $16
	JLE  srstail
	VMOVUPS (BX), Z0
	VMOVUPS 64(BX), Z1
	VMOVDQA32 Z3, Z2
	VPERMI2PS Z1, Z0, Z2
	VMOVUPS Z2, (DX)
	ADDQ $128, BX
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  srsloop

srstail:
	VMOVUPS.Z (BX), K1, Z0
	VMOVUPS.Z 64(BX), K2, Z1
	VMOVDQA32 Z3, Z2
	VPERMI2PS Z1, Z0, Z2
	VMOVUPS Z2, K3, (DX)
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R11
	JNZ  srsrow

srsdone:
	VZEROUPPER
	RET

// func s2RowsAVX2(dst *float32, ldd int, src *float32, lds, blocks, rows int, lo, hi, st *int32)
//
// s2Rows in AVX2: in each of rows rows (ldd and lds values apart), dst[j] = src[2j] for
// blocks whole blocks of 8, then a last block of 1 to 8 values: read through the masks lo
// and hi (src's lanes 0-7 and 8-15 of the block up to the row's last value read) and
// stored through st, so that nothing past the row is read or written. The even values of
// each 128-bit half by VSHUFPS, the halves put in order by VPERMPD.
TEXT ·s2RowsAVX2(SB), NOSPLIT, $0-72
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), R8
	SHLQ    $2, R8
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R9
	SHLQ    $2, R9
	MOVQ    blocks+32(FP), R10
	MOVQ    rows+40(FP), R11
	MOVQ    lo+48(FP), AX
	VMOVDQU (AX), Y13
	MOVQ    hi+56(FP), AX
	VMOVDQU (AX), Y14
	MOVQ    st+64(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   R11, R11
	JLE     s2adone

s2arow:
	MOVQ SI, AX
	MOVQ DI, DX
	MOVQ R10, CX

s2ablock:
	TESTQ CX, CX
	JLE   s2atail
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VSHUFPS $0x88, Y1, Y0, Y2
	VPERMPD $0xd8, Y2, Y2
	VMOVUPS Y2, (DX)
	ADDQ $64, AX
	ADDQ $32, DX
	DECQ CX
	JMP  s2ablock

s2atail:
	VMASKMOVPS (AX), Y13, Y0
	VMASKMOVPS 32(AX), Y14, Y1
	VSHUFPS    $0x88, Y1, Y0, Y2
	VPERMPD    $0xd8, Y2, Y2
	VMASKMOVPS Y2, Y15, (DX)
	ADDQ       R9, SI
	ADDQ       R8, DI
	DECQ       R11
	JNZ        s2arow

s2adone:
	VZEROUPPER
	RET

// func padRowsAVX512(dst, src *float32, rows, w, pitch int, tail uint64)
//
// Copies rows rows of w values, consecutive in src, to rows pitch values apart in dst:
// 16 values at a time, the last chunk of each row (w mod 16 values, tail's lanes) by a
// masked load and a masked store, so that nothing around the row in dst is written.
TEXT ·padRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  rows+16(FP), CX
	MOVQ  w+24(FP), DX
	MOVQ  pitch+32(FP), R8
	SHLQ  $2, R8
	MOVQ  tail+40(FP), BX
	KMOVW BX, K1
	TESTQ CX, CX
	JLE   prdone

prrow:
	MOVQ DX, R9
	XORQ R10, R10

prchunk:
	CMPQ    R9, $16
	JLT     prlast
	VMOVUPS (SI)(R10*1), Z0
	VMOVUPS Z0, (DI)(R10*1)
	ADDQ    $64, R10
	SUBQ    $16, R9
	JMP     prchunk

prlast:
	TESTQ     R9, R9
	JZ        prnext
	VMOVUPS.Z (SI)(R10*1), K1, Z0
	VMOVUPS   Z0, K1, (DI)(R10*1)

prnext:
	LEAQ (SI)(DX*4), SI
	ADDQ R8, DI
	DECQ CX
	JNZ  prrow

prdone:
	VZEROUPPER
	RET

// func gatherRowAVX2(dst, src *float32, idx *int32, n int)
//
// gatherRowAVX512 in AVX2 for n a multiple of 8: VGATHERDPS with the lanes whose index is
// negative masked off (they keep the zero set before the gather and read nothing).
TEXT ·gatherRowAVX2(SB), NOSPLIT, $0-32
	MOVQ     dst+0(FP), DI
	MOVQ     src+8(FP), SI
	MOVQ     idx+16(FP), DX
	MOVQ     n+24(FP), CX
	VPCMPEQD Y3, Y3, Y3
	TESTQ    CX, CX
	JLE      g2done

g2loop:
	VMOVDQU    (DX), Y1
	VPCMPGTD   Y3, Y1, Y2
	VPXOR      Y0, Y0, Y0
	VGATHERDPS Y2, (SI)(Y1*4), Y0
	VMOVUPS    Y0, (DI)
	ADDQ       $32, DI
	ADDQ       $32, DX
	SUBQ       $8, CX
	JG         g2loop

g2done:
	VZEROUPPER
	RET
