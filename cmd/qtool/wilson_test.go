package main

import (
	"math"
	"testing"
)

// TestWilsonByHand: the Wilson interval against values computed by hand. At k = 0 the
// upper end is z²/(n+z²) and at k = n the lower end n/(n+z²) (z = 1.96: 3.8415/13.8415
// and 10/13.8415 for n = 10); 90 of 100 gives the textbook [82.56, 94.48] %.
func TestWilsonByHand(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 10, 0, 27.7533}, {10, 10, 72.2467, 100}, {90, 100, 82.5634, 94.4771},
		{450, 500, 87.0578, 92.3322},
	} {
		ci := wilsonPct(c.k, c.n)
		if ci == nil || math.Abs(ci[0]-c.lo) > 1e-3 || math.Abs(ci[1]-c.hi) > 1e-3 {
			t.Errorf("wilsonPct(%d, %d) = %v, want [%g, %g]", c.k, c.n, ci, c.lo, c.hi)
		}
	}
	if wilsonPct(0, 0) != nil {
		t.Error("an interval over no trials")
	}
}
