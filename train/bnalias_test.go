package train

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/sbinet/npyio/npz"
)

// fixedBatcher reads x [n, ...sample] in order, size samples at a time, with the labels
// y (len(y)/n per sample) or without labels (y nil).
type fixedBatcher struct {
	x      []float32
	y      []int64
	sample []int64
	n      int
	size   int
	pos    int
	shape  []int64
	cur    []float32
	cury   []int64
}

func (b *fixedBatcher) Next() bool {
	if b.pos >= b.n {
		return false
	}
	m := min(b.size, b.n-b.pos)
	per := len(b.x) / b.n
	b.cur = b.x[b.pos*per : (b.pos+m)*per]
	if b.y != nil {
		py := len(b.y) / b.n
		b.cury = b.y[b.pos*py : (b.pos+m)*py]
	}
	b.shape = append([]int64{int64(m)}, b.sample...)
	b.pos += m
	return true
}
func (b *fixedBatcher) X() []float32   { return b.cur }
func (b *fixedBatcher) Y() []int64     { return b.cury }
func (b *fixedBatcher) Shape() []int64 { return b.shape }
func (b *fixedBatcher) Err() error     { return nil }
func (b *fixedBatcher) Reset()         { b.pos = 0 }

// densenet returns the DenseNet-121 export of testdata/make_densenet.py, generated
// under the repository's .cache/ (32 MB, too large to commit), or skips without torchvision.
func densenet(t *testing.T) (model, fixture string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "densenet121-32"))
	if err != nil {
		t.Fatal(err)
	}
	model, fixture = filepath.Join(dir, "densenet121-32.onnx"), filepath.Join(dir, "densenet121-32.npz")
	if _, err := os.Stat(fixture); err == nil {
		return model, fixture
	}
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch, torchvision").Run(); err != nil {
		t.Skipf("DenseNet-121 export needs %s with torch and torchvision (apt-get install python3-torchvision): %v", py, err)
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	out, err := exec.Command(py, filepath.Join("testdata", "make_densenet.py"), tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("make_densenet.py: %v\n%s", err, out)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return model, fixture
}

// TestRecalibrateDenseNet: PyTorch 1.13's export of DenseNet-121 feeds the running
// statistics of its 121 BatchNorm nodes through Identity nodes of a few merged tensors
// (some of them BatchNorm scales and shifts). After SeparateBNStats, RecalibrateBN runs
// and its statistics equal torch.optim.swa_utils.update_bn's, computed by the generator
// over the same batches; the scales and shifts the statistics were aliased to are unchanged.
func TestRecalibrateDenseNet(t *testing.T) {
	path, fix := densenet(t)
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	aliased := 0
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "Identity" {
			aliased++
		}
	}
	if aliased == 0 {
		t.Fatal("the export has no Identity nodes: it no longer shows the merged initializers")
	}
	// Unseparated, the statistics are not parameters: the error the issue reported.
	g0, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	x := fixture32Path(t, fix, "x")
	data := &fixedBatcher{x: x, sample: []int64{3, 32, 32}, n: 8, size: 4}
	if err := RecalibrateBN(context.Background(), g0, m, data, &engine.Context{Workers: 1}); err == nil || !strings.Contains(err.Error(), "not float parameters") {
		t.Fatalf("without SeparateBNStats: err = %v, want the statistics refused", err)
	}
	changed, err := SeparateBNStats(m)
	if err != nil {
		t.Fatal(err)
	}
	// The first node to use each merged tensor keeps it as a direct input.
	if len(changed) < 60 {
		t.Errorf("separated the statistics of %d nodes, want most of the 121", len(changed))
	}
	g, err := engine.Build(m, engine.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	affine := map[string][]float32{}
	for _, p := range g.Params() {
		if strings.HasSuffix(p.Name, ".weight") || strings.HasSuffix(p.Name, ".bias") {
			affine[p.Name] = append([]float32(nil), p.Value.F...)
		}
	}
	data.Reset()
	if err := RecalibrateBN(context.Background(), g, m, data, &engine.Context{Workers: 1}); err != nil {
		t.Fatal(err)
	}
	for name, v := range affine {
		for i, w := range g.Param(name).Value.F {
			if w != v[i] {
				t.Fatalf("%s changed: re-estimation wrote through an alias", name)
			}
		}
	}
	checked := 0
	var worst float64
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() != "BatchNormalization" {
			continue
		}
		module := strings.TrimSuffix(n.GetInput()[1], ".weight")
		// The channel's standard deviation is the scale both statistics are compared at:
		// what a normalised activation moves by when they are off.
		sd := fixture32Path(t, fix, module+".running_var")
		for i, stat := range [...]string{3: "running_mean", 4: "running_var"} {
			if stat == "" {
				continue
			}
			want := fixture32Path(t, fix, module+"."+stat)
			got := g.Param(n.GetInput()[i]).Value.F
			if len(got) != len(want) {
				t.Fatalf("%s.%s: %d values, want %d", module, stat, len(got), len(want))
			}
			for j := range got {
				// Float32 convolutions summed in another order, through up to 120 layers
				// normalised by batch statistics: the mean relative to the channel's
				// standard deviation, the variance relative to itself.
				scale := math.Sqrt(float64(sd[j]))
				if i == 4 {
					scale = float64(want[j])
				}
				e := math.Abs(float64(got[j])-float64(want[j])) / scale
				worst = max(worst, e)
				if e > 1e-3 {
					t.Fatalf("%s.%s[%d] = %v, PyTorch's update_bn gives %v", module, stat, j, got[j], want[j])
				}
			}
			checked++
		}
	}
	if checked != 242 {
		t.Errorf("checked %d statistics, want 242", checked)
	}
	t.Logf("121 BatchNorm nodes, worst relative difference from PyTorch %.2g", worst)
}

func fixture32Path(t *testing.T, path, key string) []float32 {
	t.Helper()
	f, err := npz.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v []float32
	if err := f.Read(key+".npy", &v); err != nil {
		t.Fatalf("%s: %s: %v", path, key, err)
	}
	return v
}
