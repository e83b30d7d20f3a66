// Package benchrate holds the bench programs' timing loop and the process CPU clock,
// apart from internal/benchkit so that a program can time a library without linking the
// engine (bench/realnets/ortrate runs under internal/cpuidmask, where the engine's
// golang.org/x/sys/cpu would fault).
package benchrate

import (
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
