package engine

import (
	"math/rand/v2"
	"testing"
)

// TestViewCopyTransposes checks viewCopy on permutations of random shapes (the tiled
// transpose path where it applies, the row walk elsewhere), copying and adding, with
// offsets, against the index arithmetic written out element by element.
func TestViewCopyTransposes(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	tiled := 0
	for trial := 0; trial < 400; trial++ {
		rank := 2 + r.IntN(3)
		shape := make([]int, rank)
		for i := range shape {
			shape[i] = 1 + r.IntN(20)
		}
		perm := r.Perm(rank)
		inStrides := stridesOf(nil, shape)
		out := make([]int, rank)
		ss := make([]int, rank)
		for i, j := range perm {
			out[i], ss[i] = shape[j], inStrides[j]
		}
		ds := stridesOf(nil, out)
		n := numel(shape)
		const sb, db = 3, 5
		src := make([]float32, n+sb)
		for i := range src {
			src[i] = float32(r.IntN(1000))
		}
		for _, add := range []bool{false, true} {
			got := make([]float32, n+db)
			want := make([]float32, n+db)
			for i := range got {
				got[i] = float32(i % 7)
				want[i] = got[i]
			}
			idx := make([]int, rank)
			viewCopy(add, got, db, ds, src, sb, ss, out, idx)
			// Every output index, by odometer.
			cur := make([]int, rank)
			for e := 0; e < n; e++ {
				d, s := db, sb
				for i := range rank {
					d += cur[i] * ds[i]
					s += cur[i] * ss[i]
				}
				if add {
					want[d] += src[s]
				} else {
					want[d] = src[s]
				}
				for i := rank - 1; i >= 0; i-- {
					cur[i]++
					if cur[i] < out[i] {
						break
					}
					cur[i] = 0
				}
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("shape %v perm %v add %v: dst[%d] = %v, want %v", shape, perm, add, i, got[i], want[i])
				}
			}
		}
		if transposeAxis(ds, ss, out) >= 0 {
			tiled++
		}
	}
	if tiled < 100 {
		t.Fatalf("only %d of 400 trials took the tiled transpose", tiled)
	}
	t.Logf("%d of 400 trials tiled", tiled)
}
