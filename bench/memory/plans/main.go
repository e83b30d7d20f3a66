// Command plans prints the bytes of a model's engine plans, as Graph.PlanBytes counts
// them, at a few batch sizes: the inference plan, and the training plan with every float
// parameter trainable. It is how the memory accounting of binarize (TrainNeed) was checked
// against the workloads of bench/memory.
//
//	go run ./bench/memory/plans MODEL.onnx [BATCH...]
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: plans MODEL.onnx [BATCH...]")
		os.Exit(2)
	}
	m, err := onnxio.Load(os.Args[1])
	if err != nil {
		fail(err)
	}
	g, err := engine.Build(m, engine.Options{MaxBytes: 1 << 40})
	if err != nil {
		fail(err)
	}
	var names []string
	var params int64
	for _, p := range g.Params() {
		if p.Value.DType == engine.Float32 {
			names = append(names, p.Name)
			params += int64(len(p.Value.F))
		}
	}
	fmt.Printf("%d float parameters (%d bytes)\n", params, 4*params)
	batches := []int{1, 64, 256, 512}
	if len(os.Args) > 2 {
		batches = batches[:0]
		for _, a := range os.Args[2:] {
			b, err := strconv.Atoi(a)
			if err != nil {
				fail(err)
			}
			batches = append(batches, b)
		}
	}
	in := g.Inputs()[0]
	for _, b := range batches {
		shape := append([]int{b}, in.Shape[1:]...)
		x := engine.NewFloat(shape, nil)
		if err := g.SetTrainable(); err != nil {
			fail(err)
		}
		inf, err := g.PlanBytes(&engine.Context{NoGrad: true}, x)
		if err != nil {
			fail(err)
		}
		if err := g.SetTrainable(names...); err != nil {
			fail(err)
		}
		tr, err := g.PlanBytes(&engine.Context{Training: true}, x)
		if err != nil {
			fail(err)
		}
		fmt.Printf("batch %4d: inference %8.1f MB  training %8.1f MB  (%.2f / %.2f MB per sample)\n",
			b, float64(inf)/1e6, float64(tr)/1e6, float64(inf)/1e6/float64(b), float64(tr)/1e6/float64(b))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
