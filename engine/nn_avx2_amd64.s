//go:build amd64 && !purego

#include "textflag.h"
#include "prefetchw_amd64.h"

// FMA4 adds a[0:4] (broadcast from AX) times the B row in Y8 (columns 0-7) and Y9
// (columns 8-15) to the accumulators: row r in Y(2r) and Y(2r+1).
#define FMA4 \
	VBROADCASTSS 0(AX), Y10 ; \
	VBROADCASTSS 4(AX), Y11 ; \
	VBROADCASTSS 8(AX), Y12 ; \
	VBROADCASTSS 12(AX), Y13 ; \
	VFMADD231PS Y8, Y10, Y0 ; \
	VFMADD231PS Y9, Y10, Y1 ; \
	VFMADD231PS Y8, Y11, Y2 ; \
	VFMADD231PS Y9, Y11, Y3 ; \
	VFMADD231PS Y8, Y12, Y4 ; \
	VFMADD231PS Y9, Y12, Y5 ; \
	VFMADD231PS Y8, Y13, Y6 ; \
	VFMADD231PS Y9, Y13, Y7

// Activations of one accumulator z, as the AVX-512 kernel's RELU, CLIP and SWISH
// compute them (see nn_conv_amd64.s), with Y8 = 0x7fffffff, Y9 = lo, Y10 = hi,
// Y11 = a, Y12 = b and Y13 as scratch (Y11 and Y12 are scratch for CLIP).
#define RELU2(z) \
	VPSRAD $31, z, Y13 ; \
	VPANDN z, Y13, z

#define CLIP2(z) \
	VPSRAD $31, z, Y11 ; \
	VPAND Y8, Y11, Y11 ; \
	VPXOR z, Y11, Y11 ; \
	VPMAXSD Y9, Y11, Y11 ; \
	VPMINSD Y10, Y11, Y11 ; \
	VPSRAD $31, Y11, Y12 ; \
	VPAND Y8, Y12, Y12 ; \
	VPXOR Y11, Y12, Y11 ; \
	VCMPPS $3, z, z, Y12 ; \
	VBLENDVPS Y12, z, Y11, z

#define SWISH2(z) \
	VMULPS Y11, z, Y13 ; \
	VADDPS Y12, Y13, Y13 ; \
	VPMAXSD Y9, Y13, Y13 ; \
	VPMINSD Y10, Y13, Y13 ; \
	VMULPS Y13, z, z

// TRANSPOSE8Y transposes the 8 × 8 matrix whose rows are Y0-Y7 into Y8-Y15 (row c of the
// result in Y(8+c)), Y0-Y7 clobbered: 32-bit and 64-bit interleaves within 128-bit lanes,
// then the lanes exchanged.
#define TRANSPOSE8Y \
	VUNPCKLPS Y1, Y0, Y8 ; \
	VUNPCKHPS Y1, Y0, Y9 ; \
	VUNPCKLPS Y3, Y2, Y10 ; \
	VUNPCKHPS Y3, Y2, Y11 ; \
	VUNPCKLPS Y5, Y4, Y12 ; \
	VUNPCKHPS Y5, Y4, Y13 ; \
	VUNPCKLPS Y7, Y6, Y14 ; \
	VUNPCKHPS Y7, Y6, Y15 ; \
	VUNPCKLPD Y10, Y8, Y0 ; \
	VUNPCKHPD Y10, Y8, Y1 ; \
	VUNPCKLPD Y11, Y9, Y2 ; \
	VUNPCKHPD Y11, Y9, Y3 ; \
	VUNPCKLPD Y14, Y12, Y4 ; \
	VUNPCKHPD Y14, Y12, Y5 ; \
	VUNPCKLPD Y15, Y13, Y6 ; \
	VUNPCKHPD Y15, Y13, Y7 ; \
	VPERM2F128 $0x20, Y4, Y0, Y8 ; \
	VPERM2F128 $0x20, Y5, Y1, Y9 ; \
	VPERM2F128 $0x20, Y6, Y2, Y10 ; \
	VPERM2F128 $0x20, Y7, Y3, Y11 ; \
	VPERM2F128 $0x31, Y4, Y0, Y12 ; \
	VPERM2F128 $0x31, Y5, Y1, Y13 ; \
	VPERM2F128 $0x31, Y6, Y2, Y14 ; \
	VPERM2F128 $0x31, Y7, Y3, Y15

#define ACT8(f) \
	f(Y0) ; f(Y1) ; f(Y2) ; f(Y3) ; f(Y4) ; f(Y5) ; f(Y6) ; f(Y7)

// func convTile4AVX2(k int, a, b *float32, ldb int, c *float32, ldc int, bias *float32, mask *int32, full, flags int, offs *int64, lo, hi int32, sa, sb float32)
//
// Four rows of one panel of the tile kernel (see convTileGeneric): row r of C (ldc
// apart) is init + Σ_i a[8i + r]·b[row(i) + j] over the 16 lanes j that mask (16 int32,
// sign bit set) selects, with row(i) = i·ldb or offs[i]/4. full != 0 says that every lane
// is selected, so plain loads and stores serve; full = 2 says so too, and that the rows
// start 64-byte aligned: they are then stored non-temporally (tileStream). Lanes outside
// the mask are neither read nor written (VMASKMOVPS does not fault on them).
TEXT ·convTile4AVX2(SB), NOSPLIT, $0-104
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), SI
	MOVQ ldb+24(FP), R8
	SHLQ $2, R8
	MOVQ c+32(FP), R9
	MOVQ ldc+40(FP), R11
	SHLQ $2, R11
	MOVQ bias+48(FP), R12
	MOVQ mask+56(FP), DX
	VMOVDQU 0(DX), Y14
	VMOVDQU 32(DX), Y15
	MOVQ flags+72(FP), R13

	// tilePrefetch: these rows of C 256 bytes on, for writing, as well.
	TESTQ $64, R13
	JZ   nopw
	LEAQ 256(R9), R14
	PFWROWS4
nopw:
	TESTQ $1, R13
	JNZ  loadc
	TESTQ R12, R12
	JZ   zero
	VBROADCASTSS 0(R12), Y0
	VBROADCASTSS 4(R12), Y2
	VBROADCASTSS 8(R12), Y4
	VBROADCASTSS 12(R12), Y6
	VMOVAPS Y0, Y1
	VMOVAPS Y2, Y3
	VMOVAPS Y4, Y5
	VMOVAPS Y6, Y7
	JMP  start

zero:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	JMP  start

loadc:
	MOVQ R9, R10
	VMASKMOVPS (R10), Y14, Y0
	VMASKMOVPS 32(R10), Y15, Y1
	ADDQ R11, R10
	VMASKMOVPS (R10), Y14, Y2
	VMASKMOVPS 32(R10), Y15, Y3
	ADDQ R11, R10
	VMASKMOVPS (R10), Y14, Y4
	VMASKMOVPS 32(R10), Y15, Y5
	ADDQ R11, R10
	VMASKMOVPS (R10), Y14, Y6
	VMASKMOVPS 32(R10), Y15, Y7
	// With a bias as well, add it to what C held.
	TESTQ R12, R12
	JZ   start
	VBROADCASTSS 0(R12), Y8
	VADDPS Y8, Y0, Y0
	VADDPS Y8, Y1, Y1
	VBROADCASTSS 4(R12), Y8
	VADDPS Y8, Y2, Y2
	VADDPS Y8, Y3, Y3
	VBROADCASTSS 8(R12), Y8
	VADDPS Y8, Y4, Y4
	VADDPS Y8, Y5, Y5
	VBROADCASTSS 12(R12), Y8
	VADDPS Y8, Y6, Y6
	VADDPS Y8, Y7, Y7

