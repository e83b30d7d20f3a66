//go:build amd64 && !purego

#include "textflag.h"
#include "prefetchw_amd64.h"

// Activations of one accumulator z, with Z16 and Z17 as scratch, computed exactly as
// the Relu, Clip (clipBits) and HardSwish kernels compute them: RELU clears values whose
// sign bit is set; CLIP clamps order-preserving integer keys k = u ^ (u>>31 & 0x7fffffff)
// (its own inverse) to [Z27, Z28], NaN lanes keeping their value; SWISH is
// z·clamp(Z29·z + Z30, bits 0, bits 1) with the product and sum rounded apart.
#define RELU(z) \
	VPSRAD $31, z, Z16 ; \
	VPANDND z, Z16, z

#define CLIP(z) \
	VPSRAD $31, z, Z16 ; \
	VPANDD Z26, Z16, Z16 ; \
	VPXORD z, Z16, Z16 ; \
	VPMAXSD Z27, Z16, Z16 ; \
	VPMINSD Z28, Z16, Z16 ; \
	VPSRAD $31, Z16, Z17 ; \
	VPANDD Z26, Z17, Z17 ; \
	VPXORD Z16, Z17, Z16 ; \
	VCMPPS $3, z, z, K4 ; \
	VMOVAPS z, K4, Z16 ; \
	VMOVAPS Z16, z

#define SWISH(z) \
	VMULPS Z29, z, Z16 ; \
	VADDPS Z30, Z16, Z16 ; \
	VPMAXSD Z27, Z16, Z16 ; \
	VPMINSD Z28, Z16, Z16 ; \
	VMULPS Z16, z, z

// ACTCONSTS loads the constants of RELU, CLIP and SWISH (Z26-Z30) from the arguments
// lo, hi (int32 keys or bit patterns), a and b, through the scratch register r.
#define ACTCONSTS(r, lo, hi, a, b) \
	MOVL $0x7fffffff, r ; \
	VPBROADCASTD r, Z26 ; \
	MOVL lo, r ; \
	VPBROADCASTD r, Z27 ; \
	MOVL hi, r ; \
	VPBROADCASTD r, Z28 ; \
	VBROADCASTSS a, Z29 ; \
	VBROADCASTSS b, Z30

#define TILEACT(f) \
	f(Z0) ; f(Z1) ; f(Z2) ; f(Z3) ; f(Z4) ; f(Z5) ; f(Z6) ; f(Z7) ; \
	f(Z8) ; f(Z9) ; f(Z10) ; f(Z11) ; f(Z12) ; f(Z13) ; f(Z14) ; f(Z15)

// TILEFMA adds one step of the sum to the 8×32 tile: row r of A (AX, 8 values) times
// the two panel rows of B in Z16 and Z17, into Z(2r) and Z(2r+1).
#define TILEFMA \
	VBROADCASTSS 0(AX), Z18 ; \
	VBROADCASTSS 4(AX), Z19 ; \
	VBROADCASTSS 8(AX), Z20 ; \
	VBROADCASTSS 12(AX), Z21 ; \
	VFMADD231PS Z16, Z18, Z0 ; \
	VFMADD231PS Z17, Z18, Z1 ; \
	VFMADD231PS Z16, Z19, Z2 ; \
	VFMADD231PS Z17, Z19, Z3 ; \
	VFMADD231PS Z16, Z20, Z4 ; \
	VFMADD231PS Z17, Z20, Z5 ; \
	VFMADD231PS Z16, Z21, Z6 ; \
	VFMADD231PS Z17, Z21, Z7 ; \
	VBROADCASTSS 16(AX), Z22 ; \
	VBROADCASTSS 20(AX), Z23 ; \
	VBROADCASTSS 24(AX), Z24 ; \
	VBROADCASTSS 28(AX), Z25 ; \
	VFMADD231PS Z16, Z22, Z8 ; \
	VFMADD231PS Z17, Z22, Z9 ; \
	VFMADD231PS Z16, Z23, Z10 ; \
	VFMADD231PS Z17, Z23, Z11 ; \
	VFMADD231PS Z16, Z24, Z12 ; \
	VFMADD231PS Z17, Z24, Z13 ; \
	VFMADD231PS Z16, Z25, Z14 ; \
	VFMADD231PS Z17, Z25, Z15

// func convTileAVX512(k int, a, b0, b1 *float32, ldb int, c0, c1 *float32, ldc int, bias *float32, m0, m1 uint64, flags, nrb int, offs *int64, lo, hi int32, sa, sb float32, s0, s1 uint64)
//
// Accumulators: row r of the tile lives in Z(2r) (panel 0) and Z(2r+1) (panel 1). The
// outer loop runs nrb row blocks: a, c0, c1 and bias continue where the last block ended.
// With offs non-nil, row i of b0 and b1 starts offs[i] bytes after them instead of
// i·ldb values. With tilePack (16) in flags, C holds the lanes of m0 and m1 packed: C is
// read by VEXPANDPS and written by VCOMPRESSPS then a store of the s0 (s1) lanes, the
// first popcount(m0) (m1).
TEXT ·convTileAVX512(SB), NOSPLIT, $0-144
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b0+16(FP), SI
	MOVQ b1+24(FP), DI
	MOVQ ldb+32(FP), R8
	SHLQ $2, R8
	MOVQ c0+40(FP), R9
	MOVQ c1+48(FP), R10
	MOVQ ldc+56(FP), R11
	SHLQ $2, R11
	MOVQ bias+64(FP), R12
	MOVQ m0+72(FP), BX
	KMOVW BX, K1
	MOVQ m1+80(FP), BX
	KMOVW BX, K2
	MOVQ s0+128(FP), BX
	KMOVW BX, K5
	MOVQ s1+136(FP), BX
	KMOVW BX, K6
	MOVQ flags+88(FP), R13
	MOVQ nrb+96(FP), DX
	// Activation constants: the key mask, the bounds (Clip keys, or 0 and the bits of 1
	// for HardSwish) and HardSwish's slope and offset.
	ACTCONSTS(BX, lo+112(FP), hi+116(FP), sa+120(FP), sb+124(FP))

block:
	// tilePrefetch: C's rows of the panel pair after next, for writing, as well.
	TESTQ $64, R13
	JZ   nopw
	LEAQ 256(R9), R14
	PFWROWS4
	ADDQ R11, R14
	PFWROWS4
	LEAQ 256(R10), R14
	PFWROWS4
	ADDQ R11, R14
	PFWROWS4
nopw:
	MOVQ b0+16(FP), SI
	MOVQ b1+24(FP), DI
	MOVQ k+0(FP), CX
	TESTQ $1, R13
	JNZ  loadc
	TESTQ R12, R12
	JZ   zero
	VBROADCASTSS 0(R12), Z0
	VBROADCASTSS 4(R12), Z2
	VBROADCASTSS 8(R12), Z4
	VBROADCASTSS 12(R12), Z6
	VBROADCASTSS 16(R12), Z8
	VBROADCASTSS 20(R12), Z10
	VBROADCASTSS 24(R12), Z12
	VBROADCASTSS 28(R12), Z14
	VMOVAPS Z0, Z1
	VMOVAPS Z2, Z3
	VMOVAPS Z4, Z5
	VMOVAPS Z6, Z7
	VMOVAPS Z8, Z9
	VMOVAPS Z10, Z11
	VMOVAPS Z12, Z13
	VMOVAPS Z14, Z15
	JMP  start

zero:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	JMP  start

loadc:
	MOVQ R9, R14
	MOVQ R10, R15
	TESTQ $16, R13
	JNZ  loadcp
	VMOVUPS.Z (R14), K1, Z0
	VMOVUPS.Z (R15), K2, Z1
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z2
	VMOVUPS.Z (R15), K2, Z3
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z4
	VMOVUPS.Z (R15), K2, Z5
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z6
	VMOVUPS.Z (R15), K2, Z7
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z8
	VMOVUPS.Z (R15), K2, Z9
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z10
	VMOVUPS.Z (R15), K2, Z11
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z12
	VMOVUPS.Z (R15), K2, Z13
	ADDQ R11, R14
	ADDQ R11, R15
	VMOVUPS.Z (R14), K1, Z14
	VMOVUPS.Z (R15), K2, Z15
	JMP  addbias

loadcp:
	VEXPANDPS.Z (R14), K1, Z0
	VEXPANDPS.Z (R15), K2, Z1
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z2
	VEXPANDPS.Z (R15), K2, Z3
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z4
	VEXPANDPS.Z (R15), K2, Z5
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z6
	VEXPANDPS.Z (R15), K2, Z7
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z8
	VEXPANDPS.Z (R15), K2, Z9
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z10
	VEXPANDPS.Z (R15), K2, Z11
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z12
	VEXPANDPS.Z (R15), K2, Z13
	ADDQ R11, R14
	ADDQ R11, R15
	VEXPANDPS.Z (R14), K1, Z14
	VEXPANDPS.Z (R15), K2, Z15
	JMP  addbias

