package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPadRows checks padRows (the assembly where the CPU has it) against the row-by-row
// definition: every row copied exactly, including NaN payloads and signed zeros, and
// nothing written around the rows, for widths below, at and above one 16-value chunk and
// pitches from w (rows back to back) to w + 9.
func TestPadRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const sentinel = 0x7fc0dead // a NaN that no copy produces
	for _, w := range []int{1, 2, 7, 14, 15, 16, 17, 31, 32, 33, 56, 112} {
		for _, rows := range []int{1, 3, 7} {
			for _, extra := range []int{0, 1, 2, 9} {
				t.Run(fmt.Sprintf("w%d/rows%d/pitch+%d", w, rows, extra), func(t *testing.T) {
					pitch := w + extra
					src := make([]float32, rows*w)
					for i := range src {
						switch r.IntN(8) {
						case 0:
							src[i] = float32(math.Copysign(0, -1))
						case 1:
							src[i] = math.Float32frombits(0x7f800001 + uint32(r.IntN(1000)))
						default:
							src[i] = r.Float32()*2 - 1
						}
					}
					// The rows land 3 values into dst, with 20 values of margin after.
					const lead = 3
					size := lead + (rows-1)*pitch + w + 20
					got, want := make([]float32, size), make([]float32, size)
					for i := range got {
						got[i] = math.Float32frombits(sentinel)
						want[i] = got[i]
					}
					padRows(got[lead:], src, rows, w, pitch)
					padRowsGo(want[lead:], src, rows, w, pitch)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("dst[%d] = %#x, want %#x", i, math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
					copied := 0
					for i := range want {
						if math.Float32bits(want[i]) != sentinel {
							copied++
						}
					}
					if copied != rows*w {
						t.Fatalf("the definition wrote %d values, want %d", copied, rows*w)
					}
				})
			}
		}
	}
}
