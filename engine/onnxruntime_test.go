//go:build cgo

package engine

import (
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// TestModelsAgainstOnnxruntime runs every test model on its shipped samples in qtool's
// engine and in onnxruntime 1.30: outputs must agree within 1e-4 (absolute plus
// relative) and top-1 predictions on every sample.
func TestModelsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	for _, tm := range testModels {
		t.Run(tm.name, func(t *testing.T) {
			m, g, x, _ := loadTestModel(t, tm.name, tm.data)
			recordPassed(t, opsCovered.ort, m.Proto)
			sess, err := ortref.NewSessionFile(filepath.Join(testmodelsDir, tm.name+".onnx"), ortref.Options{IntraOpThreads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			n := x.Shape[0]
			agree := 0
			for lo := 0; lo < n; lo += 256 {
				hi := min(lo+256, n)
				in := rows(x, lo, hi)
				out, err := g.Forward(nil, in)
				if err != nil {
					t.Fatal(err)
				}
				shape := make([]int64, len(in.Shape))
				for i, d := range in.Shape {
					shape[i] = int64(d)
				}
				ref, err := sess.Run([]ortref.Tensor{{Name: sess.InputNames()[0], Shape: shape, Data: in.F}})
				if err != nil {
					t.Fatal(err)
				}
				rshape := make([]int, len(ref[0].Shape))
				for i, d := range ref[0].Shape {
					rshape[i] = int(d)
				}
				want := NewFloat(rshape, ref[0].Data)
				if err := closeTensors(out[0], want, 1e-4, 1e-4); err != nil {
					t.Fatalf("samples %d-%d: %v", lo, hi, err)
				}
				k := rshape[len(rshape)-1]
				for i := range hi - lo {
					if argmax(out[0].F[i*k:(i+1)*k]) == argmax(want.F[i*k:(i+1)*k]) {
						agree++
					}
				}
			}
			if agree != n {
				t.Errorf("top-1 agrees with onnxruntime on %d of %d samples", agree, n)
			}
			t.Logf("%s: %d samples agree with onnxruntime within 1e-4, top-1 100%%", tm.name, n)
		})
	}
}

// ortCoverageSources are the tests that record onnxruntime coverage for TestOpCoverage.
func ortCoverageSources() []coverageSource {
	return []coverageSource{
		{"TestModelsAgainstOnnxruntime", TestModelsAgainstOnnxruntime},
		{"TestOpsAgainstOnnxruntime", TestOpsAgainstOnnxruntime},
		{"TestQuantizeLinearAgainstOnnxruntime", TestQuantizeLinearAgainstOnnxruntime},
		{"TestBlockedInt4MatMulAgainstOnnxruntime", TestBlockedInt4MatMulAgainstOnnxruntime},
		{"TestMatMulNBitsAgainstOnnxruntime", TestMatMulNBitsAgainstOnnxruntime},
		{"TestLogicAgainstOnnxruntime", TestLogicAgainstOnnxruntime},
		{"TestMaskedAttentionExport", TestMaskedAttentionExport},
		{"TestControlFlowAgainstOnnxruntime", TestControlFlowAgainstOnnxruntime},
		{"TestScriptedExportAgainstOnnxruntime", TestScriptedExportAgainstOnnxruntime},
		{"TestResizeAgainstOnnxruntime", TestResizeAgainstOnnxruntime},
		{"TestEinsumAgainstOnnxruntime", TestEinsumAgainstOnnxruntime},
		{"TestResizeExportAgainstOnnxruntime", TestResizeExportAgainstOnnxruntime},
		{"TestRNNAgainstOnnxruntime", TestRNNAgainstOnnxruntime},
		{"TestRNNClassifierExports", TestRNNClassifierExports},
		{"TestSiLUPairOnnxruntime", TestSiLUPairOnnxruntime},
	}
}