addbias:
	// With a bias as well, add it to what C held.
	TESTQ R12, R12
	JZ   start
	VBROADCASTSS 0(R12), Z16
	VADDPS Z16, Z0, Z0
	VADDPS Z16, Z1, Z1
	VBROADCASTSS 4(R12), Z16
	VADDPS Z16, Z2, Z2
	VADDPS Z16, Z3, Z3
	VBROADCASTSS 8(R12), Z16
	VADDPS Z16, Z4, Z4
	VADDPS Z16, Z5, Z5
	VBROADCASTSS 12(R12), Z16
	VADDPS Z16, Z6, Z6
	VADDPS Z16, Z7, Z7
	VBROADCASTSS 16(R12), Z16
	VADDPS Z16, Z8, Z8
	VADDPS Z16, Z9, Z9
	VBROADCASTSS 20(R12), Z16
	VADDPS Z16, Z10, Z10
	VADDPS Z16, Z11, Z11
	VBROADCASTSS 24(R12), Z16
	VADDPS Z16, Z12, Z12
	VADDPS Z16, Z13, Z13
	VBROADCASTSS 28(R12), Z16
	VADDPS Z16, Z14, Z14
	VADDPS Z16, Z15, Z15

start:
	TESTQ CX, CX
	JZ   done
	// Whole panels (both masks 0xffff, every tile but a plane's last) load B without
	// masks: a zero-masked load also takes a slot of the FMA ports on Intel cores, and the
	// loop below ran 13 % faster without them on an Emerald Rapids (same loads, same sums).
	MOVQ m0+72(FP), BX
	ANDQ m1+80(FP), BX
	CMPW BX, $0xffff
	SETEQ BX
	MOVQ offs+104(FP), R14
	TESTQ R14, R14
	JNZ  ostart
	// Rows of B 16 ahead are fetched into the cache while these are summed: a B that
	// streams from memory (weights packed once, read once per run) otherwise stalls on
	// every row; one already in the cache costs two load slots in ten. (R14, offs, is
	// nil on this path; MOVQ keeps the flags of TESTB.)
	MOVQ R8, R14
	SHLQ $4, R14
	TESTB BX, BX
	MOVQ R14, BX
	JZ   loop
	TESTQ $64, R13
	JZ   floop

	// tilePrefetch: the same rows of the panel pair after next (256 bytes on) too.
fploop:
	PREFETCHT0 (SI)(BX*1)
	PREFETCHT0 (DI)(BX*1)
	PREFETCHT0 256(SI)
	PREFETCHT0 256(DI)
	PREFETCHT0 512(AX)
	VMOVUPS (SI), Z16
	VMOVUPS (DI), Z17
	TILEFMA
	ADDQ $32, AX
	ADDQ R8, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  fploop
	JMP  done

loop:
	PREFETCHT0 (SI)(BX*1)
	PREFETCHT0 (DI)(BX*1)
	PREFETCHT0 512(AX)
	VMOVUPS.Z (SI), K1, Z16
	VMOVUPS.Z (DI), K2, Z17
	TILEFMA
	ADDQ $32, AX
	ADDQ R8, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  loop
	JMP  done

floop:
	PREFETCHT0 (SI)(BX*1)
	PREFETCHT0 (DI)(BX*1)
	PREFETCHT0 512(AX)
	VMOVUPS (SI), Z16
	VMOVUPS (DI), Z17
	TILEFMA
	ADDQ $32, AX
	ADDQ R8, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  floop
	JMP  done
ostart:
	TESTB BX, BX
	JNZ  ofloop

oloop:
	PREFETCHT0 512(AX)
	MOVQ (R14), BX
	VMOVUPS.Z (SI)(BX*1), K1, Z16
	VMOVUPS.Z (DI)(BX*1), K2, Z17
	TILEFMA
	ADDQ $32, AX
	ADDQ $8, R14
	DECQ CX
	JNZ  oloop

	JMP  done

ofloop:
	PREFETCHT0 512(AX)
	MOVQ (R14), BX
	VMOVUPS (SI)(BX*1), Z16
	VMOVUPS (DI)(BX*1), Z17
	TILEFMA
	ADDQ $32, AX
	ADDQ $8, R14
	DECQ CX
	JNZ  ofloop


done:
	TESTQ $2, R13
	JNZ  relu
	TESTQ $4, R13
	JNZ  clip
	TESTQ $8, R13
	JNZ  swish
	JMP  pack

relu:
	TILEACT(RELU)
	JMP  pack

clip:
	TILEACT(CLIP)
	JMP  pack

swish:
	TILEACT(SWISH)

pack:
	TESTQ $16, R13
	JZ   store
	VCOMPRESSPS Z0, K1, Z0
	VCOMPRESSPS Z1, K2, Z1
	VCOMPRESSPS Z2, K1, Z2
	VCOMPRESSPS Z3, K2, Z3
	VCOMPRESSPS Z4, K1, Z4
	VCOMPRESSPS Z5, K2, Z5
	VCOMPRESSPS Z6, K1, Z6
	VCOMPRESSPS Z7, K2, Z7
	VCOMPRESSPS Z8, K1, Z8
	VCOMPRESSPS Z9, K2, Z9
	VCOMPRESSPS Z10, K1, Z10
	VCOMPRESSPS Z11, K2, Z11
	VCOMPRESSPS Z12, K1, Z12
	VCOMPRESSPS Z13, K2, Z13
	VCOMPRESSPS Z14, K1, Z14
	VCOMPRESSPS Z15, K2, Z15

store:
	TESTQ $32, R13
	JNZ  storent
	VMOVUPS Z0, K5, (R9)
	VMOVUPS Z1, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z2, K5, (R9)
	VMOVUPS Z3, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z4, K5, (R9)
	VMOVUPS Z5, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z6, K5, (R9)
	VMOVUPS Z7, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z8, K5, (R9)
	VMOVUPS Z9, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z10, K5, (R9)
	VMOVUPS Z11, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z12, K5, (R9)
	VMOVUPS Z13, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVUPS Z14, K5, (R9)
	VMOVUPS Z15, K6, (R10)
	ADDQ R11, R9
	ADDQ R11, R10

stored:
	TESTQ R12, R12
	JZ   next
	ADDQ $32, R12

next:
	DECQ DX
	JNZ  block
	VZEROUPPER
	RET

storent:
	VMOVNTPS Z0, (R9)
	VMOVNTPS Z1, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z2, (R9)
	VMOVNTPS Z3, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z4, (R9)
	VMOVNTPS Z5, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z6, (R9)
	VMOVNTPS Z7, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z8, (R9)
	VMOVNTPS Z9, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z10, (R9)
	VMOVNTPS Z11, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z12, (R9)
	VMOVNTPS Z13, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	VMOVNTPS Z14, (R9)
	VMOVNTPS Z15, (R10)
	ADDQ R11, R9
	ADDQ R11, R10
	JMP  stored

// func dw3x3AVX512(x, y *float32, h, wd int, w, bias *float32, flags int, lo, hi int32, a, b float32, masks uint64, np int)
//
// np consecutive planes of a 3×3 depthwise convolution, stride 1, one pixel of zero
// padding, rows of wd <= 16 values: one register per output row, its three input rows
// read through masks that stand in for the padding (lane 0 of the left tap and lane wd−1
// of the right tap). Plane after plane, x and y move on by h·wd values, w by 9 and bias
// (when non-nil) by 1.
TEXT ·dw3x3AVX512(SB), NOSPLIT, $0-88
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ h+16(FP), CX
	MOVQ wd+24(FP), R8
	MOVQ w+32(FP), AX
	MOVQ bias+40(FP), R12
	MOVQ flags+48(FP), R13

	// K1: lanes [0, wd); K2: K1 without lane 0; K3: K1 without lane wd−1.
	MOVQ masks+72(FP), BX
	KMOVW BX, K1
	SHRQ $16, BX
	KMOVW BX, K2
	SHRQ $16, BX
	KMOVW BX, K3

	MOVL $0x7fffffff, DX
	VPBROADCASTD DX, Z25
	MOVL lo+56(FP), DX
	VPBROADCASTD DX, Z26
	MOVL hi+60(FP), DX
	VPBROADCASTD DX, Z27
	VBROADCASTSS a+64(FP), Z28
	VBROADCASTSS b+68(FP), Z29
	SHLQ $2, R8 // row stride in bytes
	MOVQ np+80(FP), R14

