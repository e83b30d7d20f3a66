package train_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"

	"github.com/qtool/qtool/internal/testenv"
)

const (
	fashionDir     = "/usr/share/datasets/fashion-mnist"
	fashionInstall = "apt-get install dataset-fashion-mnist"
	testmodels     = "../testmodels"
)

// calib's batch iterator feeds the training loop as it is.
var _ train.Batcher = (*calib.Batches)(nil)

// need skips the test when an optional asset is missing, and fails it under CI=true.
func need(t *testing.T, path, how string) {
	t.Helper()
	testenv.RequireFile(t, path, how)
}

// inputOf describes the model's first input for calib.
func inputOf(m *onnxio.Model) calib.Input {
	v := m.Inputs()[0]
	in := calib.Input{Name: v.Name, Classes: 10}
	for _, d := range v.Shape {
		if d.Fixed {
			in.Shape = append(in.Shape, d.Value)
		} else {
			in.Shape = append(in.Shape, -1)
		}
	}
	return in
}

// trainable lists the weights, biases and BatchNorm scales and shifts: every float
// initializer but BatchNorm's running statistics.
func trainable(m *onnxio.Model) []string {
	running := map[string]bool{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" && len(n.GetInput()) >= 5 {
			running[n.GetInput()[3]], running[n.GetInput()[4]] = true, true
		}
	}
	var names []string
	for _, p := range m.Params() {
		if onnxio.IsFloat(onnxio.DataType(p.Tensor.GetDataType())) && !running[p.Name] && len(p.Tensor.GetDims()) > 0 {
			names = append(names, p.Name)
		}
	}
	return names
}

