package network

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

const (
	mlpPath   = "../../testmodels/fmnist-mlp.onnx"
	calibPath = "../../testmodels/fmnist-calib.npz"
)

func load(t *testing.T, path string) (*onnxio.Model, *engine.Graph) {
	t.Helper()
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func openCalib(t *testing.T, limit int) calib.Dataset {
	t.Helper()
	d, err := calib.Open(calibPath, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 784}, Classes: 10}, Limit: limit, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// dataOf is the Data a run over d needs: d shuffled by seed for training, d in order for
// the statistics, and eval (when non-nil) in order.
func dataOf(t *testing.T, d, eval calib.Dataset, bs int, seed uint64) Data {
	t.Helper()
	batches := func(d calib.Dataset, o calib.BatchOptions) *calib.Batches {
		b, err := calib.NewBatches(d, o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	data := Data{
		Train:   batches(d, calib.BatchOptions{Size: bs, Shuffle: true, Seed: seed}),
		Calib:   batches(d, calib.BatchOptions{Size: bs}),
		Samples: d.Len(), BatchSize: bs, Labelled: d.HasLabels(),
	}
	if eval != nil {
		data.Eval = batches(eval, calib.BatchOptions{Size: bs})
	}
	return data
}

func logits(t *testing.T, g *engine.Graph, d calib.Dataset, n int) []float32 {
	t.Helper()
	x := make([]float32, n*784)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if err := d.Read(idx, x, nil); err != nil {
		t.Fatal(err)
	}
	outs, err := g.Forward(&engine.Context{Workers: 1, NoGrad: true}, engine.NewFloat([]int{n, 784}, x))
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), outs[0].F...)
}

// TestPreconditionKeepsFunction: rescaling the weights that BatchNorm follows to mean
// |w| = 1 per channel leaves the inference-mode logits as they were, to float32 rounding.
func TestPreconditionKeepsFunction(t *testing.T) {
	m, g := load(t, mlpPath)
	d := openCalib(t, 0)
	before := logits(t, g, d, 128)
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	orig := append([]float32(nil), g.Param("fc1.weight").Value.F...)
	n, err := Precondition(g, ts)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("rescaled %d weights, want all 4 (each is followed by BatchNorm)", n)
	}
	after := logits(t, g, d, 128)
	for i := range before {
		if d := math.Abs(float64(before[i] - after[i])); d > 1e-4*(1+math.Abs(float64(before[i]))) {
			t.Fatalf("logit %d: %v before, %v after rescaling", i, before[i], after[i])
		}
	}
	w := g.Param("fc1.weight").Value.F // [256, 784], channels are rows
	for r := range 256 {
		var s float64
		for _, v := range w[r*784 : (r+1)*784] {
			s += math.Abs(float64(v))
		}
		if mean := s / 784; math.Abs(mean-1) > 1e-5 {
			t.Fatalf("row %d has mean |w| = %v after rescaling", r, mean)
		}
	}
	if w[0] == orig[0] {
		t.Error("fc1.weight is unchanged")
	}
}

func newRun(t *testing.T, algo admmq.Method, iters int, ck func([]byte) error) (*Run, *engine.Graph, *onnxio.Model) {
	t.Helper()
	m, g := load(t, mlpPath)
	r, _ := binaryRun(t, m, g, Config{
		Method: algo, Rho: admmq.Schedule{Rho0: 1e-3, Growth: 2, Every: 1}, P: 0.3, Beta: 1e3,
		Iters: iters, InnerEpochs: 1, Schedule: train.Constant{LR: 1e-2}, Seed: 3, StatSamples: 64,
		Workers: 1, Checkpoint: ck,
	})
	return r, g, m
}

// binaryRun makes a run of cfg over every weight of m on the ±1 grid (preconditioned), on
// 256 calibration samples in batches of 64, and returns it with its targets.
func binaryRun(t *testing.T, m *onnxio.Model, g *engine.Graph, cfg Config) (*Run, []Target) {
	t.Helper()
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Precondition(g, ts); err != nil {
		t.Fatal(err)
	}
	d := openCalib(t, 256)
	r, err := New(m, g, ts, cfg, dataOf(t, d, d, 64, 3))
	if err != nil {
		t.Fatal(err)
	}
	return r, ts
}

