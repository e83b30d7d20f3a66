package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"

	"github.com/qtool/qtool/onnxio"
)

// The test models and their PyTorch fixtures are made by testmodels/make.py.
const testmodelsDir = "../testmodels"

const testmodelsInstall = "/usr/bin/python3 testmodels/make.py (see its header), or check out the committed testmodels/"

var testModels = []struct {
	name, data string
}{
	{"fmnist-mlp", "fmnist-calib.npz"},
	{"fmnist-cnn", "fmnist-calib.npz"},
	{"fmnist-resnet", "fmnist-calib.npz"},
	{"digits-mlp", "digits-test.npz"},
}

// npzArray reads one array of an .npz file as float32 or int64 values (by the type of
// dst) and returns its shape.
func npzArray(path, key string, dst any) ([]int, error) {
	f, err := npz.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	name := key
	if !slices.Contains(f.Keys(), name) {
		name = key + ".npy"
	}
	h := f.Header(name)
	if h == nil {
		return nil, fmt.Errorf("%s: no array %q (keys %v)", path, key, f.Keys())
	}
	if err := f.Read(name, dst); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, key, err)
	}
	return slices.Clone(h.Descr.Shape), nil
}

func npzKeys(path string) ([]string, error) {
	f, err := npz.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	var keys []string
	for _, k := range f.Keys() {
		keys = append(keys, strings.TrimSuffix(k, ".npy"))
	}
	return keys, nil
}

// loadTestModel returns the model, its graph and its shipped samples shaped for the
// model's input.
// trainFixtureParams makes trainable the parameters whose gradients the model's PyTorch
// fixture holds, and returns the fixture's path and the parameters' names.
func trainFixtureParams(t *testing.T, name string, g *Graph) (string, []string) {
	t.Helper()
	fpath := filepath.Join(testmodelsDir, "fixtures", name+"-grads.npz")
	requireAsset(t, fpath, testmodelsInstall)
	keys, err := npzKeys(fpath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, "eval/"); ok {
			names = append(names, name)
		}
	}
	if err := g.SetTrainable(names...); err != nil {
		t.Fatal(err)
	}
	return fpath, names
}

