package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/urfave/cli/v2"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "measure a model's top-1 accuracy, or its agreement with another model",
		ArgsUsage: "MODEL.onnx",
		UsageText: `qtool eval MODEL.onnx --data FILE [--ref OTHER.onnx] [--json]

Examples:
   qtool eval testmodels/fmnist-cnn.onnx --data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
   qtool eval out.onnx --data testmodels/fmnist-calib.npz --ref testmodels/fmnist-mlp.onnx --json`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "ref", Usage: "reference `MODEL.onnx`: report top-1 agreement with it and the largest logit difference"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"},
			seedFlag(),
		}, dataFlags()...),
		Action: runEval,
	}
}

// evalResult is what eval reports; its JSON form is part of qtool's CLI interface.
type evalResult struct {
	Model   string `json:"model"`
	Samples int    `json:"samples"`
	// Accuracy is the top-1 accuracy in [0,1]; absent when the data have no labels.
	Accuracy *float64 `json:"accuracy,omitempty"`
	Correct  int      `json:"correct,omitempty"`
	// Ref, Agreement and MaxLogitDiff are set with --ref.
	Ref           string   `json:"ref,omitempty"`
	Agreement     *float64 `json:"agreement,omitempty"`
	MaxLogitDiff  *float64 `json:"max_logit_diff,omitempty"`
	SamplesPerSec float64  `json:"samples_per_sec"`
	BLAS          string   `json:"blas"`
}

func runEval(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("eval takes one MODEL.onnx argument, got %d", c.NArg())
	}
	be, err := selectBackend()
	if err != nil {
		return err
	}
	seed := c.Uint64("seed")
	m, err := loadModel(c.Args().First(), be, seed)
	if err != nil {
		return err
	}
	var ref *loaded
	if p := c.String("ref"); p != "" {
		if ref, err = loadModel(p, be, seed); err != nil {
			return err
		}
	}
	data, err := openData(c, m.input(), seed)
	if err != nil {
		return err
	}
	defer data.Close()
	ev, err := evaluate(c.Context, m, ref, data.Eval, data.BatchSize, be)
	if err != nil {
		return err
	}
	ev.BLAS = be.Info.Name
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(ev)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "model      %s\nsamples    %d\n", ev.Model, ev.Samples)
	if ev.Accuracy != nil {
		fmt.Fprintf(w, "accuracy   %.2f %% (%d/%d)\n", 100**ev.Accuracy, ev.Correct, ev.Samples)
	} else {
		fmt.Fprintln(w, "accuracy   n/a: the data have no labels")
	}
	if ev.Agreement != nil {
		fmt.Fprintf(w, "agreement  %.2f %% top-1 with %s\nmax |Δlogit| %.6g\n", 100**ev.Agreement, ev.Ref, *ev.MaxLogitDiff)
	}
	fmt.Fprintf(w, "speed      %.0f samples/s (%s BLAS)\n", ev.SamplesPerSec, ev.BLAS)
	return nil
}

// evaluate runs m (and ref, when given) over d in inference mode.
func evaluate(ctx context.Context, m, ref *loaded, d calib.Dataset, batchSize int, be backend) (*evalResult, error) {
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: batchSize})
	if err != nil {
		return nil, err
	}
	ectx := &engine.Context{BLAS: be.BLAS, Workers: be.Workers, NoGrad: true}
	res := &evalResult{Model: m.Path}
	var agree int
	maxDiff := 0.0
	var shape []int
	var elapsed time.Duration
	for b.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		shape = shape[:0]
		for _, s := range b.Shape() {
			shape = append(shape, int(s))
		}
		x := engine.NewFloat(shape, b.X())
		start := time.Now()
		outs, err := m.Graph.Forward(ectx, x)
		elapsed += time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Path, err)
		}
		logits := outs[0]
		rows := shape[0]
		cols := logits.Len() / rows
		pred := argmaxRows(logits.F, rows, cols)
		if y := b.Y(); d.HasLabels() {
			for i, p := range pred {
				if int64(p) == y[i] {
					res.Correct++
				}
			}
		}
		if ref != nil {
			// The model's outputs are overwritten by its next run, not by the reference's.
			routs, err := ref.Graph.Forward(ectx, x)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref.Path, err)
			}
			r := routs[0]
			if r.Len() != logits.Len() {
				return nil, fmt.Errorf("%s gives %d outputs per batch but %s gives %d: the models do not match", ref.Path, r.Len(), m.Path, logits.Len())
			}
			rp := argmaxRows(r.F, rows, cols)
			for i := range pred {
				if pred[i] == rp[i] {
					agree++
				}
			}
			for i, v := range logits.F {
				maxDiff = math.Max(maxDiff, math.Abs(float64(v)-float64(r.F[i])))
			}
		}
		res.Samples += rows
	}
	if err := b.Err(); err != nil {
		return nil, err
	}
	if res.Samples == 0 {
		return nil, fmt.Errorf("the evaluation data hold no samples")
	}
	if d.HasLabels() {
		acc := float64(res.Correct) / float64(res.Samples)
		res.Accuracy = &acc
	}
	if ref != nil {
		a := float64(agree) / float64(res.Samples)
		res.Ref, res.Agreement, res.MaxLogitDiff = ref.Path, &a, &maxDiff
	}
	if s := elapsed.Seconds(); s > 0 {
		res.SamplesPerSec = float64(res.Samples) / s
	}
	return res, nil
}

// argmaxRows returns the index of the largest value of each row; the first wins ties,
// as numpy.argmax and torch.argmax do.
func argmaxRows(v []float32, rows, cols int) []int {
	out := make([]int, rows)
	for r := range rows {
		row := v[r*cols : (r+1)*cols]
		best := 0
		for j := 1; j < cols; j++ {
			if row[j] > row[best] {
				best = j
			}
		}
		out[r] = best
	}
	return out
}
