//go:build cgo

package engine

import (
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestResizeExportAgainstOnnxruntime runs the PyTorch exports of testdata/resize in
// qtool and onnxruntime 1.30 and compares the outputs within 1e-5.
func TestResizeExportAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for _, c := range resizeExports {
		t.Run(c.file, func(t *testing.T) {
			m, g := loadResizeExport(t, c.file)
			recordPassed(t, opsCovered.ort, m.Proto)
			x := resizeExportInput(c.shape)
			got, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			shape := make([]int64, len(c.shape))
			for i, d := range c.shape {
				shape[i] = int64(d)
			}
			ref, err := ortref.RunFile(filepath.Join("testdata", "resize", c.file), []ortref.Tensor{{Name: "x", Shape: shape, Data: x.F}})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int, len(ref[0].Shape))
			for i, d := range ref[0].Shape {
				want[i] = int(d)
			}
			if err := closeTensors(got[0], NewFloat(want, ref[0].Data), 1e-5, 1e-5); err != nil {
				t.Error(err)
			}
		})
	}
}
