//go:build cgo

package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
)

// TestFuseExpandDWAgainstOnnxruntime runs fused inverted-residual pairs (expandDWModel:
// Clip and SiLU, 3×3 and 5×5, unit stride and stride 2, folded BatchNormalizations, a
// GlobalAveragePool; MobileNetV2's 16 → 96 at 112 × 112 in bands of rows, and with the
// bands lowered to a few rows of smaller planes) in the engine with two workers and in
// onnxruntime 1.30, which runs its own kernels on the same graph.
func TestFuseExpandDWAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for i, c := range []struct {
		name         string
		x            []int
		M, K, stride int
		act          string
		bn, gap      bool
		// bandAbove and bandRows as the graph's fields (0: the defaults); banded: the
		// pair must run in bands.
		bandAbove, bandRows int
		banded              bool
	}{
		{"3x3_clip", []int{4, 16, 28, 28}, 96, 3, 1, "Clip", false, false, 0, 0, false},
		{"3x3_stride2_clip_bn", []int{3, 24, 56, 56}, 144, 3, 2, "Clip", true, false, 0, 0, false},
		{"5x5_stride2_silu_gap", []int{2, 24, 30, 30}, 48, 5, 2, "SiLU", false, true, 0, 0, false},
		{"3x3_hardswish_bn_gap", []int{2, 16, 20, 20}, 40, 3, 1, "HardSwish", true, true, 0, 0, false},
		{"band_112_stride2_clip_bn", []int{2, 16, 112, 112}, 96, 3, 2, "Clip", true, false, 0, 0, true},
		{"band_rows3_5x5_stride2_silu", []int{3, 8, 43, 38}, 32, 5, 2, "SiLU", false, false, 256, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(43, uint64(i)))
			m := expandDWModel(r, c.x, c.M, c.K, c.stride, c.act, c.bn, c.gap, false)
			x := nntRand(r, c.x, -2, 2)
			ref := ortOutputs(t, m, x)
			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			g.expandBandAbove, g.expandBandRows = c.bandAbove, c.bandRows
			got, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			if convDirectOK() && dwPlaneFast() && g.last.expandDW != 1 {
				t.Fatalf("%d pairs fused, want 1", g.last.expandDW)
			}
			banded := bandedRuns(g)
			if want := c.banded && convDirectOK() && dwPlaneFast(); (banded > 0) != want {
				t.Fatalf("%d runs in bands, want bands %v", banded, want)
			}
			for o := range got {
				// Sums of up to 24 + 25 products in other orders, a BatchNormalization
				// folded into the weights.
				if err := closeTensors(got[o], ref[o], 1e-4, 1e-4); err != nil {
					t.Errorf("output %d: %v", o, err)
				}
			}
		})
	}
}

// ortOutputs runs m in onnxruntime on x, its one input "x", and returns its outputs.
func ortOutputs(t *testing.T, m *onnxio.Model, x *Tensor) []*Tensor {
	t.Helper()
	b, err := proto.Marshal(m.Proto)
	if err != nil {
		t.Fatal(err)
	}
	dims := make([]int64, len(x.Shape))
	for j, d := range x.Shape {
		dims[j] = int64(d)
	}
	ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: dims, Data: x.F}})
	if err != nil {
		t.Fatalf("onnxruntime: %v", err)
	}
	out := make([]*Tensor, len(ref))
	for o, r := range ref {
		shape := make([]int, len(r.Shape))
		for j, d := range r.Shape {
			shape[j] = int(d)
		}
		out[o] = NewFloat(shape, r.Data)
	}
	return out
}
