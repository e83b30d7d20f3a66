//go:build !purego

#include "textflag.h"

// func gemm256(m, n, k int, a *float64, lda int, b *float64, ldb int, c *float64, ldc int)
//
// gemmFMA with AVX2 and FMA3 for n a multiple of 4 and k ≥ 1. Each lane of an accumulator
// is one element's chain fma(a_ik, b_kj, c), started at +0 and run in order of k, so the
// bits are those of gemmFMA; vectorising over j only runs four such chains side by side.
// Panels of 8 columns (a last one of 4), rows 4 at a time, then one by one.
TEXT ·gemm256(SB), NOSPLIT, $0-72
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

g2_panel:
	MOVQ m+0(FP), R13
	MOVQ a+24(FP), SI
	MOVQ c+56(FP), R8
	ADDQ R12, R8
	MOVQ BX, DX
	SUBQ R12, DX
	CMPQ DX, $64
	JLT  g2_p4_rows

g2_p8_rows:
	CMPQ R13, $4
	JLT  g2_p8_r1
	LEAQ (SI)(AX*2), R9
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

g2_k8x4:
	VMOVUPD      (DX), Y8
	VMOVUPD      32(DX), Y9
	VBROADCASTSD (SI), Y10
	VBROADCASTSD (SI)(AX*1), Y11
	VBROADCASTSD (R9), Y12
	VBROADCASTSD (R9)(AX*1), Y13
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y9, Y10, Y1
	VFMADD231PD  Y8, Y11, Y2
	VFMADD231PD  Y9, Y11, Y3
	VFMADD231PD  Y8, Y12, Y4
	VFMADD231PD  Y9, Y12, Y5
	VFMADD231PD  Y8, Y13, Y6
	VFMADD231PD  Y9, Y13, Y7
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         R15, DX
	DECQ         CX
	JNE          g2_k8x4
	MOVQ         R8, DX
	VMOVUPD      Y0, (DX)
	VMOVUPD      Y1, 32(DX)
	ADDQ         R14, DX
	VMOVUPD      Y2, (DX)
	VMOVUPD      Y3, 32(DX)
	ADDQ         R14, DX
	VMOVUPD      Y4, (DX)
	VMOVUPD      Y5, 32(DX)
	ADDQ         R14, DX
	VMOVUPD      Y6, (DX)
	VMOVUPD      Y7, 32(DX)
	// Next block of rows: the k loop moved SI by k elements.
	SUBQ         R11, SI
	LEAQ         (SI)(AX*4), SI
	LEAQ         (R8)(R14*4), R8
	SUBQ         $4, R13
	JMP          g2_p8_rows

g2_p8_r1:
	TESTQ R13, R13
	JEQ   g2_p8_done
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

g2_k8x1:
	VMOVUPD      (DX), Y8
	VMOVUPD      32(DX), Y9
	VBROADCASTSD (SI), Y10
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y9, Y10, Y1
	ADDQ         $8, SI
	ADDQ         R15, DX
	DECQ         CX
	JNE          g2_k8x1
	VMOVUPD      Y0, (R8)
	VMOVUPD      Y1, 32(R8)
	SUBQ         R11, SI
	ADDQ         AX, SI
	ADDQ         R14, R8
	DECQ         R13
	JMP          g2_p8_r1

g2_p8_done:
	ADDQ $64, R12
	JMP  g2_next

g2_p4_rows:
	CMPQ R13, $4
	JLT  g2_p4_r1
	LEAQ (SI)(AX*2), R9
	VXORPD Y0, Y0, Y0
	VXORPD Y2, Y2, Y2
	VXORPD Y4, Y4, Y4
	VXORPD Y6, Y6, Y6
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

g2_k4x4:
	VMOVUPD      (DX), Y8
	VBROADCASTSD (SI), Y10
	VBROADCASTSD (SI)(AX*1), Y11
	VBROADCASTSD (R9), Y12
	VBROADCASTSD (R9)(AX*1), Y13
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y8, Y11, Y2
	VFMADD231PD  Y8, Y12, Y4
	VFMADD231PD  Y8, Y13, Y6
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         R15, DX
	DECQ         CX
	JNE          g2_k4x4
	MOVQ         R8, DX
	VMOVUPD      Y0, (DX)
	ADDQ         R14, DX
	VMOVUPD      Y2, (DX)
	ADDQ         R14, DX
	VMOVUPD      Y4, (DX)
	ADDQ         R14, DX
	VMOVUPD      Y6, (DX)
	SUBQ         R11, SI
	LEAQ         (SI)(AX*4), SI
	LEAQ         (R8)(R14*4), R8
	SUBQ         $4, R13
	JMP          g2_p4_rows

g2_p4_r1:
	TESTQ R13, R13
	JEQ   g2_p4_done
	VXORPD Y0, Y0, Y0
	MOVQ k+16(FP), CX
	LEAQ (DI)(R12*1), DX

g2_k4x1:
	VMOVUPD      (DX), Y8
	VBROADCASTSD (SI), Y10
	VFMADD231PD  Y8, Y10, Y0
	ADDQ         $8, SI
	ADDQ         R15, DX
	DECQ         CX
	JNE          g2_k4x1
	VMOVUPD      Y0, (R8)
	SUBQ         R11, SI
	ADDQ         AX, SI
	ADDQ         R14, R8
	DECQ         R13
	JMP          g2_p4_r1

g2_p4_done:
	ADDQ $32, R12

g2_next:
	CMPQ R12, BX
	JLT  g2_panel
	VZEROUPPER
	RET
