package binarize

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// TestMixedGridsThroughOnnxruntime: fmnist-resnet with every weight on another grid (all
// six in turn) and one kept in full precision is trained, exported packed, and the file
// holds each weight at its grid's code width in the storage report, with its grid and
// reason, and onnxruntime computes the same logits as qtool's engine on it.
func TestMixedGridsThroughOnnxruntime(t *testing.T) {
	ortref.Require(t)
	dir := t.TempDir()
	orig := filepath.Join("..", "testmodels", "fmnist-resnet.onnx")
	m, err := onnxio.Load(orig)
	if err != nil {
		t.Fatal(err)
	}
	cpath := filepath.Join(dir, "calib.npz")
	if err := os.WriteFile(cpath, testmodels.FMNISTCalib, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := calib.Open(cpath, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 1, 28, 28}, Classes: 10}, Limit: 200, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	all, err := network.Targets(m, network.Binary, network.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.Iters, o.InnerEpochs, o.BatchSize, o.Workers = 1, 1, 50, 1
	kept := all[2].Name
	o.Selection = network.Selection{Keep: []string{kept}}
	o.Grids = map[string]network.Grid{}
	want := map[string]network.Grid{}
	k := 0
	for _, tg := range all {
		if tg.Name == kept {
			continue
		}
		g := network.Grids()[k%len(network.Grids())]
		o.Grids[tg.Name], want[tg.Name] = g, g
		k++
	}
	o.Output = filepath.Join(dir, "mixed.onnx")
	res, err := Run(context.Background(), m, Data{Calib: d}, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Grid != MixedGrid {
		t.Errorf("grid %q, want %q", res.Grid, MixedGrid)
	}
	for _, tg := range res.Targets {
		if tg.Grid != want[tg.Name] {
			t.Errorf("%s trained on %s, want %s", tg.Name, tg.Grid, want[tg.Name])
		}
	}
	choices := map[string]export.GridChoice{}
	for name, g := range want {
		choices[name] = export.GridChoice{Grid: string(g), Why: "test"}
	}
	rep, err := export.Compare(m, res.Model, orig, o.Output, export.CompareOptions{Grids: choices})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, tr := range rep.Tensors {
		g, ok := want[tr.Name]
		if tr.Name == kept {
			if tr.Binarized || tr.Format != "fp32" {
				t.Errorf("kept %s: binarized %v, format %s", kept, tr.Binarized, tr.Format)
			}
			continue
		}
		if !ok {
			continue
		}
		seen++
		bits := map[network.Grid]int64{network.Binary: 1, network.BinaryChannel: 1, network.Ternary: 2, network.Int2: 2, network.Int4: 4, network.Int8: 8}[g]
		if tr.Format != "packed" || tr.StoredBytes != (tr.Count*bits+7)/8 || tr.Grid != string(g) || tr.Why != "test" {
			t.Errorf("%s on %s: format %s, %d bytes for %d values, grid %q; want packed at %d bits", tr.Name, g, tr.Format, tr.StoredBytes, tr.Count, tr.Grid, bits)
		}
		if g.Scaled() != (tr.ScaleBytes > 0) {
			t.Errorf("%s on %s: %d scale bytes", tr.Name, g, tr.ScaleBytes)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d quantized weights in the report", seen, len(want))
	}
	// What `qtool inspect` reads back: each weight's code width, levels and scales.
	qs, err := export.Quantized(res.Model)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != len(want) {
		t.Errorf("%d quantized tensors in the file, want %d", len(qs), len(want))
	}
	for _, q := range qs {
		g := want[q.Name]
		levels := g.Levels()
		if q.Format != "packed" || q.Bits != (export.Grid{Levels: levels}).Bits() || !slices.Equal(q.Levels, levels) || (q.Scales > 0) != g.Scaled() {
			t.Errorf("%s on %s reads back as %+v", q.Name, g, q)
		}
	}
	// 64 calibration images through both runtimes.
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Next() {
		t.Fatal(b.Err())
	}
	x := append([]float32(nil), b.X()...)
	shape := []int{64, 1, 28, 28}
	outs, err := ortref.RunFile(o.Output, []ortref.Tensor{{Name: "input", Shape: []int64{64, 1, 28, 28}, Data: x}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Build(res.Model, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eo, err := g.Forward(nil, engine.NewFloat(shape, x))
	if err != nil {
		t.Fatal(err)
	}
	got, ref := eo[0].F, outs[0].Data
	if len(got) != len(ref) || len(got) != 64*10 {
		t.Fatalf("%d engine logits, %d onnxruntime logits; want 640", len(got), len(ref))
	}
	for i := range 64 {
		norm, arg, rarg := 1.0, 0, 0
		for j := range 10 {
			norm = math.Max(norm, math.Abs(float64(ref[i*10+j])))
			if got[i*10+j] > got[i*10+arg] {
				arg = j
			}
			if ref[i*10+j] > ref[i*10+rarg] {
				rarg = j
			}
		}
		for j := range 10 {
			if d := math.Abs(float64(got[i*10+j] - ref[i*10+j])); d > 1e-4*norm {
				t.Fatalf("sample %d logit %d: engine %v, onnxruntime %v", i, j, got[i*10+j], ref[i*10+j])
			}
		}
		if arg != rarg {
			t.Errorf("sample %d: engine class %d, onnxruntime %d", i, arg, rarg)
		}
	}
}
