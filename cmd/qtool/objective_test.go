package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestEvalOutputsMatchONNXRuntime writes every output of the shipped models with
// `eval --outputs`, reads the .npz back with npyio and compares it with onnxruntime's
// outputs on the same samples.
func TestEvalOutputsMatchONNXRuntime(t *testing.T) {
	ortref.Require(t)
	const data = "../../testmodels/fmnist-calib.npz"
	for _, name := range []string{"fmnist-mlp", "fmnist-cnn"} {
		t.Run(name, func(t *testing.T) {
			model := "../../testmodels/" + name + ".onnx"
			got, shape := evalOutputs(t, model, data, "logits")
			// The same samples as eval read, through calib as eval does.
			x, xshape, _ := readData(t, model, data)
			if n := int(xshape[0]); len(shape) != 2 || shape[0] != n || shape[1] != 10 {
				t.Fatalf("logits of shape %v for %d samples", shape, n)
			}
			s, err := ortref.NewSessionFile(model, ortref.Options{IntraOpThreads: 1, NoSpinning: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := s.Run([]ortref.Tensor{{Name: s.InputNames()[0], Shape: xshape, Data: x}})
			if err != nil {
				t.Fatal(err)
			}
			// The engine matches onnxruntime within 5e-5 on these models (engine's tests).
			for i, v := range res[0].Data {
				if d := float64(v - got[i]); d > 5e-5 || d < -5e-5 {
					t.Fatalf("logit %d: qtool %v, onnxruntime %v", i, got[i], v)
				}
			}
		})
	}
}

// TestBinarizeFidelityGates checks --min-sqnr and --min-agreement: a threshold above what
// the run reaches exits 3 and the JSON names the gate; the fidelity is reported per output.
func TestBinarizeFidelityGates(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b.onnx")
	s, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--json", "--min-sqnr", "200", "--min-agreement", "0")...)
	if code != exitGateFail {
		t.Fatalf("--min-sqnr 200: exit %d (%v), want 3\n%s", code, err, s)
	}
	var sum binarizeSummary
	if err := json.NewDecoder(strings.NewReader(s[strings.Index(s, "{"):])).Decode(&sum); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	if sum.GatePassed || len(sum.FailedGates) != 1 || sum.FailedGates[0] != "--min-sqnr" {
		t.Errorf("gates %+v, failed %v: want only --min-sqnr failed", sum.Gates, sum.FailedGates)
	}
	if len(sum.Outputs) != 1 || sum.Outputs[0].SQNRdB == nil || sum.Outputs[0].AgreementPct == nil {
		t.Fatalf("outputs %+v: want the logits' SQNR and agreement", sum.Outputs)
	}
	if *sum.Outputs[0].AgreementPct != sum.Agreement {
		t.Errorf("output agreement %v, summary %v", *sum.Outputs[0].AgreementPct, sum.Agreement)
	}
	low := *sum.Outputs[0].SQNRdB - 1
	if s, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--json", "--min-sqnr", ftoa(low))...); code != 0 {
		t.Errorf("--min-sqnr %v below the SQNR: exit %d (%v)\n%s", low, code, err, s)
	}
}

// TestObjectiveFlags checks that --class-axis and --output-weights reach the objective:
// declaring the class axis of a classifier selects the objective over its output.
func TestObjectiveFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b.onnx")
	s, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, "--json", "--class-axis", "logits=1")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, s)
	}
	var sum binarizeSummary
	// Warnings on stderr come first in runArgs' combined output.
	if err := json.NewDecoder(strings.NewReader(s[strings.Index(s, "{"):])).Decode(&sum); err != nil {
		t.Fatal(err)
	}
	if sum.Loss != "objective" || !strings.Contains(sum.Objective, "logits") {
		t.Errorf("loss %q objective %q: want the objective", sum.Loss, sum.Objective)
	}
	if _, code, _ := runArgs(t, binArgs(digitsModel, digitsData, out, "--output-weights", "nosuch=1")...); code != exitUsage {
		t.Errorf("--output-weights of an unknown output: exit %d, want a usage error", code)
	}
}
