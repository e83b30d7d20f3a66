//go:build cgo

// Command infer measures inference throughput of qtool's engine against onnxruntime 1.30
// in the same run, on the shipped test models and on the paper's full-width MLP
// (784-4096×3-10 with BatchNorm, random weights), at batch 1 and batch 256, and prints
// samples per second with the ratio qtool/onnxruntime for each BLAS.
//
//	go run ./bench/infer                    # every model, OpenBLAS and pure Go
//	go run ./bench/infer -models fmnist-cnn -blas openblas -seconds 5
//
// It needs cgo and onnxruntime's library (see internal/ortref).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/internal/benchkit"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels/papermlp"
)

func main() {
	models := flag.String("models", "fmnist-mlp,fmnist-cnn,fmnist-resnet,paper-mlp", "comma-separated models: testmodels names and paper-mlp")
	blasModes := flag.String("blas", "openblas,go", "comma-separated BLAS modes for qtool")
	batches := flag.String("batches", "1,256", "comma-separated batch sizes")
	seconds := flag.Float64("seconds", 2, "measuring time per configuration")
	threads := flag.Int("threads", 2, "threads for both engines")
	flag.Parse()
	if err := run(strings.Split(*models, ","), strings.Split(*blasModes, ","), *batches, *seconds, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "infer:", err)
		os.Exit(1)
	}
}

type modelData struct {
	name  string
	bytes []byte
	model *onnxio.Model
	input []int64 // one sample's shape
}

func loadModels(names []string) ([]modelData, error) {
	var out []modelData
	for _, name := range names {
		var m *onnxio.Model
		if name == "paper-mlp" {
			m = papermlp.New(papermlp.PaperWidth, 1)
		} else {
			p := filepath.Join(benchkit.ModuleRoot(), "testmodels", name+".onnx")
			var err error
			if m, err = onnxio.Load(p); err != nil {
				return nil, err
			}
		}
		var buf bytes.Buffer
		if err := m.Write(&buf); err != nil {
			return nil, err
		}
		g, err := engine.Build(m, engine.Options{})
		if err != nil {
			return nil, err
		}
		var sample []int64
		for _, d := range g.Inputs()[0].Shape[1:] {
			sample = append(sample, int64(d))
		}
		out = append(out, modelData{name: name, bytes: buf.Bytes(), model: m, input: sample})
	}
	return out, nil
}

func run(names, modes []string, batchList string, seconds float64, threads int) error {
	runtime.GOMAXPROCS(threads)
	ver, lib, err := ortref.Version()
	if err != nil {
		return fmt.Errorf("onnxruntime: %w (%s)", err, ortref.InstallHint)
	}
	batches, err := benchkit.Batches(batchList)
	if err != nil {
		return err
	}
	models, err := loadModels(names)
	if err != nil {
		return err
	}
	fmt.Printf("onnxruntime %s (%s), %d threads; %d CPUs (%s)\n\n", ver, lib, threads, runtime.NumCPU(), benchkit.CPUModel())
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatch\tonnxruntime samples/s\tBLAS\tqtool samples/s\tqtool/onnxruntime\t")
	for _, md := range models {
		for _, b := range batches {
			x := make([]float32, b*int(numel(md.input)))
			r := rand.New(rand.NewPCG(1, 2))
			for i := range x {
				x[i] = r.Float32()
			}
			shape := append([]int64{int64(b)}, md.input...)
			ortRate, err := timeORT(md, shape, x, seconds, threads)
			if err != nil {
				return fmt.Errorf("%s: onnxruntime: %w", md.name, err)
			}
			for _, mode := range modes {
				impl, info, err := blas.Select(mode)
				if err != nil {
					return err
				}
				rate, err := timeQtool(md, shape, x, seconds, impl, threads)
				if err != nil {
					return fmt.Errorf("%s: qtool: %w", md.name, err)
				}
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.0f\t%.2f×\t\n", md.name, b, ortRate, info.Name, rate, rate/ortRate)
			}
		}
	}
	return tw.Flush()
}

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

func timeORT(md modelData, shape []int64, x []float32, seconds float64, threads int) (float64, error) {
	s, err := ortref.NewSession(md.bytes, ortref.Options{IntraOpThreads: threads, NoSpinning: true})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	in := []ortref.Tensor{{Name: s.InputNames()[0], Shape: shape, Data: x}}
	rate, err := benchkit.Rate(seconds, func() error { _, err := s.Run(in); return err })
	return rate * float64(shape[0]), err
}

func timeQtool(md modelData, shape []int64, x []float32, seconds float64, impl gblas.Float32, threads int) (float64, error) {
	g, err := engine.Build(md.model, engine.Options{BLAS: impl, Workers: threads})
	if err != nil {
		return 0, err
	}
	ishape := make([]int, len(shape))
	for i, d := range shape {
		ishape[i] = int(d)
	}
	in := engine.NewFloat(ishape, x)
	ctx := &engine.Context{BLAS: impl, Workers: threads, NoGrad: true}
	rate, err := benchkit.Rate(seconds, func() error { _, err := g.Forward(ctx, in); return err })
	return rate * float64(shape[0]), err
}
