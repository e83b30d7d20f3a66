package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
)

const (
	digitsModel = "../../testmodels/digits-mlp.onnx"
	digitsData  = "../../testmodels/digits-test.npz"
	fmnistModel = "../../testmodels/fmnist-mlp.onnx"
	fmnistCalib = "../../testmodels/fmnist-calib.npz"
)

// small is a budget that keeps each run well under a second on the test models.
var smallBudget = []string{"--iters", "2", "--inner-epochs", "2", "-q"}

func binArgs(model, data, out string, extra ...string) []string {
	a := []string{"binarize", model, "--data", data, "-o", out}
	a = append(a, smallBudget...)
	return append(a, extra...)
}

// runArgsCtx is runArgs with a context, for cancellation.
func runArgsCtx(ctx context.Context, args ...string) (string, int, error) {
	app := newApp()
	var out strings.Builder
	app.Writer, app.ErrWriter = &out, &out
	err := run(ctx, app, append([]string{"qtool"}, args...))
	return out.String(), exitCode(err), err
}

// paramValues decodes every parameter of a model file.
func paramValues(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, p := range m.Params() {
		tn, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = tn.Float
	}
	return out
}

// engineLogits runs a model file in the engine over the first n samples of data.
func engineLogits(t *testing.T, path, data string, n int) ([]float32, []int64, []float32) {
	t.Helper()
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	l := &loaded{Path: path, Model: m, Graph: g}
	d, err := calib.Open(data, calib.Options{Input: l.input().Input})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n = min(n, d.Len())
	sh := d.SampleShape()
	size := 1
	shape := []int{n}
	ishape := []int64{int64(n)}
	for _, s := range sh {
		size *= int(s)
		shape = append(shape, int(s))
		ishape = append(ishape, s)
	}
	x := make([]float32, n*size)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if err := d.Read(idx, x, nil); err != nil {
		t.Fatal(err)
	}
	outs, err := g.Forward(&engine.Context{Workers: 1}, engine.NewFloat(shape, x))
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), outs[0].F...), ishape, x
}

// TestBinarizeDigitsOnGridAndRuntimes binarizes digits-mlp (opset 9, Constant-node
// weights): the float export holds exactly ±1 in both weights, the packed export computes
// bit for bit the same logits in the engine, and onnxruntime runs the packed file to the
// engine's outputs. fc2 has no normalisation after it, so --grid binary warns.
func TestBinarizeDigitsOnGridAndRuntimes(t *testing.T) {
	dir := t.TempDir()
	packed, float := filepath.Join(dir, "p.onnx"), filepath.Join(dir, "f.onnx")
	out, code, err := runArgs(t, binArgs(digitsModel, digitsData, packed, "--grid", "binary")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if !strings.Contains(out, "fc2.weight") || !strings.Contains(out, "binary-channel") {
		t.Errorf("no warning about fc2.weight lacking normalisation:\n%s", out)
	}
	if out, code, err := runArgs(t, binArgs(digitsModel, digitsData, float, "--format", "float", "--grid", "binary")...); code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	vals := paramValues(t, float)
	for _, name := range []string{"fc1.weight", "fc2.weight"} {
		w := vals[name]
		if len(w) == 0 {
			t.Fatalf("%s missing from the float export", name)
		}
		for i, v := range w {
			if v != 1 && v != -1 {
				t.Fatalf("%s[%d] = %v, not ±1", name, i, v)
			}
		}
	}
	lp, shape, x := engineLogits(t, packed, digitsData, 450)
	lf, _, _ := engineLogits(t, float, digitsData, 450)
	for i := range lp {
		if lp[i] != lf[i] {
			t.Fatalf("packed and float exports differ at logit %d: %v vs %v", i, lp[i], lf[i])
		}
	}
	ortref.Require(t)
	res, err := ortref.RunFile(packed, []ortref.Tensor{{Name: "input", Shape: shape, Data: x}})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range res[0].Data {
		if d := math.Abs(float64(v) - float64(lp[i])); d > 1e-4*(1+math.Abs(float64(lp[i]))) {
			t.Fatalf("onnxruntime logit %d = %v, engine %v", i, v, lp[i])
		}
	}
}

// TestBinarizeGrids exports every grid in float form and checks each weight lies on its
// levels times a per-channel scale (a single scale per output row of the Gemm weight).
func TestBinarizeGrids(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		grid   string
		levels int // largest level magnitude
	}{{"binary-channel", 1}, {"ternary", 1}, {"int2", 1}, {"int4", 7}, {"int8", 127}} {
		out := filepath.Join(dir, tc.grid+".onnx")
		if o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--format", "float", "--grid", tc.grid)...); code != 0 {
			t.Fatalf("%s: exit %d: %v\n%s", tc.grid, code, err, o)
		}
		w := paramValues(t, out)["fc1.weight"] // [64 out, 64 in], transB=1: rows are channels
		for r := 0; r < 64; r++ {
			row := w[r*64 : (r+1)*64]
			var alpha float32
			for _, v := range row {
				alpha = max(alpha, float32(math.Abs(float64(v))))
			}
			alpha /= float32(tc.levels)
			for _, v := range row {
				l := math.Round(float64(v / alpha))
				if alpha == 0 || float32(l)*alpha != v || math.Abs(l) > float64(tc.levels) || (tc.grid == "binary-channel" && l == 0) {
					t.Fatalf("%s: row %d value %v is not a level of α = %v", tc.grid, r, v, alpha)
				}
			}
		}
	}
}

