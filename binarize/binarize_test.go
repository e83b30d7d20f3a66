package binarize

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// small returns the embedded model and 200 of its calibration samples, with options of a
// tiny budget.
func small(t *testing.T) (*onnxio.Model, Data, Options) {
	t.Helper()
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "calib.npz")
	if err := os.WriteFile(path, testmodels.FMNISTCalib, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := calib.Open(path, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 784}, Classes: 10}, Limit: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	o := Defaults()
	o.Iters, o.InnerEpochs, o.BatchSize, o.Workers = 1, 1, 50, 1
	return m, Data{Calib: d}, o
}

// TestOutputVerifiedBeforeRename: the file Run writes is Result.Bytes; when the new file
// fails its check (Verify damages it), the previous file keeps its bytes and no
// temporary file is left.
func TestOutputVerifiedBeforeRename(t *testing.T) {
	m, data, o := small(t)
	dir := t.TempDir()
	o.Output = filepath.Join(dir, "out.onnx")
	old := []byte("previous model")
	if err := os.WriteFile(o.Output, old, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Verify = func(path string) error { return os.Truncate(path, 100) }
	if _, err := Run(context.Background(), m, data, o); err == nil {
		t.Fatal("a truncated new file passed its check")
	}
	if b, _ := os.ReadFile(o.Output); !bytes.Equal(b, old) {
		t.Fatal("the previous file was changed")
	}
	o.Verify = nil
	res, err := Run(context.Background(), m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(o.Output); !bytes.Equal(b, res.Bytes) || res.Output != o.Output {
		t.Fatal("the written file is not Result.Bytes")
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("%d files left in the output folder, want 1", len(es))
	}
	// The model given is never modified: a second run from it gives the same bytes.
	o.Output = ""
	again, err := Run(context.Background(), m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes, res.Bytes) {
		t.Error("a second run from the same model wrote other bytes")
	}
}

// TestTypedErrors: bad options, selections and losses are errors a caller can sort with
// errors.As, and their messages name Options fields, not flags.
func TestTypedErrors(t *testing.T) {
	m, data, o := small(t)
	for _, c := range []struct {
		field string
		edit  func(*Options)
	}{
		{"Method", func(o *Options) { o.Method = admmq.ADMMQ }},
		{"Iters", func(o *Options) { o.Iters = -1 }},
		{"Rho", func(o *Options) { o.Rho.Rho0 = -1 }},
		{"UnnormalizedGrowth", func(o *Options) { o.UnnormalizedGrowth = math.Inf(1) }},
		{"Selection", func(o *Options) {
			o.Selection = network.Selection{Keep: []string{"first"}, Only: []string{"fc1.weight"}}
		}},
		{"Optimizer", func(o *Options) { o.Optimizer = "lbfgs" }},
		{"Opset", func(o *Options) { o.Opset = 99 }},
	} {
		bad := o
		c.edit(&bad)
		_, err := Run(context.Background(), m, data, bad)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%s: %v, want an *OptionError on %s", c.field, err, c.field)
		} else if bytes.Contains([]byte(err.Error()), []byte("--")) {
			t.Errorf("%s: %q names a flag", c.field, err)
		}
	}
	bad := o
	bad.Selection.Only = []string{"nosuch"}
	var se *network.SelectionError
	if _, err := Run(context.Background(), m, data, bad); !errors.As(err, &se) || se.Name != "nosuch" {
		t.Errorf("selection: %v, want a *network.SelectionError", err)
	}
	bad = o
	bad.Opset = 10
	var pe *OpsetError
	if _, err := Run(context.Background(), m, data, bad); m.Opset("") > 10 && !errors.As(err, &pe) {
		t.Errorf("opset below the model's: %v, want an *OpsetError", err)
	}
}

// TestParseMethod: admm-q names I-ADMM-Q on a network; every network method parses to
// itself; unknown names are refused.
func TestParseMethod(t *testing.T) {
	if m, err := ParseMethod("admm-q"); err != nil || m != admmq.IADMMQ {
		t.Errorf("admm-q: %v, %v", m, err)
	}
	if m, err := ParseMethod("gd-proj"); err != nil || m != admmq.GDProj {
		t.Errorf("gd-proj: %v, %v", m, err)
	}
	for _, want := range network.Methods() {
		if m, err := ParseMethod(string(want)); err != nil || m != want {
			t.Errorf("%s: %v, %v", want, m, err)
		}
	}
	if _, err := ParseMethod("sgd"); err == nil {
		t.Error("sgd parsed as an algorithm")
	}
}

// TestExportRefusedBeforeTraining: a format the model's opset cannot hold (qdq needs
// DequantizeLinear, opset 10; digits-mlp is opset 9) is refused before the first
// optimizer step, with export's typed error, not after the whole run.
func TestExportRefusedBeforeTraining(t *testing.T) {
	m, err := onnxio.Load(filepath.Join("..", "testmodels", "digits-mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Opset("") >= 10 {
		t.Fatalf("digits-mlp has opset %d; the test needs a model below 10", m.Opset(""))
	}
	d, err := calib.Open(filepath.Join("..", "testmodels", "digits-test.npz"), calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 64}, Classes: 10}, Limit: 100, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	o := Defaults()
	o.Iters, o.InnerEpochs, o.BatchSize, o.Workers = 1, 1, 50, 1
	o.Format = export.QDQ
	steps := 0
	o.Progress = func(network.Progress) { steps++ }
	_, err = Run(context.Background(), m, Data{Calib: d}, o)
	var oe *export.OpsetError
	if !errors.As(err, &oe) || oe.Need != 10 {
		t.Fatalf("qdq at opset %d: %v, want an *export.OpsetError needing 10", m.Opset(""), err)
	}
	if steps != 0 {
		t.Errorf("refused after %d progress reports; want before any training", steps)
	}
	// Control: the same run at opset 10 trains and exports.
	o.Opset = 10
	if _, err := Run(context.Background(), m, Data{Calib: d}, o); err != nil || steps == 0 {
		t.Errorf("qdq at opset 10: %v after %d progress reports, want a trained export", err, steps)
	}
}
