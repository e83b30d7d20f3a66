//go:build !amd64 || purego

package engine

// ewVec is ewGo without the assembly.
func ewVec(mode int, p0, p1, p2 []float32, c0, c1, c2, c3 float32) {
	ewGo(mode, p0, p1, p2, c0, c1, c2, c3)
}
