package calib

import (
	"fmt"
	"math/rand/v2"
)

// Augment randomly transforms the image samples of a training batch, so that a few
// thousand calibration images are not learnt by heart: fine-tuning a pretrained
// Fashion-MNIST ResNet on 9 000 of its own training images drove the loss to 0.003 and
// the held-out accuracy down by a point even at int8. Samples of shape C×H×W are
// shifted, those of other ranks pass unchanged.
type Augment struct {
	// Shift moves each image by a random offset of up to Shift pixels along each axis,
	// drawn uniformly from [−Shift, Shift]; the pixels that come in repeat the nearest
	// edge pixel, which keeps a uniform background uniform whatever normalisation the
	// data had. 0 means no shift.
	Shift int
	// Flip mirrors each image left to right with probability 1/2. Not for data whose
	// meaning has a handedness: text, digits, signs.
	Flip bool
}

// On reports whether a changes anything.
func (a Augment) On() bool { return a.Shift > 0 || a.Flip }

func (a Augment) String() string {
	switch {
	case a.Shift > 0 && a.Flip:
		return fmt.Sprintf("shift %d, flip", a.Shift)
	case a.Shift > 0:
		return fmt.Sprintf("shift %d", a.Shift)
	case a.Flip:
		return "flip"
	}
	return "none"
}

// augmenter applies an Augment to batches in place, drawing from one stream per epoch.
type augmenter struct {
	a       Augment
	c, h, w int
	rng     *rand.Rand
	row     []float32 // one source plane
}

// newAugmenter returns nil when a does nothing or the samples are not images.
func newAugmenter(a Augment, sample []int64) *augmenter {
	if !a.On() || len(sample) != 3 || sample[1] < 1 || sample[2] < 1 {
		return nil
	}
	c, h, w := int(sample[0]), int(sample[1]), int(sample[2])
	return &augmenter{a: a, c: c, h: h, w: w, row: make([]float32, h*w)}
}

// epoch starts epoch e's stream: the draws of an epoch depend on the seed and e only,
// apart from the shuffle's stream (whose second word is e itself).
func (g *augmenter) epoch(seed uint64, e int) {
	g.rng = rand.New(rand.NewPCG(seed, uint64(e)|1<<63))
}

// apply transforms the n samples of x in place, one after the other.
func (g *augmenter) apply(x []float32, n int) {
	plane := g.h * g.w
	for s := range n {
		dy, dx, flip := 0, 0, false
		if k := g.a.Shift; k > 0 {
			dy, dx = g.rng.IntN(2*k+1)-k, g.rng.IntN(2*k+1)-k
		}
		if g.a.Flip {
			flip = g.rng.IntN(2) == 1
		}
		if dy == 0 && dx == 0 && !flip {
			continue
		}
		for c := range g.c {
			p := x[(s*g.c+c)*plane : (s*g.c+c+1)*plane]
			copy(g.row, p)
			for i := range g.h {
				si := min(max(i-dy, 0), g.h-1)
				src, dst := g.row[si*g.w:(si+1)*g.w], p[i*g.w:(i+1)*g.w]
				for j := range g.w {
					sj := min(max(j-dx, 0), g.w-1)
					if flip {
						sj = g.w - 1 - sj
					}
					dst[j] = src[sj]
				}
			}
		}
	}
}