start:
	TESTQ CX, CX
	JZ   done
	MOVQ offs+80(FP), R14
	MOVQ full+64(FP), BX
	TESTQ R14, R14
	JNZ  offsets
	// Rows of B 16 ahead are fetched while these are summed, as in the AVX-512 kernel.
	MOVQ R8, R10
	SHLQ $4, R10
	TESTQ BX, BX
	JZ   mloop
	TESTQ $64, R13
	JZ   floop

	// tilePrefetch: the same rows of the panel two pairs of panels (256 bytes) on too.
fploop:
	PREFETCHT0 (SI)(R10*1)
	PREFETCHT0 256(SI)
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	FMA4
	ADDQ $32, AX
	ADDQ R8, SI
	DECQ CX
	JNZ  fploop
	JMP  done

floop:
	PREFETCHT0 (SI)(R10*1)
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	FMA4
	ADDQ $32, AX
	ADDQ R8, SI
	DECQ CX
	JNZ  floop
	JMP  done

mloop:
	PREFETCHT0 (SI)(R10*1)
	VMASKMOVPS (SI), Y14, Y8
	VMASKMOVPS 32(SI), Y15, Y9
	FMA4
	ADDQ $32, AX
	ADDQ R8, SI
	DECQ CX
	JNZ  mloop
	JMP  done

offsets:
	TESTQ BX, BX
	JZ   omloop

ofloop:
	MOVQ (R14), BX
	VMOVUPS (SI)(BX*1), Y8
	VMOVUPS 32(SI)(BX*1), Y9
	FMA4
	ADDQ $32, AX
	ADDQ $8, R14
	DECQ CX
	JNZ  ofloop
	JMP  done

omloop:
	MOVQ (R14), BX
	LEAQ (SI)(BX*1), DX
	VMASKMOVPS (DX), Y14, Y8
	VMASKMOVPS 32(DX), Y15, Y9
	FMA4
	ADDQ $32, AX
	ADDQ $8, R14
	DECQ CX
	JNZ  omloop

done:
	VPCMPEQD Y8, Y8, Y8
	VPSRLD $1, Y8, Y8
	VBROADCASTSS lo+88(FP), Y9
	VBROADCASTSS hi+92(FP), Y10
	TESTQ $2, R13
	JNZ  relu
	TESTQ $4, R13
	JNZ  clip
	TESTQ $8, R13
	JZ   store
	VBROADCASTSS sa+96(FP), Y11
	VBROADCASTSS sb+100(FP), Y12
	ACT8(SWISH2)
	JMP  store

relu:
	ACT8(RELU2)
	JMP  store

clip:
	ACT8(CLIP2)

store:
	MOVQ full+64(FP), BX
	TESTQ BX, BX
	JZ   mstore
	CMPQ BX, $2
	JEQ  ntstore
	VMOVUPS Y0, (R9)
	VMOVUPS Y1, 32(R9)
	ADDQ R11, R9
	VMOVUPS Y2, (R9)
	VMOVUPS Y3, 32(R9)
	ADDQ R11, R9
	VMOVUPS Y4, (R9)
	VMOVUPS Y5, 32(R9)
	ADDQ R11, R9
	VMOVUPS Y6, (R9)
	VMOVUPS Y7, 32(R9)
	VZEROUPPER
	RET

mstore:
	VMASKMOVPS Y0, Y14, (R9)
	VMASKMOVPS Y1, Y15, 32(R9)
	ADDQ R11, R9
	VMASKMOVPS Y2, Y14, (R9)
	VMASKMOVPS Y3, Y15, 32(R9)
	ADDQ R11, R9
	VMASKMOVPS Y4, Y14, (R9)
	VMASKMOVPS Y5, Y15, 32(R9)
	ADDQ R11, R9
	VMASKMOVPS Y6, Y14, (R9)
	VMASKMOVPS Y7, Y15, 32(R9)
	VZEROUPPER
	RET

ntstore:
	VMOVNTPS Y0, (R9)
	VMOVNTPS Y1, 32(R9)
	ADDQ R11, R9
	VMOVNTPS Y2, (R9)
	VMOVNTPS Y3, 32(R9)
	ADDQ R11, R9
	VMOVNTPS Y4, (R9)
	VMOVNTPS Y5, 32(R9)
	ADDQ R11, R9
	VMOVNTPS Y6, (R9)
	VMOVNTPS Y7, 32(R9)
	VZEROUPPER
	RET

// func storeFence()
//
// SFENCE: the non-temporal stores before it are visible before any store after it.
TEXT ·storeFence(SB), NOSPLIT, $0-0
	SFENCE
	RET

// SIGMOID2 is the AVX-512 kernel's SIGMOID (see nn_conv_amd64.s and sigmoidF32) on the
// 8 lanes of Y0, with Y1-Y4 as scratch and the constants in the 32-byte rows of the
// table at AX (sigmoidAVX2Consts). AVX2 has no VSCALEFPS: e·2^n is e·2^(n+64), exact,
// times 2^−64, which rounds once where the result is subnormal, as VSCALEFPS does.
// EXPNEG2, its first part, sets Y2 to expNegF32(Y4) with Y1, Y3 and Y4 as scratch: the
// last compare keeps the lanes not below the smallest normal (NaN too) and zeroes the rest.
#define EXPNEG2 \
	VMOVUPS 0(AX), Y1 ; \
	VMAXPS Y4, Y1, Y4 ; \
	VMULPS 32(AX), Y4, Y1 ; \
	VROUNDPS $0, Y1, Y1 ; \
	VMULPS 64(AX), Y1, Y2 ; \
	VSUBPS Y2, Y4, Y4 ; \
	VMULPS 96(AX), Y1, Y2 ; \
	VSUBPS Y2, Y4, Y4 ; \
	VMULPS Y4, Y4, Y3 ; \
	VMULPS 128(AX), Y4, Y2 ; \
	VADDPS 160(AX), Y2, Y2 ; \
	VMULPS Y4, Y2, Y2 ; \
	VADDPS 192(AX), Y2, Y2 ; \
	VMULPS Y4, Y2, Y2 ; \
	VADDPS 224(AX), Y2, Y2 ; \
	VMULPS Y4, Y2, Y2 ; \
	VADDPS 256(AX), Y2, Y2 ; \
	VMULPS Y4, Y2, Y2 ; \
	VADDPS 288(AX), Y2, Y2 ; \
	VMULPS Y3, Y2, Y2 ; \
	VADDPS Y4, Y2, Y2 ; \
	VADDPS 320(AX), Y2, Y2 ; \
	VCVTPS2DQ Y1, Y1 ; \
	VPADDD 384(AX), Y1, Y1 ; \
	VPSLLD $23, Y1, Y1 ; \
	VMULPS Y1, Y2, Y2 ; \
	VMULPS 416(AX), Y2, Y2 ; \
	VCMPPS $5, 448(AX), Y2, Y1 ; \
	VANDPS Y1, Y2, Y2

