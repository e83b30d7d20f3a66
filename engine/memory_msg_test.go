package engine

import (
	"regexp"
	"strings"
	"testing"
)

// TestMemoryErrorNamesNoFlag: the engine is a library, so its advice names the Options
// field (MaxBytes) and leaves the command line's flag to the command line.
func TestMemoryErrorNamesNoFlag(t *testing.T) {
	flag := regexp.MustCompile(`--[a-z]`)
	for _, e := range []*MemoryError{
		{Model: "m.onnx", Node: "n", Op: "MatMul", Shape: []int{1 << 20, 1 << 20}, Bytes: 4 << 40, Limit: 1 << 30},
		{Model: "m.onnx", Node: "n", Op: "MatMul", Shape: []int{64, 1024}, Bytes: 3 << 30, Limit: 1 << 30, Total: true},
		{Model: "m.onnx", Input: "x", Shape: []int{-1}, Bytes: -1},
	} {
		msg := e.Error()
		if flag.MatchString(msg) {
			t.Errorf("message names a flag: %s", msg)
		}
		if e.Bytes >= 0 && !strings.Contains(msg, "raise the memory limit (Options.MaxBytes)") {
			t.Errorf("message does not say how to raise the limit: %s", msg)
		}
	}
}