// TestBinarizeDeterministic: two runs with the same seed give the same bytes (fmnist-mlp
// has Dropout, so the training stream matters), another seed other bytes.
func TestBinarizeDeterministic(t *testing.T) {
	dir := t.TempDir()
	var files [3][]byte
	for i, seed := range []string{"7", "7", "8"} {
		out := filepath.Join(dir, "o"+string(rune('a'+i))+".onnx")
		if o, code, err := runArgs(t, binArgs(fmnistModel, fmnistCalib, out, "--limit", "300", "--algo", "admm-r", "--seed", seed)...); code != 0 {
			t.Fatalf("exit %d: %v\n%s", code, err, o)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two runs with seed 7 wrote different files")
	}
	if bytes.Equal(files[0], files[2]) {
		t.Error("seeds 7 and 8 wrote the same file")
	}
}

// TestBinarizeResume interrupts a run once its first checkpoint is on disk: the exit code
// is 130 and no output exists; resuming from the checkpoint writes exactly the bytes of an
// uninterrupted run.
func TestBinarizeResume(t *testing.T) {
	for _, algo := range []string{"admm-q", "pgd"} {
		t.Run(algo, func(t *testing.T) {
			dir := t.TempDir()
			full, part, ck := filepath.Join(dir, "full.onnx"), filepath.Join(dir, "part.onnx"), filepath.Join(dir, "ck")
			args := []string{"binarize", fmnistModel, "--data", fmnistCalib, "--limit", "400", "--batch-size", "64", "--iters", "6", "--inner-epochs", "1", "-q", "--algo", algo}
			if o, code, err := runArgs(t, append(args, "-o", full)...); code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, o)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ctx.Err() == nil {
					if _, err := os.Stat(ck); err == nil {
						cancel()
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			o, code, err := runArgsCtx(ctx, append(args, "-o", part, "--checkpoint", ck)...)
			cancel()
			<-done
			if code != exitCancelled {
				t.Skipf("the run finished (exit %d) before it could be interrupted: %v\n%s", code, err, o)
			}
			if _, err := os.Stat(part); !os.IsNotExist(err) {
				t.Fatalf("an interrupted run left %s", part)
			}
			if o, code, err := runArgs(t, append(args, "-o", part, "--resume", ck)...); code != 0 {
				t.Fatalf("resume: exit %d: %v\n%s", code, err, o)
			}
			a, _ := os.ReadFile(full)
			b, _ := os.ReadFile(part)
			if !bytes.Equal(a, b) {
				t.Error("the resumed run wrote other bytes than the uninterrupted one")
			}
		})
	}
}

// TestBinarizeGate: the gate fails (exit 3, output kept) just below the measured drop and
// passes just above it.
func TestBinarizeGate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "g.onnx")
	o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, o)
	}
	var s binarizeSummary
	if err := json.Unmarshal([]byte(o[strings.Index(o, "{"):]), &s); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if s.DropPP < 0.5 {
		t.Fatalf("drop %.2f pp: the gate test needs a run that loses accuracy", s.DropPP)
	}
	below := s.DropPP - 0.25
	if _, code, _ := runArgs(t, binArgs(digitsModel, digitsData, out, "--max-drop", ftoa(below))...); code != exitGateFail {
		t.Errorf("--max-drop %.2f with a drop of %.2f: exit %d, want 3", below, s.DropPP, code)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("a failed gate must keep the output: %v", err)
	}
	if _, code, _ := runArgs(t, binArgs(digitsModel, digitsData, out, "--max-drop", ftoa(s.DropPP+0.25))...); code != 0 {
		t.Errorf("--max-drop above the drop: exit %d, want 0", code)
	}
}

