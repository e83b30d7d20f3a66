package network

import (
	"math"
	"slices"

	"github.com/qtool/qtool/admmq"
)

// gridOf returns the grid whose set t projects onto, and false for a set no grid builds
// (a caller's own Target), whose levels are then the values themselves.
func gridOf(t Target) (Grid, bool) {
	spec := t.Set.Spec()
	for _, g := range Grids() {
		if g.Spec() == spec {
			return g, true
		}
	}
	return "", false
}

// gridPoint is a tensor's grid point as integer levels and per-channel scales: what
// "changed" is split into. A sign flip is a level change; a refitted scale is not.
type gridPoint struct {
	levels []int8
	scales []float32
	values []float32 // only for sets outside Grids: compared as values
}

// pointOf returns the levels and scales of y, a point of t's grid, as Finish would
// export them (snap).
func pointOf(t Target, y []float32) gridPoint {
	g, ok := gridOf(t)
	if !ok {
		return gridPoint{values: slices.Clone(y)}
	}
	w := snap(g, y, t)
	lv := make([]int8, len(w.Values))
	if w.Scales == nil {
		for i, v := range w.Values {
			lv[i] = int8(v)
		}
		return gridPoint{levels: lv}
	}
	channels, inner := len(w.Scales), 1
	for _, d := range t.Layout.Shape[w.Axis+1:] {
		inner *= d
	}
	for i, v := range w.Values {
		a := w.Scales[(i/inner)%channels]
		if a > 0 {
			lv[i] = int8(admmq.RoundHalfUp(float64(v) / float64(a)))
		} else {
			lv[i] = 1 // snap's level where the channel is all zero
		}
	}
	return gridPoint{levels: lv, scales: w.Scales}
}

// changes counts the elements whose level differs between p and q, the channels whose
// scale differs, and sums the relative scale changes |α_q − α_p|/α_p.
func (p gridPoint) changes(q gridPoint) (flips, scales int, rel float64) {
	if p.values != nil {
		for i, v := range p.values {
			if v != q.values[i] {
				flips++
			}
		}
		return flips, 0, 0
	}
	for i, l := range p.levels {
		if l != q.levels[i] {
			flips++
		}
	}
	for c, a := range p.scales {
		b := q.scales[c]
		if a != b {
			scales++
			if a > 0 {
				rel += math.Abs(float64(b)-float64(a)) / float64(a)
			}
		}
	}
	return flips, scales, rel
}