plane:
	VBROADCASTSS 0(AX), Z16
	VBROADCASTSS 4(AX), Z17
	VBROADCASTSS 8(AX), Z18
	VBROADCASTSS 12(AX), Z19
	VBROADCASTSS 16(AX), Z20
	VBROADCASTSS 20(AX), Z21
	VBROADCASTSS 24(AX), Z22
	VBROADCASTSS 28(AX), Z23
	VBROADCASTSS 32(AX), Z24
	VPXORD Z15, Z15, Z15
	TESTQ R12, R12
	JZ   nobias
	VBROADCASTSS (R12), Z15
	ADDQ $4, R12

nobias:
	ADDQ $36, AX
	XORQ R10, R10 // output row

row:
	TESTQ $1, R13
	JZ   init
	VMOVUPS.Z (DI), K1, Z0
	JMP  taps

init:
	VMOVAPS Z15, Z0

taps:
	// Input row oh−1, when it exists.
	TESTQ R10, R10
	JZ   mid
	MOVQ SI, R11
	SUBQ R8, R11
	VMOVUPS.Z -4(R11), K2, Z1
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 4(R11), K3, Z3
	VFMADD231PS Z1, Z16, Z0
	VFMADD231PS Z2, Z17, Z0
	VFMADD231PS Z3, Z18, Z0

mid:
	VMOVUPS.Z -4(SI), K2, Z1
	VMOVUPS.Z (SI), K1, Z2
	VMOVUPS.Z 4(SI), K3, Z3
	VFMADD231PS Z1, Z19, Z0
	VFMADD231PS Z2, Z20, Z0
	VFMADD231PS Z3, Z21, Z0

	// Input row oh+1, when it exists.
	MOVQ R10, R11
	INCQ R11
	CMPQ R11, CX
	JGE  act
	MOVQ SI, R11
	ADDQ R8, R11
	VMOVUPS.Z -4(R11), K2, Z1
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 4(R11), K3, Z3
	VFMADD231PS Z1, Z22, Z0
	VFMADD231PS Z2, Z23, Z0
	VFMADD231PS Z3, Z24, Z0

act:
	TESTQ $2, R13
	JZ   clip
	// Relu: values whose sign bit is set become +0.
	VPSRAD $31, Z0, Z1
	VPANDND Z0, Z1, Z0
	JMP  store

clip:
	TESTQ $4, R13
	JZ   swish
	// Clip on order-preserving integer keys, as clipBits: k = u ^ (u>>31 & 0x7fffffff)
	// is its own inverse; NaN lanes keep their value.
	VPSRAD $31, Z0, Z1
	VPANDD Z25, Z1, Z1
	VPXORD Z0, Z1, Z1
	VPMAXSD Z26, Z1, Z1
	VPMINSD Z27, Z1, Z1
	VPSRAD $31, Z1, Z2
	VPANDD Z25, Z2, Z2
	VPXORD Z1, Z2, Z1
	VCMPPS $3, Z0, Z0, K4
	VMOVAPS Z0, K4, Z1
	VMOVAPS Z1, Z0
	JMP  store

swish:
	TESTQ $8, R13
	JZ   store
	// HardSwish: v · clamp(a·v + b, 0, 1), the clamp on bit patterns (lo = 0, hi = bits
	// of 1), the product and sum rounded apart as Go computes them.
	VMULPS Z28, Z0, Z1
	VADDPS Z29, Z1, Z1
	VPMAXSD Z26, Z1, Z1
	VPMINSD Z27, Z1, Z1
	VMULPS Z1, Z0, Z0

store:
	VMOVUPS Z0, K1, (DI)
	ADDQ R8, SI
	ADDQ R8, DI
	INCQ R10
	CMPQ R10, CX
	JLT  row
	// SI and DI have moved on by h rows: the next plane.
	DECQ R14
	JNZ  plane
	VZEROUPPER
	RET

// HSUMADD adds the sum of the 16 lanes of z to the float32 at off(AX).
#define HSUMADD(z, off) \
	VEXTRACTF64X4 $1, z, Y1 ; \
	VMOVAPS z, Z0 ; \
	VADDPS Y1, Y0, Y0 ; \
	VEXTRACTF128 $1, Y0, X1 ; \
	VADDPS X1, X0, X0 ; \
	VHADDPS X0, X0, X0 ; \
	VHADDPS X0, X0, X0 ; \
	VADDSS off(AX), X0, X0 ; \
	VMOVSS X0, off(AX)

// func dw3x3GradWAVX512(x, gy *float32, h, wd int, gw *float32, masks uint64)
//
// Adds to gw[3kh+kw] the sum over the plane of gy[oh, ow] · x[oh+kh−1, ow+kw−1] (zero
// outside x), for a plane of rows of wd <= 16 values.
TEXT ·dw3x3GradWAVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ gy+8(FP), DI
	MOVQ h+16(FP), CX
	MOVQ wd+24(FP), R8
	MOVQ gw+32(FP), AX

	MOVQ masks+40(FP), BX
	KMOVW BX, K1
	SHRQ $16, BX
	KMOVW BX, K2
	SHRQ $16, BX
	KMOVW BX, K3

	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24

	SHLQ $2, R8
	XORQ R10, R10

growrow:
	VMOVUPS.Z (DI), K1, Z0
	TESTQ R10, R10
	JZ   gmid
	MOVQ SI, R11
	SUBQ R8, R11
	VMOVUPS.Z -4(R11), K2, Z1
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 4(R11), K3, Z3
	VFMADD231PS Z1, Z0, Z16
	VFMADD231PS Z2, Z0, Z17
	VFMADD231PS Z3, Z0, Z18

gmid:
	VMOVUPS.Z -4(SI), K2, Z1
	VMOVUPS.Z (SI), K1, Z2
	VMOVUPS.Z 4(SI), K3, Z3
	VFMADD231PS Z1, Z0, Z19
	VFMADD231PS Z2, Z0, Z20
	VFMADD231PS Z3, Z0, Z21

	MOVQ R10, R11
	INCQ R11
	CMPQ R11, CX
	JGE  gnext
	MOVQ SI, R11
	ADDQ R8, R11
	VMOVUPS.Z -4(R11), K2, Z1
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 4(R11), K3, Z3
	VFMADD231PS Z1, Z0, Z22
	VFMADD231PS Z2, Z0, Z23
	VFMADD231PS Z3, Z0, Z24

gnext:
	ADDQ R8, SI
	ADDQ R8, DI
	INCQ R10
	CMPQ R10, CX
	JLT  growrow

	// Horizontal sums, each added into its gw entry.
	HSUMADD(Z16, 0)
	HSUMADD(Z17, 4)
	HSUMADD(Z18, 8)
	HSUMADD(Z19, 12)
	HSUMADD(Z20, 16)
	HSUMADD(Z21, 20)
	HSUMADD(Z22, 24)
	HSUMADD(Z23, 28)
	HSUMADD(Z24, 32)
	VZEROUPPER
	RET

// MAXFIX sets d = max(a, b) as Go's max builtin computes it: NaN when either is NaN
// (a+b), +0 over −0 (a AND b where a == b), otherwise VMAXPS's larger value.
#define MAXFIX(a, b, d) \
	VMAXPS b, a, d ; \
	VCMPPS $0, b, a, K3 ; \
	VPANDD b, a, K3, d ; \
	VCMPPS $3, b, a, K4 ; \
	VADDPS b, a, K4, d

