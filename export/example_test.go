package export_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// Project every weight of the embedded fmnist-mlp onto ±α per output channel, export the
// model in the packed format and compare the two files. The algorithm here is one
// projection (GD+Proj without the fine-tuning); any algorithm hands export the same
// thing: values on the grid, the levels, the scales and their axis.
func Example() {
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		panic(err)
	}
	set := admmq.MustSet(admmq.Spec{Kind: admmq.KindScaledBinary, Scale: admmq.ScaleOptimal, PerChannel: true})
	levels := []int{-1, 1}
	var weights []export.Weight
	roles := m.ParamRoles()
	for _, p := range m.Params() {
		c := roles[p.Name]
		if c.Role != onnxio.RoleWeight {
			continue
		}
		t, err := m.Tensor(p.Tensor)
		if err != nil {
			panic(err)
		}
		// The output channels' axis comes from the model's layer schema; admmq only
		// needs the number.
		axis, err := c.Use.ChannelAxis(t.Dims)
		if err != nil {
			panic(err)
		}
		shape := make([]int, len(t.Dims))
		for i, d := range t.Dims {
			shape[i] = int(d)
		}
		y := make([]float32, len(t.Float))
		if err := set.Project32(y, t.Float, admmq.Layout{Shape: shape, Axis: axis}); err != nil {
			panic(err)
		}
		scales := export.ScalesFromValues(y, t.Dims, levels, axis, true)
		weights = append(weights, export.Weight{Name: p.Name, Values: y, Grid: export.Grid{Levels: levels, Scales: scales, Axis: axis}})
	}

	dir, err := os.MkdirTemp("", "export-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	orig, quant := filepath.Join(dir, "fmnist-mlp.onnx"), filepath.Join(dir, "fmnist-mlp-binary.onnx")
	if err := m.Save(orig); err != nil {
		panic(err)
	}
	if err := export.WriteFile(quant, m, weights, export.Options{Format: export.Packed}); err != nil {
		panic(err)
	}
	q, err := onnxio.Load(quant)
	if err != nil {
		panic(err)
	}
	rep, err := export.Compare(m, q, orig, quant, export.CompareOptions{})
	if err != nil {
		panic(err)
	}
	tot := rep.Totals
	fmt.Printf("%d weights binarized, %d B of them before\n", tot.BinarizedWeights, tot.BinarizedBytesBefore)
	fmt.Printf("tensors %d B -> %d B (scales %d B, unpacking constants %d B)\n", tot.TensorBytesBefore, tot.TensorBytesAfter, tot.ScaleBytes, tot.UnpackBytes)
	fmt.Printf("file %d B -> %d B: %.2f %% saved, %.2fx smaller\n", tot.FileBytesBefore, tot.FileBytesAfter, tot.SavedPercent, tot.Ratio)
	// Output:
	// 334336 weights binarized, 1337344 B of them before
	// tensors 1352920 B -> 68736 B (scales 3112 B, unpacking constants 8256 B)
	// file 1356822 B -> 74767 B: 94.49 % saved, 18.15x smaller
}