#define SIGMOID2 \
	VORPS 352(AX), Y0, Y4 ; \
	EXPNEG2 ; \
	VADDPS 320(AX), Y2, Y3 ; \
	VXORPS Y4, Y4, Y4 ; \
	VCMPPS $13, Y4, Y0, Y4 ; \
	VBLENDVPS Y4, 320(AX), Y2, Y2 ; \
	VDIVPS Y3, Y2, Y0

// func expVecAVX2(x, y *float32, n int, consts *[15][8]float32, mode int)
//
// expVecAVX512 (same modes) for n a multiple of 8.
TEXT ·expVecAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ consts+24(FP), AX
	MOVQ mode+32(FP), DX
	SHRQ $3, CX
	JZ   expdone

exploop:
	VMOVUPS (SI), Y0
	CMPQ  DX, $1
	JEQ   expsig
	JGT   expsilu
	VMOVAPS Y0, Y4
	EXPNEG2
	VMOVAPS Y2, Y0
	JMP   expstore

expsilu:
	VMOVAPS Y0, Y5
	SIGMOID2
	VMULPS Y5, Y0, Y0
	JMP   expstore

expsig:
	SIGMOID2

expstore:
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  exploop

expdone:
	VZEROUPPER
	RET

// DWTAP1 adds w[t]·x for the 16 columns at (AX)(R13*1) to Y0 and Y1, the product
// rounded before the sum (VMULPS, VADDPS), as dwPlaneGo sums.
#define DWTAP1 \
	VMULPS (AX)(R13*1), Y6, Y2 ; \
	VMULPS 32(AX)(R13*1), Y6, Y3 ; \
	VADDPS Y2, Y0, Y0 ; \
	VADDPS Y3, Y1, Y1

// DWTAP2 is DWTAP1 for column stride 2: the even columns of 32 loaded ones, put in order
// by VSHUFPS (even lanes of each 128-bit half) and VPERMPD (halves in place).
#define DWTAP2 \
	VMOVUPS (AX)(R13*1), Y2 ; \
	VMOVUPS 32(AX)(R13*1), Y3 ; \
	VSHUFPS $0x88, Y3, Y2, Y2 ; \
	VPERMPD $0xD8, Y2, Y2 ; \
	VMOVUPS 64(AX)(R13*1), Y3 ; \
	VMOVUPS 96(AX)(R13*1), Y4 ; \
	VSHUFPS $0x88, Y4, Y3, Y3 ; \
	VPERMPD $0xD8, Y3, Y3 ; \
	VMULPS Y2, Y6, Y2 ; \
	VMULPS Y3, Y6, Y3 ; \
	VADDPS Y2, Y0, Y0 ; \
	VADDPS Y3, Y1, Y1

// func dwPlaneAVX2(xp, y *float32, oh, ow, rowStep, s2 int, w *float32, k int, offs *int64, tail *int32, bias float32, flags int, lo, hi int32, a, b float32)
//
// dwPlaneAVX512 (see there) in AVX2: 16 outputs of a row at a time in two registers,
// tap after tap (rows of at most 8 outputs two rows at a time, one register each); a row's last chunk of ow mod 16 outputs (when not 0) is stored, and
// with dwAdd read, through the 16 int32 lane masks at tail. Loads of xp past a row's
// end stay inside the padded plane (dwPlan.size) and feed only unstored lanes.
TEXT ·dwPlaneAVX2(SB), NOSPLIT, $0-112
	MOVQ xp+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ oh+16(FP), R8
	MOVQ s2+40(FP), R14
	MOVQ w+48(FP), R15
	MOVQ k+56(FP), R10
	MOVQ offs+64(FP), R9
	MOVQ tail+72(FP), AX
	VMOVDQU 0(AX), Y14
	VMOVDQU 32(AX), Y15
	MOVQ R14, DX
	SHLQ $6, DX // input bytes per 16 outputs
	VBROADCASTSS bias+80(FP), Y7
	VPCMPEQD Y8, Y8, Y8
	VPSRLD $1, Y8, Y8
	VBROADCASTSS lo+96(FP), Y9
	VBROADCASTSS hi+100(FP), Y10
	VBROADCASTSS a+104(FP), Y11
	VBROADCASTSS b+108(FP), Y12
	CMPQ ow+24(FP), $8
	JLE  dwhalf

dwrow:
	MOVQ SI, AX
	MOVQ ow+24(FP), BX

dwchunk:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ R9, R11
	MOVQ R15, R12
	MOVQ R10, CX
	CMPQ R14, $1
	JNE  dwtaps2

dwtaps1:
	MOVQ (R11), R13
	VBROADCASTSS (R12), Y6
	DWTAP1
	ADDQ $8, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  dwtaps1
	JMP  dwsum

dwtaps2:
	MOVQ (R11), R13
	VBROADCASTSS (R12), Y6
	DWTAP2
	ADDQ $8, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  dwtaps2

dwsum:
	MOVQ flags+88(FP), R13
	TESTQ $32, R13
	JZ   dwnoadd
	CMPQ BX, $16
	JL   dwaddtail
	VADDPS (DI), Y0, Y0
	VADDPS 32(DI), Y1, Y1
	JMP  dwnoadd

dwaddtail:
	VMASKMOVPS (DI), Y14, Y2
	VMASKMOVPS 32(DI), Y15, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1

dwnoadd:
	TESTQ $16, R13
	JZ   dwact
	VADDPS Y7, Y0, Y0
	VADDPS Y7, Y1, Y1

dwact:
	TESTQ $2, R13
	JZ   dwclip
	RELU2(Y0)
	RELU2(Y1)
	JMP  dwput

dwclip:
	TESTQ $4, R13
	JZ   dwswish
	CLIP2(Y0)
	CLIP2(Y1)
	// CLIP2 took Y11 and Y12 as scratch; SWISH2 (their other user) is not this plane's.
	JMP  dwput

dwswish:
	TESTQ $8, R13
	JZ   dwput
	SWISH2(Y0)
	SWISH2(Y1)

dwput:
	CMPQ BX, $16
	JL   dwputtail
	// dwStream: whole, 64-byte-aligned chunks go non-temporally.
	TESTQ $64, R13
	JZ   dwputu
	TESTQ $63, DI
	JNZ  dwputu
	VMOVNTPS Y0, (DI)
	VMOVNTPS Y1, 32(DI)
	JMP  dwputnext

dwputu:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)

dwputnext:
	CMPQ BX, $16
	JE   dwrowdone
	SUBQ $16, BX
	ADDQ $64, DI
	ADDQ DX, AX
	JMP  dwchunk

dwputtail:
	VMASKMOVPS Y0, Y14, (DI)
	VMASKMOVPS Y1, Y15, 32(DI)

dwrowdone:
	LEAQ (DI)(BX*4), DI
	ADDQ rowStep+32(FP), SI
	DECQ R8
	JNZ  dwrow
	VZEROUPPER
	RET

	// Rows of at most 8 outputs fill one register: two rows at a time, Y0 and Y1, from
	// input rows SI and AX, sharing each tap's offset and weight. A last odd row is
	// made twice (AX = SI) and its copy stored through Y5 = Y15, which is all zero here
	// (ow mod 16 ≤ 8), as is the add's load through it. DX is a row's output bytes, BX
	// the input step between output rows.
dwhalf:
	MOVQ ow+24(FP), DX
	SHLQ $2, DX
	MOVQ rowStep+32(FP), BX