// func maxPool2x2AVX512(x, y *float32, oh, ow, wd int, masks uint64)
//
// y (oh × ow) = the 2×2 stride-2 max pool of x (rows of wd values): 16 input columns,
// 8 outputs at a time; masks holds the input lanes (bits 0-15) and output lanes (bits
// 16-23) of each row's last chunk.
TEXT ·maxPool2x2AVX512(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ oh+16(FP), CX
	MOVQ ow+24(FP), R8
	MOVQ wd+32(FP), R9
	SHLQ $2, R9 // input row stride in bytes
	MOVQ masks+40(FP), BX
	KMOVW BX, K5 // last chunk's input lanes
	SHRQ $16, BX
	KMOVW BX, K6 // last chunk's output lanes
	MOVQ $0xffff, BX
	KMOVW BX, K7
	MOVQ $0xff, BX
	KMOVW BX, K2
	// Chunks per row: ceil(ow / 8).
	MOVQ R8, R10
	ADDQ $7, R10
	SHRQ $3, R10

prow:
	MOVQ SI, R11 // input row 2r
	MOVQ SI, R12
	ADDQ R9, R12 // input row 2r+1
	MOVQ DI, R13
	MOVQ R10, DX

pchunk:
	CMPQ DX, $1
	JNE  pfull
	VMOVUPS.Z (R11), K5, Z0
	VMOVUPS.Z (R12), K5, Z1
	JMP  pmax

pfull:
	VMOVUPS (R11), Z0
	VMOVUPS (R12), Z1

pmax:
	MAXFIX(Z0, Z1, Z2)
	VPMOVQD Z2, Y3
	VPSRLQ $32, Z2, Z4
	VPMOVQD Z4, Y4
	MAXFIX(Z3, Z4, Z5)
	CMPQ DX, $1
	JNE  pstore
	VMOVUPS Z5, K6, (R13)
	JMP  pnext

pstore:
	VMOVUPS Y5, (R13)

pnext:
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ $32, R13
	DECQ DX
	JNZ  pchunk

	LEAQ (SI)(R9*2), SI
	LEAQ (DI)(R8*4), DI
	DECQ CX
	JNZ  prow
	VZEROUPPER
	RET

// func im2colS2AVX512(col, x *float32, plan *s2Entry, n int, ow, srcStride int, out uint64, idx *int32)
//
// Runs the n entries of plan, each {dst, src, rows int64; in uint64}: for rows output
// rows, col[dst/4 + r·ow + o] = x[src/4 + r·srcStride/4 + 2o] for o < ow, lanes whose input
// lane 2o is clear in in (bits 0-31) reading as zero. idx holds the permutation
// 0, 2, ..., 30 that picks even lanes.
TEXT ·im2colS2AVX512(SB), NOSPLIT, $0-64
	MOVQ col+0(FP), R10
	MOVQ x+8(FP), R11
	MOVQ plan+16(FP), R12
	MOVQ n+24(FP), DX
	MOVQ ow+32(FP), R8
	SHLQ $2, R8
	MOVQ srcStride+40(FP), R9
	MOVQ out+48(FP), BX
	KMOVW BX, K3
	MOVQ idx+56(FP), AX
	VMOVDQU32 (AX), Z31
	TESTQ DX, DX
	JZ   s2done

s2entry:
	MOVQ 0(R12), DI
	ADDQ R10, DI
	MOVQ 8(R12), SI
	ADDQ R11, SI
	MOVQ 16(R12), CX
	MOVQ 24(R12), BX
	KMOVW BX, K1
	SHRQ $16, BX
	KMOVW BX, K2
	TESTQ CX, CX
	JZ   s2next

s2row:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VPERMT2PS Z1, Z31, Z0
	VMOVUPS Z0, K3, (DI)
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  s2row

s2next:
	ADDQ $32, R12
	DECQ DX
	JNZ  s2entry

s2done:
	VZEROUPPER
	RET

// func maxPool2x2BackAVX512(x, y, gy, gx *float32, oh, ow, wd int, masks uint64, dup *int32)
//
// Adds each gy of the 2×2 stride-2 max pool (y, oh × ow) of x (rows of wd values) to gx
// at the first element of its window, in row-major order, that equals y (none for a NaN
// maximum). 16 input columns, 8 outputs at a time; masks holds the input lanes (bits
// 0-15) and output lanes (bits 16-23) of each row's last chunk; dup is the permutation
// 0, 0, 1, 1, ..., 7, 7 that spreads 8 outputs over their 16 input columns.
TEXT ·maxPool2x2BackAVX512(SB), NOSPLIT, $0-72
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), R14
	MOVQ gy+16(FP), R15
	MOVQ gx+24(FP), DI
	MOVQ oh+32(FP), CX
	MOVQ wd+48(FP), R9
	SHLQ $2, R9 // input row stride in bytes
	MOVQ dup+64(FP), AX
	VMOVDQU32 (AX), Z31

bprow:
	MOVQ SI, R11 // x row 2r
	MOVQ DI, R12 // gx row 2r
	MOVQ ow+40(FP), DX // outputs left in this row

bpchunk:
	// K5: input lanes, K6: output lanes of this chunk.
	MOVQ $0xffff, BX
	MOVQ $0xff, R13
	CMPQ DX, $8
	JG   bpmasks
	MOVQ masks+56(FP), BX
	MOVQ BX, R13
	SHRQ $16, R13
	ANDQ $0xffff, BX

bpmasks:
	KMOVW BX, K5
	KMOVW R13, K6
	MOVQ BX, R10 // input lanes, for the bit arithmetic below
	VMOVUPS.Z (R14), K6, Z0
	VMOVUPS.Z (R15), K6, Z1
	VPERMPS Z0, Z31, Z0 // y over its window's columns
	VPERMPS Z1, Z31, Z1 // gy likewise
	VMOVUPS.Z (R11), K5, Z2
	VMOVUPS.Z (R11)(R9*1), K5, Z3
	VCMPPS $0, Z0, Z2, K1
	VCMPPS $0, Z0, Z3, K2
	KMOVW K1, AX
	KMOVW K2, BX
	ANDQ R10, AX
	ANDQ R10, BX
	// Row 2r: the even column when it matches, else the odd one.
	MOVQ AX, R8
	ANDQ $0x5555, R8 // a: even-column matches
	MOVQ R8, R13
	SHLQ $1, R13
	NOTQ R13
	ANDQ AX, R13
	ANDQ $0xaaaa, R13 // b without a
	ORQ  R8, R13 // first match in row 2r
	KMOVW R13, K3
	// Windows with a match in row 2r take nothing from row 2r+1.
	MOVQ AX, R8
	SHRQ $1, R8
	ORQ  AX, R8
	ANDQ $0x5555, R8
	MOVQ R8, R13
	SHLQ $1, R13
	ORQ  R13, R8
	NOTQ R8
	ANDQ R8, BX
	MOVQ BX, R8
	ANDQ $0x5555, R8 // c: even-column matches of row 2r+1
	MOVQ R8, R13
	SHLQ $1, R13
	NOTQ R13
	ANDQ BX, R13
	ANDQ $0xaaaa, R13
	ORQ  R8, R13
	KMOVW R13, K4
	VMOVUPS.Z (R12), K3, Z4
	VADDPS Z1, Z4, Z4
	VMOVUPS Z4, K3, (R12)
	VMOVUPS.Z (R12)(R9*1), K4, Z5
	VADDPS Z1, Z5, Z5
	VMOVUPS Z5, K4, (R12)(R9*1)
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ $32, R14
	ADDQ $32, R15
	SUBQ $8, DX
	JG   bpchunk

	// Next output row: y and gy moved on by whole chunks of 8; step back the overshoot.
	MOVQ ow+40(FP), R8
	ADDQ $7, R8
	ANDQ $-8, R8
	SUBQ ow+40(FP), R8
	SHLQ $2, R8
	SUBQ R8, R14
	SUBQ R8, R15
	LEAQ (SI)(R9*2), SI
	LEAQ (DI)(R9*2), DI
	DECQ CX
	JNZ  bprow
	VZEROUPPER
	RET

// func transposeAVX512(t, a *float32, R, C int, idx *int32, tail uint64)
//
// t (C × R) = the transpose of a (R × C): each row of a is read 16 values at a time and
// scattered down a column of t; idx holds 0, R, 2R, ..., 15R and tail masks a row's last
// group of C mod 16 (or 16) values.
TEXT ·transposeAVX512(SB), NOSPLIT, $0-48
	MOVQ t+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ R+16(FP), CX
	MOVQ C+24(FP), R8
	MOVQ idx+32(FP), AX
	VMOVDQU32 (AX), Z31
	MOVQ tail+40(FP), BX
	KMOVW BX, K3
	MOVQ $0xffff, BX
	KMOVW BX, K2
	MOVQ CX, R10
	SHLQ $6, R10 // 16 rows of t, in bytes

trow:
	MOVQ DI, R11 // t column r
	MOVQ R8, DX

tgroup:
	CMPQ DX, $16
	JLE  tlast
	VMOVUPS (SI), Z0
	KMOVW K2, K1
	VSCATTERDPS Z0, K1, (R11)(Z31*4)
	ADDQ $64, SI
	ADDQ R10, R11
	SUBQ $16, DX
	JMP  tgroup

tlast:
	VMOVUPS.Z (SI), K3, Z0
	KMOVW K3, K1
	VSCATTERDPS Z0, K1, (R11)(Z31*4)
	LEAQ (SI)(DX*4), SI
	ADDQ $4, DI
	DECQ CX
	JNZ  trow
	VZEROUPPER
	RET

// func copyPlanAVX512(dst, src *float32, plan *cpEntry, n int)
//
// Runs the n entries of plan, each {dst, src, full int64; tail uint64}: copies full
// groups of 16 values, then the lanes of tail, from src + e.src to dst + e.dst (byte
// offsets).
TEXT ·copyPlanAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), R10
	MOVQ src+8(FP), R11
	MOVQ plan+16(FP), R12
	MOVQ n+24(FP), DX
	TESTQ DX, DX
	JZ   cpdone

