//go:build !amd64 || purego

package engine

// nibbles is nibblesGo: no vector form off amd64 or with the purego tag.
func nibbles(out []float32, data []byte, lut *[16]float32) { nibblesGo(out, data, lut) }
