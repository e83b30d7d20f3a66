package engine_test

import (
	"fmt"
	"log"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// Example runs the embedded Fashion-MNIST MLP on a batch of two blank images. The batch
// dimension is free: the first Forward plans for batch 2, and later calls with the same
// shapes reuse that plan without allocating.
func Example() {
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp", "")
	if err != nil {
		log.Fatal(err)
	}
	g, err := engine.Build(m, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	in := g.Inputs()[0]
	shape := append([]int{2}, in.Shape[1:]...)
	x := engine.NewFloat(shape, make([]float32, 2*784))
	outs, err := g.Forward(nil, x)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Name, shape, "→", g.Outputs()[0].Name, outs[0].Shape)
	// Output: input [2 784] → logits [2 10]
}
