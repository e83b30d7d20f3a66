package benchrate

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRateCPU checks the loop's count against a call of known length and that an
// error from the call is returned.
func TestRateCPU(t *testing.T) {
	calls := 0
	rate, cpu, err := RateCPU(0.05, func() error {
		calls++
		// Busy for about 2 ms, so that the call takes CPU time, not just wall time.
		for start := time.Now(); time.Since(start) < 2*time.Millisecond; {
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 4 {
		t.Fatalf("%d calls, want the warm-up and at least three", calls)
	}
	if rate <= 0 || rate > 500 {
		t.Errorf("rate %v calls/s for calls of 2 ms", rate)
	}
	if cpu < 0.001 {
		t.Errorf("CPU %v s a call for calls busy 2 ms", cpu)
	}
	want := errors.New("boom")
	if _, _, err := RateCPU(1, func() error { return want }); err != want {
		t.Errorf("error %v, want %v", err, want)
	}
}

// TestRange checks the parser's refusals and that the unit range draws exactly the
// stream the benches drew before the option (PCG(1, 2)'s Float32s), so that old and new
// runs time the same input.
func TestRange(t *testing.T) {
	for _, bad := range []string{"", "1", "1,1", "2,1", "a,1", "0,inf", "-inf,0", "1,2,3"} {
		if _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) accepted", bad)
		}
	}
	unit, err := ParseRange("0,1")
	if err != nil {
		t.Fatal(err)
	}
	g := rand.New(rand.NewPCG(1, 2))
	for i, v := range unit.Inputs(1000) {
		if want := g.Float32(); v != want {
			t.Fatalf("unit range value %d = %v, want PCG(1, 2)'s %v", i, v, want)
		}
	}
	r, err := ParseRange(" -2 , 2 ")
	if err != nil {
		t.Fatal(err)
	}
	if r.String() != "-2,2" {
		t.Errorf("String() = %q", r.String())
	}
	lo, hi := float32(2), float32(-2)
	for _, v := range r.Inputs(10000) {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -2 || hi >= 2 || lo > -1.99 || hi < 1.99 {
		t.Errorf("values of [-2, 2) spread over [%v, %v]", lo, hi)
	}
}
