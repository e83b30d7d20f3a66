//go:build !purego

#include "textflag.h"

// AVX-512 versions of the passes in kernels.go. Each computes exactly the operations of its Go
// counterpart, element by element and in the same order, with no fused multiply-add except
// where the Go code calls for one (the FMA chain of gemmFMA), so the results are the same
// bits. All of them need d (the row length) to be a multiple of 8.

// PROJ rounds Zu to the nearest integer with ties toward +∞ into Zr, as admmq.RoundHalfUp:
// VRNDSCALEPD rounds to nearest even, a tie that went down (u − r = 0.5) is moved up, and
// adding +0 turns the −0 of rounding a small negative number into the +0 that
// (u + 2^52) − 2^52 gives. Uses K1 and Zt; needs Z28 = 0.5, Z29 = 1, Z30 = +0.
#define PROJ(Zu, Zr, Zt) \
	VRNDSCALEPD $0, Zu, Zr \
	VSUBPD Zr, Zu, Zt \
	VCMPPD $0, Z28, Zt, K1 \
	VADDPD Z30, Zr, Zr \
	VADDPD Z29, Zr, K1, Zr

#define CONSTS \
	MOVQ $0x3FE0000000000000, AX \
	VPBROADCASTQ AX, Z28 \
	MOVQ $0x3FF0000000000000, AX \
	VPBROADCASTQ AX, Z29 \
	VXORPD Z30, Z30, Z30

// func yQ512(x, l, y, w, b *float64, n, d int, inv, iv, v, rho float64)
TEXT ·yQ512(SB), NOSPLIT, $0-88
	MOVQ x+0(FP), SI
	MOVQ l+8(FP), DI
	MOVQ y+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ b+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ d+48(FP), DX
	SHLQ $3, DX
	VBROADCASTSD inv+56(FP), Z24
	VBROADCASTSD iv+64(FP), Z25
	VBROADCASTSD v+72(FP), Z26
	VBROADCASTSD rho+80(FP), Z27
	CONSTS
	TESTQ CX, CX
	JEQ   yq_done

yq_row:
	XORQ BX, BX

yq_chunk:
	VMOVUPD (SI), Z0
	VMOVUPD (DI), Z1
	VMULPD  Z24, Z1, Z2
	VADDPD  Z2, Z0, Z2
	VMULPD  Z25, Z2, Z2
	PROJ(Z2, Z3, Z6)
	VMULPD  Z26, Z3, Z3
	VMOVUPD Z3, (R8)
	VMULPD  Z27, Z3, Z4
	VMOVUPD (R10)(BX*1), Z5
	VSUBPD  Z5, Z4, Z4
	VSUBPD  Z1, Z4, Z4
	VMOVUPD Z4, (R9)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, BX
	CMPQ    BX, DX
	JLT     yq_chunk
	DECQ    CX
	JNE     yq_row

yq_done:
	VZEROUPPER
	RET

