package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// constInputConformance lists conformance tests whose op needs its inputs' values to
// plan shapes (Range's length depends on start, limit and delta) but whose model feeds
// them as float graph inputs, which qtool knows only at run time. Exporters give such
// ops constants, so the test turns each data set's inputs into initializers and checks
// the suite's expected outputs through the whole executor.
var constInputConformance = []string{"test_range_float_type_positive_delta",
	// Resize's and Upsample's output shape follows from their float scales.
	"test_resize_downsample_scales_cubic", "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
	"test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_linear",
	"test_resize_downsample_scales_linear_align_corners", "test_resize_downsample_scales_nearest",
	"test_resize_upsample_scales_cubic", "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
	"test_resize_upsample_scales_cubic_align_corners", "test_resize_upsample_scales_cubic_asymmetric",
	"test_resize_upsample_scales_linear", "test_resize_upsample_scales_linear_align_corners",
	"test_resize_upsample_scales_nearest", "test_upsample_nearest"}

func TestConformanceInputsAsConstants(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	for _, name := range constInputConformance {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(conformanceDir, name)
			raw, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
			if len(sets) == 0 {
				t.Fatal("no data sets")
			}
			for _, set := range sets {
				mp := &onnxpb.ModelProto{}
				if err := proto.Unmarshal(raw, mp); err != nil {
					t.Fatal(err)
				}
				recordPassed(t, opsCovered.conf, mp)
				gp := mp.GetGraph()
				for i, vi := range gp.GetInput() {
					b, err := os.ReadFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
					if err != nil {
						t.Fatal(err)
					}
					tp := &onnxpb.TensorProto{}
					if err := proto.Unmarshal(b, tp); err != nil {
						t.Fatal(err)
					}
					tp.Name = proto.String(vi.GetName())
					gp.Initializer = append(gp.Initializer, tp)
				}
				gp.Input = nil
				g, err := Build(&onnxio.Model{Name: name, Proto: mp}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				outs, err := g.Forward(nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := range outs {
					want, err := onnxio.ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
					if err != nil {
						t.Fatal(err)
					}
					if err := closeTensors(outs[i], fromONNX(want), 1e-4, 1e-4); err != nil {
						t.Errorf("%s: output %d: %v", filepath.Base(set), i, err)
					}
				}
			}
		})
	}
}
