package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/train"
	"github.com/sbinet/npyio/npz"
)

// The models of testdata/feed (make.py): a two-input recurrent model with a state whose
// batch axis is 1 and a scalar sample rate, a model exported with a static batch of 1, and
// a channels-last model fed data already in its shape.

// engineOutputs runs the model at path over the whole npz at batch size bs through calib
// and train.Feed, as eval and binarize do, and returns every output and the inputs fed.
func engineOutputs(t *testing.T, path, data string, bs int) ([]*engine.Tensor, []ortref.Tensor) {
	t.Helper()
	be := backend{Workers: 1, MaxMemory: calib.DefaultMaxMemory}
	l, err := loadModel(path, be, 1)
	if err != nil {
		t.Fatal(err)
	}
	var o calib.Options
	l.input().setOn(&o)
	d, err := calib.Open(data, o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: bs})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Next() {
		t.Fatal(b.Err())
	}
	var f train.Feed
	if err := f.Load(l.Graph, b); err != nil {
		t.Fatal(err)
	}
	outs, err := f.Forward(l.Graph, &engine.Context{Workers: 1, NoGrad: true})
	if err != nil {
		t.Fatal(err)
	}
	var ins []ortref.Tensor
	for k, in := range f.Inputs {
		ot := ortref.Tensor{Name: l.Graph.Inputs()[k].Name, Data: in.F, Int64: in.I}
		for _, s := range in.Shape {
			ot.Shape = append(ot.Shape, int64(s))
		}
		ins = append(ins, ot)
	}
	return outs, ins
}

// evalOutputs writes path's outputs on data with `eval --outputs` and reads back the
// array of the output named name.
func evalOutputs(t *testing.T, path, data, name string) ([]float32, []int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "outputs.npz")
	if s, code, err := runArgs(t, "eval", path, "--data", data, "--outputs", out); code != 0 {
		t.Fatalf("eval --outputs: exit %d: %v\n%s", code, err, s)
	}
	f, err := npz.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []float32
	if err := f.Read(name+".npy", &got); err != nil {
		t.Fatalf("keys %v: %v", f.Keys(), err)
	}
	return got, f.Header(name + ".npy").Descr.Shape
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %v, onnxruntime %v", what, i, got[i], want[i])
		}
	}
}

// binarizeFeed binarizes model on data with a small budget and returns the written file.
func binarizeFeed(t *testing.T, model, data string, extra ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.onnx")
	args := append(binArgs(model, data, out, "--iters", "2", "--inner-epochs", "1", "--seed", "3"), extra...)
	stdout, code, err := runArgs(t, args...)
	if code != 0 {
		t.Fatalf("binarize %s: exit %d: %v\n%s", model, code, err, stdout)
	}
	return out, stdout
}

func TestFeedTwoInputsWithState(t *testing.T) {
	ortref.Require(t)
	const model, data = "testdata/feed/vad.onnx", "testdata/feed/vad.npz"
	for _, path := range []string{model, ""} {
		if path == "" {
			path, _ = binarizeFeed(t, model, data)
		}
		outs, ins := engineOutputs(t, path, data, 256)
		if len(ins) != 3 || ins[1].Shape[1] != 40 || len(ins[2].Shape) != 0 || ins[2].Int64[0] != 16000 {
			t.Fatalf("inputs fed: %+v", ins[1:])
		}
		ref, err := ortref.RunFile(path, ins)
		if err != nil {
			t.Fatal(err)
		}
		for k := range outs {
			closeTo(t, path+" output "+ref[k].Name, outs[k].F, ref[k].Data, 1e-5)
			// eval --outputs feeds every input and writes each output whole.
			got, shape := evalOutputs(t, path, data, ref[k].Name)
			if fmt.Sprint(shape) != fmt.Sprint(ref[k].Shape) {
				t.Errorf("%s: eval --outputs wrote %s of shape %v, onnxruntime %v", path, ref[k].Name, shape, ref[k].Shape)
			}
			closeTo(t, path+" eval --outputs "+ref[k].Name, got, ref[k].Data, 1e-5)
		}
	}
}

func TestFeedFixedBatch(t *testing.T) {
	ortref.Require(t)
	const model, data = "testdata/feed/fixed1.onnx", "testdata/feed/fixed1.npz"
	out, _ := binarizeFeed(t, model, data, "--batch-size", "16")
	for _, path := range []string{model, out} {
		outs, ins := engineOutputs(t, path, data, 256)
		if outs[0].Shape[0] != 40 {
			t.Fatalf("%s: output shape %v", path, outs[0].Shape)
		}
		// onnxruntime sample by sample, at the declared batch.
		per := len(ins[0].Data) / 40
		for i := range 40 {
			r, err := ortref.RunFile(path, []ortref.Tensor{{Name: "x", Shape: []int64{1, 4, 12}, Data: ins[0].Data[i*per : (i+1)*per]}})
			if err != nil {
				t.Fatal(err)
			}
			closeTo(t, path, outs[0].F[i*3:(i+1)*3], r[0].Data, 1e-5)
		}
		// eval --outputs runs it in chunks of its declared batch and gathers all 40.
		got, shape := evalOutputs(t, path, data, "logits")
		if fmt.Sprint(shape) != "[40 3]" {
			t.Errorf("%s: eval --outputs wrote shape %v, want [40 3]", path, shape)
		}
		closeTo(t, path+" eval --outputs", got, outs[0].F, 0)
	}
	// eval at the default batch size says once that the model runs at its declared batch.
	stdout, code, err := runArgs(t, "eval", model, "--data", data)
	if code != 0 || !strings.Contains(stdout, "samples    40") {
		t.Fatalf("eval: exit %d %v\n%s", code, err, stdout)
	}
}

func TestFeedChannelsLastAsIs(t *testing.T) {
	ortref.Require(t)
	const model, data = "testdata/feed/nhwc.onnx", "testdata/feed/nhwc.npz"
	out, _ := binarizeFeed(t, model, data)
	for _, path := range []string{model, out} {
		outs, ins := engineOutputs(t, path, data, 256)
		if len(ins[0].Shape) != 4 || ins[0].Shape[3] != 1 {
			t.Fatalf("fed %v", ins[0].Shape)
		}
		ref, err := ortref.RunFile(path, ins)
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, path, outs[0].F, ref[0].Data, 1e-5)
	}
}
