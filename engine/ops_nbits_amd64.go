//go:build amd64 && !purego

package engine

// nibblesAVX512 is nibblesGo over n bytes, n a positive multiple of 16: each 16 bytes
// widened to 16 lanes, their low and high nibbles looked up in lut by VPERMPS (the 16
// entries fill one register) and interleaved back into code order by VPERMT2PS with the
// indices idx.
//
//go:noescape
func nibblesAVX512(out *float32, data *byte, n int, lut *[16]float32, idx *[32]int32)

// nibbleOrder are nibblesAVX512's indices: low nibble i (table 1, entry i) then high
// nibble i (table 2, entry 16 + i), for bytes 0–7, then bytes 8–15.
var nibbleOrder = func() (t [32]int32) {
	for i := range 8 {
		t[2*i], t[2*i+1] = int32(i), int32(16+i)
		t[16+2*i], t[16+2*i+1] = int32(8+i), int32(24+i)
	}
	return t
}()

// nibblesAVX2 is nibblesAVX512 in AVX2, for n a positive multiple of 8.
//
//go:noescape
func nibblesAVX2(out *float32, data *byte, n int, lut *[16]float32)

// nibbles is nibblesGo, in AVX-512 (whole groups of 16 bytes) or AVX2 (of 8) where the
// CPU has it. Table lookups copy the entries' bits, so every path gives the same results.
func nibbles(out []float32, data []byte, lut *[16]float32) {
	n := 0
	switch {
	case convTileOK():
		if n = len(data) &^ 15; n > 0 {
			_ = out[2*n-1]
			nibblesAVX512(&out[0], &data[0], n, lut, &nibbleOrder)
		}
	case convTileAVX2OK():
		if n = len(data) &^ 7; n > 0 {
			_ = out[2*n-1]
			nibblesAVX2(&out[0], &data[0], n, lut)
		}
	}
	nibblesGo(out[2*n:], data[n:], lut)
}

// dot32AVX2 is dot32Go over n values, n a positive multiple of 32: four 8-lane registers
// hold the 32 sums, with a VMULPS and a VADDPS for each 8 products (not FMA: the
// definition rounds the product on its own).
//
//go:noescape
func dot32AVX2(x, y *float32, n int, s *[32]float32)

// dot32 is dot32Go, in AVX2 where the CPU has it (AVX-512 CPUs too: the same bits).
func dot32(x, y []float32, s *[32]float32) {
	n := len(x) &^ 31 // the assembly loops n/32 times and must not be given 0
	if n == 0 || !convTileAVX2OK() {
		dot32Go(x, y, s)
		return
	}
	_ = y[n-1]
	dot32AVX2(&x[0], &y[0], n, s)
}
