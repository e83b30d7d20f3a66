//go:build !amd64 || purego

package engine

// nibbles is nibblesGo: no vector form off amd64 or with the purego tag.
func nibbles(out []float32, data []byte, lut *[16]float32) { nibblesGo(out, data, lut) }

// dot32 is dot32Go: no vector form off amd64 or with the purego tag.
func dot32(x, y []float32, s *[32]float32) { dot32Go(x, y, s) }
