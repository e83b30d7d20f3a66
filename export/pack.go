package export

import "fmt"

// Pack packs codes of the given width (1, 2, 4 or 8 bits) into bytes, least significant
// bits first: code i goes to byte i·bits/8, bits (i·bits)%8 upwards. The last byte is
// padded with zero codes.
func Pack(codes []uint8, bits int) ([]byte, error) {
	if bits != 1 && bits != 2 && bits != 4 && bits != 8 {
		return nil, fmt.Errorf("export: pack: width %d bits, want 1, 2, 4 or 8", bits)
	}
	per := 8 / bits
	out := make([]byte, (len(codes)+per-1)/per)
	mask := uint8(1)<<bits - 1
	switch bits {
	case 8:
		copy(out, codes)
		return out, nil
	case 1:
		// Whole bytes first: the common case for binary weights, eight codes per byte.
		// The OR of all codes tells at the end whether any had a bit beyond the width.
		full := len(codes) / 8
		var all uint8
		for i := range full {
			c := codes[8*i : 8*i+8 : 8*i+8]
			all |= c[0] | c[1] | c[2] | c[3] | c[4] | c[5] | c[6] | c[7]
			out[i] = c[0]&1 | c[1]&1<<1 | c[2]&1<<2 | c[3]&1<<3 | c[4]&1<<4 | c[5]&1<<5 | c[6]&1<<6 | c[7]&1<<7
		}
		for j, c := range codes[8*full:] {
			all |= c
			out[full] |= c & 1 << j
		}
		if all&^mask == 0 {
			return out, nil
		}
		return out, checkWidth(codes, mask)
	}
	var all uint8
	for i, c := range codes {
		all |= c
		out[i/per] |= (c & mask) << ((i % per) * bits)
	}
	if all&^mask == 0 {
		return out, nil
	}
	return out, checkWidth(codes, mask)
}

// checkWidth finds the first code that does not fit the width, for the error message.
func checkWidth(codes []uint8, mask uint8) error {
	for i, c := range codes {
		if c&^mask != 0 {
			return fmt.Errorf("export: pack: code %d at index %d does not fit in %d bits", c, i, bitsOf(mask))
		}
	}
	return nil
}

func bitsOf(mask uint8) int {
	n := 0
	for ; mask != 0; mask >>= 1 {
		n++
	}
	return n
}

// Unpack returns the first n codes of width bits packed in data by Pack.
func Unpack(data []byte, bits, n int) ([]uint8, error) {
	if bits != 1 && bits != 2 && bits != 4 && bits != 8 {
		return nil, fmt.Errorf("export: unpack: width %d bits, want 1, 2, 4 or 8", bits)
	}
	per := 8 / bits
	if n < 0 || (n+per-1)/per > len(data) {
		return nil, fmt.Errorf("export: unpack: %d codes of %d bits need %d bytes, have %d", n, bits, (n+per-1)/per, len(data))
	}
	mask := uint8(1)<<bits - 1
	out := make([]uint8, n)
	for i := range out {
		out[i] = data[i/per] >> ((i % per) * bits) & mask
	}
	return out, nil
}

// LUT returns the [256, 8/bits] unpacking table of a grid packed at the given width:
// entry (b, j) is float32 of the level whose code sits in bits j·bits… of byte b, or 0
// for codes the grid does not use.
func LUT(levels []int, bits int) []float32 {
	per := 8 / bits
	mask := 1<<bits - 1
	t := make([]float32, 256*per)
	for b := range 256 {
		for j := range per {
			if c := b >> (j * bits) & mask; c < len(levels) {
				t[b*per+j] = float32(levels[c])
			}
		}
	}
	return t
}
