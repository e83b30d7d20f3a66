//go:build amd64 && !purego

#include "textflag.h"

// func nibblesAVX512(out *float32, data *byte, n int, lut *[16]float32, idx *[32]int32)
//
// out[2j] = lut[data[j] & 15], out[2j+1] = lut[data[j] >> 4] for j < n, 16 bytes (32
// codes) an iteration; n is a positive multiple of 16.
TEXT ·nibblesAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ data+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ lut+24(FP), AX
	MOVQ idx+32(FP), BX
	VMOVUPS (AX), Z30
	VMOVDQU32 (BX), Z28
	VMOVDQU32 64(BX), Z29
	MOVL $15, DX
	VPBROADCASTD DX, Z31
nibloop:
	VPMOVZXBD (SI), Z0
	VPANDD Z31, Z0, Z1    // low nibbles: codes 0, 2, 4, …
	VPSRLD $4, Z0, Z2     // high nibbles: codes 1, 3, 5, …
	VPERMPS Z30, Z1, Z3
	VPERMPS Z30, Z2, Z4
	VMOVAPS Z3, Z5
	VPERMT2PS Z4, Z28, Z5 // codes 0–15
	VPERMT2PS Z4, Z29, Z3 // codes 16–31
	VMOVUPS Z5, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ $16, SI
	ADDQ $128, DI
	SUBQ $16, CX
	JNZ  nibloop
	VZEROUPPER
	RET
