package fdcheck

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that keeps the errors instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCheck: the gradient of Σ x³ (3x²) agrees in float32 and float64, and a gradient
// off by 1 % is caught, naming the entries (the negative control).
func TestCheck(t *testing.T) {
	x64 := []float64{-1.5, 0.25, 2}
	x32 := []float32{-1.5, 0.25, 2}
	cube := func(x []float64) float64 {
		var s float64
		for _, v := range x {
			s += v * v * v
		}
		return s
	}
	spec := Spec{Step: Fixed(1e-3), Atol: 1e-6, Rtol: 1e-5}
	if !Check(t, "x64", x64, func(j int) float64 { return 3 * x64[j] * x64[j] }, func() float64 { return cube(x64) }, spec) {
		t.Error("float64: the exact gradient was refused")
	}
	spec32 := Spec{Step: Fixed(1.0 / 256), Atol: 1e-3, Rtol: 1e-3}
	loss32 := func() float64 {
		v := make([]float64, len(x32))
		for i, e := range x32 {
			v[i] = float64(e)
		}
		return cube(v)
	}
	if !Check(t, "x32", x32, func(j int) float64 { return 3 * float64(x32[j]) * float64(x32[j]) }, loss32, spec32) {
		t.Error("float32: the exact gradient was refused")
	}
	r := &recorder{TB: t}
	if Check(r, "wrong", x64, func(j int) float64 { return 1.01 * 3 * x64[j] * x64[j] }, func() float64 { return cube(x64) }, spec) || len(r.errs) != 4 {
		t.Errorf("a gradient off by 1 %%: errors %q, want one per entry and a count", r.errs)
	}
	if x64[0] != -1.5 || x32[2] != 2 {
		t.Error("Check did not restore x")
	}
}
