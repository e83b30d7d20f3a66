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

// NIBBLE2 sets dst to lut[idx] for the 8 codes (0–15) in idx: VPERMPS takes the low three
// bits, so entries 0–7 (Y14) and 8–15 (Y15) are both looked up and bit 3, shifted into
// the sign, chooses.
#define NIBBLE2(idx, dst) \
	VPERMPS Y14, idx, Y9 ; \
	VPERMPS Y15, idx, Y10 ; \
	VPSLLD $28, idx, Y11 ; \
	VBLENDVPS Y11, Y10, Y9, dst

// func nibblesAVX2(out *float32, data *byte, n int, lut *[16]float32)
//
// nibblesAVX512 in AVX2, 8 bytes (16 codes) an iteration; n is a positive multiple of 8.
TEXT ·nibblesAVX2(SB), NOSPLIT, $0-32
	MOVQ out+0(FP), DI
	MOVQ data+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ lut+24(FP), AX
	VMOVUPS (AX), Y14
	VMOVUPS 32(AX), Y15
	MOVQ $15, DX
	VMOVQ DX, X13
	VPBROADCASTD X13, Y13
nib2loop:
	VPMOVZXBD (SI), Y0
	VPAND Y13, Y0, Y1 // low nibbles: codes 0, 2, …, 14
	VPSRLD $4, Y0, Y2 // high nibbles: codes 1, 3, …, 15
	NIBBLE2(Y1, Y3)
	NIBBLE2(Y2, Y4)
	VUNPCKLPS Y4, Y3, Y5 // codes 0–3 | 8–11
	VUNPCKHPS Y4, Y3, Y6 // codes 4–7 | 12–15
	VPERM2F128 $0x20, Y6, Y5, Y7
	VPERM2F128 $0x31, Y6, Y5, Y8
	VMOVUPS Y7, (DI)
	VMOVUPS Y8, 32(DI)
	ADDQ $8, SI
	ADDQ $64, DI
	SUBQ $8, CX
	JNZ  nib2loop
	VZEROUPPER
	RET

// func dot32AVX2(x, y *float32, n int, s *[32]float32)
//
// s[i mod 32] += x[i]·y[i] for i < n, n a positive multiple of 32: Y0-Y3 hold s, lanes
// 8q…8q+7 in Yq, and each product is rounded before its sum (VMULPS, then VADDPS), as
// dot32Go computes it.
TEXT ·dot32AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	SHRQ $5, CX

dot32loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMULPS (DI), Y4, Y4
	VMULPS 32(DI), Y5, Y5
	VMULPS 64(DI), Y6, Y6
	VMULPS 96(DI), Y7, Y7
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  dot32loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET
