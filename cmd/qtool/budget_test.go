package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio"
)

const (
	cnnModel = "../../testmodels/fmnist-cnn.onnx"
)

// TestAnalyzeCommand: analyze's JSON lists the CNN's three weights in graph order with a
// loss per grid that is the full-precision accuracy less the projected one, each weight's
// share of the parameter bytes as the file's tensors give it, the all-at-once row, and
// the PNG is written.
func TestAnalyzeCommand(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "s.png")
	out, errs, code := runSplit(t, "analyze", cnnModel, "--data", calibData, "--json", "--plot", plot, "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r analysisJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	m, err := onnxio.Load(cnnModel)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range m.Params() {
		total += onnxio.TensorBytes(p.Tensor)
	}
	names := []string{"conv1.weight", "conv2.weight", "fc.weight"}
	if len(r.Layers) != 3 || r.Metric != "accuracy" || r.ModelBytes != total || len(r.All) != 5 {
		t.Fatalf("%d layers, metric %s, %d model bytes (want %d), %d all-at-once rows", len(r.Layers), r.Metric, r.ModelBytes, total, len(r.All))
	}
	fp := *r.FullPrecision.AccuracyPct
	for i, l := range r.Layers {
		p, _ := m.Param(l.Name)
		if l.Name != names[i] || l.FloatBytes != onnxio.TensorBytes(p.Tensor) || math.Abs(l.SharePct-100*float64(l.FloatBytes)/float64(total)) > 1e-4 {
			t.Errorf("layer %d: %s, %d bytes, %.4f %%", i, l.Name, l.FloatBytes, l.SharePct)
		}
		if len(l.Grids) != 5 {
			t.Fatalf("%s: %d grids", l.Name, len(l.Grids))
		}
		for _, g := range l.Grids {
			s := g.Score
			if s.AccuracyPct == nil || s.Positions != r.ValidationSamples || math.Abs(g.Loss-(fp-*s.AccuracyPct)) > 1e-3 {
				t.Errorf("%s on %s: loss %v, accuracy %v of %d", l.Name, g.Grid, g.Loss, s.AccuracyPct, s.Positions)
			}
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if img, err := png.Decode(f); err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("plot: %v", err)
	}
}

// TestBinarizeBudget: --budget writes a file whose storage report gives every weight the
// grid of the chosen trial, records the trials, and measures the file on the held-out
// part once.
func TestBinarizeBudget(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "b.onnx")
	out, errs, code := runSplit(t, "binarize", cnnModel, "--data", calibData, "-o", o, "--budget", "--max-drop", "100",
		"--iters", "1", "--inner-epochs", "1", "--json", "-q", "--report", filepath.Join(dir, "rep"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s binarizeSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	b := s.Budget
	if b == nil || b.Chosen != 1 || len(b.Trials) != 1 || !b.Trials[0].Met || s.Grid != "mixed" && s.Grid != "binary" {
		t.Fatalf("budget %+v, grid %s", b, s.Grid)
	}
	// 100 pp allows everything: every weight on the smallest grid, binary.
	for _, ch := range b.Trials[0].Choices {
		if ch.Grid != "binary" || ch.Reason == "" {
			t.Errorf("%s on %s (%s), want binary", ch.Weight, ch.Grid, ch.Reason)
		}
	}
	// Without --validation, --budget sets half the calibration data apart for validation
	// (binarize.BudgetValidation), where a run without --budget keeps most for training.
	if v, tr := s.Splits.Validation, s.Splits.Train; v < tr-1 || v > tr+1 {
		t.Errorf("splits: %d validation, %d training; want half of the calibration data each", v, tr)
	}
	if b.Trials[0].FileBytes != s.OutputBytes || s.AccuracySplit != "held-out" {
		t.Errorf("trial file %d B, output %d B, accuracy on %s", b.Trials[0].FileBytes, s.OutputBytes, s.AccuracySplit)
	}
	grids := map[string]string{}
	for _, tr := range s.Storage.Tensors {
		if tr.Binarized {
			grids[tr.Name] = tr.Grid
		}
	}
	if len(grids) != 3 || grids["fc.weight"] != "binary" {
		t.Errorf("report grids %v", grids)
	}
	md, err := os.ReadFile(filepath.Join(dir, "rep.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Budget") || !strings.Contains(string(md), "| grid | why |") {
		t.Errorf("the Markdown report has no budget section or grid column:\n%s", md)
	}
}

// TestBinarizeBudgetMissed: a constraint no trial can meet exits 3, writes nothing and
// lists the trials, each relaxing a weight.
func TestBinarizeBudgetMissed(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "b.onnx")
	out, errs, code := runSplit(t, "binarize", cnnModel, "--data", calibData, "-o", o, "--budget", "--min-sqnr", "200",
		"--budget-grids", "binary,int8", "--iters", "1", "--inner-epochs", "1", "--max-trials", "2", "--json", "-q")
	if code != exitGateFail {
		t.Fatalf("exit %d, want %d: %s", code, exitGateFail, errs)
	}
	if _, err := os.Stat(o); !os.IsNotExist(err) {
		t.Errorf("output written: %v", err)
	}
	var r struct {
		Budget budgetJSON `json:"budget"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	// 200 dB: no weight fits even on int8, so the first trial quantizes nothing and there
	// is nothing to relax.
	if len(r.Budget.Trials) != 1 || r.Budget.Trials[0].Met || r.Budget.Chosen != 0 {
		t.Errorf("trials %+v", r.Budget.Trials)
	}
}

// TestGateNamesCostlyLayers: when --max-drop fails, the error names the weights that cost
// the most alone on the validation split and the --keep command, and the JSON has them.
func TestGateNamesCostlyLayers(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "g.onnx")
	out, errs, code := runSplit(t, "binarize", cnnModel, "--data", calibData, "-o", o, "--max-drop", "0", "--keep", "fc.weight",
		"--iters", "1", "--inner-epochs", "1", "--json", "-q")
	if code != exitGateFail {
		t.Fatalf("exit %d, want %d: %s", code, exitGateFail, errs)
	}
	var s binarizeSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(s.CostlyLayers) == 0 || !strings.Contains(s.KeepCommand, "--keep fc.weight,"+s.CostlyLayers[0].Weight) {
		t.Fatalf("costly %+v, command %q", s.CostlyLayers, s.KeepCommand)
	}
	for i, l := range s.CostlyLayers {
		if l.Weight == "fc.weight" || l.Grid != "binary" || l.DropPP <= 0 || i > 0 && l.DropPP > s.CostlyLayers[i-1].DropPP {
			t.Errorf("costly %d: %+v", i, l)
		}
	}
	if !strings.Contains(errs, "to keep the costliest in full precision: qtool binarize") {
		t.Errorf("stderr does not give the command:\n%s", errs)
	}
}

// TestBudgetConfidenceFlag: --budget-confidence outside [0, 100) is a one-line usage
// error before anything runs.
func TestBudgetConfidenceFlag(t *testing.T) {
	for _, v := range []string{"100", "-5"} {
		_, errs, code := runSplit(t, "binarize", cnnModel, "--data", calibData, "-o", filepath.Join(t.TempDir(), "b.onnx"),
			"--budget", "--max-drop", "1", "--budget-confidence", v)
		if code != exitUsage || !strings.Contains(errs, "--budget-confidence") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("--budget-confidence %s: exit %d, stderr %q; want %d and one line naming the flag", v, code, errs, exitUsage)
		}
	}
}
