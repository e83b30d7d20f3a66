package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// TestCompareADMMBeatsGDProj runs compare on the embedded default (fmnist-mlp, 800
// calibration / 200 held-out images) with a small budget and the BatchNorm statistics
// kept as training left them: ADMM-Q's binary network must be more accurate on held-out
// data and have a lower loss f(y) at its binary point than GD+Proj's, the paper's finding
// that fitting y beats projecting a fine-tuned x once. It also checks compare's outputs.
func TestCompareADMMBeatsGDProj(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runArgs(t, "compare", "--algos", "gd-proj,admm-q", "--seeds", "2", "--rho-growth", "2",
		"--no-bn-recalib", "--out", dir, "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	var res compareResult
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Rows) != 2 || res.Rows[0].Algo != string(admmq.GDProj) || res.Rows[1].Algo != string(admmq.IADMMQ) {
		t.Fatalf("rows %+v", res.Rows)
	}
	gd, admm := res.Rows[0], res.Rows[1]
	t.Logf("GD+Proj %.2f ± %.2f %%, f(y) %.4f; ADMM-Q %.2f ± %.2f %%, f(y) %.4f", gd.AccMeanPct, gd.AccStdPct, gd.FYMean, admm.AccMeanPct, admm.AccStdPct, admm.FYMean)
	if admm.AccMeanPct <= gd.AccMeanPct {
		t.Errorf("ADMM-Q accuracy %.4f %% is not above GD+Proj's %.4f %%", admm.AccMeanPct, gd.AccMeanPct)
	}
	if admm.FYMean >= gd.FYMean {
		t.Errorf("ADMM-Q's f(y) %.4f is not below GD+Proj's %.4f", admm.FYMean, gd.FYMean)
	}
	for _, r := range res.Rows {
		if len(r.Runs) != 2 || len(r.Runs[0].Iterations) != 8 {
			t.Errorf("%s: %d runs, want 2 with 8 iterations each", r.Algo, len(r.Runs))
		}
	}
	for _, f := range []string{"compare.md", "compare.csv", "compare.json", "accuracy.png", "lagrangian.png", "residual.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if strings.HasSuffix(f, ".png") && string(b[1:4]) != "PNG" {
			t.Errorf("%s is not a PNG", f)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "compare.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 1+4 {
		t.Errorf("compare.csv has %d lines, want a header and 4 runs", lines)
	}
}

func TestCompareUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"compare", "--algos", "admm-x"}, {"compare", "--seeds", "0"}, {"compare", "--algos", ","},
	} {
		if _, code, _ := runArgs(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
