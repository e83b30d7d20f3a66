//go:build !cgo

package engine

// ortCoverageSources is empty without cgo, which onnxruntime needs.
func ortCoverageSources() []coverageSource { return nil }