// func zS512(x, l, z, zt, sq *float64, n int, inv, iv, v float64)
// n counts elements here: the pass has no per-row quantity.
TEXT ·zS512(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ l+8(FP), DI
	MOVQ z+16(FP), R8
	MOVQ zt+24(FP), R9
	MOVQ sq+32(FP), R10
	MOVQ n+40(FP), CX
	VBROADCASTSD inv+48(FP), Z24
	VBROADCASTSD iv+56(FP), Z25
	VBROADCASTSD v+64(FP), Z26
	CONSTS
	SHRQ $3, CX
	JEQ  zs_done

zs_loop:
	VMOVUPD (SI), Z0
	VMOVUPD (DI), Z1
	VMULPD  Z24, Z1, Z2
	VADDPD  Z2, Z0, Z2
	VMOVUPD Z2, (R8)
	VMULPD  Z25, Z2, Z3
	PROJ(Z3, Z4, Z6)
	VMULPD  Z26, Z4, Z4
	VMOVUPD Z4, (R9)
	VSUBPD  Z2, Z4, Z5
	VMULPD  Z5, Z5, Z5
	VMOVUPD Z5, (R10)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, R10
	DECQ    CX
	JNE     zs_loop

zs_done:
	VZEROUPPER
	RET

// func yS512(z, zt, y, w, l, b, s *float64, n, d int, rho float64)
TEXT ·yS512(SB), NOSPLIT, $0-80
	MOVQ z+0(FP), SI
	MOVQ zt+8(FP), DI
	MOVQ y+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ l+32(FP), R10
	MOVQ b+40(FP), R11
	MOVQ s+48(FP), R12
	MOVQ n+56(FP), CX
	MOVQ d+64(FP), DX
	SHLQ $3, DX
	VBROADCASTSD rho+72(FP), Z27
	CONSTS
	TESTQ CX, CX
	JEQ   ys_done

ys_row:
	XORQ BX, BX
	VMOVSD (R12), X7
	VUCOMISD X29, X7 // s ≥ 1 (false for NaN): y is P_A(z) exactly
	JCC ys_copy
	VBROADCASTSD (R12), Z7

ys_soft:
	VMOVUPD (SI), Z0
	VMOVUPD (DI), Z1
	VSUBPD  Z0, Z1, Z2
	VMULPD  Z7, Z2, Z2
	VADDPD  Z2, Z0, Z3
	VMOVUPD Z3, (R8)
	VMULPD  Z27, Z3, Z4
	VMOVUPD (R11)(BX*1), Z5
	VSUBPD  Z5, Z4, Z4
	VMOVUPD (R10), Z6
	VSUBPD  Z6, Z4, Z4
	VMOVUPD Z4, (R9)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, R10
	ADDQ    $64, BX
	CMPQ    BX, DX
	JLT     ys_soft
	JMP     ys_next

ys_copy:
	VMOVUPD (DI), Z3
	VMOVUPD Z3, (R8)
	VMULPD  Z27, Z3, Z4
	VMOVUPD (R11)(BX*1), Z5
	VSUBPD  Z5, Z4, Z4
	VMOVUPD (R10), Z6
	VSUBPD  Z6, Z4, Z4
	VMOVUPD Z4, (R9)
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, R10
	ADDQ    $64, BX
	CMPQ    BX, DX
	JLT     ys_copy

ys_next:
	ADDQ $8, R12
	DECQ CX
	JNE  ys_row

ys_done:
	VZEROUPPER
	RET

// func dual512(x, xp, y, l *float64, flags *int64, n, d int, rho float64) (candidates int)
//
// candidates counts the rows that are unchanged or not finite: the only ones that can freeze.
TEXT ·dual512(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ xp+8(FP), DI
	MOVQ y+16(FP), R8
	MOVQ l+24(FP), R9
	MOVQ flags+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ d+48(FP), DX
	SHLQ $3, DX
	VBROADCASTSD rho+56(FP), Z27
	VXORPD Z30, Z30, Z30
	XORQ  R12, R12
	TESTQ CX, CX
	JEQ   du_done

du_row:
	XORQ  BX, BX
	KXORW K2, K2, K2
	KXORW K3, K3, K3

du_chunk:
	VMOVUPD (SI), Z0
	VMOVUPD (DI), Z1
	VMOVUPD (R8), Z2
	VMOVUPD (R9), Z3
	VSUBPD  Z2, Z0, Z4
	VMULPD  Z27, Z4, Z4
	VADDPD  Z4, Z3, Z4
	VMOVUPD Z4, (R9)
	VCMPPD  $4, Z3, Z4, K1
	KORW    K1, K2, K2
	VCMPPD  $4, Z1, Z0, K1
	KORW    K1, K2, K2
	VMULPD  Z30, Z0, Z5
	VCMPPD  $3, Z5, Z5, K1
	KORW    K1, K3, K3
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, BX
	CMPQ    BX, DX
	JLT     du_chunk
	KMOVW   K2, AX
	KMOVW   K3, R11
	TESTQ   R11, R11
	JNE     du_cand
	TESTQ   AX, AX
	JNE     du_store

du_cand:
	INCQ    R12

du_store:
	SHLQ    $16, R11
	ORQ     R11, AX
	MOVQ    AX, (R10)
	ADDQ    $8, R10
	DECQ    CX
	JNE     du_row

du_done:
	MOVQ    R12, candidates+64(FP)
	VZEROUPPER
	RET

// func gemm512(m, n, k int, a *float64, lda int, b *float64, ldb int, c *float64, ldc int)
//
// C = A·B with every c_ij the chain of fused multiply-adds over p = 0..k−1 in order,
// starting from +0: gemmFMA. Column panels of 16 (then 8) run over blocks of 8, 4 and 1
// rows: the panel of B stays in L1 while the row blocks stream past it, and an 8×16 block
// keeps 16 independent accumulators in flight for 10 loads per 16 multiply-adds.
//
// Registers: AX lda in bytes; SI, R9 = SI+2·lda, R10 = SI+3·lda walk along the block's rows
// of A (rows 0..7 at SI, SI+lda, R9, R10, SI+4·lda, R10+2·lda, R9+4·lda, R10+4·lda); DX
// walks down the panel of B; CX counts k; R11 = k in bytes; R12 the panel's first column in
// bytes; R13 the rows left; R8 the block's first row of C; BX = n in bytes.

TEXT ·gemm512(SB), NOSPLIT, $0-72
	MOVQ n+8(FP), BX
	SHLQ $3, BX
	MOVQ k+16(FP), R11
	SHLQ $3, R11
	MOVQ lda+32(FP), AX
	SHLQ $3, AX
	MOVQ b+40(FP), DI
	MOVQ ldb+48(FP), R15
	SHLQ $3, R15
	MOVQ ldc+64(FP), R14
	SHLQ $3, R14
	XORQ R12, R12

gm_panel:
	MOVQ m+0(FP), R13
	MOVQ a+24(FP), SI
	MOVQ c+56(FP), R8
	ADDQ R12, R8
	MOVQ BX, DX
	SUBQ R12, DX
	CMPQ DX, $128
	JLT  gm_p8

	// Panels of 16 columns.
gm_p16_rows:
	LEAQ (SI)(AX*2), R9
	LEAQ (R9)(AX*1), R10
	CMPQ R13, $8
	JLT  gm_p16_r4
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	VXORPD Z4, Z4, Z4
	VXORPD Z5, Z5, Z5
	VXORPD Z6, Z6, Z6
	VXORPD Z7, Z7, Z7
	VXORPD Z8, Z8, Z8
	VXORPD Z9, Z9, Z9
	VXORPD Z10, Z10, Z10
	VXORPD Z11, Z11, Z11
	VXORPD Z12, Z12, Z12
	VXORPD Z13, Z13, Z13
	VXORPD Z14, Z14, Z14
	VXORPD Z15, Z15, Z15
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

gm_k16x8:
	VMOVUPD      (DX), Z16
	VMOVUPD      64(DX), Z17
	VBROADCASTSD (SI), Z18
	VBROADCASTSD (SI)(AX*1), Z19
	VBROADCASTSD (R9), Z20
	VBROADCASTSD (R10), Z21
	VBROADCASTSD (SI)(AX*4), Z22
	VBROADCASTSD (R10)(AX*2), Z23
	VBROADCASTSD (R9)(AX*4), Z24
	VBROADCASTSD (R10)(AX*4), Z25
	VFMADD231PD  Z16, Z18, Z0
	VFMADD231PD  Z17, Z18, Z1
	VFMADD231PD  Z16, Z19, Z2
	VFMADD231PD  Z17, Z19, Z3
	VFMADD231PD  Z16, Z20, Z4
	VFMADD231PD  Z17, Z20, Z5
	VFMADD231PD  Z16, Z21, Z6
	VFMADD231PD  Z17, Z21, Z7
	VFMADD231PD  Z16, Z22, Z8
	VFMADD231PD  Z17, Z22, Z9
	VFMADD231PD  Z16, Z23, Z10
	VFMADD231PD  Z17, Z23, Z11
	VFMADD231PD  Z16, Z24, Z12
	VFMADD231PD  Z17, Z24, Z13
	VFMADD231PD  Z16, Z25, Z14
	VFMADD231PD  Z17, Z25, Z15
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         $8, R10
	ADDQ         R15, DX
	DECQ         CX
	JNE          gm_k16x8
	MOVQ         R8, DX
	VMOVUPD      Z0, (DX)
	VMOVUPD      Z1, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z2, (DX)
	VMOVUPD      Z3, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z4, (DX)
	VMOVUPD      Z5, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z6, (DX)
	VMOVUPD      Z7, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z8, (DX)
	VMOVUPD      Z9, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z10, (DX)
	VMOVUPD      Z11, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z12, (DX)
	VMOVUPD      Z13, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z14, (DX)
	VMOVUPD      Z15, 64(DX)
	// Next block: rows advance by 8 (the k loop moved SI by k).
	SUBQ         R11, SI
	LEAQ         (SI)(AX*8), SI
	LEAQ         (R8)(R14*8), R8
	SUBQ         $8, R13
	JMP          gm_p16_rows

gm_p16_r4:
	CMPQ R13, $4
	JLT  gm_p16_r1
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	VXORPD Z4, Z4, Z4
	VXORPD Z5, Z5, Z5
	VXORPD Z6, Z6, Z6
	VXORPD Z7, Z7, Z7
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

gm_k16x4:
	VMOVUPD      (DX), Z16
	VMOVUPD      64(DX), Z17
	VBROADCASTSD (SI), Z18
	VBROADCASTSD (SI)(AX*1), Z19
	VBROADCASTSD (R9), Z20
	VBROADCASTSD (R10), Z21
	VFMADD231PD  Z16, Z18, Z0
	VFMADD231PD  Z17, Z18, Z1
	VFMADD231PD  Z16, Z19, Z2
	VFMADD231PD  Z17, Z19, Z3
	VFMADD231PD  Z16, Z20, Z4
	VFMADD231PD  Z17, Z20, Z5
	VFMADD231PD  Z16, Z21, Z6
	VFMADD231PD  Z17, Z21, Z7
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         $8, R10
	ADDQ         R15, DX
	DECQ         CX
	JNE          gm_k16x4
	MOVQ         R8, DX
	VMOVUPD      Z0, (DX)
	VMOVUPD      Z1, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z2, (DX)
	VMOVUPD      Z3, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z4, (DX)
	VMOVUPD      Z5, 64(DX)
	ADDQ         R14, DX
	VMOVUPD      Z6, (DX)
	VMOVUPD      Z7, 64(DX)
	SUBQ         R11, SI
	LEAQ         (SI)(AX*4), SI
	LEAQ         (R8)(R14*4), R8
	SUBQ         $4, R13
	LEAQ         (SI)(AX*2), R9
	LEAQ         (R9)(AX*1), R10

gm_p16_r1:
	TESTQ R13, R13
	JEQ   gm_p16_done
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

gm_k16x1:
	VMOVUPD      (DX), Z16
	VMOVUPD      64(DX), Z17
	VBROADCASTSD (SI), Z18
	VFMADD231PD  Z16, Z18, Z0
	VFMADD231PD  Z17, Z18, Z1
	ADDQ         $8, SI
	ADDQ         R15, DX
	DECQ         CX
	JNE          gm_k16x1
	VMOVUPD      Z0, (R8)
	VMOVUPD      Z1, 64(R8)
	SUBQ         R11, SI
	ADDQ         AX, SI
	ADDQ         R14, R8
	DECQ         R13
	JMP          gm_p16_r1

gm_p16_done:
	ADDQ $128, R12
	JMP  gm_next

	// A last panel of 8 columns.
gm_p8:
gm_p8_rows:
	LEAQ (SI)(AX*2), R9
	LEAQ (R9)(AX*1), R10
	CMPQ R13, $8
	JLT  gm_p8_r1
	VXORPD Z0, Z0, Z0
	VXORPD Z2, Z2, Z2
	VXORPD Z4, Z4, Z4
	VXORPD Z6, Z6, Z6
	VXORPD Z8, Z8, Z8
	VXORPD Z10, Z10, Z10
	VXORPD Z12, Z12, Z12
	VXORPD Z14, Z14, Z14
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

gm_k8x8:
	VMOVUPD      (DX), Z16
	VBROADCASTSD (SI), Z18
	VBROADCASTSD (SI)(AX*1), Z19
	VBROADCASTSD (R9), Z20
	VBROADCASTSD (R10), Z21
	VBROADCASTSD (SI)(AX*4), Z22
	VBROADCASTSD (R10)(AX*2), Z23
	VBROADCASTSD (R9)(AX*4), Z24
	VBROADCASTSD (R10)(AX*4), Z25
	VFMADD231PD  Z16, Z18, Z0
	VFMADD231PD  Z16, Z19, Z2
	VFMADD231PD  Z16, Z20, Z4
	VFMADD231PD  Z16, Z21, Z6
	VFMADD231PD  Z16, Z22, Z8
	VFMADD231PD  Z16, Z23, Z10
	VFMADD231PD  Z16, Z24, Z12
	VFMADD231PD  Z16, Z25, Z14
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         $8, R10
	ADDQ         R15, DX
	DECQ         CX
	JNE          gm_k8x8
	MOVQ         R8, DX
	VMOVUPD      Z0, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z2, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z4, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z6, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z8, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z10, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z12, (DX)
	ADDQ         R14, DX
	VMOVUPD      Z14, (DX)
	SUBQ         R11, SI
	LEAQ         (SI)(AX*8), SI
	LEAQ         (R8)(R14*8), R8
	SUBQ         $8, R13
	JMP          gm_p8_rows

gm_p8_r1:
	TESTQ R13, R13
	JEQ   gm_p8_done
	VXORPD Z0, Z0, Z0
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

gm_k8x1:
	VMOVUPD      (DX), Z16
	VBROADCASTSD (SI), Z18
	VFMADD231PD  Z16, Z18, Z0
	ADDQ         $8, SI
	ADDQ         R15, DX
	DECQ         CX
	JNE          gm_k8x1
	VMOVUPD      Z0, (R8)
	SUBQ         R11, SI
	ADDQ         AX, SI
	ADDQ         R14, R8
	DECQ         R13
	JMP          gm_p8_r1

gm_p8_done:
	ADDQ $64, R12

gm_next:
	CMPQ R12, BX
	JLT  gm_panel
	VZEROUPPER
	RET

DATA laneIdx<>+0(SB)/8, $0
DATA laneIdx<>+8(SB)/8, $1
DATA laneIdx<>+16(SB)/8, $2
DATA laneIdx<>+24(SB)/8, $3
DATA laneIdx<>+32(SB)/8, $4
DATA laneIdx<>+40(SB)/8, $5
DATA laneIdx<>+48(SB)/8, $6
DATA laneIdx<>+56(SB)/8, $7
GLOBL laneIdx<>(SB), RODATA, $64

// func yR512(x, l, y, w, b *float64, keys, thrs *uint64, offs *int, n, d int, inv, iv, v, rho float64)
//
// The ADMM-R y-update with its mask computed in the vector unit: element e of a row whose
// mask has key and threshold t is on when splitmix64(key ⊕ e·φ) >> 11 < t (maskBit).
// Needs AVX-512DQ for the 64-bit products.
TEXT ·yR512(SB), NOSPLIT, $0-112
	MOVQ x+0(FP), SI
	MOVQ l+8(FP), DI
	MOVQ y+16(FP), R8
	MOVQ w+24(FP), R9
	MOVQ b+32(FP), R10
	MOVQ keys+40(FP), R11
	MOVQ thrs+48(FP), R12
	MOVQ offs+56(FP), R13
	MOVQ n+64(FP), CX
	MOVQ d+72(FP), DX
	SHLQ $3, DX
	VBROADCASTSD inv+80(FP), Z24
	VBROADCASTSD iv+88(FP), Z25
	VBROADCASTSD v+96(FP), Z26
	VBROADCASTSD rho+104(FP), Z27
	CONSTS
	VMOVDQU64 laneIdx<>(SB), Z16
	MOVQ $0x9e3779b97f4a7c15, AX
	VPBROADCASTQ AX, Z17
	MOVQ $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z18
	MOVQ $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z19
	MOVQ $8, AX
	VPBROADCASTQ AX, Z23
	TESTQ CX, CX
	JEQ   yr_done

yr_row:
	XORQ BX, BX
	VPBROADCASTQ (R11), Z20
	VPBROADCASTQ (R12), Z21
	VPBROADCASTQ (R13), Z22
	VPADDQ Z16, Z22, Z22

yr_chunk:
	VMOVUPD (SI), Z0
	VMOVUPD (DI), Z1
	VMULPD  Z24, Z1, Z2
	VADDPD  Z2, Z0, Z2
	VMULPD  Z25, Z2, Z2
	PROJ(Z2, Z3, Z6)
	VMULPD  Z26, Z3, Z3
	VMOVUPD (R8), Z4
	VCMPPD  $4, Z4, Z3, K3
	KORTESTW K3, K3
	JEQ     yr_keep // p = y everywhere: no mask can change this chunk
	VPMULLQ Z17, Z22, Z8
	VPXORQ  Z20, Z8, Z8
	VPADDQ  Z17, Z8, Z8
	VPSRLQ  $30, Z8, Z9
	VPXORQ  Z9, Z8, Z8
	VPMULLQ Z18, Z8, Z8
	VPSRLQ  $27, Z8, Z9
	VPXORQ  Z9, Z8, Z8
	VPMULLQ Z19, Z8, Z8
	VPSRLQ  $31, Z8, Z9
	VPXORQ  Z9, Z8, Z8
	VPSRLQ  $11, Z8, Z8
	VPCMPUQ $1, Z21, Z8, K2
	KANDW   K2, K3, K3
	VBLENDMPD Z3, Z4, K3, Z4

yr_keep:
	VMOVUPD Z4, (R8)
	VMULPD  Z27, Z4, Z4
	VMOVUPD (R10)(BX*1), Z5
	VSUBPD  Z5, Z4, Z4
	VSUBPD  Z1, Z4, Z4
	VMOVUPD Z4, (R9)
	VPADDQ  Z23, Z22, Z22
	ADDQ    $64, SI
	ADDQ    $64, DI
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, BX
	CMPQ    BX, DX
	JLT     yr_chunk
	ADDQ    $8, R11
	ADDQ    $8, R12
	ADDQ    $8, R13
	DECQ    CX
	JNE     yr_row

yr_done:
	VZEROUPPER
	RET
