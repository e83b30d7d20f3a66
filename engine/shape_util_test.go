package engine

import (
	"math"
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

// TestViewCopyCoalesced checks viewCopy where coalesceView merges axes: windows of a
// larger array (unit, stepped and reversed strides, axes of size 1), broadcasts (zero
// src strides) and reductions into a broadcast (zero dst strides, adding), against the
// index arithmetic written out element by element, bit for bit. The reductions' values
// span many magnitudes, so that adding them in another order than the walk's changes the
// bits (checked: the reverse order differs on some trials).
func TestViewCopyCoalesced(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	merged, orderSensitive := 0, 0
	for trial := 0; trial < 600; trial++ {
		rank := 1 + r.IntN(5)
		shape := make([]int, rank)
		for i := range shape {
			shape[i] = 1 + r.IntN(6)
			if r.IntN(4) == 0 {
				shape[i] = 1
			}
		}
		// src: a window of a row-major array of shape full, where full[i] ≥ shape[i]·|step|.
		full := make([]int, rank)
		step := make([]int, rank)
		for i := range full {
			step[i] = 1
			switch r.IntN(5) {
			case 0:
				step[i] = 2
			case 1:
				step[i] = -1
			}
			full[i] = shape[i]*abs(step[i]) + r.IntN(2)
		}
		fs := stridesOf(nil, full)
		ss := make([]int, rank)
		sb := 0
		for i := range rank {
			ss[i] = step[i] * fs[i]
			if step[i] < 0 {
				sb += (full[i] - 1) * fs[i]
			}
		}
		mode := r.IntN(3) // 0 window, 1 broadcast from src, 2 reduce into dst
		ds := stridesOf(nil, shape)
		if mode == 1 || mode == 2 {
			for i := range rank {
				if r.IntN(2) == 0 {
					if mode == 1 {
						ss[i] = 0
					} else {
						ds[i] = 0
					}
				}
			}
			if mode == 2 { // dst is then the broadcast shape's row-major array
				s := 1
				for i := rank - 1; i >= 0; i-- {
					if ds[i] != 0 {
						ds[i] = s
						s *= shape[i]
					}
				}
			}
		}
		src := make([]float32, numel(full))
		for i := range src {
			src[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
		}
		n := numel(shape)
		for _, add := range []bool{false, true} {
			if mode == 2 && !add {
				continue
			}
			got := make([]float32, n+3)
			want := make([]float32, n+3)
			rev := make([]float32, n+3)
			viewCopy(add, got, 1, ds, src, sb, ss, shape, make([]int, rank))
			var ds2, ss2, cs [8]int
			if coalesceView(shape, ds, ss, &cs, &ds2, &ss2) < rank {
				merged++
			}
			cur := make([]int, rank)
			var visits [][2]int
			for e := 0; e < n; e++ {
				d, s := 1, sb
				for i := range rank {
					d += cur[i] * ds[i]
					s += cur[i] * ss[i]
				}
				visits = append(visits, [2]int{d, s})
				for i := rank - 1; i >= 0; i-- {
					cur[i]++
					if cur[i] < shape[i] {
						break
					}
					cur[i] = 0
				}
			}
			for _, v := range visits {
				if add {
					want[v[0]] += src[v[1]]
				} else {
					want[v[0]] = src[v[1]]
				}
			}
			for i := len(visits) - 1; i >= 0; i-- {
				rev[visits[i][0]] += src[visits[i][1]]
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("shape %v ds %v ss %v add %v: dst[%d] = %v, want %v", shape, ds, ss, add, i, got[i], want[i])
				}
				if mode == 2 && rev[i] != want[i] {
					orderSensitive++
				}
			}
		}
	}
	if merged < 200 || orderSensitive < 20 {
		t.Fatalf("%d trials merged axes and %d reduced values depended on the order, want ≥ 200 and ≥ 20", merged, orderSensitive)
	}
	t.Logf("%d trials merged axes, %d reduced values order-sensitive", merged, orderSensitive)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