func ftoa(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestBinarizeJSON checks the --json summary's schema: logs stay off stdout.
func TestBinarizeJSON(t *testing.T) {
	dir := t.TempDir()
	app := newApp()
	var stdout, stderr strings.Builder
	app.Writer, app.ErrWriter = &stdout, &stderr
	args := append([]string{"qtool"}, binArgs(digitsModel, digitsData, filepath.Join(dir, "j.onnx"), "--json", "--report", filepath.Join(dir, "rep"))...)
	if err := app.Run(interspersed(app, args)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout.String()), &m); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
	}
	for key, kind := range map[string]string{
		"model": "string", "output": "string", "algo": "string", "grid": "string", "format": "string", "loss": "string",
		"seed": "number", "targets": "array", "labelled": "bool", "calib_samples": "number", "eval_samples": "number",
		"fp_accuracy_pct": "number", "binary_accuracy_pct": "number", "agreement_pct": "number", "drop_pct": "number",
		"gate_passed": "bool", "input_bytes": "number", "output_bytes": "number", "seconds": "number",
		"history": "array", "storage": "object", "bn_recalibrated": "bool",
	} {
		v, ok := m[key]
		if !ok {
			t.Errorf("summary lacks %q", key)
			continue
		}
		got := map[bool]string{}[false]
		switch v.(type) {
		case string:
			got = "string"
		case float64:
			got = "number"
		case bool:
			got = "bool"
		case []any:
			got = "array"
		case map[string]any:
			got = "object"
		}
		if got != kind {
			t.Errorf("%s is a %s, want %s", key, got, kind)
		}
	}
	// A model of two weights keeps none by default, --keep sensitive included.
	if _, ok := m["sensitive"]; ok {
		t.Errorf("the two-weight model's default keep measured sensitivities: %v", m["sensitive"])
	}
	// One unit: percent, rounded to 4 decimals, in every _pct field (history included).
	if bad := regexp.MustCompile(`"[a-z_]+_pct": -?[0-9]+\.[0-9]{5,}`).FindString(stdout.String()); bad != "" {
		t.Errorf("unrounded percentage in the JSON: %s", bad)
	}
	fp, bin := m["fp_accuracy_pct"].(float64), m["binary_accuracy_pct"].(float64)
	if fp <= 1 || fp > 100 || bin <= 1 || bin > 100 {
		t.Errorf("accuracies %v and %v: want percentages", fp, bin)
	}
	if d := m["drop_pct"].(float64); math.Abs(d-(fp-bin)) > 1e-3 {
		t.Errorf("drop_pct %v is not fp_accuracy_pct − binary_accuracy_pct = %v", d, fp-bin)
	}
	for _, old := range []string{"fp_accuracy", "binary_accuracy", "agreement", "drop_pp"} {
		if _, ok := m[old]; ok {
			t.Errorf("the JSON still has %q in another unit", old)
		}
	}
	if h := m["history"].([]any); len(h) != 2 {
		t.Errorf("history has %d iterations, want 2", len(h))
	}
	if m["calib_samples"].(float64)+m["eval_samples"].(float64) != 450 {
		t.Errorf("calibration and held-out samples do not add up to the 450 of the data")
	}
	for _, ext := range []string{".json", ".md"} {
		if _, err := os.Stat(filepath.Join(dir, "rep"+ext)); err != nil {
			t.Errorf("--report: %v", err)
		}
	}
}

