package train

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
)

// bnStats is one BatchNormalization node's running statistics and their accumulators.
type bnStats struct {
	node       string
	momentum   float32
	mean, vari *engine.Param
	sumMean    []float64
	sumVar     []float64
	saved      [2][]float32
}

// RecalibrateBN re-estimates the running mean and variance of every BatchNormalization
// node of g (built from m) over one epoch of data with the current weights, as the
// cumulative average over batches of the batch means and unbiased batch variances — what
// PyTorch computes with momentum=None (torch.optim.swa_utils.update_bn). As there, the
// forward passes run in training mode, so Dropout drops. After binarization the weights
// differ from those the running statistics were collected with; re-estimating them
// recovers much of the accuracy lost.
//
// The engine updates running statistics at each node's momentum μ, running ← μ·running +
// (1−μ)·batch; RecalibrateBN zeroes them before each batch and reads batch = running/(1−μ)
// afterwards, so it needs μ < 1. On error or cancellation the running statistics are
// restored to their values before the call. Other parameters are not changed.
func RecalibrateBN(ctx context.Context, g *engine.Graph, m *onnxio.Model, data Batcher, eng *engine.Context) error {
	var nodes []*bnStats
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() != "BatchNormalization" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") {
			continue
		}
		in := n.GetInput()
		name := n.GetName()
		if name == "" && len(n.GetOutput()) > 0 {
			name = n.GetOutput()[0]
		}
		if len(in) < 5 {
			return fmt.Errorf("recalibrate BatchNorm: node %s has %d inputs, want 5", name, len(in))
		}
		b := &bnStats{node: name, momentum: 0.9, mean: g.Param(in[3]), vari: g.Param(in[4])}
		for _, a := range n.GetAttribute() {
			if a.GetName() == "momentum" {
				b.momentum = a.GetF()
			}
		}
		if b.mean == nil || b.vari == nil || b.mean.Value.DType != engine.Float32 || b.vari.Value.DType != engine.Float32 {
			// SeparateBNStats, run before the graph was built, resolves Identity aliases.
			return &BNStatsError{Node: name, Mean: in[3], Var: in[4]}
		}
		if !(b.momentum < 1) {
			return fmt.Errorf("recalibrate BatchNorm: node %s has momentum %v: its running statistics never take batch statistics", name, b.momentum)
		}
		for _, o := range nodes {
			if o.mean == b.mean || o.vari == b.vari {
				return fmt.Errorf("recalibrate BatchNorm: nodes %s and %s share running statistics", o.node, name)
			}
		}
		c := len(b.mean.Value.F)
		b.sumMean, b.sumVar = make([]float64, c), make([]float64, c)
		b.saved = [2][]float32{append([]float32(nil), b.mean.Value.F...), append([]float32(nil), b.vari.Value.F...)}
		nodes = append(nodes, b)
	}
	if len(nodes) == 0 {
		return nil
	}
	// The statistics are written between runs whatever the outcome.
	defer func() {
		for _, b := range nodes {
			b.mean.Changed()
			b.vari.Changed()
		}
	}()
	restore := func() {
		for _, b := range nodes {
			copy(b.mean.Value.F, b.saved[0])
			copy(b.vari.Value.F, b.saved[1])
		}
	}
	run := engine.Context{}
	if eng != nil {
		run = *eng
	}
	run.Training, run.NoGrad = true, true
	if run.Rand == nil {
		run.Rand = rand.New(rand.NewPCG(0, 0x626e)) // stream "bn"
	}
	var st stepper
	st.init(g)
	batches := 0
	for data.Next() {
		if err := ctx.Err(); err != nil {
			restore()
			return fmt.Errorf("recalibrate BatchNorm: %w", err)
		}
		f, n, err := st.input(g, data)
		if err != nil {
			restore()
			return fmt.Errorf("recalibrate BatchNorm: %w", err)
		}
		// A model declaring a fixed batch B is run on chunks of B, each a batch of the
		// average; a last chunk shorter than B > 1 is left out, as padding it would repeat
		// a sample in the batch statistics.
		for _, c := range f.Chunks(g) {
			if nc := c[1] - c[0]; nc != n && nc != DeclaredBatch(g) {
				continue
			}
			for _, b := range nodes {
				clear(b.mean.Value.F)
				clear(b.vari.Value.F)
			}
			if _, err := g.Forward(&run, f.Slice(c[0], c[1], c[1]-c[0])...); err != nil {
				restore()
				return fmt.Errorf("recalibrate BatchNorm: %w", err)
			}
			for _, b := range nodes {
				k := 1 / (1 - float64(b.momentum))
				for i, v := range b.mean.Value.F {
					b.sumMean[i] += float64(v) * k
				}
				for i, v := range b.vari.Value.F {
					b.sumVar[i] += float64(v) * k
				}
			}
			batches++
		}
	}
	if err := data.Err(); err != nil {
		restore()
		return fmt.Errorf("recalibrate BatchNorm: reading data: %w", err)
	}
	data.Reset()
	if batches == 0 {
		restore()
		return fmt.Errorf("recalibrate BatchNorm: the data gave no batch")
	}
	for _, b := range nodes {
		for i := range b.sumMean {
			b.mean.Value.F[i] = float32(b.sumMean[i] / float64(batches))
			b.vari.Value.F[i] = float32(b.sumVar[i] / float64(batches))
		}
	}
	return nil
}
