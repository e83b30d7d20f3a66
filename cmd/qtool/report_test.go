package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"

	"github.com/qtool/qtool/internal/testenv"
)

// writeBinarized exports testmodels/fmnist-mlp.onnx with every weight on ±1 (sign)
// and returns the original's and the export's paths.
func writeBinarized(t *testing.T) (orig, quant string) {
	t.Helper()
	orig = filepath.Join("..", "..", "testmodels", "fmnist-mlp.onnx")
	m, err := onnxio.Load(orig)
	if err != nil {
		testenv.Missing(t, "%v: run testmodels/make.py", err)
	}
	var ws []export.Weight
	for name, c := range m.ParamRoles() {
		if c.Role != onnxio.RoleWeight {
			continue
		}
		p, _ := m.Param(name)
		tt, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(tt.Float))
		for i, x := range tt.Float {
			v[i] = 1
			if x < 0 {
				v[i] = -1
			}
		}
		ws = append(ws, export.Weight{Name: name, Values: v, Grid: export.Grid{Levels: []int{-1, 1}}})
	}
	quant = filepath.Join(t.TempDir(), "mlp-1bit.onnx")
	if err := export.WriteFile(quant, m, ws, export.Options{}); err != nil {
		t.Fatal(err)
	}
	return orig, quant
}

func TestReportCommand(t *testing.T) {
	orig, quant := writeBinarized(t)
	size := func(p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	out, code, err := runQtool(t, "report", "--json", orig, quant)
	if code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep export.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if rep.Totals.FileBytesBefore != size(orig) || rep.Totals.FileBytesAfter != size(quant) {
		t.Fatalf("file sizes %d → %d, disk has %d → %d", rep.Totals.FileBytesBefore, rep.Totals.FileBytesAfter, size(orig), size(quant))
	}
	text, code, err := runQtool(t, "report", orig, quant)
	if code != 0 || !strings.Contains(text, export.RuntimeNote) || !strings.Contains(text, "fc1.weight") {
		t.Fatalf("exit %d, %v:\n%s", code, err, text)
	}
	md, code, _ := runQtool(t, "report", "--markdown", orig, quant)
	if code != 0 || !strings.Contains(md, "| `fc1.weight` |") {
		t.Fatalf("markdown: exit %d:\n%s", code, md)
	}
	saved := filepath.Join(t.TempDir(), "sizes.json")
	if _, code, err := runQtool(t, "report", "--out", saved, orig, quant); code != 0 {
		t.Fatalf("--out: exit %d: %v", code, err)
	}
	for _, p := range []string{saved, strings.TrimSuffix(saved, ".json") + ".md"} {
		if size(p) == 0 {
			t.Fatalf("%s is empty", p)
		}
	}
}

func TestReportCommandErrors(t *testing.T) {
	orig, quant := writeBinarized(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"report", orig}, 2, "two model files"},
		{[]string{"report", "--json", "--markdown", orig, quant}, 2, "choose one"},
		{[]string{"report", orig, filepath.Join(t.TempDir(), "missing.onnx")}, 1, "missing.onnx"},
		// A model that is not the other's export: its weights are nowhere.
		{[]string{"report", quant, orig}, 1, "compare a model with its own export"},
	} {
		_, code, err := runQtool(t, c.args...)
		if code != c.code || err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: exit %d, err %v; want exit %d and one line mentioning %q", c.args, code, err, c.code, c.want)
		}
	}
}