cpentry:
	MOVQ 0(R12), DI
	ADDQ R10, DI
	MOVQ 8(R12), SI
	ADDQ R11, SI
	MOVQ 16(R12), CX
	TESTQ CX, CX
	JZ   cptail

cpfull:
	VMOVUPS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  cpfull

cptail:
	MOVQ 24(R12), BX
	KMOVW BX, K1
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS Z0, K1, (DI)
	ADDQ $32, R12
	DECQ DX
	JNZ  cpentry

cpdone:
	VZEROUPPER
	RET

// func dwPlaneAVX512(xp, y *float32, oh, ow, rowStep int, w *float32, k int, offs *int64, tail uint64, bias float32, flags int, lo, hi int32, a, b float32)
//
// One output plane of a depthwise convolution from the padded plane xp (see dwPlaneGo):
// 16 outputs of a row at a time, tap after tap, each product rounded (VMULPS) before it
// is added (VADDPS) so that the sum is dwPlaneGo's bit for bit. Output row o1's first tap
// is rowStep bytes after row o1−1's, and its outputs are one column apart at either
// column stride (dwPlan's layout). tail masks a row's last chunk (ow mod 16
// lanes; unused when that is 0). Then, by flags, the bias (dwBias) and the activation
// (tileRelu, tileClip, tileSwish with lo, hi, a and b as the tile kernel takes them).
TEXT ·dwPlaneAVX512(SB), NOSPLIT, $0-104
	MOVQ xp+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ oh+16(FP), R8
	MOVQ rowStep+32(FP), R14
	MOVQ w+40(FP), R15
	MOVQ k+48(FP), R10
	MOVQ offs+56(FP), R9
	MOVQ tail+64(FP), AX
	KMOVW AX, K2
	MOVQ $0xffff, AX
	KMOVW AX, K3
	VBROADCASTSS bias+72(FP), Z4
	ACTCONSTS(AX, lo+88(FP), hi+92(FP), a+96(FP), b+100(FP))

	// Blocks of four output rows: each tap's weight is broadcast once for four chunks,
	// whose sums (Z0, Z5, Z6, Z7) are four independent chains, where one row at a time
	// waits on each VADDPS's latency. Each output's sum is the same. Three rows left (or
	// a plane of three) make a block whose fourth row is computed from the row below the
	// plane (dwPlan.size reaches it) and neither read nor written in y: its mask K7 is
	// empty (K5 and K6 are rows 1 and 2's, K1 row 0's). One or two rows left are made
	// again in a last block that ends at the last row, the same values stored twice,
	// except when adding to y (dwAdd) or in a plane of one or two rows, where they go one
	// at a time below.
	CMPQ R8, $3
	JLT  dwrow

dwblk:
	MOVQ SI, AX
	MOVQ ow+24(FP), BX

dwbchunk:
	KMOVW K3, K1
	CMPQ BX, $16
	JGE  dwbfull
	KMOVW K2, K1

dwbfull:
	KMOVW K1, K5
	KMOVW K1, K6
	KMOVW K1, K7
	CMPQ R8, $4
	JGE  dwbrows4
	KXORW K7, K7, K7

dwbrows4:
	VXORPS Z0, Z0, Z0
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	MOVQ R9, R11
	MOVQ R15, R12
	MOVQ R10, CX

dwbtaps1:
	MOVQ (R11), R13
	VBROADCASTSS (R12), Z1
	VMULPS (AX)(R13*1), Z1, Z2
	VADDPS Z2, Z0, Z0
	ADDQ R14, R13
	VMULPS (AX)(R13*1), Z1, Z3
	VADDPS Z3, Z5, Z5
	ADDQ R14, R13
	VMULPS (AX)(R13*1), Z1, Z8
	VADDPS Z8, Z6, Z6
	ADDQ R14, R13
	VMULPS (AX)(R13*1), Z1, Z9
	VADDPS Z9, Z7, Z7
	ADDQ $8, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  dwbtaps1

dwbstore:
	// R11: the output row stride in bytes; R12: row i's chunk in y.
	MOVQ ow+24(FP), R11
	SHLQ $2, R11
	TESTQ $32, flags+80(FP)
	JZ   dwbnoadd
	MOVQ DI, R12
	VMOVUPS.Z (R12), K1, Z2
	VADDPS Z2, Z0, Z0
	ADDQ R11, R12
	VMOVUPS.Z (R12), K5, Z2
	VADDPS Z2, Z5, Z5
	ADDQ R11, R12
	VMOVUPS.Z (R12), K6, Z2
	VADDPS Z2, Z6, Z6
	ADDQ R11, R12
	VMOVUPS.Z (R12), K7, Z2
	VADDPS Z2, Z7, Z7

dwbnoadd:
	TESTQ $16, flags+80(FP)
	JZ   dwbact
	VADDPS Z4, Z0, Z0
	VADDPS Z4, Z5, Z5
	VADDPS Z4, Z6, Z6
	VADDPS Z4, Z7, Z7

dwbact:
	TESTQ $2, flags+80(FP)
	JZ   dwbclip
	RELU(Z0)
	RELU(Z5)
	RELU(Z6)
	RELU(Z7)
	JMP  dwbput

dwbclip:
	TESTQ $4, flags+80(FP)
	JZ   dwbswish
	CLIP(Z0)
	CLIP(Z5)
	CLIP(Z6)
	CLIP(Z7)
	JMP  dwbput

dwbswish:
	TESTQ $8, flags+80(FP)
	JZ   dwbput
	SWISH(Z0)
	SWISH(Z5)
	SWISH(Z6)
	SWISH(Z7)

dwbput:
	// Non-temporal stores (dwStream) only where all four rows' chunks are whole and
	// 64-byte aligned, which a row stride that is a multiple of 16 values gives.
	MOVQ DI, R12
	TESTQ $64, flags+80(FP)
	JZ   dwbplain
	CMPQ R8, $4
	JLT  dwbplain
	KORTESTW K1, K1
	JCC  dwbplain
	TESTQ $63, DI
	JNZ  dwbplain
	TESTQ $63, R11
	JNZ  dwbplain
	VMOVNTPS Z0, (R12)
	ADDQ R11, R12
	VMOVNTPS Z5, (R12)
	ADDQ R11, R12
	VMOVNTPS Z6, (R12)
	ADDQ R11, R12
	VMOVNTPS Z7, (R12)
	JMP  dwbstored

dwbplain:
	VMOVUPS Z0, K1, (R12)
	ADDQ R11, R12
	VMOVUPS Z5, K5, (R12)
	ADDQ R11, R12
	VMOVUPS Z6, K6, (R12)
	ADDQ R11, R12
	VMOVUPS Z7, K7, (R12)

dwbstored:
	CMPQ BX, $16
	JLE  dwbrows
	SUBQ $16, BX
	ADDQ $64, DI
	ADDQ $64, AX
	JMP  dwbchunk

dwbrows:
	// DI: past row 0 of the block; on to the block's row 4.
	LEAQ (DI)(BX*4), DI
	LEAQ (R11)(R11*2), R11
	ADDQ R11, DI
	MOVQ rowStep+32(FP), R11
	SHLQ $2, R11
	ADDQ R11, SI
	SUBQ $4, R8
	JLE  dwdone
	CMPQ R8, $3
	JGE  dwblk
	TESTQ $32, flags+80(FP)
	JNZ  dwrow
	// Back up 4 − R8 rows, in xp and in y, for a last block that ends at the last row.
	MOVQ $4, CX
	SUBQ R8, CX
	MOVQ rowStep+32(FP), R11
	IMULQ CX, R11
	SUBQ R11, SI
	MOVQ ow+24(FP), R11
	IMULQ CX, R11
	SHLQ $2, R11
	SUBQ R11, DI
	MOVQ $4, R8
	JMP  dwblk

dwrow:
	MOVQ SI, AX
	MOVQ ow+24(FP), BX

dwchunk:
	KMOVW K3, K1
	CMPQ BX, $16
	JGE  dwfull
	KMOVW K2, K1

dwfull:
	VXORPS Z0, Z0, Z0
	MOVQ R9, R11
	MOVQ R15, R12
	MOVQ R10, CX

dwtaps1:
	MOVQ (R11), R13
	VBROADCASTSS (R12), Z1
	VMULPS (AX)(R13*1), Z1, Z2
	VADDPS Z2, Z0, Z0
	ADDQ $8, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  dwtaps1
	MOVQ flags+80(FP), R13
	TESTQ $32, R13
	JZ   dwnoadd
	VMOVUPS.Z (DI), K1, Z5
	VADDPS Z5, Z0, Z0

dwnoadd:
	TESTQ $16, R13
	JZ   dwact
	VADDPS Z4, Z0, Z0

