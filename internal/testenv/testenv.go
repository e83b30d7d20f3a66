// Package testenv decides what a test does when an optional external asset is missing —
// the onnxruntime library, Fashion-MNIST, the ONNX conformance data, OpenBLAS or Debian's
// python3-onnx: it skips with a message saying how to install the asset, except under
// CI=true, where every asset must be installed and the test fails instead.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI, where optional assets are mandatory.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t with the formatted message, or fails it under CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal("CI=true requires it: " + msg)
		return
	}
	t.Skip(msg)
}

// RequireFile skips t (fails it under CI) when path does not exist; install says how to
// get it.
func RequireFile(t testing.TB, path, install string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, "%s is missing; install it with: %s", path, install)
	}
}
