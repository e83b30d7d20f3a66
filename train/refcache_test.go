package train_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	tm "github.com/qtool/qtool/testmodels"
	"github.com/qtool/qtool/train"
)

// TestRefCache: a second Evaluate with the cache of a first reads the reference's
// outputs from it (a changed reference does not change the result), and a cache over its
// bound holds nothing and runs the reference.
func TestRefCache(t *testing.T) {
	m, err := onnxio.Parse(tm.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		t.Fatal(err)
	}
	build := func() *engine.Graph {
		g, err := engine.Build(m, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g, ref := build(), build()
	path := filepath.Join(t.TempDir(), "calib.npz")
	if err := os.WriteFile(path, tm.FMNISTCalib, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := calib.Open(path, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 784}, Classes: 10}, Limit: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	eval := func(c *train.RefCache) train.Metrics {
		b := batches(t, d, 128, false)
		mt, err := train.Evaluate(ctx, g, b, train.EvalOptions{Loss: train.Distillation{}, Reference: ref, ReferenceCache: c})
		if err != nil {
			t.Fatal(err)
		}
		return mt
	}
	var c train.RefCache
	first := eval(&c)
	if c.Bytes() != 300*10*4 {
		t.Fatalf("the cache holds %d bytes, want the reference's 300×10 outputs", c.Bytes())
	}
	for _, p := range ref.Params() {
		for i := range p.Value.F {
			p.Value.F[i] *= 0.5
		}
	}
	if again := eval(&c); again.Loss != first.Loss || again.MaxLogitDiff != first.MaxLogitDiff {
		t.Errorf("a cached pass gave loss %g, max diff %g; want the first pass's %g, %g", again.Loss, again.MaxLogitDiff, first.Loss, first.MaxLogitDiff)
	}
	small := train.RefCache{Max: 1000}
	eval(&small)
	if small.Bytes() != 0 {
		t.Errorf("a cache bounded by 1000 bytes holds %d", small.Bytes())
	}
	if changed := eval(&small); changed.Loss == first.Loss {
		t.Error("over its bound the cache still served the old reference's outputs")
	}
}
