package engine

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/onnxio"
)

// resizeExports are the PyTorch 1.13 exports of testdata/resize/make.py: a U-Net-like
// block whose bilinear (half_pixel) and nearest (asymmetric + floor) F.interpolate
// become Resize, and an attention block written with torch.einsum. Each names a conv or
// linear weight for the gradient check and the input shape.
var resizeExports = []struct {
	file, weight string
	shape        []int
}{
	// mid is the conv whose output both Resize nodes read. The first conv's gradient
	// also crosses MaxPool, whose windows switch under finite steps.
	{"unet.onnx", "mid.weight", []int{2, 3, 8, 8}},
	// The query projection's weight, transposed for MatMul by the exporter.
	{"einsum.onnx", "onnx::MatMul_51", []int{2, 5, 8}},
}

func loadResizeExport(t *testing.T, file string) (*onnxio.Model, *Graph) {
	t.Helper()
	m, err := onnxio.Load(filepath.Join("testdata", "resize", file))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func resizeExportInput(shape []int) *Tensor {
	r := rand.New(rand.NewPCG(4, 4))
	x := NewFloat(shape, make([]float32, numel(shape)))
	for i := range x.F {
		x.F[i] = float32(2 * (r.Float64() - 0.5))
	}
	return x
}

// TestResizeExportGradient checks the gradient of L = Σ w·y with respect to a weight in
// front of the Resize or Einsum nodes by finite differences, so that their VJPs are
// checked inside real exporter graphs. The step is 1e-3 because a step of 1e-2 moves
// some pre-activations across ReLU's kink.
func TestResizeExportGradient(t *testing.T) {
	for _, c := range resizeExports {
		t.Run(c.file, func(t *testing.T) {
			_, g := loadResizeExport(t, c.file)
			if err := g.SetTrainable(c.weight); err != nil {
				t.Fatal(err)
			}
			x := resizeExportInput(c.shape)
			out, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(9, 1))
			w := NewFloat(slices.Clone(out[0].Shape), gFloats(r, out[0].Len()))
			loss := func() float64 {
				out, err := g.Forward(nil, x)
				if err != nil {
					t.Fatal(err)
				}
				var l float64
				for j, v := range out[0].F {
					l += float64(w.F[j]) * float64(v)
				}
				return l
			}
			loss()
			if err := g.Backward(nil, w); err != nil {
				t.Fatal(err)
			}
			p := g.Param(c.weight)
			analytic := slices.Clone(p.Grad.F)
			fdCheck(t, c.file+": d/d"+c.weight, p.Value.F, func(j int) float64 { return float64(analytic[j]) }, loss,
				fdSpec{step: fixedStep(1e-3), atol: 1e-3, rtol: 1e-2})
		})
	}
}
