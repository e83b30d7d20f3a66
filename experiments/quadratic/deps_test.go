package quadratic

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// The package doc promises that the experiment loads no shared library: its results are
// the same bits on every CPU only because its kernels are its own, and a dynamically loaded
// BLAS would bring a summation order chosen per CPU. This walks the dependencies of the
// package as built now (cgo on or off, whatever the environment says) and fails on
// anything that can load code at run time, and on the engine, whose BLAS loader is
// qtool's one.
func TestNoDynamicLoading(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sawAdmmq := false
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, cgoFiles, _ := strings.Cut(l, " ")
		sawAdmmq = sawAdmmq || path == "github.com/qtool/qtool/admmq"
		switch {
		case cgoFiles != "0":
			t.Errorf("dependency %s has cgo files", path)
		case path == "runtime/cgo", path == "plugin", strings.Contains(path, "purego"):
			t.Errorf("dependency %s can load shared libraries", path)
		case strings.HasPrefix(path, "github.com/qtool/qtool/engine"), strings.HasPrefix(path, "github.com/qtool/qtool/onnxio"):
			t.Errorf("dependency %s: the experiment needs neither the engine nor ONNX", path)
		}
	}
	if !sawAdmmq {
		t.Fatalf("go list did not list package admmq, so it did not list this package's dependencies:\n%s", out)
	}
}