dwact:
	TESTQ $2, R13
	JZ   dwclip
	RELU(Z0)
	JMP  dwput

dwclip:
	TESTQ $4, R13
	JZ   dwswish
	CLIP(Z0)
	JMP  dwput

dwswish:
	TESTQ $8, R13
	JZ   dwput
	SWISH(Z0)

dwput:
	// dwStream: whole, 64-byte-aligned chunks go non-temporally.
	TESTQ $64, R13
	JZ   dwplain
	KORTESTW K1, K1
	JCC  dwplain
	TESTQ $63, DI
	JNZ  dwplain
	VMOVNTPS Z0, (DI)
	JMP  dwstored

dwplain:
	VMOVUPS Z0, K1, (DI)

dwstored:
	CMPQ BX, $16
	JLE  dwrowdone
	SUBQ $16, BX
	ADDQ $64, DI
	ADDQ $64, AX
	JMP  dwchunk

dwrowdone:
	LEAQ (DI)(BX*4), DI
	ADDQ rowStep+32(FP), SI
	DECQ R8
	JNZ  dwrow

dwdone:
	VZEROUPPER
	RET

// EXPNEG sets Z2 to expNegF32(Z4) with Z1, Z3, Z4 and K2 as scratch and the constants in
// Z19 (1), Z20 (the smallest normal, below which the result is 0; NaN passes) and
// Z21-Z30 (sigConsts' first ten), each operation in expNegF32's order.
//
// SIGMOID(z) sets z to sigmoidF32(z) with Z1-Z4 and K2 as scratch and the constants in
// Z17 (0), Z18 (sign bit), Z19 (1) and Z21-Z30 (sigConsts' first ten), each operation
// in sigmoidF32's order. The clamp takes t as the second source, so that NaN passes.
#define EXPNEG \
	VMAXPS Z4, Z21, Z4 ; \
	VMULPS Z22, Z4, Z1 ; \
	VRNDSCALEPS $0, Z1, Z1 ; \
	VMULPS Z23, Z1, Z2 ; \
	VSUBPS Z2, Z4, Z4 ; \
	VMULPS Z24, Z1, Z2 ; \
	VSUBPS Z2, Z4, Z4 ; \
	VMULPS Z4, Z4, Z3 ; \
	VMULPS Z25, Z4, Z2 ; \
	VADDPS Z26, Z2, Z2 ; \
	VMULPS Z4, Z2, Z2 ; \
	VADDPS Z27, Z2, Z2 ; \
	VMULPS Z4, Z2, Z2 ; \
	VADDPS Z28, Z2, Z2 ; \
	VMULPS Z4, Z2, Z2 ; \
	VADDPS Z29, Z2, Z2 ; \
	VMULPS Z4, Z2, Z2 ; \
	VADDPS Z30, Z2, Z2 ; \
	VMULPS Z3, Z2, Z2 ; \
	VADDPS Z4, Z2, Z2 ; \
	VADDPS Z19, Z2, Z2 ; \
	VSCALEFPS Z1, Z2, Z2 ; \
	VCMPPS $5, Z20, Z2, K2 ; \
	VMOVAPS.Z Z2, K2, Z2

#define SIGMOID(z) \
	VORPS Z18, z, Z4 ; \
	EXPNEG ; \
	VADDPS Z19, Z2, Z3 ; \
	VCMPPS $13, Z17, z, K2 ; \
	VMOVAPS Z19, K2, Z2 ; \
	VDIVPS Z3, Z2, z

// func siluRowsAVX512(src *float32, lds int, dst *float32, rows, ldc int, mask uint64, consts *float32, stream int)
//
// dst[r·ldc + j] = siluF32(src[r·lds + j]) for r < rows and the lanes j of mask (at most
// 16): the SiLU of a tile's rows where the tile kernel left them, still in the cache.
// stream != 0 (mask full, dst's rows 64-byte aligned) stores them non-temporally.
TEXT ·siluRowsAVX512(SB), NOSPLIT, $0-64
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R9
	SHLQ $2, R9
	MOVQ dst+16(FP), DI
	MOVQ rows+24(FP), CX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	MOVQ mask+40(FP), BX
	KMOVW BX, K1
	MOVQ consts+48(FP), AX
	MOVQ stream+56(FP), DX
	VBROADCASTSS 0(AX), Z21
	VBROADCASTSS 4(AX), Z22
	VBROADCASTSS 8(AX), Z23
	VBROADCASTSS 12(AX), Z24
	VBROADCASTSS 16(AX), Z25
	VBROADCASTSS 20(AX), Z26
	VBROADCASTSS 24(AX), Z27
	VBROADCASTSS 28(AX), Z28
	VBROADCASTSS 32(AX), Z29
	VBROADCASTSS 36(AX), Z30
	VBROADCASTSS 40(AX), Z19
	VBROADCASTSS 44(AX), Z20
	VXORPS Z17, Z17, Z17
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z18
	TESTQ CX, CX
	JLE   srdone

srloop:
	VMOVUPS.Z (SI), K1, Z0
	VMOVAPS Z0, Z5
	SIGMOID(Z0)
	VMULPS Z5, Z0, Z0
	TESTQ DX, DX
	JNZ  srnt
	VMOVUPS Z0, K1, (DI)
	JMP  srnext

srnt:
	VMOVNTPS Z0, (DI)

srnext:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  srloop

srdone:
	VZEROUPPER
	RET

// func expVecAVX512(x, y *float32, n int, consts *float32, mode int)
//
// y[i] = expNegF32(x[i]) for i < n (mode 0), sigmoidF32(x[i]) (mode 1) or
// x[i]·sigmoidF32(x[i]) (mode 2, SiLU); the last n mod 16 through a lane mask.
TEXT ·expVecAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ consts+24(FP), AX
	MOVQ mode+32(FP), DX
	VBROADCASTSS 0(AX), Z21
	VBROADCASTSS 4(AX), Z22
	VBROADCASTSS 8(AX), Z23
	VBROADCASTSS 12(AX), Z24
	VBROADCASTSS 16(AX), Z25
	VBROADCASTSS 20(AX), Z26
	VBROADCASTSS 24(AX), Z27
	VBROADCASTSS 28(AX), Z28
	VBROADCASTSS 32(AX), Z29
	VBROADCASTSS 36(AX), Z30
	VBROADCASTSS 40(AX), Z19
	VBROADCASTSS 44(AX), Z20
	VXORPS Z17, Z17, Z17
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z18
	TESTQ CX, CX
	JLE   expdone

exploop:
	KXNORW K1, K1, K1
	CMPQ   CX, $16
	JGE    expbody
	MOVQ   $1, AX
	SHLQ   CX, AX
	DECQ   AX
	KMOVW  AX, K1

expbody:
	VMOVUPS.Z (SI), K1, Z0
	CMPQ  DX, $1
	JEQ   expsig
	JGT   expsilu
	VMOVAPS Z0, Z4
	EXPNEG
	VMOVAPS Z2, Z0
	JMP   expstore

expsilu:
	VMOVAPS Z0, Z5
	SIGMOID(Z0)
	VMULPS Z5, Z0, Z0
	JMP   expstore

expsig:
	SIGMOID(Z0)

expstore:
	VMOVUPS Z0, K1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JG   exploop

expdone:
	VZEROUPPER
	RET

// func dwGradWAVX512(xp, gy *float32, oh, ow, rowStep, k int, offs *int64, tail uint64, gw *float32)
//
// Adds to gw[t], for each of the k taps, the sum over the output plane gy of gy times
// the padded plane xp under tap t (see dwGradWGo): 16 lanes of products, rounded before
// they are added (lanes past a row's end multiply to zero), then summed by HSUMADD.
TEXT ·dwGradWAVX512(SB), NOSPLIT, $0-72
	MOVQ gw+64(FP), AX
	MOVQ offs+48(FP), R9
	MOVQ k+40(FP), R10
	MOVQ tail+56(FP), BX
	KMOVW BX, K2
	MOVQ $0xffff, BX
	KMOVW BX, K3

gwtap:
	VXORPS Z5, Z5, Z5
	MOVQ xp+0(FP), SI
	ADDQ (R9), SI
	MOVQ gy+8(FP), DI
	MOVQ oh+16(FP), R8

gwrow:
	MOVQ SI, R11
	MOVQ ow+24(FP), BX

gwchunk:
	KMOVW K3, K1
	CMPQ BX, $16
	JGE  gwfull
	KMOVW K2, K1

gwfull:
	VMOVUPS.Z (DI), K1, Z2
	VMULPS.Z (R11), Z2, K1, Z3
	VADDPS Z3, Z5, Z5
	CMPQ BX, $16
	JLE  gwrowdone
	SUBQ $16, BX
	ADDQ $64, DI
	ADDQ $64, R11
	JMP  gwchunk

