//go:build !unix

package engine

import "math"

// benchCPU is not measured outside Unix: the cpu-ms/op metric reads NaN.
func benchCPU() float64 { return math.NaN() }
