package quadratic

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// CI runs this package again under GODEBUG=cpu.avx512f=off to test the kernels of CPUs
// without AVX-512 on one that has it. That only works if CPU detection obeys GODEBUG, which
// this checks in a child process: the flag must turn the AVX-512 kernels off.
func TestGODEBUGTurnsOffAVX512(t *testing.T) {
	if os.Getenv("QUADRATIC_PRINT_CPU") == "1" {
		os.Stdout.WriteString("simd=" + map[bool]string{true: "on", false: "off"}[haveSIMD()] + "\n")
		return
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the assembly kernels are amd64 only")
	}
	child := func(godebug string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGODEBUGTurnsOffAVX512$", "-test.count=1")
		cmd.Env = append(os.Environ(), "QUADRATIC_PRINT_CPU=1", "GODEBUG="+godebug)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with GODEBUG=%q: %v\n%s", godebug, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "simd=") {
				return l
			}
		}
		t.Fatalf("child with GODEBUG=%q printed no simd= line:\n%s", godebug, out)
		return ""
	}
	if got := child("cpu.avx512f=off"); got != "simd=off" {
		t.Fatalf("GODEBUG=cpu.avx512f=off: %s, want simd=off", got)
	}
	if !strings.Contains(os.Getenv("GODEBUG"), "avx512f=off") {
		want := "simd=" + map[bool]string{true: "on", false: "off"}[haveSIMD()]
		if got := child(""); got != want {
			t.Fatalf("child without GODEBUG: %s, parent has %s", got, want)
		}
	}
}
