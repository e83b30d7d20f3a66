package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGatherRow checks the table gather (AVX-512 where the CPU has it, else AVX2, else Go:
// run under GODEBUG=cpu.avx512f=off for the AVX2 form) against
// gatherRowGo at every length up to 40 and a long one: padding entries (−1) give 0 and
// read nothing, the indices land anywhere in src, nothing past dst is written.
func TestGatherRow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 8))
	src := make([]float32, 500)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	src[7] = float32(math.NaN())
	for _, n := range append([]int{333}, func() []int {
		var l []int
		for n := 0; n <= 40; n++ {
			l = append(l, n)
		}
		return l
	}()...) {
		idx := make([]int32, n)
		for p := range idx {
			idx[p] = int32(r.IntN(len(src)))
			if r.IntN(4) == 0 {
				idx[p] = -1
			}
		}
		got, want := make([]float32, n+1), make([]float32, n)
		for p := range got {
			got[p] = 42
		}
		gatherRow(got[:n], src, idx, len(src))
		gatherRowGo(want, src, idx)
		if got[n] != 42 {
			t.Fatalf("n %d: wrote past dst", n)
		}
		for p := range want {
			if math.Float32bits(got[p]) != math.Float32bits(want[p]) {
				t.Fatalf("n %d: dst[%d] = %v, want %v (index %d)", n, p, got[p], want[p], idx[p])
			}
			if idx[p] < 0 && want[p] != 0 || idx[p] >= 0 && math.Float32bits(want[p]) != math.Float32bits(src[idx[p]]) {
				t.Fatalf("n %d: gatherRowGo dst[%d] = %v for index %d", n, p, want[p], idx[p])
			}
		}
	}
}
