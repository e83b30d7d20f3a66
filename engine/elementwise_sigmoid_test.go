package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSigmoidVector checks sigmoidVec against its definition sigmoidF32 bit for bit
// (NaN matching any NaN), at every length up to 40 for the masked tail, on random values
// and on the edges: zeros, infinities, NaN, the clamps and where exp over- and
// underflows; and sigmoidF32 against the float64 sigmoid within 4 units in the last
// place, and 0 exactly where σ is below float32's smallest normal (expNegF32 flushes
// those), never a subnormal.
func TestSigmoidVector(t *testing.T) {
	edges := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		100, -100, 110, -110, 120, -120, 88.7, -88.7, 87, -87, 103.9, -103.9, 104, -104, 1e-8, -1e-8, 1, -1, 16.6, -16.6}
	r := rand.New(rand.NewPCG(16, 1))
	x := append([]float32(nil), edges...)
	for range 4000 {
		x = append(x, float32(r.NormFloat64()*8))
	}
	for range 1000 {
		x = append(x, float32(r.Float64()*240-120))
	}
	for _, v := range x {
		got := float64(sigmoidF32(v))
		want := 1 / (1 + math.Exp(-float64(v)))
		if math.IsNaN(float64(v)) {
			if !math.IsNaN(got) {
				t.Fatalf("sigmoidF32(NaN) = %v", got)
			}
			continue
		}
		checkFlushed(t, "sigmoidF32", v, got, want, 4)
	}
	check := func(x []float32) {
		t.Helper()
		y := make([]float32, len(x)+1)
		y[len(x)] = 42
		sigmoidVec(x, y[:len(x)])
		if y[len(x)] != 42 {
			t.Fatalf("length %d: sigmoidVec wrote past its output", len(x))
		}
		for i, v := range x {
			want := sigmoidF32(v)
			if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
				t.Fatalf("sigmoidVec(%v) = %v, sigmoidF32 %v", v, y[i], want)
			}
		}
	}
	for n := 0; n <= 40; n++ {
		check(x[:n])
		check(x[len(x)-n:])
	}
	check(x)
}

// TestSiLUVector checks the vector SiLU (AVX-512, AVX2 under GODEBUG=cpu.avx512f=off, or
// the scalar loop) bit for bit against siluF32 at every length up to 40, without writing
// past y, and siluF32 against float64's x/(1 + e^−x) within 4 ulp plus the smallest
// normal, and 0 where σ(x) is below the smallest normal (sigmoidF32 flushes it).
func TestSiLUVector(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4))
	x := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		100, -100, 88.7, -88.7, -103.9, -104, 1e-8, -1e-8, 1, -1}
	for range 4000 {
		x = append(x, float32(r.NormFloat64()*8))
	}
	for _, v := range x {
		got, want := float64(siluF32(v)), float64(v)/(1+math.Exp(-float64(v)))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		switch sig := 1 / (1 + math.Exp(-float64(v))); {
		case sig < 0x1p-126*(1-0x1p-20) && got != 0:
			t.Fatalf("siluF32(%v) = %v, want 0 where σ is below the smallest normal", v, got)
		case got == 0 && sig < 0x1p-126*(1+0x1p-20):
			continue
		}
		if d := math.Abs(got - want); d > 4*0x1p-24*math.Abs(want)+0x1p-126 {
			t.Fatalf("siluF32(%v) = %v, float64 %v", v, got, want)
		}
	}
	for n := 0; n <= 40; n++ {
		for _, in := range [][]float32{x[:n], x[len(x)-n:], x} {
			y := make([]float32, len(in)+1)
			y[len(in)] = 42
			siluVec(in, y[:len(in)])
			if y[len(in)] != 42 {
				t.Fatalf("length %d: wrote past y", len(in))
			}
			for i, v := range in {
				want := siluF32(v)
				if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
					t.Fatalf("SiLU(%v) = %v, siluF32 %v", v, y[i], want)
				}
			}
		}
	}
}

// TestSiLURows checks siluRowsTo (the direct path's SiLU of a tile's rows: one AVX-512
// call, one AVX2 call for whole rows of 16 under GODEBUG=cpu.avx512f=off, or row by row)
// bit for bit against siluF32 on rows of 1 to 16 values, 1 to 9 rows a stride apart,
// in place and from another buffer, with and without non-temporal stores, and that it
// leaves the values between and after the rows as they were. The inputs include zeros
// of both signs, infinities, NaN and values past the exponential's range.
func TestSiLURows(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 5))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		100, -100, 88.7, -88.7, -103.9, -104, 1e-8, -1e-8}
	fill := func(x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * 8)
			if r.IntN(8) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
	}
	for n := 1; n <= 16; n++ {
		for _, rows := range []int{1, 2, 9} {
			for _, inPlace := range []bool{false, true} {
				for _, stream := range []bool{false, true} {
					lds, ldc := 16+r.IntN(9), 16+16*r.IntN(3)
					src := make([]float32, rows*lds+3)
					fill(src)
					dst := src
					if !inPlace {
						dst = make([]float32, rows*ldc+3)
						fill(dst)
					} else {
						ldc = lds
					}
					before := slices.Clone(dst)
					orig := slices.Clone(src)
					siluRowsTo(dst, ldc, src, lds, rows, n, stream)
					storeFence()
					for i := range dst {
						row, j := i/ldc, i%ldc
						want := before[i]
						if row < rows && j < n {
							want = siluF32(orig[row*lds+j])
						}
						if math.Float32bits(dst[i]) != math.Float32bits(want) && !(want != want && dst[i] != dst[i]) {
							t.Fatalf("n %d, rows %d, in place %v, stream %v: [%d] = %v, want %v", n, rows, inPlace, stream, i, dst[i], want)
						}
					}
				}
			}
		}
	}
}
