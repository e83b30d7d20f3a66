package main

import (
	"fmt"
	"runtime"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/urfave/cli/v2"
)

// seedFlag is the --seed flag of every command with randomness: data splits, shuffling,
// dropout and the ADMM-R masks all derive from it.
func seedFlag() cli.Flag {
	return &cli.Uint64Flag{Name: "seed", Value: 1, Usage: "`SEED` for every random choice; the same inputs and seed give bit-identical outputs"}
}

// backend is the BLAS and worker configuration a command runs with.
type backend struct {
	BLAS    gblas.Float32
	Info    blas.Info
	Workers int
}

// selectBackend chooses the BLAS from QTOOL_BLAS. An unknown mode is a usage error.
func selectBackend() (backend, error) {
	impl, info, err := blas.Select(blas.ModeFromEnv())
	if err != nil {
		return backend{}, usagef("%s: %v", blas.EnvVar, err)
	}
	return backend{BLAS: impl, Info: info, Workers: runtime.GOMAXPROCS(0)}, nil
}

// loaded is a model ready to run.
type loaded struct {
	Path  string
	Model *onnxio.Model
	Graph *engine.Graph
}

// loadModel reads path and builds its graph.
func loadModel(path string, be backend, seed uint64) (*loaded, error) {
	m, err := onnxio.Load(path)
	if err != nil {
		return nil, err
	}
	return buildModel(m, path, be, seed)
}

func buildModel(m *onnxio.Model, path string, be backend, seed uint64) (*loaded, error) {
	g, err := engine.Build(m, engine.Options{BLAS: be.BLAS, Workers: be.Workers, Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(g.Inputs()) != 1 {
		return nil, fmt.Errorf("%s: the model has %d inputs; qtool feeds calibration data to models with exactly one", path, len(g.Inputs()))
	}
	if len(g.Outputs()) < 1 {
		return nil, fmt.Errorf("%s: the model has no outputs", path)
	}
	return &loaded{Path: path, Model: m, Graph: g}, nil
}

// input describes the model's data input for calib: its declared shape and, from the
// first output's last dimension, the number of classes that labels must stay below.
func (l *loaded) input() calib.Input {
	in := l.Graph.Inputs()[0]
	shape := make([]int64, len(in.Shape))
	for i, d := range in.Shape {
		shape[i] = int64(d)
	}
	if len(shape) > 0 {
		shape[0] = -1 // the batch dimension is always free for qtool
	}
	classes := 0
	if out := l.Graph.Outputs()[0].Shape; len(out) > 0 && out[len(out)-1] > 0 {
		classes = out[len(out)-1]
	}
	return calib.Input{Name: in.Name, Shape: shape, Classes: classes}
}
