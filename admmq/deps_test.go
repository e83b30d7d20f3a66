package admmq

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// The package doc promises pure math: no ONNX, no engine, no other qtool package. A
// dependency on them would tie the algorithms to one model format and pull the BLAS loader
// into every user, so this lists the package's dependencies and fails on any of them.
func TestPureMath(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command is not on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/qtool/qtool/admmq"
	sawSelf := false
	for _, path := range strings.Fields(string(out)) {
		switch {
		case path == self:
			sawSelf = true
		case strings.HasPrefix(path, "github.com/qtool/qtool/"), strings.Contains(path, "onnx"):
			t.Errorf("admmq depends on %s", path)
		}
	}
	if !sawSelf {
		t.Fatalf("go list did not list %s, so it did not list its dependencies:\n%s", self, out)
	}
}