func loadTestModel(t *testing.T, name, data string) (*onnxio.Model, *Graph, *Tensor, []int64) {
	t.Helper()
	path := filepath.Join(testmodelsDir, name+".onnx")
	requireAsset(t, path, testmodelsInstall)
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var x []float32
	var y []int64
	dpath := filepath.Join(testmodelsDir, data)
	shape, err := npzArray(dpath, "x", &x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := npzArray(dpath, "y", &y); err != nil {
		t.Fatal(err)
	}
	// The MLPs take flattened images.
	if in := g.Inputs()[0].Shape; len(in) == 2 && len(shape) > 2 {
		shape = []int{shape[0], numel(shape[1:])}
	}
	return m, g, NewFloat(shape, x), y
}

// rows returns rows [lo, hi) of a batch-major tensor, sharing its data.
func rows(x *Tensor, lo, hi int) *Tensor {
	n := x.Len() / x.Shape[0]
	return NewFloat(append([]int{hi - lo}, x.Shape[1:]...), x.F[lo*n:hi*n])
}

// TestModelLogits runs every test model on its shipped samples and compares the logits
// with PyTorch's within 1e-4 absolute plus 1e-4 relative, in batches of 256 (the last
// one partial, which exercises a second plan).
func TestModelLogits(t *testing.T) {
	for _, tm := range testModels {
		t.Run(tm.name, func(t *testing.T) {
			_, g, x, _ := loadTestModel(t, tm.name, tm.data)
			var want []float32
			wpath := filepath.Join(testmodelsDir, "fixtures", tm.name+"-logits.npz")
			requireAsset(t, wpath, testmodelsInstall)
			wshape, err := npzArray(wpath, "logits", &want)
			if err != nil {
				t.Fatal(err)
			}
			n := x.Shape[0]
			if wshape[0] != n {
				t.Fatalf("fixture has %d rows, the data %d", wshape[0], n)
			}
			k := wshape[1]
			agree := 0
			for lo := 0; lo < n; lo += 256 {
				hi := min(lo+256, n)
				out, err := g.Forward(nil, rows(x, lo, hi))
				if err != nil {
					t.Fatal(err)
				}
				ref := NewFloat([]int{hi - lo, k}, want[lo*k:hi*k])
				if err := closeTensors(out[0], ref, 1e-4, 1e-4); err != nil {
					t.Fatalf("samples %d-%d: %v", lo, hi, err)
				}
				for i := range hi - lo {
					if argmax(out[0].F[i*k:(i+1)*k]) == argmax(ref.F[i*k:(i+1)*k]) {
						agree++
					}
				}
			}
			if agree != n {
				t.Errorf("top-1 agrees on %d of %d samples", agree, n)
			}
		})
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// softmaxCrossEntropy returns the mean cross-entropy of logits [n, k] against labels and
// its gradient with respect to the logits, (softmax − onehot)/n, computed in float64.
func softmaxCrossEntropy(logits *Tensor, labels []int64) (float64, *Tensor) {
	n, k := logits.Shape[0], logits.Shape[1]
	grad := NewFloat([]int{n, k}, make([]float32, n*k))
	var loss float64
	p := make([]float64, k)
	for i := range n {
		row := logits.F[i*k : (i+1)*k]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		var s float64
		for j, v := range row {
			p[j] = math.Exp(float64(v) - m)
			s += p[j]
		}
		loss += math.Log(s) + m - float64(row[labels[i]])
		for j := range k {
			q := p[j] / s
			if j == int(labels[i]) {
				q--
			}
			grad.F[i*k+j] = float32(q / float64(n))
		}
	}
	return loss / float64(n), grad
}

// TestModelGradients compares the parameter gradients of the mean softmax cross-entropy
// over the first 32 shipped samples with PyTorch's (computed in float64), in inference
// mode (BatchNorm on running statistics) and with BatchNorm on batch statistics, Dropout
// off in both. Each element must agree within 1e-3 of its value plus 1e-3 of the
// tensor's RMS: elements far below the tensor's scale are sums whose terms cancel, and
// float32 accumulation cannot resolve them relative to themselves. Gradients that are
// zero in exact arithmetic must be below 1e-3 of the RMS of all the model's gradients.
func TestModelGradients(t *testing.T) {
	const batch = 32
	for _, tm := range testModels {
		t.Run(tm.name, func(t *testing.T) {
			m, g, x, y := loadTestModel(t, tm.name, tm.data)
			fpath, names := trainFixtureParams(t, tm.name, g)
			xb, yb := rows(x, 0, batch), y[:batch]
			// Dropout stays off with BatchNorm in training mode: its ratio inputs, which
			// the exporter emits as Constant nodes (parameters), are set to 0.
			for _, n := range m.Proto.GetGraph().GetNode() {
				if n.GetOpType() != "Dropout" {
					continue
				}
				if len(n.GetInput()) < 2 || g.Param(n.GetInput()[1]) == nil {
					t.Fatalf("Dropout node %q has no ratio parameter to turn it off", n.GetName())
				}
				clear(g.Param(n.GetInput()[1]).Value.F)
			}
			// Eval first: the training-mode run updates the running statistics.
			for _, variant := range []string{"eval", "bntrain"} {
				ctx := &Context{Training: variant == "bntrain"}
				g.ZeroGrad()
				out, err := g.Forward(ctx, xb)
				if err != nil {
					t.Fatal(err)
				}
				loss, gout := softmaxCrossEntropy(out[0], yb)
				var want []float32
				if _, err := npzArray(fpath, "loss_"+variant, &want); err != nil {
					t.Fatal(err)
				}
				if math.Abs(loss-float64(want[0])) > 1e-4*math.Abs(float64(want[0]))+1e-6 {
					t.Errorf("%s: loss %.7g, PyTorch %.7g", variant, loss, want[0])
				}
				if err := g.Backward(ctx, gout); err != nil {
					t.Fatal(err)
				}
				refs := map[string][]float32{}
				var ssAll float64
				var nAll int
				for _, name := range names {
					var ref []float32
					shape, err := npzArray(fpath, variant+"/"+name, &ref)
					if err != nil {
						t.Fatal(err)
					}
					if got := g.Param(name).Grad; numel(shape) != got.Len() {
						t.Fatalf("%s %s: fixture shape %v, parameter %v", variant, name, shape, got.Shape)
					}
					refs[name] = ref
					for _, v := range ref {
						ssAll += float64(v) * float64(v)
					}
					nAll += len(ref)
				}
				rmsAll := math.Sqrt(ssAll / float64(max(nAll, 1)))
				worst := 0.0
				for _, name := range names {
					ref, got := refs[name], g.Param(name).Grad
					var ss float64
					for _, v := range ref {
						ss += float64(v) * float64(v)
					}
					rms := math.Sqrt(ss / float64(max(len(ref), 1)))
					// A bias followed by BatchNorm on batch statistics has a gradient that
					// is zero in exact arithmetic (PyTorch's float64 gives ~1e-17); ours
					// must then be negligible next to the model's gradients.
					zero := rms < 1e-9*rmsAll
					for i, r := range ref {
						d := math.Abs(float64(got.F[i]) - float64(r))
						scale := math.Abs(float64(r)) + rms
						if zero {
							scale = rmsAll
						}
						if d > 1e-3*scale {
							t.Errorf("%s: d/d%s[%d] = %.7g, PyTorch %.7g (tolerance %.2g)", variant, name, i, got.F[i], r, 1e-3*scale)
							break
						}
						worst = math.Max(worst, d/scale)
					}
				}
				t.Logf("%s: loss %.6f (PyTorch %.6f), worst gradient error %.2g of (|g|+rms)", variant, loss, want[0], worst)
			}
		})
	}
}

// BenchmarkModelForward measures inference on each test model at batch 1 and 256 with
// the default (pure-Go) BLAS; allocs/op shows the steady state.
func BenchmarkModelForward(b *testing.B) {
	for _, tm := range testModels {
		path := filepath.Join(testmodelsDir, tm.name+".onnx")
		m, err := onnxio.Load(path)
		if err != nil {
			b.Logf("skipping %s: %v", tm.name, err)
			continue
		}
		g, err := Build(m, Options{})
		if err != nil {
			b.Fatal(err)
		}
		var x []float32
		shape, err := npzArray(filepath.Join(testmodelsDir, tm.data), "x", &x)
		if err != nil {
			b.Fatal(err)
		}
		if in := g.Inputs()[0].Shape; len(in) == 2 && len(shape) > 2 {
			shape = []int{shape[0], numel(shape[1:])}
		}
		all := NewFloat(shape, x)
		for _, batch := range []int{1, 256} {
			if batch > shape[0] {
				continue
			}
			b.Run(fmt.Sprintf("%s/batch=%d", tm.name, batch), func(b *testing.B) {
				xb := rows(all, 0, batch)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := g.Forward(nil, xb); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// TestModelTrainAndWriteBack takes plain SGD steps on a test model through the public
// API — SetTrainable, training-mode Forward, Backward, in-place updates of Param.Value —
// checks that the loss falls, then writes the parameters back into the model and checks
// that a fresh graph built from it computes the same inference logits.
func TestModelTrainAndWriteBack(t *testing.T) {
	for _, tm := range testModels {
		t.Run(tm.name, func(t *testing.T) {
			m, g, x, y := loadTestModel(t, tm.name, tm.data)
			trainFixtureParams(t, tm.name, g)
			const batch, steps = 64, 8
			xb, yb := rows(x, 0, batch), y[:batch]
			ctx := &Context{Training: true, Rand: rand.New(rand.NewPCG(1, 2))}
			// The loss of the training objective: BatchNorm on batch statistics, and
			// the same Dropout masks for both measurements.
			trainLoss := func() float64 {
				out, err := g.Forward(&Context{Training: true, NoGrad: true, Rand: rand.New(rand.NewPCG(9, 9))}, xb)
				if err != nil {
					t.Fatal(err)
				}
				l, _ := softmaxCrossEntropy(out[0], yb)
				return l
			}
			before := trainLoss()
			for range steps {
				g.ZeroGrad()
				out, err := g.Forward(ctx, xb)
				if err != nil {
					t.Fatal(err)
				}
				_, gout := softmaxCrossEntropy(out[0], yb)
				if err := g.Backward(ctx, gout); err != nil {
					t.Fatal(err)
				}
				for _, p := range g.Params() {
					if p.Trainable {
						for i, d := range p.Grad.F {
							p.Value.F[i] -= 0.005 * d
						}
					}
				}
			}
			after := trainLoss()
			t.Logf("training loss on the batch: %.4f before, %.4f after %d SGD steps", before, after, steps)
			if !(after < before) {
				t.Errorf("loss rose from %.4f to %.4f", before, after)
			}
			// Frozen like the rebuilt graph, so that both run the same plan (inference
			// plans of frozen graphs fold BatchNormalization into Conv, which rounds
			// differently): the comparison below is then exact.
			if err := g.SetTrainable(); err != nil {
				t.Fatal(err)
			}
			out, err := g.Forward(nil, xb)
			if err != nil {
				t.Fatal(err)
			}
			want := NewFloat(slices.Clone(out[0].Shape), slices.Clone(out[0].F))
			if err := g.WriteParams(m); err != nil {
				t.Fatal(err)
			}
			g2, err := Build(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := g2.Forward(nil, xb)
			if err != nil {
				t.Fatal(err)
			}
			if err := closeTensors(got[0], want, 0, 0); err != nil {
				t.Errorf("rebuilt from the written model: %v", err)
			}
		})
	}
}
