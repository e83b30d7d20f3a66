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
