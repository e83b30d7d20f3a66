// Package benchrate holds the bench programs' timing loop and the process CPU clock,
// apart from internal/benchkit so that a program can time a library without linking the
// engine (bench/realnets/ortrate runs under internal/cpuidmask, where the engine's
// golang.org/x/sys/cpu would fault).
package benchrate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RateCPU runs f until seconds have passed (after one warm-up call, and at least three
// calls) and returns calls per second and the process's CPU seconds per timed call
// (every thread of the process, cgo libraries' included). On a machine shared with
// other jobs the CPU time moves far less than the wall time, which waits for the
// scheduler.
func RateCPU(seconds float64, f func() error) (rate, cpu float64, err error) {
	if err := f(); err != nil {
		return 0, 0, err
	}
	n := 0
	start, c0 := time.Now(), CPUTime()
	for time.Since(start).Seconds() < seconds || n < 3 {
		if err := f(); err != nil {
			return 0, 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), (CPUTime() - c0).Seconds() / float64(n), nil
}

// CPUTime returns the process's user and system CPU time so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Range is the interval [Lo, Hi) a bench draws its input values from.
type Range struct{ Lo, Hi float32 }

// ParseRange reads "lo,hi" (lo < hi, both finite).
func ParseRange(s string) (Range, error) {
	lo, hi, ok := strings.Cut(s, ",")
	a, err1 := strconv.ParseFloat(strings.TrimSpace(lo), 32)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(hi), 32)
	if !ok || err1 != nil || err2 != nil || !(a < b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return Range{}, fmt.Errorf("input range %q: want lo,hi with lo < hi, both finite", s)
	}
	return Range{float32(a), float32(b)}, nil
}

// String is the range as ParseRange reads it.
func (r Range) String() string { return fmt.Sprintf("%g,%g", r.Lo, r.Hi) }

// Inputs returns n values drawn uniformly from r by PCG(1, 2), the stream every engine
// of a bench reads, so that they all run on the same input.
func (r Range) Inputs(n int) []float32 {
	x := make([]float32, n)
	g := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = r.Lo + (r.Hi-r.Lo)*g.Float32()
	}
	return x
}