dwhblock:
	LEAQ    (SI)(BX*1), AX
	VMOVAPS Y14, Y5
	CMPQ    R8, $2
	JGE     dwhgo
	MOVQ    SI, AX
	VMOVAPS Y15, Y5

dwhgo:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   R9, R11
	MOVQ   R15, R12
	MOVQ   R10, CX
	CMPQ   R14, $1
	JNE    dwhtaps2

dwhtaps1:
	MOVQ         (R11), R13
	VBROADCASTSS (R12), Y6
	VMULPS       (SI)(R13*1), Y6, Y2
	VMULPS       (AX)(R13*1), Y6, Y3
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	ADDQ         $8, R11
	ADDQ         $4, R12
	DECQ         CX
	JNZ          dwhtaps1
	JMP          dwhsum

	// DWTAP2's first half for each row: the even columns of 16.
dwhtaps2:
	MOVQ         (R11), R13
	VBROADCASTSS (R12), Y6
	VMOVUPS      (SI)(R13*1), Y2
	VSHUFPS      $0x88, 32(SI)(R13*1), Y2, Y2
	VPERMPD      $0xD8, Y2, Y2
	VMOVUPS      (AX)(R13*1), Y3
	VSHUFPS      $0x88, 32(AX)(R13*1), Y3, Y3
	VPERMPD      $0xD8, Y3, Y3
	VMULPS       Y2, Y6, Y2
	VMULPS       Y3, Y6, Y3
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	ADDQ         $8, R11
	ADDQ         $4, R12
	DECQ         CX
	JNZ          dwhtaps2

dwhsum:
	MOVQ       flags+88(FP), R13
	TESTQ      $32, R13
	JZ         dwhnoadd
	VMASKMOVPS (DI), Y14, Y2
	VMASKMOVPS (DI)(DX*1), Y5, Y3
	VADDPS     Y2, Y0, Y0
	VADDPS     Y3, Y1, Y1

dwhnoadd:
	TESTQ  $16, R13
	JZ     dwhact
	VADDPS Y7, Y0, Y0
	VADDPS Y7, Y1, Y1

dwhact:
	TESTQ $2, R13
	JZ    dwhclip
	RELU2(Y0)
	RELU2(Y1)
	JMP   dwhput

dwhclip:
	TESTQ $4, R13
	JZ    dwhswish
	CLIP2(Y0)
	CLIP2(Y1)
	JMP   dwhput

dwhswish:
	TESTQ $8, R13
	JZ    dwhput
	SWISH2(Y0)
	SWISH2(Y1)

dwhput:
	VMASKMOVPS Y0, Y14, (DI)
	VMASKMOVPS Y1, Y5, (DI)(DX*1)
	LEAQ       (DI)(DX*2), DI
	LEAQ       (SI)(BX*2), SI
	SUBQ       $2, R8
	JG         dwhblock
	VZEROUPPER
	RET

// func padRowsAVX2(dst, src *float32, rows, w, pitch int, mask *int32)
//
// padRowsAVX512 in AVX2: 8 values at a time, the last w mod 8 of each row through
// VMASKMOVPS with mask (8 int32, the sign bit set on the lanes to copy), which neither
// reads nor writes the others.
TEXT ·padRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    rows+16(FP), CX
	MOVQ    w+24(FP), DX
	MOVQ    pitch+32(FP), R8
	SHLQ    $2, R8
	MOVQ    mask+40(FP), AX
	VMOVDQU (AX), Y1
	TESTQ   CX, CX
	JLE     p2done

p2row:
	MOVQ DX, R9
	XORQ R10, R10

p2chunk:
	CMPQ    R9, $8
	JLT     p2last
	VMOVUPS (SI)(R10*1), Y0
	VMOVUPS Y0, (DI)(R10*1)
	ADDQ    $32, R10
	SUBQ    $8, R9
	JMP     p2chunk

p2last:
	TESTQ      R9, R9
	JZ         p2next
	VMASKMOVPS (SI)(R10*1), Y1, Y0
	VMASKMOVPS Y0, Y1, (DI)(R10*1)

p2next:
	LEAQ (SI)(DX*4), SI
	ADDQ R8, DI
	DECQ CX
	JNZ  p2row

p2done:
	VZEROUPPER
	RET

// func transpose8AVX2(t, a *float32, chunks, lda, ldt int)
//
// transpose8AVX512 in AVX2, into rows of t ldt values apart: per chunk of 8 columns of
// the 8 rows (lda values apart), an 8 × 8 transpose in registers (32-bit and 64-bit
// interleaves within 128-bit lanes, then the lanes exchanged), and t's 8 rows of 8 stored
// whole.
TEXT ·transpose8AVX2(SB), NOSPLIT, $0-40
	MOVQ  t+0(FP), DI
	MOVQ  a+8(FP), SI
	MOVQ  chunks+16(FP), CX
	MOVQ  lda+24(FP), R8
	SHLQ  $2, R8
	MOVQ  ldt+32(FP), R10
	SHLQ  $2, R10
	TESTQ CX, CX
	JLE   t2done

t2loop:
	MOVQ    SI, R9
	VMOVUPS (R9), Y0
	ADDQ    R8, R9
	VMOVUPS (R9), Y1
	ADDQ    R8, R9
	VMOVUPS (R9), Y2
	ADDQ    R8, R9
	VMOVUPS (R9), Y3
	ADDQ    R8, R9
	VMOVUPS (R9), Y4
	ADDQ    R8, R9
	VMOVUPS (R9), Y5
	ADDQ    R8, R9
	VMOVUPS (R9), Y6
	ADDQ    R8, R9
	VMOVUPS (R9), Y7
	TRANSPOSE8Y
	MOVQ    DI, R11
	VMOVUPS Y8, (R11)
	ADDQ    R10, R11
	VMOVUPS Y9, (R11)
	ADDQ    R10, R11
	VMOVUPS Y10, (R11)
	ADDQ    R10, R11
	VMOVUPS Y11, (R11)
	ADDQ    R10, R11
	VMOVUPS Y12, (R11)
	ADDQ    R10, R11
	VMOVUPS Y13, (R11)
	ADDQ    R10, R11
	VMOVUPS Y14, (R11)
	ADDQ    R10, R11
	VMOVUPS Y15, (R11)
	ADDQ $32, SI
	LEAQ (DI)(R10*8), DI
	DECQ CX
	JNZ  t2loop

t2done:
	VZEROUPPER
	RET

// DWLTAP adds tap product Y14 · (r + DX) to accumulator z, the product rounded first.
#define DWLTAP(r, z) \
	VMULPS (r)(DX*1), Y14, Y15 ; \
	VADDPS Y15, z, z

// func dwLanesAVX2(xp, y *float32, ldy int, pix *int64, groups, tail int, taps *int64, w, bias *float32, flags int, lo, hi int32, a, b float32)
//
// Depthwise planes with 8 channels in the lanes (see dwLanes): xp holds the padded
// input, 8 channels a pixel; pix the byte offset of every output pixel's first tap in
// it, 8 a group (groups of them, the last holding tail valid pixels, 8 when full); taps
// the byte offset of each tap from it, ended by −1; w the taps' 8 channel weights. Each
// group of 8 output pixels is summed in Y0-Y7 (one pixel a register, a channel a lane)
// tap by tap, each product rounded before it is added, from +0; then the bias (when
// non-nil) and the activation of flags, then transposed so that each register holds one
// channel's 8 pixels, stored to row c of y (ldy bytes apart), the last group masked.
TEXT ·dwLanesAVX2(SB), NOSPLIT, $0-96
	MOVQ pix+24(FP), DI
	MOVQ groups+32(FP), BX
	XORQ R13, R13 // byte offset of the group's first output pixel in y's rows

