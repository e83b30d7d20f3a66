package main

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestEvalGates checks eval's --min-sqnr and --min-agreement: comparing the CNN with the
// ResNet (two different Fashion-MNIST models, which disagree on some samples), a 100 %
// agreement gate fails with exit code 3 and the JSON names it, while a gate the
// measurement meets passes with exit code 0.
func TestEvalGates(t *testing.T) {
	cnn, resnet := "../../testmodels/fmnist-cnn.onnx", "../../testmodels/fmnist-resnet.onnx"
	data := "../../testmodels/fmnist-calib.npz"
	decode := func(out string) evalResult {
		t.Helper()
		var res evalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		return res
	}

	out, code, err := runArgs(t, "eval", cnn, "--data", data, "--ref", resnet, "--json", "--min-agreement", "100", "--min-sqnr", "-100")
	if code != exitGateFail {
		t.Fatalf("exit %d (%v), want %d\n%s", code, err, exitGateFail, out)
	}
	res := decode(out)
	if !slices.Equal(res.FailedGates, []string{"--min-agreement"}) || res.GatePassed == nil || *res.GatePassed {
		t.Errorf("failed gates %v, passed %v: want only --min-agreement to fail", res.FailedGates, res.GatePassed)
	}
	if len(res.Gates) != 2 || res.Gates[1].Value == nil || *res.Gates[1].Value != *res.AgreementPct {
		t.Errorf("gates %+v: the agreement gate must measure the reported agreement %v", res.Gates, *res.AgreementPct)
	}

	// Thresholds just below the measured values pass.
	sqnr := *res.Gates[0].Value
	out, code, err = runArgs(t, "eval", cnn, "--data", data, "--ref", resnet, "--json",
		"--min-agreement", jsonNum(*res.AgreementPct-0.01), "--min-sqnr", jsonNum(sqnr-0.01))
	if code != 0 {
		t.Fatalf("exit %d (%v) with thresholds below the measurement\n%s", code, err, out)
	}
	if res := decode(out); res.GatePassed == nil || !*res.GatePassed || len(res.FailedGates) != 0 {
		t.Errorf("gates %+v: want both passed", res.Gates)
	}
	// Just above the measured SQNR fails on --min-sqnr alone.
	out, code, _ = runArgs(t, "eval", cnn, "--data", data, "--ref", resnet, "--json", "--min-sqnr", jsonNum(sqnr+0.01))
	if code != exitGateFail || !slices.Equal(decode(out).FailedGates, []string{"--min-sqnr"}) {
		t.Errorf("--min-sqnr above the measured %v dB: exit %d, %s", sqnr, code, out)
	}

	// A gate needs the reference.
	if _, code, err := runArgs(t, "eval", cnn, "--data", data, "--min-sqnr", "10"); code != exitUsage {
		t.Errorf("--min-sqnr without --ref: exit %d (%v), want %d", code, err, exitUsage)
	}
}

func jsonNum(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
