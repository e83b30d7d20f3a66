package network

import (
	"math"

	"github.com/qtool/qtool/admmq"
)

// The STE path (admmq.STE, BinaryConnect; Courbariaux et al. 2015). The parameters of
// the targeted weights hold the latent float x. Before each training step's forward pass
// steSwap saves x and writes P_A(x) in its place, so the forward and backward passes run
// at the projection; after the backward pass (train.Options.GradHook, before the
// optimizer step) steRestore puts x back, so the optimizer applies the gradient taken at
// P_A(x) to x unchanged: the straight-through estimator, with the identity for the
// derivative of P_A. The buffers are allocated once in New; a step allocates nothing.
//
// With Config.STEClip the latent weights are clipped to the grid's range before each
// swap and at the end of each epoch, as BinaryConnect clips to [−1, 1]: without it, a
// weight the gradient keeps pushing outward grows without bound and can never flip back.
// Only grids whose range does not depend on x have one (steRange); the grids with a
// fitted scale are left unclipped.

// steInit prepares the STE path: the latent copies and the swap before every step.
func (r *Run) steInit() {
	r.latent = make([][]float32, len(r.params))
	r.clipLo = make([]float32, len(r.params))
	r.clipHi = make([]float32, len(r.params))
	for i, p := range r.params {
		r.latent[i] = make([]float32, len(p.Value.F))
		r.clipLo[i], r.clipHi[i] = float32(math.Inf(-1)), float32(math.Inf(1))
		if lo, hi, ok := steRange(r.targets[i].Set.Spec()); ok && r.cfg.STEClip {
			r.clipLo[i], r.clipHi[i] = float32(lo), float32(hi)
		}
	}
	r.feed.before = r.steSwap
}

// steRange returns the interval the levels of a set span when it does not depend on the
// weights: [−1, 1] for {−1,+1}, ±α·m for a fixed scale α, [Lo, Hi] for the integer box.
// A fitted scale (admmq.ScaleOptimal's mean |x|, admmq.ScaleMax's max|x|/m) has none:
// clipping to ±mean|x| would shrink x every step until every |x| is equal, and the range
// of max|x|/m is max|x| itself, so the clip would do nothing. The lattice is unbounded.
func steRange(s admmq.Spec) (lo, hi float64, ok bool) {
	fixed := s.Scale == "" || s.Scale == admmq.ScaleFixed
	switch s.Kind {
	case admmq.KindBinary:
		return -1, 1, true
	case admmq.KindScaledBinary, admmq.KindTernary:
		if fixed {
			return -s.Alpha, s.Alpha, true
		}
	case admmq.KindUniform:
		if fixed {
			m := float64(int(1)<<(s.Bits-1) - 1)
			return -s.Alpha * m, s.Alpha * m, true
		}
	case admmq.KindBox:
		return float64(s.Lo), float64(s.Hi), true
	}
	return 0, 0, false
}

// steSwap clips the latent x, saves it and writes P_A(x) in its place. It is idempotent,
// because the feed calls it before every Next, including the one that ends the epoch.
func (r *Run) steSwap() {
	if r.swapped {
		return
	}
	for i, p := range r.params {
		x := p.Value.F
		lo, hi := r.clipLo[i], r.clipHi[i]
		for j, v := range x {
			// NaN passes through, for Project32 to refuse and the loss to report.
			if v < lo {
				x[j] = lo
			} else if v > hi {
				x[j] = hi
			}
		}
		copy(r.latent[i], x)
		// Project32 fails only on NaN, which the next loss reports.
		_ = r.targets[i].Set.Project32(x, x, r.targets[i].Layout)
		p.Changed()
	}
	r.swapped = true
}

// steRestore puts the latent x back in place of P_A(x): the GradHook of the STE path,
// after the backward pass at P_A(x) and before the optimizer step.
func (r *Run) steRestore(int) error {
	if r.swapped {
		for i, p := range r.params {
			copy(p.Value.F, r.latent[i])
			p.Changed()
		}
		r.swapped = false
	}
	return nil
}

// steEpochEnd restores x after train.Fit returns (the feed swapped before the Next that
// ended the epoch, or a step failed between swap and restore) and applies the clip to
// the last step's update, so that the statistics and the checkpoint see the clipped x.
func (r *Run) steEpochEnd() {
	_ = r.steRestore(0)
	r.steSwap()
	_ = r.steRestore(0)
}
