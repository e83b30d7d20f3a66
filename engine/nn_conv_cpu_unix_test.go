//go:build unix

package engine

import (
	"math"
	"syscall"
)

// benchCPU returns the process's user plus system CPU time in seconds. Per operation it
// is steadier than the wall time on a machine shared with other jobs, since time spent
// waiting for a core does not count (spinning threads would, but the engine's workers
// block).
func benchCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