gwrowdone:
	LEAQ (DI)(BX*4), DI
	ADDQ rowStep+32(FP), SI
	DECQ R8
	JNZ  gwrow
	HSUMADD(Z5, 0)
	ADDQ $4, AX
	ADDQ $8, R9
	DECQ R10
	JNZ  gwtap
	VZEROUPPER
	RET

// LANES16(lo, hi) leaves in the low lane of lo the sum of the 16 float64 lanes lo and hi
// by halves, as nnLanes16 adds them; hi is clobbered.
#define LANES16(lo, hi, ylo, yhi, xlo, xhi) \
	VADDPD hi, lo, lo ; \
	VEXTRACTF64X4 $1, lo, yhi ; \
	VADDPD yhi, ylo, ylo ; \
	VEXTRACTF128 $1, ylo, xhi ; \
	VADDPD xhi, xlo, xlo ; \
	VPERMILPD $1, xlo, xhi ; \
	VADDSD xhi, xlo, xlo

// func sumsAVX512(x, gr *float32, n int, mu, inv float32, mode int, out *float64, segs, stride int)
//
// The float64 sums of nnSumsLanes: four sets of 16 lanes, set s taking the chunks of 16
// elements c with c mod 4 = s in each segment, so that 64 elements go through eight
// (sixteen) independent chains of additions: with one set, the latency of VADDPD held the
// sums to 16 elements every 4 cycles. Set s's first sum is in A_s (lanes 0-7, 8-15), its
// second in B_s; the last chunk of each of the segs segments of n elements (stride elements
// apart, in x and gr alike) loads zeros past its end.
//
//	set 0: Z0 Z1 / Z2 Z3   set 1: Z11 Z12 / Z13 Z14   set 2: Z15 Z16 / Z17 Z18   set 3: Z19 Z20 / Z21 Z22

// SUMS0 adds the 16 elements at off(SI) (K: the lanes loaded) to alo/ahi.
#define SUMS0(off, K, alo, ahi) \
	VMOVUPS.Z off(SI), K, Z4 ; \
	VCVTPS2PD Y4, Z6 ; \
	VEXTRACTF64X4 $1, Z4, Y5 ; \
	VCVTPS2PD Y5, Z7 ; \
	VADDPD Z6, alo, alo ; \
	VADDPD Z7, ahi, ahi

// SUMS1 adds (x−mu)² to alo/ahi and x−mu to blo/bhi, x−mu rounded to float32.
#define SUMS1(off, K, alo, ahi, blo, bhi) \
	VMOVUPS.Z off(SI), K, Z4 ; \
	VSUBPS.Z Z9, Z4, K, Z4 ; \
	VCVTPS2PD Y4, Z6 ; \
	VEXTRACTF64X4 $1, Z4, Y5 ; \
	VCVTPS2PD Y5, Z7 ; \
	VMULPD Z6, Z6, Z8 ; \
	VADDPD Z8, alo, alo ; \
	VMULPD Z7, Z7, Z8 ; \
	VADDPD Z8, ahi, ahi ; \
	VADDPD Z6, blo, blo ; \
	VADDPD Z7, bhi, bhi

// SUMS2 adds g to alo/ahi and g·(x−mu)·inv, rounded to float32, to blo/bhi.
#define SUMS2(off, K, alo, ahi, blo, bhi) \
	VMOVUPS.Z off(SI), K, Z4 ; \
	VMOVUPS.Z off(DI), K, Z5 ; \
	VCVTPS2PD Y5, Z6 ; \
	VEXTRACTF64X4 $1, Z5, Y8 ; \
	VCVTPS2PD Y8, Z7 ; \
	VADDPD Z6, alo, alo ; \
	VADDPD Z7, ahi, ahi ; \
	VSUBPS Z9, Z4, Z4 ; \
	VMULPS Z4, Z5, Z4 ; \
	VMULPS Z10, Z4, Z4 ; \
	VCVTPS2PD Y4, Z6 ; \
	VEXTRACTF64X4 $1, Z4, Y5 ; \
	VCVTPS2PD Y5, Z7 ; \
	VADDPD Z6, blo, blo ; \
	VADDPD Z7, bhi, bhi

// SUMSMASK sets K1 to the lanes of the next chunk: all 16, or the CX < 16 left.
#define SUMSMASK \
	MOVQ $0xffff, AX ; \
	MOVQ $1, DX ; \
	SHLQ CX, DX ; \
	DECQ DX ; \
	CMPQ CX, $16 ; \
	CMOVQLT DX, AX ; \
	KMOVW AX, K1

// SUMSPF prefetches the first 256 bytes and the last line of the segment BX bytes on
// from base (R13: the segment's last byte): segments of planes a few lines long, a
// channel's planes far apart, leave the hardware prefetchers nothing to follow, and the
// sums then wait on memory for every segment.
#define SUMSPF(base) \
	LEAQ (base)(BX*1), AX ; \
	PREFETCHT0 (AX) ; \
	PREFETCHT0 64(AX) ; \
	PREFETCHT0 128(AX) ; \
	PREFETCHT0 192(AX) ; \
	PREFETCHT0 (AX)(R13*1)

// SETS2 adds the four sets of lanes lo/hi pairwise into the first, as nnSumsLanes does:
// (set 0 + set 1) + (set 2 + set 3).
#define SETS2(a0, a1, b0, b1, c0, c1, d0, d1) \
	VADDPD b0, a0, a0 ; \
	VADDPD b1, a1, a1 ; \
	VADDPD d0, c0, c0 ; \
	VADDPD d1, c1, c1 ; \
	VADDPD c0, a0, a0 ; \
	VADDPD c1, a1, a1

TEXT ·sumsAVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), R11
	MOVQ gr+8(FP), R12
	VBROADCASTSS mu+24(FP), Z9
	VBROADCASTSS inv+28(FP), Z10
	MOVQ mode+32(FP), R8
	MOVQ segs+48(FP), R9
	MOVQ stride+56(FP), R10
	SHLQ $2, R10
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	VXORPD Z11, Z11, Z11
	VXORPD Z12, Z12, Z12
	VXORPD Z13, Z13, Z13
	VXORPD Z14, Z14, Z14
	VXORPD Z15, Z15, Z15
	VXORPD Z16, Z16, Z16
	VXORPD Z17, Z17, Z17
	VXORPD Z18, Z18, Z18
	VXORPD Z19, Z19, Z19
	VXORPD Z20, Z20, Z20
	VXORPD Z21, Z21, Z21
	VXORPD Z22, Z22, Z22
	MOVQ $0xffff, AX
	KMOVW AX, K3
	// BX: four segments on, or none (the segment itself) for one segment.
	MOVQ R10, BX
	SHLQ $2, BX
	CMPQ R9, $1
	JGT  sumspf
	XORQ BX, BX
sumspf:
	MOVQ n+16(FP), R13
	SHLQ $2, R13
	DECQ R13
	CMPQ R8, $1
	JEQ  s1seg
	JGT  s2seg

s0seg:
	MOVQ R11, SI
	SUMSPF(R11)
	MOVQ n+16(FP), CX

s0full:
	CMPQ CX, $64
	JLT  s0tail
	SUMS0(0, K3, Z0, Z1)
	SUMS0(64, K3, Z11, Z12)
	SUMS0(128, K3, Z15, Z16)
	SUMS0(192, K3, Z19, Z20)
	ADDQ $256, SI
	SUBQ $64, CX
	JMP  s0full

s0tail:
	TESTQ CX, CX
	JLE   s0next
	SUMSMASK
	SUMS0(0, K1, Z0, Z1)
	SUBQ  $16, CX
	JLE   s0next
	SUMSMASK
	SUMS0(64, K1, Z11, Z12)
	SUBQ  $16, CX
	JLE   s0next
	SUMSMASK
	SUMS0(128, K1, Z15, Z16)
	SUBQ  $16, CX
	JLE   s0next
	SUMSMASK
	SUMS0(192, K1, Z19, Z20)

s0next:
	ADDQ R10, R11
	DECQ R9
	JGT  s0seg
	JMP  sumsdone

s1seg:
	MOVQ R11, SI
	SUMSPF(R11)
	MOVQ n+16(FP), CX

s1full:
	CMPQ CX, $64
	JLT  s1tail
	SUMS1(0, K3, Z0, Z1, Z2, Z3)
	SUMS1(64, K3, Z11, Z12, Z13, Z14)
	SUMS1(128, K3, Z15, Z16, Z17, Z18)
	SUMS1(192, K3, Z19, Z20, Z21, Z22)
	ADDQ $256, SI
	SUBQ $64, CX
	JMP  s1full

