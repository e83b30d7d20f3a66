package binarize

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// tinyWeights returns the shipped CNN rewritten to compute the same function with every
// weight about 1e-3 in magnitude, as some pretrained nets have: the convolutions (each
// followed by BatchNorm, which undoes their scale) and the final Gemm are scaled by c,
// and the second BatchNorm's affine by 1/c so that the Gemm's input grows by 1/c.
func tinyWeights(t *testing.T) (*onnxio.Model, Data) {
	t.Helper()
	m, err := onnxio.Load(filepath.Join("..", "testmodels", "fmnist-cnn.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const c = 0.02
	scale := func(name string, f float64) {
		p := g.Param(name)
		if p == nil {
			t.Fatalf("no parameter %s", name)
		}
		for i := range p.Value.F {
			p.Value.F[i] = float32(float64(p.Value.F[i]) * f)
		}
	}
	for _, l := range []string{"1", "2"} {
		scale("conv"+l+".weight", c)
		scale("conv"+l+".bias", c)
		scale("bn"+l+".running_mean", c)
		scale("bn"+l+".running_var", c*c)
	}
	scale("bn2.weight", 1/c)
	scale("bn2.bias", 1/c)
	scale("fc.weight", c)
	if err := g.WriteParams(m); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "calib.npz")
	if err := os.WriteFile(path, testmodels.FMNISTCalib, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := calib.Open(path, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 1, 28, 28}, Classes: 10}, Limit: 256, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return m, Data{Calib: d}
}

// TestGridRelativeLR: on a per-channel binary grid over weights of about 1e-3, the
// default learning rate (relative to each binarized weight's grid magnitude, and to each
// kept layer's own magnitude: the first and last stay in float by default) keeps the
// first epoch's loss near the full-precision model's, while the same base rate applied
// to every parameter as an absolute step (the policy before) blows it up.
func TestGridRelativeLR(t *testing.T) {
	m, data := tinyWeights(t)
	o := Defaults()
	o.Grid = network.BinaryChannel
	o.Iters, o.InnerEpochs, o.BatchSize, o.Workers = 1, 1, 32, 1
	o.NoBNRecalib = true
	first := func(abs bool) float64 {
		o := o
		o.AbsoluteLR = abs
		res, err := Run(context.Background(), m, data, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.History[0].TrainLoss
	}
	rel, abs := first(false), first(true)
	t.Logf("first-epoch distillation loss: relative lr %.4g, absolute lr %.4g", rel, abs)
	// Distillation's KL from a 10-class teacher: a network that still computes something
	// sensible stays within a few nats; ln 10 is a uniform guess.
	if !(rel < math.Log(10)) {
		t.Errorf("relative lr: first-epoch loss %v, want below ln 10", rel)
	}
	if !(abs > 100*rel && abs > 10) {
		t.Errorf("absolute lr: first-epoch loss %v did not blow up (relative: %v): the negative control no longer shows the problem", abs, rel)
	}
}
