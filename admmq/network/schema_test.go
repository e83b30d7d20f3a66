package network

import (
	"math"
	"testing"

	"github.com/qtool/qtool/engine"
)

// layersPath is PyTorch's export of one layer per weight layout (onnxio/testdata/layers.py).
const layersPath = "../../onnxio/testdata/layers.onnx"

// TestPreconditionConvTranspose: rescaling a ConvTranspose that BatchNorm follows also
// rescales its own bias (input 2, as for Conv), so the outputs stay as they were.
func TestPreconditionConvTranspose(t *testing.T) {
	m, g := load(t, layersPath)
	x := make([]float32, 1*4*6*6)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	forward := func() [][]float32 {
		outs, err := g.Forward(&engine.Context{Workers: 1, NoGrad: true}, engine.NewFloat([]int{1, 4, 6, 6}, x))
		if err != nil {
			t.Fatal(err)
		}
		var vs [][]float32
		for _, o := range outs {
			vs = append(vs, append([]float32(nil), o.F...))
		}
		return vs
	}
	before := forward()
	ts, err := Targets(m, Binary, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Precondition(g, ts)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("rescaled %d weights, want 2 (conv and deconv are followed by BatchNorm)", n)
	}
	after := forward()
	for k := range before {
		for i := range before[k] {
			if d := math.Abs(float64(before[k][i] - after[k][i])); d > 1e-4*(1+math.Abs(float64(before[k][i]))) {
				t.Fatalf("output %d, value %d: %v before, %v after rescaling", k, i, before[k][i], after[k][i])
			}
		}
	}
}

// TestTargetsChannelAxes: each target's layout carries the schema's output-channel axis,
// and a weight without one (a grouped ConvTranspose) is projected and snapped with one
// scale for the whole tensor rather than one per index of an arbitrary axis.
func TestTargetsChannelAxes(t *testing.T) {
	m, _ := load(t, layersPath)
	ts, err := Targets(m, Int4, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"conv.weight": 0, "deconv.weight": 1, "linear.weight": 0,
		"onnx::MatMul_47": 1, "gemm_b.1": 1, "gemm_a.1": 0, "left.1": 0}
	for _, tg := range ts {
		p, _ := m.Param(tg.Name)
		tt, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		if tg.Name == "gdeconv.weight" {
			if tg.Layout.Shape != nil || tg.Set.Spec().PerChannel {
				t.Errorf("%s: layout %+v, per-channel %v; want one scale for the tensor", tg.Name, tg.Layout, tg.Set.Spec().PerChannel)
			}
			y := make([]float32, len(tt.Float))
			if err := tg.Set.Project32(y, tt.Float, tg.Layout); err != nil {
				t.Fatal(err)
			}
			if eg := snap(Int4, y, tg); len(eg.Scales) != 1 {
				t.Errorf("%s: snapped with %d scales, want 1", tg.Name, len(eg.Scales))
			}
			continue
		}
		w, ok := want[tg.Name]
		if !ok {
			t.Errorf("unexpected target %s", tg.Name)
			continue
		}
		if tg.Layout.Axis != w || len(tg.Layout.Shape) != len(tt.Dims) {
			t.Errorf("%s %v: layout %+v, want axis %d", tg.Name, tt.Dims, tg.Layout, w)
		}
		delete(want, tg.Name)
	}
	if len(want) != 0 {
		t.Errorf("not targeted: %v", want)
	}
}
