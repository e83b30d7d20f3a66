package binarize

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/onnxio"
)

// TestDefaultSelection: by default the first, last and depthwise weights stay in full precision and
// each binarized weight gets ±1 where a normalisation follows it, ±α per channel
// elsewhere; Keep {KeepNone} binarizes every weight (the paper's setting). A model of
// two weights keeps none of them by default, while asking for first and last explicitly
// is refused as leaving nothing.
func TestDefaultSelection(t *testing.T) {
	load := func(name string) *onnxio.Model {
		m, err := onnxio.Load(filepath.Join("..", "testmodels", name))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	targets := func(m *onnxio.Model, o Options) ([]string, []network.Grid) {
		ts, _, err := Targets(m, o)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		var grids []network.Grid
		for _, t := range ts {
			names, grids = append(names, t.Name), append(grids, t.Grid)
		}
		return names, grids
	}
	d := Defaults()
	if d.Grid != network.Auto || d.RhoScale != RhoGradient || d.Rho.Rho0 != DefaultRho {
		t.Fatalf("Defaults: grid %s, ρ scale %s, ρ %v", d.Grid, d.RhoScale, d.Rho.Rho0)
	}
	mlp := load("fmnist-mlp.onnx")
	if names, grids := targets(mlp, d); !slices.Equal(names, []string{"fc2.weight", "fc3.weight"}) || !slices.Equal(grids, []network.Grid{network.Binary, network.Binary}) {
		t.Errorf("fmnist-mlp by default: %v on %v, want fc2 and fc3 on the ±1 grid", names, grids)
	}
	all := d
	all.Selection.Keep = []string{KeepNone}
	if names, _ := targets(mlp, all); len(names) != 4 {
		t.Errorf("fmnist-mlp with Keep none: %v, want its 4 weights", names)
	}
	cnn := load("fmnist-cnn.onnx")
	names, grids := targets(cnn, all)
	if last := len(names) - 1; grids[0] != network.Binary || grids[last] != network.BinaryChannel {
		t.Errorf("fmnist-cnn, every weight on auto: %v on %v, want the BatchNorm-followed convolutions on ±1 and the last Gemm on ±α", names, grids)
	}
	// fmnist-resnet's depthwise convolutions (PyTorch's groups = in_channels, the
	// [C, 1, 3, 3] weights named dw) stay in float by default, its other inner weights do
	// not; keeping first and last only binarizes them.
	resnet := load("fmnist-resnet.onnx")
	inner := []string{"block1.conv1.weight", "block1.pw.weight", "block1.short.weight", "block2.pw.weight",
		"block3.conv1.weight", "block3.pw.weight", "block3.short.weight"}
	if names, _ := targets(resnet, d); !slices.Equal(names, inner) {
		t.Errorf("fmnist-resnet by default: %v, want %v", names, inner)
	}
	endsOnly := d
	endsOnly.Selection.Keep = []string{"first", "last"}
	if names, _ := targets(resnet, endsOnly); len(names) != len(inner)+3 || !slices.Contains(names, "block2.dw.weight") {
		t.Errorf("fmnist-resnet keeping first and last: %v, want the depthwise weights too", names)
	}
	digits := load("digits-mlp.onnx")
	if names, _ := targets(digits, d); len(names) != 2 {
		t.Errorf("digits-mlp (2 weights) by default: %v, want both", names)
	}
	explicit := d
	explicit.Selection.Keep = []string{"first", "last"}
	var se *network.SelectionError
	if _, _, err := Targets(digits, explicit); !errors.As(err, &se) {
		t.Errorf("digits-mlp with Keep first,last asked for: %v, want a *network.SelectionError", err)
	}
	bad := d
	bad.Selection.Keep = []string{KeepNone, "first"}
	var oe *OptionError
	if err := bad.Validate(); !errors.As(err, &oe) || oe.Field != "Selection" {
		t.Errorf("Keep none,first: %v, want an *OptionError on Selection", err)
	}
}

// TestRhoScalesReported: the result gives one ρ factor per binarized weight; under the
// default gradient scale they are the measured ‖∇f(y⁰)‖/‖y⁰‖, far below the grid scale's
// exact 1 on the ±1 grid (fmnist-mlp's gradients are ~1e-5 of its weights), which is what
// RhoGrid reports instead.
func TestRhoScalesReported(t *testing.T) {
	m, data, o := small(t)
	for _, scale := range []RhoScale{RhoGradient, RhoGrid} {
		o := o
		o.RhoScale = scale
		res, err := Run(context.Background(), m, data, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.RhoScales) != len(res.Targets) {
			t.Fatalf("%s: %d ρ factors for %d weights", scale, len(res.RhoScales), len(res.Targets))
		}
		for i, k := range res.RhoScales {
			if scale == RhoGrid && k != 1 || scale == RhoGradient && !(k > 0 && k < 1e-2) {
				t.Errorf("%s: %s's ρ factor %v", scale, res.Targets[i].Name, k)
			}
		}
	}
}

// TestUnnormalizedGrowthDefault: ρ grows where no normalisation follows under the default
// gradient-relative ρ only; the paper's absolute ρ and the grid scale keep their schedule
// unless told, and an explicit factor stands under every scale.
func TestUnnormalizedGrowthDefault(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want float64
	}{
		{Options{}, DefaultUnnormalizedGrowth},
		{Options{RhoScale: RhoGradient, UnnormalizedGrowth: 1}, 1},
		{Options{AbsoluteRho: true}, 1},
		{Options{RhoScale: RhoGrid}, 1},
		{Options{RhoScale: RhoAbsolute, UnnormalizedGrowth: 3}, 3},
	} {
		o := c.o.withDefaults()
		if o.UnnormalizedGrowth != c.want {
			t.Errorf("%+v: growth %v, want %v", c.o, o.UnnormalizedGrowth, c.want)
		}
		cfg, err := o.config(nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UnnormalizedGrowth != c.want {
			t.Errorf("%+v: network growth %v, want %v", c.o, cfg.UnnormalizedGrowth, c.want)
		}
	}
}
