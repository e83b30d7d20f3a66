package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// README promises that CGO_ENABLED=0 go build -tags noopenblas gives a fully static binary
// that never loads OpenBLAS: no purego (which needs the dynamic loader) in its
// dependencies, and no program interpreter in the ELF file.
func TestNoOpenBLASBuildIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the static-build promise is about Linux ELF binaries")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command is not on PATH: %v", err)
	}
	env := append(os.Environ(), "CGO_ENABLED=0")
	list := exec.Command(goTool, "list", "-deps", "-tags", "noopenblas", ".")
	list.Env = env
	deps, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(deps)) {
		if strings.Contains(p, "purego") || p == "runtime/cgo" {
			t.Errorf("the noopenblas build depends on %s", p)
		}
	}
	bin := filepath.Join(t.TempDir(), "qtool")
	build := exec.Command(goTool, "build", "-tags", "noopenblas", "-o", bin, ".")
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the noopenblas binary is dynamically linked (%v segment)", p.Type)
		}
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("qtool version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "BLAS: go") {
		t.Fatalf("the noopenblas binary does not report the Go BLAS:\n%s", out)
	}
}
