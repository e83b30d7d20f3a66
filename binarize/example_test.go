package binarize_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// Binarize the embedded fmnist-mlp on part of its calibration subset with a tiny budget,
// and read what the run did. The printed facts do not depend on floating-point
// details: which weights were binarized, that they are exactly ±1, and the file format.
func Example() {
	model, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		log.Fatal(err)
	}
	g, err := engine.Build(model, engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// Read the data for the model's input; the same file serves as calibration and
	// held-out set here, split 80:20.
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "fmnist-calib.npz")
	if err := os.WriteFile(path, testmodels.FMNISTCalib, 0o644); err != nil {
		log.Fatal(err)
	}
	all, err := calib.Open(path, calib.Options{Input: binarize.InputOf(g), Limit: 300, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer all.Close()
	cal, held, err := calib.Split(all, 0.8, 0.2, 1)
	if err != nil {
		log.Fatal(err)
	}

	o := binarize.Defaults()
	o.Iters, o.InnerEpochs, o.BatchSize = 1, 1, 64
	res, err := binarize.Run(context.Background(), model, binarize.Data{Calib: cal, Eval: held}, o)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("algorithm:", res.Method, "loss:", res.Loss)
	for _, w := range res.Weights {
		pm := true
		for _, v := range w.Values {
			pm = pm && (v == 1 || v == -1)
		}
		fmt.Printf("%s: %d weights, all ±1: %v\n", w.Name, len(w.Values), pm)
	}
	fmt.Println("iterations:", len(res.History), "held-out samples:", res.Binarized.Samples)
	// The first and last layers stay in float32 by default (DefaultKeep).
	fmt.Println("file smaller than the input:", len(res.Bytes) < len(testmodels.FMNISTMLP))
	// Output:
	// algorithm: i-admm-q loss: ce
	// fc2.weight: 65536 weights, all ±1: true
	// fc3.weight: 65536 weights, all ±1: true
	// iterations: 1 held-out samples: 60
	// file smaller than the input: true
}