dwlgroup:
	MOVQ xp+0(FP), AX
	MOVQ 0(DI), R8
	ADDQ AX, R8
	MOVQ 8(DI), R9
	ADDQ AX, R9
	MOVQ 16(DI), R10
	ADDQ AX, R10
	MOVQ 24(DI), R11
	ADDQ AX, R11
	MOVQ 32(DI), R12
	ADDQ AX, R12
	MOVQ 40(DI), R14
	ADDQ AX, R14
	MOVQ 48(DI), R15
	ADDQ AX, R15
	MOVQ 56(DI), SI
	ADDQ AX, SI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ taps+48(FP), CX
	MOVQ w+56(FP), AX

dwltap:
	MOVQ (CX), DX
	TESTQ DX, DX
	JS   dwltapdone
	VMOVUPS (AX), Y14
	DWLTAP(R8, Y0)
	DWLTAP(R9, Y1)
	DWLTAP(R10, Y2)
	DWLTAP(R11, Y3)
	DWLTAP(R12, Y4)
	DWLTAP(R14, Y5)
	DWLTAP(R15, Y6)
	DWLTAP(SI, Y7)
	ADDQ $8, CX
	ADDQ $32, AX
	JMP  dwltap

dwltapdone:
	MOVQ bias+64(FP), AX
	TESTQ AX, AX
	JZ   dwlact
	VMOVUPS (AX), Y14
	VADDPS Y14, Y0, Y0
	VADDPS Y14, Y1, Y1
	VADDPS Y14, Y2, Y2
	VADDPS Y14, Y3, Y3
	VADDPS Y14, Y4, Y4
	VADDPS Y14, Y5, Y5
	VADDPS Y14, Y6, Y6
	VADDPS Y14, Y7, Y7

dwlact:
	MOVQ flags+72(FP), AX
	VPCMPEQD Y8, Y8, Y8
	VPSRLD $1, Y8, Y8
	VBROADCASTSS lo+80(FP), Y9
	VBROADCASTSS hi+84(FP), Y10
	TESTQ $2, AX
	JNZ  dwlrelu
	TESTQ $4, AX
	JNZ  dwlclip
	TESTQ $8, AX
	JZ   dwltrans
	VBROADCASTSS a+88(FP), Y11
	VBROADCASTSS b+92(FP), Y12
	ACT8(SWISH2)
	JMP  dwltrans

dwlrelu:
	ACT8(RELU2)
	JMP  dwltrans

dwlclip:
	ACT8(CLIP2)

dwltrans:
	// Y0-Y7 are pixels (rows) of 8 channels; after the transpose Y8-Y15 are channels.
	TRANSPOSE8Y

	MOVQ y+8(FP), R8
	ADDQ R13, R8
	MOVQ ldy+16(FP), R9
	CMPQ BX, $1
	JNE  dwlfull
	CMPQ tail+40(FP), $8
	JEQ  dwlfull
	// The last group, fewer than 8 pixels: the stores masked to them.
	MOVQ tail+40(FP), AX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
	VMOVDQU dwlIota<>(SB), Y1
	VPCMPGTD Y1, Y0, Y0
	VMASKMOVPS Y8, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y9, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y10, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y11, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y12, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y13, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y14, Y0, (R8)
	ADDQ R9, R8
	VMASKMOVPS Y15, Y0, (R8)
	JMP  dwldone

dwlfull:
	VMOVUPS Y8, (R8)
	ADDQ R9, R8
	VMOVUPS Y9, (R8)
	ADDQ R9, R8
	VMOVUPS Y10, (R8)
	ADDQ R9, R8
	VMOVUPS Y11, (R8)
	ADDQ R9, R8
	VMOVUPS Y12, (R8)
	ADDQ R9, R8
	VMOVUPS Y13, (R8)
	ADDQ R9, R8
	VMOVUPS Y14, (R8)
	ADDQ R9, R8
	VMOVUPS Y15, (R8)
	ADDQ $64, DI
	ADDQ $32, R13
	DECQ BX
	JNZ  dwlgroup

dwldone:
	VZEROUPPER
	RET

DATA dwlIota<>+0(SB)/4, $0
DATA dwlIota<>+4(SB)/4, $1
DATA dwlIota<>+8(SB)/4, $2
DATA dwlIota<>+12(SB)/4, $3
DATA dwlIota<>+16(SB)/4, $4
DATA dwlIota<>+20(SB)/4, $5
DATA dwlIota<>+24(SB)/4, $6
DATA dwlIota<>+28(SB)/4, $7
GLOBL dwlIota<>(SB), RODATA|NOPTR, $32

// func siluRowsAVX2(src *float32, lds int, dst *float32, rows, ldc int, consts *[15][8]float32)
//
// dst[r·ldc + j] = x·sigmoidF32(x), x = src[r·lds + j], for r < rows and j < 16, as
// expVecAVX2 computes it in mode 2: one call for a tile's rows rather than one a row.
TEXT ·siluRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R9
	SHLQ $2, R9
	MOVQ dst+16(FP), DI
	MOVQ rows+24(FP), CX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	MOVQ consts+40(FP), AX
	TESTQ CX, CX
	JLE   sr2done

sr2loop:
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y5
	SIGMOID2
	VMULPS Y5, Y0, Y0
	VMOVUPS 32(SI), Y6
	VMOVUPS Y0, (DI)
	VMOVAPS Y6, Y0
	SIGMOID2
	VMULPS Y6, Y0, Y0
	VMOVUPS Y0, 32(DI)
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  sr2loop

sr2done:
	VZEROUPPER
	RET

// FMA6 adds six rows of A, broadcast in turn into Y14 and Y15 (rows 0-1 from AX, rows
// 2-5 from DX), times the B row in Y12 (columns 0-7) and Y13 (columns 8-15) to the
// accumulators: row r in Y(2r) and Y(2r+1). BROW is one row.
#define BROW(src, bc, z0, z1) \
	VBROADCASTSS src, bc ; \
	VFMADD231PS Y12, bc, z0 ; \
	VFMADD231PS Y13, bc, z1

#define FMA6 \
	BROW(0(AX), Y14, Y0, Y1) ; \
	BROW(4(AX), Y15, Y2, Y3) ; \
	BROW(0(DX), Y14, Y4, Y5) ; \
	BROW(4(DX), Y15, Y6, Y7) ; \
	BROW(0(DI), Y14, Y8, Y9) ; \
	BROW(4(DI), Y15, Y10, Y11)

// ROW6(op) applies op(z0, z1) at R9 to each row's pair of accumulators, moving R9 a row
// (R11 bytes) on after each but the last.
#define ROW6(op) \
	op(Y0, Y1) ; ADDQ R11, R9 ; \
	op(Y2, Y3) ; ADDQ R11, R9 ; \
	op(Y4, Y5) ; ADDQ R11, R9 ; \
	op(Y6, Y7) ; ADDQ R11, R9 ; \
	op(Y8, Y9) ; ADDQ R11, R9 ; \
	op(Y10, Y11)

