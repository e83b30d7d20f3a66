package benchrate

import (
	"errors"
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
