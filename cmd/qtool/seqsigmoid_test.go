package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
	"github.com/sbinet/npyio/npz"
)

// readData reads every sample of data for model through calib, as qtool does, so that
// onnxruntime sees exactly the inputs qtool evaluated: the samples, their shape with the
// batch first, and the labels (LabelsPerSample per sample, IgnoredLabel for padding).
func readData(t *testing.T, model, data string) ([]float32, []int64, []int64) {
	t.Helper()
	m, err := onnxio.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	g, err := binarize.Build(m, binarize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := calib.Open(data, calib.Options{Input: binarize.InputOf(g), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: d.Len()})
	if err != nil || !b.Next() {
		t.Fatal(err, b.Err())
	}
	return append([]float32(nil), b.X()...), append([]int64(nil), b.Shape()...), append([]int64(nil), b.Y()...)
}

// ortOutput runs model in onnxruntime on x and returns its one output.
func ortOutput(t *testing.T, model, input string, shape []int64, x []float32) []float32 {
	t.Helper()
	res, err := ortref.RunFile(model, []ortref.Tensor{{Name: input, Shape: shape, Data: x}})
	if err != nil {
		t.Fatalf("onnxruntime on %s: %v", model, err)
	}
	return res[0].Data
}

func binarizeJSON(t *testing.T, wantCode int, args ...string) binarizeSummary {
	t.Helper()
	out, code, err := runArgs(t, append([]string{"binarize", "--json", "-q"}, args...)...)
	if code != wantCode {
		t.Fatalf("binarize %v: exit %d (%v), want %d\n%s", args, code, err, wantCode, out)
	}
	var s binarizeSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return s
}

// TestSequenceTaggerPerPositionLabels binarizes the small Conv1d tagger of testdata/seq
// ([N, 4, 16] → [N, 16, 4] log-probabilities) with its [N, 16] labels, −1 at the first
// step and on the padding of the shorter sequences: it trains with per-position NLL, and
// the per-position accuracy it reports on the held-out sequences is, count for count,
// what onnxruntime gives on the full-precision file and on the binarized one.
func TestSequenceTaggerPerPositionLabels(t *testing.T) {
	ortref.Require(t)
	const dir = "testdata/seq/"
	model := dir + "tagger.onnx"
	out := filepath.Join(t.TempDir(), "tagger-binary.onnx")
	s := binarizeJSON(t, 0, model, "--data", dir+"calib.npz", "--eval-data", dir+"heldout.npz", "-o", out,
		"--grid", "binary-channel", "--iters", "3", "--inner-epochs", "2", "--lr", "1e-3")
	if !s.Labelled || s.Loss != "objective" || !strings.Contains(s.Objective, "labels") {
		t.Errorf("labelled %v, loss %q, objective %q: want the labels to supervise logp", s.Labelled, s.Loss, s.Objective)
	}
	x, shape, y := readData(t, model, dir+"heldout.npz")
	const T, C = 16, 4
	if len(y) != int(shape[0])*T {
		t.Fatalf("%d labels for %d sequences of %d steps", len(y), shape[0], T)
	}
	count := func(path string) (correct, positions int) {
		p := ortOutput(t, path, "x", shape, x)
		for pos, label := range y {
			if label == calib.IgnoredLabel {
				continue
			}
			positions++
			if int64(argmax(p[pos*C:(pos+1)*C])) == label {
				correct++
			}
		}
		return correct, positions
	}
	fpCorrect, positions := count(model)
	binCorrect, _ := count(out)
	if s.Positions != positions || s.FPCorrect != fpCorrect || s.BinCorrect != binCorrect {
		t.Errorf("qtool: FP %d, binarized %d of %d positions; onnxruntime: FP %d, binarized %d of %d",
			s.FPCorrect, s.BinCorrect, s.Positions, fpCorrect, binCorrect, positions)
	}
	// make.py measured the full-precision tagger in PyTorch: 1977 of 2475.
	if fpCorrect != 1977 || positions != 2475 {
		t.Errorf("onnxruntime: FP %d of %d positions; PyTorch measured 1977 of 2475", fpCorrect, positions)
	}
	// Chance is a third; the binarized tagger must still tag.
	if float64(binCorrect) < 0.5*float64(positions) {
		t.Errorf("binarized tagger: %d of %d positions", binCorrect, positions)
	}
	// eval reports the same count.
	ev, code, err := runArgs(t, "eval", out, "--data", dir+"heldout.npz", "--json")
	if code != 0 {
		t.Fatalf("eval: exit %d (%v)\n%s", code, err, ev)
	}
	var er evalResult
	if err := json.Unmarshal([]byte(ev), &er); err != nil {
		t.Fatal(err)
	}
	if er.Correct != binCorrect || er.AccuracyPct == nil || math.Abs(*er.AccuracyPct-100*float64(binCorrect)/float64(positions)) > 1e-4 {
		t.Errorf("eval: %d correct (%v %%), onnxruntime %d of %d", er.Correct, er.AccuracyPct, binCorrect, positions)
	}
}

// sigmoidDir holds a Fashion-MNIST shirt-vs-T-shirt head ending in one Sigmoid [N, 1], and
// 1200 test images with their 0/1 labels.
const sigmoidDir = "testdata/sigmoid/"

// unlabelled writes the images of sigmoid/data.npz without their labels.
func unlabelled(t *testing.T) string {
	t.Helper()
	f, err := npz.Open(sigmoidDir + "data.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var x []uint8
	if err := f.Read("x.npy", &x); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "x.npz")
	arr := make([][1][28][28]uint8, len(x)/784)
	for i := range arr {
		for j := range 784 {
			arr[i][0][j/28][j%28] = x[i*784+j]
		}
	}
	if err := npz.Write(p, map[string]any{"x": arr}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSigmoidHeadWithoutLabels binarizes the single-sigmoid head by matching the
// full-precision probabilities (Bernoulli KL): the loss is not zero, as distillation
// through a one-class softmax was; the weights move beyond the rounding of the
// full-precision ones; and the fidelity qtool reports (SQNR and cosine of the probability,
// decision agreement at 0.5) is what onnxruntime gives on the two files.
func TestSigmoidHeadWithoutLabels(t *testing.T) {
	ortref.Require(t)
	model := sigmoidDir + "head.onnx"
	data := unlabelled(t)
	out := filepath.Join(t.TempDir(), "head-binary.onnx")
	// --last-iterate: what is checked is that training moves the weights; the best iterate
	// by validation may legitimately be the first, plain rounding.
	s := binarizeJSON(t, 0, model, "--data", data, "--eval-data", data, "-o", out, "--format", "float",
		"--grid", "binary-channel", "--iters", "3", "--inner-epochs", "2", "--lr", "1e-3", "--last-iterate")
	if s.Labelled || !strings.Contains(s.Objective, "bernoulli kl") {
		t.Errorf("labelled %v, objective %q: want the Bernoulli KL to the full-precision model", s.Labelled, s.Objective)
	}
	if len(s.History) == 0 || !(s.History[0].TrainLoss > 0) || !(s.History[0].FY > 0) {
		t.Fatalf("history %+v: the objective must not be 0", s.History)
	}
	// Plain rounding onto binary-channel is sign(w)·α_c with α_c = mean |w| over output
	// channel c (a row of the Linear weights [out, in]); ADMM starts there and then moves.
	fp, bin := paramValues(t, model), paramValues(t, out)
	moved := 0
	for name, rows := range map[string]int{"1.weight": 32, "3.weight": 1} {
		w, b := fp[name], bin[name]
		if len(w) == 0 || len(b) != len(w) {
			t.Fatalf("%s: %d full-precision and %d binarized values", name, len(w), len(b))
		}
		in := len(w) / rows
		for r := range rows {
			var alpha float64
			for _, v := range w[r*in : (r+1)*in] {
				alpha += math.Abs(float64(v))
			}
			alpha /= float64(in)
			for i := r * in; i < (r+1)*in; i++ {
				round := math.Copysign(alpha, float64(w[i]))
				if math.Abs(float64(b[i])-round) > 1e-5*alpha {
					moved++
				}
			}
		}
	}
	if moved == 0 {
		t.Error("every binarized weight is the rounding of its full-precision weight: training did not move them")
	}

	x, shape, _ := readData(t, model, data)
	pt, ps := ortOutput(t, model, "input", shape, x), ortOutput(t, out, "input", shape, x)
	var tt, dd, ss, st float64
	agree := 0
	for i := range pt {
		tv, sv := float64(pt[i]), float64(ps[i])
		tt, dd, ss, st = tt+tv*tv, dd+(sv-tv)*(sv-tv), ss+sv*sv, st+sv*tv
		if (pt[i] >= 0.5) == (ps[i] >= 0.5) {
			agree++
		}
	}
	if len(s.Outputs) != 1 {
		t.Fatalf("outputs %+v", s.Outputs)
	}
	o := s.Outputs[0]
	sqnr, cos := 10*math.Log10(tt/dd), st/math.Sqrt(ss*tt)
	// The engine and onnxruntime sum in different orders: the probabilities differ by a
	// few float32 ulps, far below the 1e-3 dB that the JSON rounds the SQNR to.
	if o.Kind != "sigmoid" || o.SQNRdB == nil || math.Abs(*o.SQNRdB-sqnr) > 2e-3 || math.Abs(o.Cosine-cos) > 1e-6 {
		t.Errorf("qtool: %s SQNR %v dB, cosine %v; onnxruntime: %v dB, %v", o.Kind, o.SQNRdB, o.Cosine, sqnr, cos)
	}
	if o.AgreementPct == nil || o.Positions != len(pt) || math.Abs(*o.AgreementPct-100*float64(agree)/float64(len(pt))) > 1e-4 {
		t.Errorf("qtool: agreement %v %% of %d; onnxruntime %d of %d", o.AgreementPct, o.Positions, agree, len(pt))
	}
	if agree == len(pt) || sqnr > 60 {
		t.Errorf("binarizing changed nothing measurable (SQNR %v dB, %d of %d decisions agree)", sqnr, agree, len(pt))
	}
}

// TestSigmoidHeadWithLabels binarizes the head with its 0/1 labels ([N, 1]): it trains
// with binary cross-entropy, reports accuracies that are onnxruntime's counts, and
// --max-drop passes or fails on the measured drop.
func TestSigmoidHeadWithLabels(t *testing.T) {
	ortref.Require(t)
	model, data := sigmoidDir+"head.onnx", sigmoidDir+"data.npz"
	out := filepath.Join(t.TempDir(), "head-binary.onnx")
	args := []string{model, "--data", data, "--eval-data", data, "-o", out,
		"--grid", "binary-channel", "--iters", "3", "--inner-epochs", "2", "--lr", "1e-3"}
	s := binarizeJSON(t, 0, args...)
	if !s.Labelled || !strings.Contains(s.Objective, "labels") {
		t.Errorf("labelled %v, objective %q: want the labels to supervise prob", s.Labelled, s.Objective)
	}
	x, shape, y := readData(t, model, data)
	count := func(path string) int {
		c := 0
		for i, p := range ortOutput(t, path, "input", shape, x) {
			if (p >= 0.5) == (y[i] == 1) {
				c++
			}
		}
		return c
	}
	fpCorrect, binCorrect := count(model), count(out)
	if s.Positions != len(y) || s.FPCorrect != fpCorrect || s.BinCorrect != binCorrect {
		t.Errorf("qtool: FP %d, binarized %d of %d; onnxruntime: FP %d, binarized %d of %d",
			s.FPCorrect, s.BinCorrect, s.Positions, fpCorrect, binCorrect, len(y))
	}
	// make.py measured the head in PyTorch: 1011 of 1200.
	if fpCorrect != 1011 {
		t.Errorf("onnxruntime: FP %d of %d; PyTorch measured 1011", fpCorrect, len(y))
	}
	drop := 100 * float64(fpCorrect-binCorrect) / float64(len(y))
	if math.Abs(s.DropPP-drop) > 1e-3 {
		t.Errorf("drop %v pp, onnxruntime's counts give %v", s.DropPP, drop)
	}
	if drop <= 0.1 {
		t.Fatalf("drop %v pp: too small to test --max-drop on both sides", drop)
	}
	// The run is deterministic: a gate just above the drop passes, one just below fails.
	g := binarizeJSON(t, 0, append(args, "--max-drop", jsonNum(drop+0.05))...)
	if !g.GatePassed || len(g.FailedGates) != 0 {
		t.Errorf("--max-drop %v with a drop of %v: gates %+v", drop+0.05, drop, g.Gates)
	}
	g = binarizeJSON(t, exitGateFail, append(args, "--max-drop", jsonNum(drop-0.05))...)
	if g.GatePassed || len(g.FailedGates) != 1 || g.FailedGates[0] != "--max-drop" {
		t.Errorf("--max-drop %v with a drop of %v: gates %+v", drop-0.05, drop, g.Gates)
	}
}

// argmax is the first index of the largest value, as qtool breaks ties.
func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestIgnoreLabelFlag: --ignore-label sets calib.Options.IgnoreLabels; "none" makes the
// tagger's −1 padding an error naming its place.
func TestIgnoreLabelFlag(t *testing.T) {
	in := calib.Input{Name: "x", Shape: []int64{-1, 4, 16}, Classes: 4}
	data := "testdata/seq/heldout.npz"
	ds, o, err := runData(t, in, "--data", data, "--ignore-label", "-1, 7")
	if err != nil || !slices.Equal(o.IgnoreLabels, []int64{-1, 7}) || calib.LabelsPerSample(ds.Calib) != 16 {
		t.Fatalf("--ignore-label -1,7: %v, options %v", err, o.IgnoreLabels)
	}
	_, _, err = runData(t, in, "--data", data, "--ignore-label", "none")
	var le *calib.LabelError
	if !errors.As(err, &le) || le.Label != -1 || !strings.Contains(err.Error(), "position") {
		t.Errorf("--ignore-label none: %v, want a label error for the −1 padding", err)
	}
	if _, _, err = runData(t, in, "--data", data, "--ignore-label", "pad"); exitCode(err) != exitUsage {
		t.Errorf("--ignore-label pad: exit %d (%v), want %d", exitCode(err), err, exitUsage)
	}
}

// TestIgnoredLabelAdvice: the plain losses' refusal of ignored labels names the flag.
func TestIgnoredLabelAdvice(t *testing.T) {
	err := cliError(fmt.Errorf("step 3: %w", &train.IgnoredLabelError{Loss: "cross-entropy loss", Sample: 2}))
	if !strings.Contains(err.Error(), "use --loss objective") || !strings.HasPrefix(err.Error(), "step 3: ") {
		t.Errorf("advice %q", err)
	}
	var ie *train.IgnoredLabelError
	if !errors.As(err, &ie) {
		t.Errorf("the advice lost the library error: %v", err)
	}
}