s1tail:
	TESTQ CX, CX
	JLE   s1next
	SUMSMASK
	SUMS1(0, K1, Z0, Z1, Z2, Z3)
	SUBQ  $16, CX
	JLE   s1next
	SUMSMASK
	SUMS1(64, K1, Z11, Z12, Z13, Z14)
	SUBQ  $16, CX
	JLE   s1next
	SUMSMASK
	SUMS1(128, K1, Z15, Z16, Z17, Z18)
	SUBQ  $16, CX
	JLE   s1next
	SUMSMASK
	SUMS1(192, K1, Z19, Z20, Z21, Z22)

s1next:
	ADDQ R10, R11
	DECQ R9
	JGT  s1seg
	JMP  sumsdone

s2seg:
	MOVQ R11, SI
	MOVQ R12, DI
	SUMSPF(R11)
	SUMSPF(R12)
	MOVQ n+16(FP), CX

s2full:
	CMPQ CX, $64
	JLT  s2tail
	SUMS2(0, K3, Z0, Z1, Z2, Z3)
	SUMS2(64, K3, Z11, Z12, Z13, Z14)
	SUMS2(128, K3, Z15, Z16, Z17, Z18)
	SUMS2(192, K3, Z19, Z20, Z21, Z22)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JMP  s2full

s2tail:
	TESTQ CX, CX
	JLE   s2next
	SUMSMASK
	SUMS2(0, K1, Z0, Z1, Z2, Z3)
	SUBQ  $16, CX
	JLE   s2next
	SUMSMASK
	SUMS2(64, K1, Z11, Z12, Z13, Z14)
	SUBQ  $16, CX
	JLE   s2next
	SUMSMASK
	SUMS2(128, K1, Z15, Z16, Z17, Z18)
	SUBQ  $16, CX
	JLE   s2next
	SUMSMASK
	SUMS2(192, K1, Z19, Z20, Z21, Z22)

s2next:
	ADDQ R10, R11
	ADDQ R10, R12
	DECQ R9
	JGT  s2seg

sumsdone:
	SETS2(Z0, Z1, Z11, Z12, Z15, Z16, Z19, Z20)
	SETS2(Z2, Z3, Z13, Z14, Z17, Z18, Z21, Z22)
	MOVQ out+40(FP), AX
	LANES16(Z0, Z1, Y0, Y1, X0, X1)
	VMOVSD X0, (AX)
	LANES16(Z2, Z3, Y2, Y3, X2, X3)
	VMOVSD X2, 8(AX)
	VZEROUPPER
	RET

// LANES4X4 stores, at off + 128·L bytes from DI, the 128-bit lanes L of s0, s1, s2 and s3
// side by side (a 4 × 4 transpose of lanes), through Z24-Z31.
#define LANES4X4(s0, s1, s2, s3, off) \
	VSHUFF32X4 $0x44, s1, s0, Z24 \
	VSHUFF32X4 $0xee, s1, s0, Z25 \
	VSHUFF32X4 $0x44, s3, s2, Z26 \
	VSHUFF32X4 $0xee, s3, s2, Z27 \
	VSHUFF32X4 $0x88, Z26, Z24, Z28 \
	VSHUFF32X4 $0xdd, Z26, Z24, Z29 \
	VSHUFF32X4 $0x88, Z27, Z25, Z30 \
	VSHUFF32X4 $0xdd, Z27, Z25, Z31 \
	VMOVUPS Z28, off(DI) \
	VMOVUPS Z29, off+128(DI) \
	VMOVUPS Z30, off+256(DI) \
	VMOVUPS Z31, off+384(DI)

// func transpose8AVX512(t, a *float32, chunks, lda int)
//
// t (16·chunks × 8) = the transpose of the first 16·chunks columns of a (8 rows, lda
// values apart): per chunk of 16 columns, the 8 rows are loaded whole and transposed in
// registers, 32-bit then 64-bit interleaves within 128-bit lanes, then a 4 × 4 transpose
// of the lanes, and t's 16 rows (128 values) are stored in eight 64-byte writes. The
// scatters of transposeAVX512 took 7 % of a small transformer's run in packRows' 8 × K
// transposes.
TEXT ·transpose8AVX512(SB), NOSPLIT, $0-32
	MOVQ t+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ chunks+16(FP), CX
	MOVQ lda+24(FP), R8
	SHLQ $2, R8
	TESTQ CX, CX
	JLE   t8done

t8loop:
	MOVQ    SI, R9
	VMOVUPS (R9), Z0
	ADDQ    R8, R9
	VMOVUPS (R9), Z1
	ADDQ    R8, R9
	VMOVUPS (R9), Z2
	ADDQ    R8, R9
	VMOVUPS (R9), Z3
	ADDQ    R8, R9
	VMOVUPS (R9), Z4
	ADDQ    R8, R9
	VMOVUPS (R9), Z5
	ADDQ    R8, R9
	VMOVUPS (R9), Z6
	ADDQ    R8, R9
	VMOVUPS (R9), Z7
	// Per 128-bit lane L: Z8 = a0,a1 of columns 4L, 4L+1; Z9 = of 4L+2, 4L+3; and so on.
	VUNPCKLPS Z1, Z0, Z8
	VUNPCKHPS Z1, Z0, Z9
	VUNPCKLPS Z3, Z2, Z10
	VUNPCKHPS Z3, Z2, Z11
	VUNPCKLPS Z5, Z4, Z12
	VUNPCKHPS Z5, Z4, Z13
	VUNPCKLPS Z7, Z6, Z14
	VUNPCKHPS Z7, Z6, Z15
	// Z16..Z19: rows 0-3 of columns 4L, 4L+1, 4L+2, 4L+3; Z20..Z23: rows 4-7.
	VUNPCKLPD Z10, Z8, Z16
	VUNPCKHPD Z10, Z8, Z17
	VUNPCKLPD Z11, Z9, Z18
	VUNPCKHPD Z11, Z9, Z19
	VUNPCKLPD Z14, Z12, Z20
	VUNPCKHPD Z14, Z12, Z21
	VUNPCKLPD Z15, Z13, Z22
	VUNPCKHPD Z15, Z13, Z23
	// Columns 4L and 4L+1, whole, into lane order: t rows 4L, 4L+1 (out at 128·L bytes);
	// then columns 4L+2 and 4L+3 (at 128·L + 64).
	LANES4X4(Z16, Z20, Z17, Z21, 0)
	LANES4X4(Z18, Z22, Z19, Z23, 64)
	ADDQ $64, SI
	ADDQ $512, DI
	DECQ CX
	JNZ  t8loop

t8done:
	VZEROUPPER
	RET

// func dwBackS2AVX512(gx *float32, ldx int, gy *float32, ldy, n, rows int, w float32, tail uint64)
//
// dwBackS2Go in AVX-512: per row, blocks of 8 values of gy expanded into the even lanes
// of a register (K1 = 0x5555), times w, added into gx's even lanes by a masked load, add
// and store (the odd lanes are neither read nor written); the last n mod 8 values
// through tail, the even lanes below 2·(n mod 8) − 1.
TEXT ·dwBackS2AVX512(SB), NOSPLIT, $0-64
	MOVQ         gx+0(FP), DI
	MOVQ         ldx+8(FP), R8
	SHLQ         $2, R8
	MOVQ         gy+16(FP), SI
	MOVQ         ldy+24(FP), R9
	SHLQ         $2, R9
	MOVQ         n+32(FP), R10
	MOVQ         rows+40(FP), R11
	VBROADCASTSS w+48(FP), Z15
	MOVQ         tail+56(FP), BX
	KMOVW        BX, K2
	MOVQ         $0x5555, BX
	KMOVW        BX, K1
	TESTQ        R11, R11
	JLE          dbsdone

dbsrow:
	MOVQ SI, AX
	MOVQ DI, DX
	MOVQ R10, CX

dbsblock:
	CMPQ         CX, $8
	JLT          dbstail
	VEXPANDPS.Z  (AX), K1, Z0
	VMULPS       Z15, Z0, Z0
	VMOVUPS.Z    (DX), K1, Z1
	VADDPS       Z0, Z1, K1, Z1
	VMOVUPS      Z1, K1, (DX)
	ADDQ         $32, AX
	ADDQ         $64, DX
	SUBQ         $8, CX
	JMP          dbsblock

dbstail:
	TESTQ        CX, CX
	JLE          dbsnext
	VEXPANDPS.Z  (AX), K2, Z0
	VMULPS       Z15, Z0, Z0
	VMOVUPS.Z    (DX), K2, Z1
	VADDPS       Z0, Z1, K2, Z1
	VMOVUPS      Z1, K2, (DX)

dbsnext:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ R11
	JNZ  dbsrow

dbsdone:
	VZEROUPPER
	RET
