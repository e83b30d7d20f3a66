//go:build cgo

package engine

import "testing"

// TestConvPhasedAgainstOnnxruntime runs phasedCases as one-node models (convOnnxruntime:
// two workers, so that their batches of six or more take the phase planes) in
// onnxruntime 1.30 and in the engine.
func TestConvPhasedAgainstOnnxruntime(t *testing.T) {
	// Sums of up to 147 products of values in [−1, 1], in other orders.
	convCasesAgainstOnnxruntime(t, phasedCases, 73, 1e-5, nil)
}