// LOADC6 loads the six rows at R10 (R11 bytes apart) into the accumulators, R10 moved.
#define LOADC6 \
	VMOVUPS (R10), Y0 ; VMOVUPS 32(R10), Y1 ; ADDQ R11, R10 ; \
	VMOVUPS (R10), Y2 ; VMOVUPS 32(R10), Y3 ; ADDQ R11, R10 ; \
	VMOVUPS (R10), Y4 ; VMOVUPS 32(R10), Y5 ; ADDQ R11, R10 ; \
	VMOVUPS (R10), Y6 ; VMOVUPS 32(R10), Y7 ; ADDQ R11, R10 ; \
	VMOVUPS (R10), Y8 ; VMOVUPS 32(R10), Y9 ; ADDQ R11, R10 ; \
	VMOVUPS (R10), Y10 ; VMOVUPS 32(R10), Y11

#define STORE2(z0, z1) VMOVUPS z0, (R9) ; VMOVUPS z1, 32(R9)
#define NTSTORE2(z0, z1) VMOVNTPS z0, (R9) ; VMOVNTPS z1, 32(R9)

// CLIP6 is CLIP2 with its constants read from the rows at DI (0x7fffffff, lo, hi) and
// Y12-Y13 as scratch.
#define CLIP6(z) \
	VPSRAD $31, z, Y12 ; \
	VPAND (DI), Y12, Y12 ; \
	VPXOR z, Y12, Y12 ; \
	VPMAXSD 32(DI), Y12, Y12 ; \
	VPMINSD 64(DI), Y12, Y12 ; \
	VPSRAD $31, Y12, Y13 ; \
	VPAND (DI), Y13, Y13 ; \
	VPXOR Y12, Y13, Y12 ; \
	VCMPPS $3, z, z, Y13 ; \
	VBLENDVPS Y13, z, Y12, z

#define RELU6(z) \
	VPSRAD $31, z, Y15 ; \
	VPANDN z, Y15, z

#define BIAS2(off, z0, z1) \
	VBROADCASTSS off(R12), Y12 ; \
	VADDPS Y12, z0, z0 ; \
	VADDPS Y12, z1, z1

// func convTile6AVX2(k int, a0, a1, a2, b *float32, ldb int, c *float32, ldc int, bias *float32, flags int, offs *int64, nt int, clip *int32)
//
// Six rows of one panel of the tile kernel whose 16 lanes are all valid, as
// convTile4AVX2 makes four: row r of C (ldc apart) is init + Σ_i a_r(i)·b[row(i) + j],
// with a_r(i) = a0[8i + r] for r < 2, a1[8i + r − 2] for r < 4 and a2[8i + r − 4] for
// the last two (each pair of rows from a pointer of its own, so that six rows from any
// even row may straddle two 8-row blocks of A), row(i) = i·ldb or offs[i]/4, and init
// bias[r] (0 when bias is nil) plus, with tileAdd, C itself. Of the activations tileRelu
// and tileClip, whose three rows of 8 int32 (0x7fffffff, lo, hi) clip points to, since
// the registers cannot hold them; tilePrefetch as in convTile4AVX2; nt != 0 stores the
// rows non-temporally (they start 64-byte aligned). Twelve
// accumulators, where four rows hold eight: with the FMA's latency of four cycles, eight
// chains are exactly what two FMA pipes need, and any stall showed (Zen 3).
TEXT ·convTile6AVX2(SB), NOSPLIT, $0-104
	MOVQ k+0(FP), CX
	MOVQ a0+8(FP), AX
	MOVQ a1+16(FP), DX
	MOVQ a2+24(FP), DI
	MOVQ b+32(FP), SI
	MOVQ ldb+40(FP), R8
	SHLQ $2, R8
	MOVQ c+48(FP), R9
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11
	MOVQ bias+64(FP), R12
	MOVQ flags+72(FP), R13

	// tilePrefetch: these rows of C 256 bytes on, for writing, as well.
	TESTQ $64, R13
	JZ   nopw6
	LEAQ 256(R9), R14
	PFWROWS4
	ADDQ R11, R14
	PREFETCHW_R14
	ADDQ R11, R14
	PREFETCHW_R14

nopw6:
	TESTQ $1, R13
	JNZ  loadc6
	TESTQ R12, R12
	JZ   zero6
	VBROADCASTSS 0(R12), Y0
	VBROADCASTSS 4(R12), Y2
	VBROADCASTSS 8(R12), Y4
	VBROADCASTSS 12(R12), Y6
	VBROADCASTSS 16(R12), Y8
	VBROADCASTSS 20(R12), Y10
	VMOVAPS Y0, Y1
	VMOVAPS Y2, Y3
	VMOVAPS Y4, Y5
	VMOVAPS Y6, Y7
	VMOVAPS Y8, Y9
	VMOVAPS Y10, Y11
	JMP  start6

zero6:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	JMP  start6

loadc6:
	MOVQ R9, R10
	LOADC6
	// With a bias as well, add it to what C held.
	TESTQ R12, R12
	JZ   start6
	BIAS2(0, Y0, Y1)
	BIAS2(4, Y2, Y3)
	BIAS2(8, Y4, Y5)
	BIAS2(12, Y6, Y7)
	BIAS2(16, Y8, Y9)
	BIAS2(20, Y10, Y11)

start6:
	TESTQ CX, CX
	JZ   done6
	MOVQ offs+80(FP), R14
	TESTQ R14, R14
	JNZ  oloop6
	// Rows of B 16 ahead are fetched while these are summed, as in convTile4AVX2.
	MOVQ R8, R10
	SHLQ $4, R10
	TESTQ $64, R13
	JZ   floop6

	// tilePrefetch: the same rows of the panel two pairs of panels (256 bytes) on too.
fploop6:
	PREFETCHT0 (SI)(R10*1)
	PREFETCHT0 256(SI)
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	FMA6
	ADDQ $32, AX
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ R8, SI
	DECQ CX
	JNZ  fploop6
	JMP  done6

floop6:
	PREFETCHT0 (SI)(R10*1)
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	FMA6
	ADDQ $32, AX
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ R8, SI
	DECQ CX
	JNZ  floop6
	JMP  done6

oloop6:
	MOVQ (R14), BX
	VMOVUPS (SI)(BX*1), Y12
	VMOVUPS 32(SI)(BX*1), Y13
	FMA6
	ADDQ $32, AX
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ $8, R14
	DECQ CX
	JNZ  oloop6

done6:
	TESTQ $4, R13
	JNZ  clip6
	TESTQ $2, R13
	JZ   store6
	RELU6(Y0)
	RELU6(Y1)
	RELU6(Y2)
	RELU6(Y3)
	RELU6(Y4)
	RELU6(Y5)
	RELU6(Y6)
	RELU6(Y7)
	RELU6(Y8)
	RELU6(Y9)
	RELU6(Y10)
	RELU6(Y11)

	JMP  store6

clip6:
	MOVQ clip+96(FP), DI
	CLIP6(Y0)
	CLIP6(Y1)
	CLIP6(Y2)
	CLIP6(Y3)
	CLIP6(Y4)
	CLIP6(Y5)
	CLIP6(Y6)
	CLIP6(Y7)
	CLIP6(Y8)
	CLIP6(Y9)
	CLIP6(Y10)
	CLIP6(Y11)