// TestBinarizeDistillWithoutLabels: CSV data without a label column train by
// distillation and report agreement, not accuracy.
func TestBinarizeDistillWithoutLabels(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../testmodels/digits-test.csv")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(src)), "\n") {
		b.WriteString(line[:strings.LastIndex(line, ",")] + "\n")
	}
	data := filepath.Join(dir, "x.csv")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	o, code, err := runArgs(t, binArgs(digitsModel, data, filepath.Join(dir, "d.onnx"), "--json", "--grid", "binary-channel")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, o)
	}
	var s binarizeSummary
	if err := json.Unmarshal([]byte(o[strings.Index(o, "{"):]), &s); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if s.Labelled || s.Loss != "distill" || s.BinAccuracy != nil || s.FPAccuracy != nil {
		t.Errorf("labelled %v, loss %s, accuracies %v %v: want distillation and no accuracy", s.Labelled, s.Loss, s.BinAccuracy, s.FPAccuracy)
	}
	if s.Agreement < 80 {
		t.Errorf("agreement with the full-precision model %.3f %% after distillation", s.Agreement)
	}
	if _, code, _ := runArgs(t, binArgs(digitsModel, data, filepath.Join(dir, "e.onnx"), "--loss", "ce")...); code != exitInput {
		t.Errorf("--loss ce without labels: exit %d, want 1", code)
	}
}

func TestBinarizeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "u.onnx")
	for _, extra := range [][]string{
		{"--algo", "sgd"}, {"--grid", "int3"}, {"--iters", "0"}, {"--loss", "l1"}, {"--optimizer", "lbfgs"},
		{"--lr-schedule", "poly"}, {"--format", "zip"}, {"--keep", "first", "--only", "fc1.weight"},
		{"--keep", "nosuch.weight"}, {"--max-drop", "-1"}, {"--rho", "0"}, {"--split", "0.5:0.5", "--eval-data", digitsData},
	} {
		o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, extra...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want 2\n%s", extra, code, err, o)
		}
	}
	if _, code, _ := runArgs(t, "binarize", digitsModel, digitsModel, "--data", digitsData); code != exitUsage {
		t.Errorf("two models: exit %d, want 2", code)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a usage error wrote the output")
	}
}

func TestBinarizeInputErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.onnx")
	if err := os.WriteFile(bad, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.onnx")
	for _, tc := range []struct{ model, data, want string }{
		{filepath.Join(dir, "missing.onnx"), digitsData, "missing.onnx"},
		{bad, digitsData, "bad.onnx"},
		{digitsModel, filepath.Join(dir, "nodata.npz"), "nodata.npz"},
		{digitsModel, fmnistCalib, "fmnist-calib.npz"}, // 784 features for a 64-input model
	} {
		_, code, err := runArgs(t, binArgs(tc.model, tc.data, out)...)
		if code != exitInput || err == nil {
			t.Errorf("%s / %s: exit %d, want 1", tc.model, tc.data, code)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
			t.Errorf("error %q: want one line naming %s", msg, tc.want)
		}
	}
	if _, code, _ := runArgs(t, binArgs(digitsModel, digitsData, out, "--resume", bad)...); code != exitInput {
		t.Errorf("--resume with a non-checkpoint: exit %d, want 1", code)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a failed run wrote the output")
	}
}

