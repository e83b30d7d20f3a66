package engine

import (
	"math"
	"testing"
)

// TestExpF compares expF with math.Exp over the float32 range where e^x is finite and
// normal, on a fine grid and at the edges.
func TestExpF(t *testing.T) {
	check := func(x float32) {
		want := math.Exp(float64(x))
		got := float64(expF(x))
		if math.IsInf(want, 1) || want > math.MaxFloat32 {
			if !math.IsInf(got, 1) && got < float64(math.MaxFloat32)*(1-1e-6) {
				t.Fatalf("expF(%v) = %v, want overflow", x, got)
			}
			return
		}
		tol := 2 * float64(math.Nextafter32(float32(want), float32(math.Inf(1)))-float32(want))
		if want < 1e-37 {
			tol = 1e-44 // subnormal results may flush to zero
		}
		if math.Abs(got-want) > tol {
			t.Fatalf("expF(%v) = %v, want %v (|error| %g > %g)", x, got, want, math.Abs(got-want), tol)
		}
	}
	for x := float32(-104); x <= 89; x += 0.00731 {
		check(x)
	}
	for _, x := range []float32{0, -0, 1, -1, 1e-8, -1e-8, 88.7, 88.72, 88.73, -87.3, -103.9, -104, -200, 200} {
		check(x)
	}
	if v := expF(float32(math.NaN())); v == v {
		t.Errorf("expF(NaN) = %v", v)
	}
	if v := expF(float32(math.Inf(-1))); v != 0 {
		t.Errorf("expF(-Inf) = %v", v)
	}
	if v := expF(float32(math.Inf(1))); !math.IsInf(float64(v), 1) {
		t.Errorf("expF(+Inf) = %v", v)
	}
}

// TestClipBitsSpecialValues compares clipBits with the comparison form of the clamp on
// special values and bounds of every sign, including NaN bounds and lo > hi.
func TestClipBitsSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	vals := []float32{nan, -inf, -math.MaxFloat32, -7, -1, -math.SmallestNonzeroFloat32, negZero, 0,
		math.SmallestNonzeroFloat32, 0.5, 1, 6, 6.5, math.MaxFloat32, inf, -nan}
	bounds := []float32{-inf, -6, -1, negZero, 0, 0.5, 6, inf}
	y := make([]float32, len(vals))
	for _, lo := range bounds {
		for _, hi := range bounds {
			clipBits(vals, y, lo, hi)
			for i, v := range vals {
				want := v
				if v < lo {
					want = lo
				}
				if want > hi || lo > hi && v == v {
					want = hi // NaN stays NaN, even when lo > hi
				}
				if got := y[i]; got != want && !(got != got && want != want) {
					t.Errorf("clip(%v, %v, %v) = %v, want %v", v, lo, hi, got, want)
				}
			}
		}
	}
	clipBits(vals, y, nan, 1)
	for i, v := range y {
		if v == v {
			t.Errorf("clip(%v, NaN, 1) = %v, want NaN like min(max(x, NaN), 1)", vals[i], v)
		}
	}
}
