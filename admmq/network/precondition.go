package network

import (
	"fmt"
	"math"

	"github.com/qtool/qtool/engine"
)

// Precondition rescales every target that a BatchNormalization follows so that its
// output channels have mean |w| = 1, dividing the channel's bias and running mean by
// the same α_c, its running variance by α_c², and correcting the BatchNorm scale for ε,
// so that the network computes the same function in inference mode (up to float32
// rounding) while its weights sit at the scale of the ±1 grid.
//
// Why: a pretrained layer's weights are typically of size 1/√fan-in (0.01–0.1), far
// from ±1. ADMM's dual then accumulates x − y ≈ −y every iteration, z = x + λ/ρ flips
// sign, and y oscillates unless the x-update can move x all the way to ±1 — which the
// paper's budget (60 000 images, ≈600 Adam steps per x-update) allows but a calibration
// subset does not. BatchNorm makes the scale irrelevant to the function, as the paper's
// unscaled ±1 grid assumes. It returns how many weights it rescaled.
func Precondition(g *engine.Graph, targets []Target) (int, error) {
	n := 0
	for _, t := range targets {
		if t.norm == nil || t.norm.GetOpType() != "BatchNormalization" || len(t.norm.GetInput()) < 5 {
			continue
		}
		w := g.Param(t.Name)
		in := t.norm.GetInput()
		gamma, mean, variance := g.Param(in[1]), g.Param(in[3]), g.Param(in[4])
		if w == nil || gamma == nil || mean == nil || variance == nil {
			continue
		}
		shape, axis := t.Layout.Shape, t.Layout.Axis
		if len(shape) == 0 {
			continue
		}
		channels, inner := shape[axis], 1
		for _, d := range shape[axis+1:] {
			inner *= d
		}
		outer := len(w.Value.F) / (channels * inner)
		if len(gamma.Value.F) != channels || len(mean.Value.F) != channels || len(variance.Value.F) != channels {
			return n, fmt.Errorf("network: %s has %d output channels but %s normalises %d", t.Name, channels, t.norm.GetName(), len(mean.Value.F))
		}
		var bias []float32
		if t.bias != "" {
			if b := g.Param(t.bias); b != nil && len(b.Value.F) == channels {
				bias = b.Value.F
			}
		}
		eps := 1e-5
		for _, a := range t.norm.GetAttribute() {
			if a.GetName() == "epsilon" {
				eps = float64(a.GetF())
			}
		}
		for c := range channels {
			var sum float64
			for o := range outer {
				off := (o*channels + c) * inner
				for _, v := range w.Value.F[off : off+inner] {
					sum += math.Abs(float64(v))
				}
			}
			alpha := sum / float64(outer*inner)
			if alpha == 0 || math.IsNaN(alpha) || math.IsInf(alpha, 0) {
				continue
			}
			for o := range outer {
				off := (o*channels + c) * inner
				for i := range w.Value.F[off : off+inner] {
					w.Value.F[off+i] = float32(float64(w.Value.F[off+i]) / alpha)
				}
			}
			if bias != nil {
				bias[c] = float32(float64(bias[c]) / alpha)
			}
			v := float64(variance.Value.F[c])
			gamma.Value.F[c] = float32(float64(gamma.Value.F[c]) * math.Sqrt(v+alpha*alpha*eps) / math.Sqrt(v+eps))
			mean.Value.F[c] = float32(float64(mean.Value.F[c]) / alpha)
			variance.Value.F[c] = float32(v / (alpha * alpha))
		}
		for _, p := range []*engine.Param{w, gamma, mean, variance, g.Param(t.bias)} {
			if p != nil {
				p.Changed()
			}
		}
		n++
	}
	return n, nil
}