// TestRestoreBitIdentical: a run restored from the checkpoint of its first iteration ends
// with every parameter bit for bit equal to the uninterrupted run's, for each algorithm
// (Dropout's stream, the data order, ADMM-R's masks and Adam's moments all resume).
func TestRestoreBitIdentical(t *testing.T) {
	for _, algo := range Methods() {
		t.Run(string(algo), func(t *testing.T) {
			var first []byte
			full, g, m := newRun(t, algo, 3, func(b []byte) error {
				if first == nil {
					first = b
				}
				return nil
			})
			if err := full.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := full.Finish(context.Background(), m, Binary, true); err != nil {
				t.Fatal(err)
			}
			resumed, g2, m2 := newRun(t, algo, 3, nil)
			if err := resumed.Restore(first); err != nil {
				t.Fatal(err)
			}
			if resumed.Iter() != 1 {
				t.Fatalf("restored at iteration %d, want 1", resumed.Iter())
			}
			if err := resumed.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := resumed.Finish(context.Background(), m2, Binary, true); err != nil {
				t.Fatal(err)
			}
			for _, p := range g.Params() {
				q := g2.Param(p.Name)
				for i, v := range p.Value.F {
					if math.Float32bits(v) != math.Float32bits(q.Value.F[i]) {
						t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", p.Name, i, v, q.Value.F[i])
					}
				}
			}
			if len(resumed.History()) != 3 {
				t.Errorf("resumed history has %d iterations, want 3", len(resumed.History()))
			}
		})
	}
}

// TestFinishOnGrid: after Finish every targeted weight is exactly ±1 and equals y's sign
// pattern — the y variable, not a rounding of x.
func TestFinishOnGrid(t *testing.T) {
	r, g, m := newRun(t, admmq.IADMMQ, 2, nil)
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ys := make([][]float32, len(r.y))
	for i := range r.y {
		ys[i] = append([]float32(nil), r.y[i]...)
	}
	ws, err := r.Finish(context.Background(), m, Binary, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		p := g.Param(w.Name)
		for j, v := range p.Value.F {
			if v != ys[i][j] || (v != 1 && v != -1) {
				t.Fatalf("%s[%d] = %v, y = %v", w.Name, j, v, ys[i][j])
			}
		}
	}
}

// TestStartOnGrid: with StartOnGrid the first x is y⁰ = P_A(x⁰), exactly.
func TestStartOnGrid(t *testing.T) {
	m, g := load(t, mlpPath)
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	d := openCalib(t, 128)
	r, err := New(m, g, ts, Config{Method: admmq.IADMMQ, Rho: admmq.Schedule{Rho0: 1e-3}, Iters: 1, StartOnGrid: true, Workers: 1},
		dataOf(t, d, nil, 64, 1))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range r.params {
		for j, v := range p.Value.F {
			if v != r.y[i][j] || (v != 1 && v != -1) {
				t.Fatalf("%s[%d]: x = %v, y = %v", ts[i].Name, j, v, r.y[i][j])
			}
		}
	}
}

// TestSelectionError: a Keep or Only name that is no weight, and a selection that leaves
// nothing, are *SelectionError naming the list and the name.
func TestSelectionError(t *testing.T) {
	m, _ := load(t, mlpPath)
	for _, c := range []struct {
		sel        Selection
		list, name string
	}{
		{Selection{Keep: []string{"first", "nosuch"}}, "Keep", "nosuch"},
		{Selection{Only: []string{"fc1.weight", "fc1.bias"}}, "Only", "fc1.bias"},
		{Selection{Keep: []string{"fc1.weight", "fc2.weight", "fc3.weight", "fc4.weight"}}, "", ""},
	} {
		_, err := Targets(m, Binary, c.sel)
		var se *SelectionError
		if !errors.As(err, &se) {
			t.Fatalf("%+v: %v, want a *SelectionError", c.sel, err)
		}
		if se.List != c.list || se.Name != c.name || len(se.Weights) != 4 || se.Weights[0] != "fc1.weight" {
			t.Errorf("%+v: %+v", c.sel, se)
		}
	}
}

// TestMethodError: admmq.ADMMQ (an exact x-update) and unknown names are refused with a
// *MethodError before any work.
func TestMethodError(t *testing.T) {
	m, g := load(t, mlpPath)
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	d := openCalib(t, 64)
	for _, meth := range []admmq.Method{admmq.ADMMQ, "sgd", ""} {
		_, err := New(m, g, ts, Config{Method: meth, Rho: admmq.Schedule{Rho0: 1}, Iters: 1}, dataOf(t, d, nil, 64, 1))
		var me *MethodError
		if !errors.As(err, &me) || me.Method != meth {
			t.Errorf("%q: %v, want a *MethodError", meth, err)
		}
	}
}
