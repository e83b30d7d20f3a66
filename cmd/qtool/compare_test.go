package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	for _, f := range []string{"compare.md", "compare.csv", "compare.json", "accuracy.png", "lagrangian.png", "residual.png", "dual.png"} {
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
	// The two algorithms differ: no warning, and one pair with an interval over the two
	// seeds and McNemar's test per seed.
	if len(res.Warnings) != 0 || len(res.Identical) != 0 || admm.IdenticalTo != "" {
		t.Errorf("different algorithms reported identical: %q %+v", res.Warnings, res.Identical)
	}
	if len(res.Pairs) != 1 {
		t.Fatalf("%d pairs, want 1", len(res.Pairs))
	}
	checkPair(t, res.Pairs[0], gd, admm, res.EvalCount)
	if p := res.Pairs[0]; p.CI95Pct == nil || p.CI95Pct[0] > p.MeanPct || p.CI95Pct[1] < p.MeanPct || p.Identical {
		t.Errorf("pair %+v: want an interval around the mean, not identical", p)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "compare.md"))
	if !strings.Contains(string(md), "paired t interval over the 2 seeds") || strings.Contains(string(md), "Warning") {
		t.Errorf("compare.md:\n%s", md)
	}
}

// checkPair checks a pair's statistics against its rows: the differences are the rows'
// accuracies seed by seed, and on each seed McNemar's discordant counts differ by
// exactly the difference in correct samples, so the per-sample results are those of the
// models the table reports.
func checkPair(t *testing.T, p *pairStat, a, b *compareRow, n int) {
	t.Helper()
	if p.A != a.Algo || p.B != b.Algo || len(p.DiffsPct) != len(a.Runs) || len(p.McNemar) != len(a.Runs) {
		t.Fatalf("pair %+v for %s − %s over %d seeds", p, a.Algo, b.Algo, len(a.Runs))
	}
	for k, m := range p.McNemar {
		ra, rb := a.Runs[k], b.Runs[k]
		if d := *ra.AccuracyPct - *rb.AccuracyPct; math.Abs(d-p.DiffsPct[k]) > 1e-3 {
			t.Errorf("seed %d: difference %.4f, rows give %.4f", ra.Seed, p.DiffsPct[k], d)
		}
		if want := math.Round((*ra.AccuracyPct - *rb.AccuracyPct) / 100 * float64(n)); float64(m.AOnly-m.BOnly) != want {
			t.Errorf("seed %d: McNemar %d/%d, but the accuracies differ by %v samples", ra.Seed, m.AOnly, m.BOnly, want)
		}
		if wp, _ := mcnemar(m.AOnly, m.BOnly); m.P != wp || m.Seed != ra.Seed {
			t.Errorf("seed %d: %+v", ra.Seed, m)
		}
	}
}

// TestCompareWarnsOnIdenticalWeights: at the default ρ on the embedded fmnist-mlp, PGD
// and ADMM-Q export the same binary weights (issue 15); compare says so once, in the
// table, the JSON and stderr, and the pair's statistics show no difference. With one seed
// the interval is unavailable, and says so.
func TestCompareWarnsOnIdenticalWeights(t *testing.T) {
	dir := t.TempDir()
	out, code, err := runArgs(t, "compare", "--algos", "pgd,admm-q", "--seeds", "1", "--iters", "2", "--inner-epochs", "1", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if n := strings.Count(out, "exported the same binary weights on every seed"); n != 2 { // stderr and the table
		t.Errorf("the warning appears %d times in the output, want twice (stderr, table):\n%s", n, out)
	}
	if !strings.Contains(out, "| i-admm-q |") || !strings.Contains(out, "**pgd** (every seed)") || !strings.Contains(out, "unavailable (1 seed)") {
		t.Errorf("table:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res compareResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || len(res.Identical) != 1 || !slices.Equal(res.Identical[0].Algos, []string{"pgd", "i-admm-q"}) || res.Rows[1].IdenticalTo != "pgd" {
		t.Fatalf("warnings %q, groups %+v", res.Warnings, res.Identical)
	}
	if res.Rows[0].Runs[0].WeightsSHA256 != res.Rows[1].Runs[0].WeightsSHA256 || res.Rows[0].Runs[0].WeightsSHA256 == "" {
		t.Error("the runs' weight digests differ")
	}
	p := res.Pairs[0]
	checkPair(t, p, res.Rows[0], res.Rows[1], res.EvalCount)
	if !p.Identical || p.MeanPct != 0 || p.CI95Pct != nil || p.McNemar[0].AOnly != 0 || p.McNemar[0].BOnly != 0 || p.McNemar[0].P != 1 {
		t.Errorf("pair of identical networks: %+v", p)
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
