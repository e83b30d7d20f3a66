package binarize

import (
	"fmt"
	"math"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// gridMagnitudes returns, for each target, the mean |v| over the grid point P_A(x⁰) of
// its current (pretrained, possibly rescaled) weights: the mean |level×scale| of the
// tensor's grid as the weights use it. It is exactly 1 on the binary grid, whose points
// are ±1, so the shipped binary runs keep their learning rate bit for bit.
func gridMagnitudes(g *engine.Graph, targets []network.Target) (map[string]float64, error) {
	out := make(map[string]float64, len(targets))
	for _, t := range targets {
		p := g.Param(t.Name)
		if p == nil || p.Value.DType != engine.Float32 {
			return nil, fmt.Errorf("weight %s is not a float parameter of the graph", t.Name)
		}
		y := make([]float32, len(p.Value.F))
		if err := t.Set.Project32(y, p.Value.F, t.Layout); err != nil {
			return nil, fmt.Errorf("projecting %s: %w", t.Name, err)
		}
		var sum float64
		for _, v := range y {
			sum += math.Abs(float64(v))
		}
		m := sum / float64(max(len(y), 1))
		// A tensor of zeros projects to a zero grid point (a zero scale): it keeps the
		// base rate rather than never moving.
		if !(m > 0) {
			m = 1
		}
		out[t.Name] = m
	}
	return out, nil
}

// keptMagnitudes returns, for each weight of m that is no target (kept in full
// precision and fine-tuned with the rest), the mean |w| of its values in g: the rate a
// kept weight trains at is relative to its own magnitude, as a target's is to its grid's.
// An absolute 1e-2 on a kept layer of weights ~1e-3 blew the loss up (TestGridRelativeLR).
func keptMagnitudes(g *engine.Graph, m *onnxio.Model, targets []network.Target, into map[string]float64) {
	target := make(map[string]bool, len(targets))
	for _, t := range targets {
		target[t.Name] = true
	}
	for name, c := range m.ParamRoles() {
		p := g.Param(name)
		if c.Role != onnxio.RoleWeight || target[name] || p == nil || p.Value.DType != engine.Float32 {
			continue
		}
		var sum float64
		for _, v := range p.Value.F {
			sum += math.Abs(float64(v))
		}
		if mean := sum / float64(max(len(p.Value.F), 1)); mean > 0 {
			into[name] = mean
		}
	}
}

// gridLR is an optimizer whose rate for a target weight is the base rate times the mean
// magnitude of the weight's grid (gridMagnitudes), for a kept weight its own mean
// magnitude (keptMagnitudes); every other parameter (biases, normalisation) takes the
// base rate. Adam's step is about lr per element whatever the
// gradient's size, so with the base rate 1e-2 a weight moves by 1 % of its grid's
// magnitude per step on every grid: on a per-channel binary grid with weights of 1e-3
// an absolute 1e-2 would jump ten times the distance between grid points at each step.
//
// Parameters are updated in graph order, consecutive ones with the same rate in one
// call, so a run whose factors are all 1 calls the inner optimizer exactly as before.
type gridLR struct {
	train.Optimizer
	factor map[string]float64
	group  []*engine.Param
}

func (o *gridLR) Step(ctx *engine.Context, params []*engine.Param, lr float64) error {
	cur := math.NaN()
	o.group = o.group[:0]
	flush := func() error {
		if len(o.group) == 0 {
			return nil
		}
		err := o.Optimizer.Step(ctx, o.group, lr*cur)
		o.group = o.group[:0]
		return err
	}
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		f, ok := o.factor[p.Name]
		if !ok {
			f = 1
		}
		if f != cur {
			if err := flush(); err != nil {
				return err
			}
			cur = f
		}
		o.group = append(o.group, p)
	}
	return flush()
}
