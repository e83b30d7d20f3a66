//go:build !unix

package blas

import "testing"

// cpuSeconds returns -1: process CPU time is read with getrusage on unix only.
func cpuSeconds(*testing.B) float64 { return -1 }
