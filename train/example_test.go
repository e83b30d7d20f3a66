package train_test

import (
	"context"
	"fmt"
	"log"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// Fine-tune the shipped Fashion-MNIST MLP on its calibration subset for two epochs with
// Adam and a cosine schedule, then re-estimate its BatchNorm statistics and evaluate it.
func Example() {
	m, err := onnxio.Load("../testmodels/fmnist-mlp.onnx")
	if err != nil {
		log.Fatal(err)
	}
	g, err := engine.Build(m, engine.Options{Workers: 2})
	if err != nil {
		log.Fatal(err)
	}
	// Weights, biases and BatchNorm scales and shifts; not the running statistics.
	if err := g.SetTrainable("fc1.weight", "fc1.bias", "bn1.weight", "bn1.bias",
		"fc2.weight", "fc2.bias", "bn2.weight", "bn2.bias",
		"fc3.weight", "fc3.bias", "bn3.weight", "bn3.bias",
		"fc4.weight", "fc4.bias", "bn4.weight", "bn4.bias"); err != nil {
		log.Fatal(err)
	}
	d, err := calib.Open("../testmodels/fmnist-calib.npz", calib.Options{Input: calib.Input{Shape: []int64{-1, 784}, Classes: 10}})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	data, err := calib.NewBatches(d, calib.BatchOptions{Size: 100, Shuffle: true, Seed: 1, DropLast: true})
	if err != nil {
		log.Fatal(err)
	}
	res, err := train.Fit(context.Background(), g, data, train.Options{
		Epochs:    2,
		Loss:      train.CrossEntropy{},
		Optimizer: train.NewAdam(train.AdamOptions{WeightDecay: 1e-4, Decoupled: true}),
		Schedule:  train.Cosine{LR: 1e-4, Total: 20},
		Seed:      1,
		EpochEnd: func(r train.EpochReport) error {
			// ADMM's y- and λ-updates would run here.
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := train.RecalibrateBN(context.Background(), g, m, data, nil); err != nil {
		log.Fatal(err)
	}
	metrics, err := train.Evaluate(context.Background(), g, data, train.EvalOptions{Loss: train.CrossEntropy{}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d epochs, %d steps; %d samples evaluated, labelled: %v\n", res.Epochs, res.Steps, metrics.Samples, metrics.Labelled)
	// Output: 2 epochs, 20 steps; 1000 samples evaluated, labelled: true
}
