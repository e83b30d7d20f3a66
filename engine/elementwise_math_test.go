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
