//go:build amd64 && !purego

package engine

import "fmt"

//go:noescape
func ewAVX512(mode, n int, p0, p1, p2 *float32, c0, c1, c2, c3 float32)

//go:noescape
func ewAVX2(mode, n int, p0, p1, p2 *float32, c0, c1, c2, c3 float32)

// ewVec is ewGo in AVX-512, or in AVX2 for all but the last n mod 8 values, where the CPU
// allows.
func ewVec(mode int, p0, p1, p2 []float32, c0, c1, c2, c3 float32) {
	n := len(p0)
	reads2 := mode == ewClipGrad || mode == ewHardSwishGrad || mode == ewBNGrad || mode == ewAdd || mode == ewMul || mode == ewReluGrad
	if len(p1) < n || (reads2 && len(p2) < n) {
		panic(fmt.Sprintf("elementwise loop %d over %d values with operands of %d and %d", mode, n, len(p1), len(p2)))
	}
	if n == 0 {
		return
	}
	var q2 *float32
	if reads2 {
		q2 = &p2[0]
	}
	switch {
	case convTileOK():
		ewAVX512(mode, n, &p0[0], &p1[0], q2, c0, c1, c2, c3)
	case convTileAVX2OK():
		m := n &^ 7
		if m > 0 {
			ewAVX2(mode, m, &p0[0], &p1[0], q2, c0, c1, c2, c3)
		}
		if m < n {
			var t2 []float32
			if reads2 {
				t2 = p2[m:n]
			}
			ewGo(mode, p0[m:n], p1[m:n], t2, c0, c1, c2, c3)
		}
	default:
		ewGo(mode, p0, p1, p2, c0, c1, c2, c3)
	}
}
