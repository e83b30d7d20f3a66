package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

const fmnistTestImages = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

// runArgs runs qtool in-process exactly as main does, with positional arguments allowed
// before flags.
func runArgs(t *testing.T, args ...string) (stdout string, code int, err error) {
	t.Helper()
	app := newApp()
	var out strings.Builder
	app.Writer, app.ErrWriter = &out, &out
	err = run(context.Background(), app, append([]string{"qtool"}, args...))
	return out.String(), exitCode(err), err
}

func requireFile(t *testing.T, path, install string) {
	t.Helper()
	testenv.RequireFile(t, path, install)
}

// testmodelAccuracy reads the full-test-set accuracy that testmodels/make.py measured in
// PyTorch.
func testmodelAccuracy(t *testing.T, model string) (correct, total int) {
	t.Helper()
	b, err := os.ReadFile("../../testmodels/accuracy.json")
	if err != nil {
		t.Fatalf("testmodels/accuracy.json: %v", err)
	}
	var acc map[string]struct {
		Correct int `json:"correct"`
		Total   int `json:"total"`
	}
	if err := json.Unmarshal(b, &acc); err != nil {
		t.Fatalf("testmodels/accuracy.json: %v", err)
	}
	a, ok := acc[model]
	if !ok {
		t.Fatalf("testmodels/accuracy.json has no entry %q", model)
	}
	return a.Correct, a.Total
}

// TestEvalFashionMNISTMatchesPyTorch evaluates the shipped CNN on the full Fashion-MNIST
// test set through the idx reader: the count of correct predictions must be the one
// PyTorch measured when the model was made.
func TestEvalFashionMNISTMatchesPyTorch(t *testing.T) {
	requireFile(t, fmnistTestImages, "apt-get install dataset-fashion-mnist")
	for _, model := range []string{"fmnist-cnn", "fmnist-mlp"} {
		t.Run(model, func(t *testing.T) {
			wantCorrect, wantTotal := testmodelAccuracy(t, model)
			out, code, err := runArgs(t, "eval", "../../testmodels/"+model+".onnx", "--data", fmnistTestImages, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %v\n%s", code, err, out)
			}
			var res evalResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if res.Samples != wantTotal || res.Correct != wantCorrect {
				t.Errorf("qtool: %d/%d correct; PyTorch: %d/%d", res.Correct, res.Samples, wantCorrect, wantTotal)
			}
		})
	}
}

func TestEvalAgreementWithItself(t *testing.T) {
	m := "../../testmodels/fmnist-mlp.onnx"
	out, code, err := runArgs(t, "eval", m, "--data", "../../testmodels/fmnist-calib.npz", "--ref", m, "--json", "--batch-size", "100")
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	var res evalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.AgreementPct == nil || *res.AgreementPct != 100 || res.MaxLogitDiff == nil || *res.MaxLogitDiff != 0 {
		t.Errorf("a model compared with itself: agreement %v %%, max diff %v", res.AgreementPct, res.MaxLogitDiff)
	}
	if res.Samples != 1000 || res.AccuracyPct == nil || *res.AccuracyPct != 100*float64(res.Correct)/1000 {
		t.Errorf("samples %d, correct %d, accuracy %v %%", res.Samples, res.Correct, res.AccuracyPct)
	}
}

func TestEvalErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.onnx")
	os.WriteFile(junk, []byte("this is not a model"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model", []string{"eval", "--data", "x.npz"}, exitUsage, "one MODEL.onnx"},
		{"missing model", []string{"eval", filepath.Join(dir, "nope.onnx"), "--data", "x.npz"}, exitInput, "nope.onnx"},
		{"corrupt model", []string{"eval", junk, "--data", "x.npz"}, exitInput, "junk.onnx"},
		{"no data", []string{"eval", "../../testmodels/fmnist-mlp.onnx"}, exitUsage, "--data"},
		{"missing data", []string{"eval", "../../testmodels/fmnist-mlp.onnx", "--data", filepath.Join(dir, "none.npz")}, exitInput, "none.npz"},
		{"bad flag", []string{"eval", "../../testmodels/fmnist-mlp.onnx", "--bogus"}, exitUsage, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, err := runArgs(t, tc.args...)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exit %d, error %v; want exit %d mentioning %q", code, err, tc.code, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

func TestInterspersedArgs(t *testing.T) {
	app := newApp()
	got := strings.Join(interspersed(app, []string{"qtool", "eval", "m.onnx", "--data", "d.npz", "--json", "--ref=r.onnx"}), " ")
	want := "qtool eval --data d.npz --json --ref=r.onnx -- m.onnx"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestVersionNamesBLAS(t *testing.T) {
	t.Setenv("QTOOL_BLAS", "go")
	out, code, err := runArgs(t, "version")
	if code != 0 || !strings.Contains(out, "BLAS: go") {
		t.Errorf("exit %d (%v), output %q: want the pure-Go BLAS named", code, err, out)
	}
	t.Setenv("QTOOL_BLAS", "fortran")
	if _, code, _ := runArgs(t, "version"); code != exitUsage {
		t.Errorf("an unknown QTOOL_BLAS gave exit %d, want %d", code, exitUsage)
	}
}
