//go:build !linux

package engine

// physicalMemory has no portable source outside Linux; the fallback still stops shapes
// that no machine could hold.
func physicalMemory() int64 { return fallbackMaxBytes }