store6:
	MOVQ nt+88(FP), BX
	TESTQ BX, BX
	JNZ  ntstore6
	ROW6(STORE2)
	VZEROUPPER
	RET

ntstore6:
	ROW6(NTSTORE2)
	VZEROUPPER
	RET

// func dwGradWAVX2(xp, gy *float32, oh, ow, rowStep, k int, offs *int64, tail *int32, gw *float32)
//
// dwGradWAVX512 in AVX2: for each of the k taps, gw[t] += the sum over the plane of
// gy[o1, o2]·xp[offs[t]/4 + o1·rowStep/4 + o2], in 16 lanes as dwGradWGo defines it
// (Y4 lanes 0-7, Y5 lanes 8-15; a row's last chunk of fewer than 16 outputs read through
// the 16 int32 of tail, as zeros past the row), the lanes then added pairwise by halves.
TEXT ·dwGradWAVX2(SB), NOSPLIT, $0-72
	MOVQ gw+64(FP), AX
	MOVQ offs+48(FP), R9
	MOVQ k+40(FP), R10
	MOVQ tail+56(FP), DX
	VMOVDQU (DX), Y14
	VMOVDQU 32(DX), Y15

gwtap2:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	MOVQ xp+0(FP), SI
	ADDQ (R9), SI
	MOVQ gy+8(FP), DI
	MOVQ oh+16(FP), R8

gwrow2:
	MOVQ SI, R11
	MOVQ ow+24(FP), BX

gwchunk2:
	CMPQ BX, $16
	JL   gwtail2
	VMOVUPS (DI), Y2
	VMOVUPS 32(DI), Y3
	VMULPS (R11), Y2, Y2
	VMULPS 32(R11), Y3, Y3
	VADDPS Y2, Y4, Y4
	VADDPS Y3, Y5, Y5
	CMPQ BX, $16
	JLE  gwrowdone2
	SUBQ $16, BX
	ADDQ $64, DI
	ADDQ $64, R11
	JMP  gwchunk2

gwtail2:
	VMASKMOVPS (DI), Y14, Y2
	VMASKMOVPS 32(DI), Y15, Y3
	VMASKMOVPS (R11), Y14, Y0
	VMASKMOVPS 32(R11), Y15, Y1
	VMULPS Y0, Y2, Y2
	VMULPS Y1, Y3, Y3
	VADDPS Y2, Y4, Y4
	VADDPS Y3, Y5, Y5

gwrowdone2:
	LEAQ (DI)(BX*4), DI
	ADDQ rowStep+32(FP), SI
	DECQ R8
	JNZ  gwrow2
	VADDPS Y5, Y4, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VADDSS (AX), X0, X0
	VMOVSS X0, (AX)
	ADDQ $4, AX
	ADDQ $8, R9
	DECQ R10
	JNZ  gwtap2
	VZEROUPPER
	RET

// func sumsSetAVX2(x, gr *float32, n int, mu, inv float32, mode int, out *float64, segs, stride, set int)
//
// One set of nnSumsLanes' four sets of 16 lanes: the chunks of 16 elements c with
// c mod 4 = set in each of the segs segments of n elements (stride elements apart, in x
// and gr alike), the last chunk of a segment loading zeros past its end. Sixteen float64
// lanes of two sums take eight of AVX2's sixteen registers, so the four sets take a call
// each (each set reads its own cache lines: one pass over memory in all), and the caller
// adds the sets and the lanes as nnSumsLanes does. Lanes 0-15 of the first sum go to
// out[0:16] (Y8-Y11), of the second to out[16:32] (Y12-Y15). Y0-Y5 are scratch, Y6 = mu,
// Y7 = inv.

// SUMSMASK2 sets Y4 and Y5 to the lanes 0-7 and 8-15 of a chunk of CX < 16 elements;
// clobbers AX, Y2 and Y3.
#define SUMSMASK2 \
	MOVQ CX, AX ; \
	VMOVQ AX, X2 ; \
	VPBROADCASTD X2, Y2 ; \
	VMOVDQU dwlIota<>(SB), Y3 ; \
	VPCMPGTD Y3, Y2, Y4 ; \
	SUBQ $8, AX ; \
	VMOVQ AX, X2 ; \
	VPBROADCASTD X2, Y2 ; \
	VPCMPGTD Y3, Y2, Y5

// SUMS0Q adds the float64 of the 8 floats in q (lanes l, l+4 in alo, ahi) to alo and ahi.
#define SUMS0Q(q, xq, alo, ahi) \
	VCVTPS2PD xq, Y2 ; \
	VADDPD Y2, alo, alo ; \
	VEXTRACTF128 $1, q, X3 ; \
	VCVTPS2PD X3, Y3 ; \
	VADDPD Y3, ahi, ahi

// SUMS1Q adds d² (in float64) to alo/ahi and d to blo/bhi for the 8 float32 d in q.
#define SUMS1Q(q, xq, alo, ahi, blo, bhi) \
	VCVTPS2PD xq, Y2 ; \
	VMULPD Y2, Y2, Y3 ; \
	VADDPD Y3, alo, alo ; \
	VADDPD Y2, blo, blo ; \
	VEXTRACTF128 $1, q, xq ; \
	VCVTPS2PD xq, Y2 ; \
	VMULPD Y2, Y2, Y3 ; \
	VADDPD Y3, ahi, ahi ; \
	VADDPD Y2, bhi, bhi

// SUMS2Q adds g (in gq) to alo/ahi and (x−mu)·g·inv, rounded to float32 (x in q), to
// blo/bhi; clobbers q and Y4, Y5.
#define SUMS2Q(q, xq, gq, xgq, alo, ahi, blo, bhi) \
	VCVTPS2PD xgq, Y4 ; \
	VADDPD Y4, alo, alo ; \
	VEXTRACTF128 $1, gq, X5 ; \
	VCVTPS2PD X5, Y5 ; \
	VADDPD Y5, ahi, ahi ; \
	VSUBPS Y6, q, q ; \
	VMULPS gq, q, q ; \
	VMULPS Y7, q, q ; \
	VCVTPS2PD xq, Y4 ; \
	VADDPD Y4, blo, blo ; \
	VEXTRACTF128 $1, q, X5 ; \
	VCVTPS2PD X5, Y5 ; \
	VADDPD Y5, bhi, bhi

TEXT ·sumsSetAVX2(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), R11
	MOVQ gr+8(FP), R12
	MOVQ n+16(FP), R13
	VBROADCASTSS mu+24(FP), Y6
	VBROADCASTSS inv+28(FP), Y7
	MOVQ mode+32(FP), R8
	MOVQ segs+48(FP), R9
	MOVQ stride+56(FP), R10
	SHLQ $2, R10
	MOVQ set+64(FP), BX
	SHLQ $4, BX          // the set's first element
	SUBQ BX, R13         // elements from it to a segment's end
	SHLQ $2, BX          // its byte offset
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15
	TESTQ R13, R13
	JLE   ssdone
	TESTQ R9, R9
	JLE   ssdone
	// DX: the same chunk four segments on, for the prefetch (see SUMSPF in nn_conv_amd64.s).
	MOVQ R10, DX
	SHLQ $2, DX
	CMPQ R8, $1
	JEQ  ss1seg
	JGT  ss2seg

ss0seg:
	LEAQ (R11)(BX*1), SI
	PREFETCHT0 (SI)(DX*1)
	PREFETCHT0 63(SI)(DX*1)
	MOVQ R13, CX