func batches(t *testing.T, d calib.Dataset, size int, shuffle bool) *calib.Batches {
	t.Helper()
	// Training drops the ragged last batch, as the models' training did, so that
	// BatchNormalization never sees a tiny batch.
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: size, Shuffle: shuffle, Seed: 11, DropLast: shuffle})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFineTuneTestModels is the package's API test: fine-tuning each testmodels network
// for one epoch lowers its training loss and keeps its accuracy within 0.5 percentage
// points of where it started, or better.
//
// The Fashion-MNIST networks train on a seeded subset of the 60 000 training images, 12 000
// for the MLP and 6 000 for the convolutional networks (to keep the suite within minutes on
// two cores), with Adam at lr 1e-4 and the batch size the models were trained with; their loss is measured on that
// subset before and after, in inference mode, and their accuracy on the full 10 000-image
// test set. digits-mlp has only the shipped test split (450 samples): it trains on it (7
// batches of 64), and both loss and accuracy are measured there.
func TestFineTuneTestModels(t *testing.T) {
	impl, info, err := blas.Select(blas.ModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BLAS: %s", info)
	cases := []struct {
		model       string
		train, test string
		limit       int
		batch       int
	}{
		{"fmnist-mlp", fashionDir + "/train-images-idx3-ubyte.gz", fashionDir + "/t10k-images-idx3-ubyte.gz", 12000, 256},
		{"fmnist-cnn", fashionDir + "/train-images-idx3-ubyte.gz", fashionDir + "/t10k-images-idx3-ubyte.gz", 6000, 256},
		{"fmnist-resnet", fashionDir + "/train-images-idx3-ubyte.gz", fashionDir + "/t10k-images-idx3-ubyte.gz", 6000, 256},
		{"digits-mlp", testmodels + "/digits-test.npz", "", 0, 64},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			path := filepath.Join(testmodels, c.model+".onnx")
			need(t, path, "run testmodels/make.py")
			need(t, c.train, fashionInstall)
			m, err := onnxio.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			in := inputOf(m)
			var o calib.Options
			o.Input, o.Limit, o.Seed = in, c.limit, 3
			trainSet, err := calib.Open(c.train, o)
			if err != nil {
				t.Fatal(err)
			}
			defer trainSet.Close()
			testSet := trainSet
			if c.test != "" {
				testSet, err = calib.Open(c.test, calib.Options{Input: in})
				if err != nil {
					t.Fatal(err)
				}
				defer testSet.Close()
			}
			g, err := engine.Build(m, engine.Options{BLAS: impl, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetTrainable(trainable(m)...); err != nil {
				t.Fatal(err)
			}
			run := &engine.Context{BLAS: impl, Workers: 2}
			ctx := context.Background()
			measure := func() (loss, acc float64) {
				l, err := train.Evaluate(ctx, g, batches(t, trainSet, 500, false), train.EvalOptions{Loss: train.CrossEntropy{}, Engine: run})
				if err != nil {
					t.Fatal(err)
				}
				a, err := train.Evaluate(ctx, g, batches(t, testSet, 500, false), train.EvalOptions{Engine: run})
				if err != nil {
					t.Fatal(err)
				}
				return l.Loss, a.Accuracy
			}
			loss0, acc0 := measure()
			res, err := train.Fit(ctx, g, batches(t, trainSet, c.batch, true), train.Options{
				Epochs: 1, Loss: train.CrossEntropy{}, Optimizer: train.NewAdam(train.AdamOptions{}),
				Schedule: train.Constant{LR: 1e-4}, Engine: run, Seed: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			loss1, acc1 := measure()
			t.Logf("%s: %d steps; training loss %.4f → %.4f; accuracy %.2f%% → %.2f%% on %d samples",
				c.model, res.Steps, loss0, loss1, 100*acc0, 100*acc1, testSet.Len())
			if !(loss1 < loss0) {
				t.Errorf("training loss rose from %.5f to %.5f", loss0, loss1)
			}
			if acc1 < acc0-0.005 {
				t.Errorf("accuracy fell from %.2f%% to %.2f%%", 100*acc0, 100*acc1)
			}
		})
	}
}

// TestRecalibrateBNMatchesPyTorch re-estimates fmnist-cnn's BatchNorm statistics over
// fmnist-calib.npz in batches of 250 and compares them with
// torch.optim.swa_utils.update_bn on the same weights (stored in the fixture) and batches
// (testdata/make_bn_fixture.py).
func TestRecalibrateBNMatchesPyTorch(t *testing.T) {
	path := filepath.Join(testmodels, "fmnist-cnn.onnx")
	need(t, path, "run testmodels/make.py")
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := npz.Open("testdata/bn_cnn.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	read := func(key string) []float32 {
		var v []float32
		if err := ref.Read(key+".npy", &v); err != nil {
			t.Fatalf("testdata/bn_cnn.npz: %s: %v", key, err)
		}
		return v
	}
	g, err := engine.Build(m, engine.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The weights the fixture was made with, running statistics included: RecalibrateBN
	// must overwrite those.
	n := 0
	for _, k := range ref.Keys() {
		name, ok := strings.CutPrefix(strings.TrimSuffix(k, ".npy"), "param_")
		if !ok {
			continue
		}
		p := g.Param(name)
		v := read("param_" + name)
		if p == nil || len(p.Value.F) != len(v) {
			t.Fatalf("testdata/bn_cnn.npz: parameter %s does not fit fmnist-cnn.onnx: run testdata/make_bn_fixture.py", name)
		}
		copy(p.Value.F, v)
		n++
	}
	if n != len(g.Params()) {
		t.Fatalf("testdata/bn_cnn.npz holds %d parameters, fmnist-cnn.onnx %d: run testdata/make_bn_fixture.py", n, len(g.Params()))
	}
	d, err := calib.Open(filepath.Join(testmodels, "fmnist-calib.npz"), calib.Options{Input: inputOf(m)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: 250})
	if err != nil {
		t.Fatal(err)
	}
	if err := train.RecalibrateBN(context.Background(), g, m, b, nil); err != nil {
		t.Fatal(err)
	}
	for _, bn := range []string{"bn1", "bn2"} {
		for _, s := range []string{"_running_mean", "_running_var"} {
			want := read(bn + s)
			got := g.Param(bn + strings.Replace(s, "_running", ".running", 1)).Value.F
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Errorf("%s%s[%d] = %v, PyTorch %v", bn, s, i, got[i], want[i])
				}
			}
		}
	}
}
