//go:build linux && (amd64 || arm64) && !noopenblas

package blas

import (
	"testing"

	"github.com/ebitengine/purego"
)

// TestThreadTimeoutReachesLibc checks that the OpenBLAS thread timeout is set where
// OpenBLAS reads it, in the C library's environment, and that a user's own value wins.
func TestThreadTimeoutReachesLibc(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("no glibc: %v", err)
	}
	fn, err := purego.Dlsym(h, "getenv")
	if err != nil {
		t.Fatal(err)
	}
	var getenv func(name string) string
	purego.RegisterFunc(&getenv, fn)

	const probe = "QTOOL_TEST_LIBC_ENV"
	setLibcEnv(probe, "4")
	if got := getenv(probe); got != "4" {
		t.Fatalf("libc getenv(%s) = %q after setLibcEnv, want 4", probe, got)
	}
	t.Setenv(probe+"_USER", "9")
	setLibcEnv(probe+"_USER", "4")
	if got := getenv(probe + "_USER"); got == "4" {
		t.Errorf("setLibcEnv overrode a value the user set")
	}
}