ss0full:
	CMPQ CX, $16
	JLT  ss0tail
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	SUMS0Q(Y0, X0, Y8, Y9)
	SUMS0Q(Y1, X1, Y10, Y11)
	ADDQ $256, SI
	SUBQ $64, CX
	JMP  ss0full

ss0tail:
	TESTQ CX, CX
	JLE   ss0next
	SUMSMASK2
	VMASKMOVPS (SI), Y4, Y0
	VMASKMOVPS 32(SI), Y5, Y1
	SUMS0Q(Y0, X0, Y8, Y9)
	SUMS0Q(Y1, X1, Y10, Y11)

ss0next:
	ADDQ R10, R11
	DECQ R9
	JGT  ss0seg
	JMP  ssdone

ss1seg:
	LEAQ (R11)(BX*1), SI
	PREFETCHT0 (SI)(DX*1)
	PREFETCHT0 63(SI)(DX*1)
	MOVQ R13, CX

ss1full:
	CMPQ CX, $16
	JLT  ss1tail
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VSUBPS Y6, Y0, Y0
	VSUBPS Y6, Y1, Y1
	SUMS1Q(Y0, X0, Y8, Y9, Y12, Y13)
	SUMS1Q(Y1, X1, Y10, Y11, Y14, Y15)
	ADDQ $256, SI
	SUBQ $64, CX
	JMP  ss1full

ss1tail:
	TESTQ CX, CX
	JLE   ss1next
	SUMSMASK2
	VMASKMOVPS (SI), Y4, Y0
	VMASKMOVPS 32(SI), Y5, Y1
	// x − mu is 0, not −mu, past the end.
	VSUBPS Y6, Y0, Y0
	VSUBPS Y6, Y1, Y1
	VANDPS Y4, Y0, Y0
	VANDPS Y5, Y1, Y1
	SUMS1Q(Y0, X0, Y8, Y9, Y12, Y13)
	SUMS1Q(Y1, X1, Y10, Y11, Y14, Y15)

ss1next:
	ADDQ R10, R11
	DECQ R9
	JGT  ss1seg
	JMP  ssdone

ss2seg:
	LEAQ (R11)(BX*1), SI
	LEAQ (R12)(BX*1), DI
	PREFETCHT0 (SI)(DX*1)
	PREFETCHT0 63(SI)(DX*1)
	PREFETCHT0 (DI)(DX*1)
	PREFETCHT0 63(DI)(DX*1)
	MOVQ R13, CX

ss2full:
	CMPQ CX, $16
	JLT  ss2tail
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS (DI), Y2
	VMOVUPS 32(DI), Y3
	SUMS2Q(Y0, X0, Y2, X2, Y8, Y9, Y12, Y13)
	SUMS2Q(Y1, X1, Y3, X3, Y10, Y11, Y14, Y15)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JMP  ss2full

ss2tail:
	TESTQ CX, CX
	JLE   ss2next
	SUMSMASK2
	VMASKMOVPS (SI), Y4, Y0
	VMASKMOVPS 32(SI), Y5, Y1
	VMASKMOVPS (DI), Y4, Y2
	VMASKMOVPS 32(DI), Y5, Y3
	SUMS2Q(Y0, X0, Y2, X2, Y8, Y9, Y12, Y13)
	SUMS2Q(Y1, X1, Y3, X3, Y10, Y11, Y14, Y15)

ss2next:
	ADDQ R10, R11
	ADDQ R10, R12
	DECQ R9
	JGT  ss2seg

ssdone:
	MOVQ out+40(FP), AX
	VMOVUPD Y8, (AX)
	VMOVUPD Y9, 32(AX)
	VMOVUPD Y10, 64(AX)
	VMOVUPD Y11, 96(AX)
	VMOVUPD Y12, 128(AX)
	VMOVUPD Y13, 160(AX)
	VMOVUPD Y14, 192(AX)
	VMOVUPD Y15, 224(AX)
	VZEROUPPER
	RET

// func dwBackS2AVX2(gx *float32, ldx int, gy *float32, ldy, blocks, rows int, w float32, masks *[32]int32)
//
// dwBackS2Go in AVX2: per row, blocks whole blocks of 8 values of gy times w, each
// product doubled into a pair of lanes (VUNPCKLPS/VUNPCKHPS, then VPERM2F128 puts them in
// order), added to gx's 16 values and blended into its even lanes (the odd ones are
// written back as they were read: VMASKMOVPS stores cost AMD's cores a dozen cycles),
// then a last block of 1 to 8 values through VMASKMOVPS, so that nothing past the row's
// last value is read or written. masks: [0:8] gy's lanes of the last block, [8:16] and
// [16:24] gx's even lanes below the row's end in its two registers.
TEXT ·dwBackS2AVX2(SB), NOSPLIT, $0-64
	MOVQ         gx+0(FP), DI
	MOVQ         ldx+8(FP), R8
	SHLQ         $2, R8
	MOVQ         gy+16(FP), SI
	MOVQ         ldy+24(FP), R9
	SHLQ         $2, R9
	MOVQ         blocks+32(FP), R10
	MOVQ         rows+40(FP), R11
	VBROADCASTSS w+48(FP), Y15
	MOVQ         masks+56(FP), AX
	VMOVDQU      (AX), Y12
	VMOVDQU      32(AX), Y13
	VMOVDQU      64(AX), Y14
	TESTQ        R11, R11
	JLE          dbs2done

dbs2row:
	MOVQ SI, AX
	MOVQ DI, DX
	MOVQ R10, CX

dbs2block:
	TESTQ      CX, CX
	JLE        dbs2tail
	VMOVUPS    (AX), Y0
	VMULPS     Y15, Y0, Y0
	VUNPCKLPS  Y0, Y0, Y2
	VUNPCKHPS  Y0, Y0, Y3
	VPERM2F128 $0x20, Y3, Y2, Y4
	VPERM2F128 $0x31, Y3, Y2, Y5
	VMOVUPS    (DX), Y6
	VADDPS     Y4, Y6, Y8
	VBLENDPS   $0x55, Y8, Y6, Y6
	VMOVUPS    Y6, (DX)
	VMOVUPS    32(DX), Y7
	VADDPS     Y5, Y7, Y9
	VBLENDPS   $0x55, Y9, Y7, Y7
	VMOVUPS    Y7, 32(DX)
	ADDQ       $32, AX
	ADDQ       $64, DX
	DECQ       CX
	JMP        dbs2block

dbs2tail:
	VMASKMOVPS (AX), Y12, Y0
	VMULPS     Y15, Y0, Y0
	VUNPCKLPS  Y0, Y0, Y2
	VUNPCKHPS  Y0, Y0, Y3
	VPERM2F128 $0x20, Y3, Y2, Y4
	VPERM2F128 $0x31, Y3, Y2, Y5
	VMASKMOVPS (DX), Y13, Y6
	VADDPS     Y4, Y6, Y6
	VMASKMOVPS Y6, Y13, (DX)
	VMASKMOVPS 32(DX), Y14, Y7
	VADDPS     Y5, Y7, Y7
	VMASKMOVPS Y7, Y14, 32(DX)
	ADDQ       R9, SI
	ADDQ       R8, DI
	DECQ       R11
	JNZ        dbs2row

dbs2done:
	VZEROUPPER
	RET