// TestAlgoAlias: --algo admm-q is I-ADMM-Q: the same file as --algo i-admm-q, and the
// summary names the canonical i-admm-q.
func TestAlgoAlias(t *testing.T) {
	dir := t.TempDir()
	var files [][]byte
	for _, algo := range []string{"admm-q", "i-admm-q"} {
		out := filepath.Join(dir, algo+".onnx")
		o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--algo", algo, "--json")...)
		if code != 0 {
			t.Fatalf("--algo %s: exit %d: %v\n%s", algo, code, err, o)
		}
		if !strings.Contains(o, `"algo": "i-admm-q"`) {
			t.Errorf("--algo %s: the summary does not name i-admm-q:\n%s", algo, o)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("--algo admm-q and --algo i-admm-q wrote different files")
	}
}

// TestBinarizeSensitive: on fmnist-resnet with its labelled calibration subset, the default
// keep measures every weight the other keeps leave; what it kept was significant, is no
// longer a target, and the text summary names it.
func TestBinarizeSensitive(t *testing.T) {
	dir := t.TempDir()
	args := []string{"binarize", "../../testmodels/fmnist-resnet.onnx", "--data", "../../testmodels/fmnist-calib.npz",
		"-o", filepath.Join(dir, "r.onnx"), "--iters", "1", "--inner-epochs", "1", "-q"}
	o, code, err := runArgs(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, o)
	}
	var sum binarizeSummary
	if err := json.Unmarshal([]byte(o[strings.Index(o, "{"):]), &sum); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	sv := sum.Sensitive
	if sv == nil || !sv.Measured || len(sv.Layers) != len(sum.Targets)+len(sv.Kept) {
		t.Fatalf("sensitive %+v with targets %v: want measured, every candidate a target or kept", sv, sum.Targets)
	}
	var kept, total int64
	for _, l := range sv.Layers {
		total += l.Params
		if l.Kept {
			kept += l.Params
		}
		if l.Kept != slices.Contains(sv.Kept, l.Name) || l.Kept == slices.Contains(sum.Targets, l.Name) || (l.Kept && l.LowerPct <= 0) || l.LowerPct > l.DropPct {
			t.Errorf("sensitive layer %+v (kept %v, targets %v)", l, sv.Kept, sum.Targets)
		}
	}
	if float64(kept) > 0.25*float64(total) {
		t.Errorf("kept %d of %d values, more than the default share", kept, total)
	}
	if len(sv.Kept) == 0 {
		t.Fatalf("nothing kept on fmnist-resnet (layers %+v): its first block's weights cost several points alone", sv.Layers)
	}
	o, code, err = runArgs(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, o)
	}
	if !strings.Contains(o, "kept         "+sv.Kept[0]) {
		t.Errorf("the summary does not name the kept weight %s:\n%s", sv.Kept[0], o)
	}
	// Without -q the measurement, which runs before the first epoch, is reported.
	o, code, err = runArgs(t, args[:len(args)-1]...)
	if want := fmt.Sprintf("--keep sensitive: %d weights scored", len(sv.Layers)); code != 0 || !strings.Contains(o, want) {
		t.Errorf("exit %d (%v); want %q in:\n%s", code, err, want, o)
	}

	// The same images without their labels: the drops are the ones the full-precision
	// model's probabilities expect, and its first block's weights are still kept.
	unl := filepath.Join(dir, "x-only.npz")
	npzWithout(t, "../../testmodels/fmnist-calib.npz", unl, "y.npy")
	uargs := slices.Clone(args)
	uargs[3] = unl
	us := binarizeJSON(t, 0, uargs[1:len(uargs)-1]...).Sensitive
	if us == nil || !us.Measured || us.Basis != "expected" || len(us.Layers) != len(sv.Layers) || len(us.Kept) == 0 {
		t.Fatalf("without labels: sensitive %+v; want measured on expected drops, every weight scored, something kept", us)
	}
	for _, l := range us.Layers {
		if l.DropPct != l.ExpectedPct || l.DropPct < 0 || (l.DropPct > 0) != (l.DisagreePct > 0) || (l.Kept && l.LowerPct <= 0) {
			t.Errorf("without labels: sensitive layer %+v", l)
		}
	}
	o, code, err = runArgs(t, uargs...)
	if code != 0 || !strings.Contains(o, "kept         "+us.Kept[0]) || !strings.Contains(o, "(--keep sensitive; no labels)") {
		t.Errorf("exit %d (%v): the summary does not say the kept weights were chosen without labels:\n%s", code, err, o)
	}
}

