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

// nibbles is nibblesGo, in AVX-512 for whole groups of 16 bytes where the CPU has it.
// Table lookups copy the entries' bits, so the results are the same on every path.
func nibbles(out []float32, data []byte, lut *[16]float32) {
	n := len(data) &^ 15
	if n > 0 && convTileOK() {
		_ = out[2*n-1]
		nibblesAVX512(&out[0], &data[0], n, lut, &nibbleOrder)
	} else {
		n = 0
	}
	nibblesGo(out[2*n:], data[n:], lut)
}