// npzWithout copies the .npz archive src to dst without its member name.
func npzWithout(t *testing.T, src, dst, name string) {
	t.Helper()
	r, err := zip.OpenReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	w := zip.NewWriter(f)
	for _, m := range r.File {
		if m.Name == name {
			continue
		}
		if err := w.Copy(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBinarizeSignsLine: the summary's signs line states the level changes the JSON
// history records, summed over the iterations, and tells an ADMM run that changed none
// how to let them move; a baseline that changed none gets no ADMM advice.
func TestBinarizeSignsLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
		moved bool // whether the history must record level changes
		hint  bool
	}{
		{"ste", []string{"--algo", "ste"}, true, false},
		{"admm-q held by a large rho", []string{"--rho", "100"}, false, true},
		{"pgd", []string{"--algo", "pgd"}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			text, code, err := runArgs(t, binArgs(fmnistModel, fmnistCalib, filepath.Join(dir, "t.onnx"), c.extra...)...)
			if code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, text)
			}
			app := newApp()
			var stdout, stderr strings.Builder
			app.Writer, app.ErrWriter = &stdout, &stderr
			args := binArgs(fmnistModel, fmnistCalib, filepath.Join(dir, "j.onnx"), append(c.extra, "--json")...)
			if err := run(context.Background(), app, append([]string{"qtool"}, args...)); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			var s binarizeSummary
			if err := json.Unmarshal([]byte(stdout.String()), &s); err != nil {
				t.Fatal(err)
			}
			// fmnist-mlp's binarized weights all have a BatchNormalization after them: their
			// ρ does not grow; a baseline has no ρ to report.
			if c.hint != (len(s.RhoGrowths) == len(s.Targets)) {
				t.Errorf("rho_growths %v for %d weights", s.RhoGrowths, len(s.Targets))
			}
			for name, g := range s.RhoGrowths {
				if g != 1 {
					t.Errorf("%s: ρ growth %v, want 1 (normalised)", name, g)
				}
			}
			sum := 0.0
			for _, h := range s.History {
				sum += h.FlippedPct
			}
			if c.moved != (sum > 0) {
				t.Fatalf("history's level changes sum to %v %%: the case wants moved = %v", sum, c.moved)
			}
			line := regexp.MustCompile(`(?m)^signs +(.*)$`).FindStringSubmatch(text)
			if line == nil {
				t.Fatalf("no signs line in\n%s", text)
			}
			want := fmt.Sprintf("%.3g %% of the binarized values changed level, summed over the 2 iterations", sum)
			if !c.moved {
				want = "no binarized value changed level in 2 iterations: the signs are those the run started from"
			}
			if !strings.HasPrefix(line[1], want) {
				t.Errorf("signs line %q, want it to start %q", line[1], want)
			}
			if got := strings.Contains(line[1], "--rho"); got != c.hint {
				t.Errorf("signs line %q: advice on --rho %v, want %v", line[1], got, c.hint)
			}
		})
	}
}
