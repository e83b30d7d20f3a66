package network

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/admmq"
)

// TestSnapJointScale: every scaled grid's projection, exported by snap, keeps its values
// (to a float32 rounding of level·α) as float32(level)·scale with |level| ≤ m. The joint
// α of int2 and int4 can leave the top level unused, where a scale recovered as max|y|/m
// would move values by up to half a step: the hand-built channel at the end is such a
// case.
func TestSnapJointScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const channels, inner = 6, 50
	for _, g := range []Grid{BinaryChannel, Ternary, Int2, Int4, Int8} {
		set := admmq.MustSet(g.Spec())
		tg := Target{Name: "w", Set: set, Layout: admmq.Layout{Shape: []int{channels, inner}, Axis: 0}, Grid: g}
		levels := g.Levels()
		m := levels[len(levels)-1]
		for trial := range 20 {
			x := make([]float32, channels*inner)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
			}
			y := make([]float32, len(x))
			if err := set.Project32(y, x, tg.Layout); err != nil {
				t.Fatal(err)
			}
			w := snap(g, y, tg)
			topUnused := 0
			for c := range channels {
				a := w.Scales[c]
				top := false
				for i := c * inner; i < (c+1)*inner; i++ {
					l := math.Round(float64(w.Values[i]) / float64(a))
					if math.Abs(l) > float64(m) || w.Values[i] != float32(l)*a {
						t.Fatalf("%s trial %d: value %v is not float32(level)·%v with |level| ≤ %d", g, trial, w.Values[i], a, m)
					}
					top = top || math.Abs(l) == float64(m)
					if d := math.Abs(float64(w.Values[i] - y[i])); d > 1e-6*math.Abs(float64(y[i])) {
						t.Fatalf("%s trial %d: snap moved %v to %v", g, trial, y[i], w.Values[i])
					}
				}
				if !top {
					topUnused++
				}
			}
			if topUnused > 0 {
				t.Logf("%s trial %d: %d channels without the top level", g, trial, topUnused)
			}
		}
	}
	// One channel: ten weights at 1 and one at 0.2. α = 0.2 represents all of them exactly
	// (levels 5 and 1), so int4's joint α leaves level 7 unused; max|y|/7 would move 0.2 to
	// 1/7.
	x := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.2}
	tg := Target{Name: "w", Set: admmq.MustSet(Int4.Spec()), Layout: admmq.Layout{Shape: []int{1, len(x)}, Axis: 0}, Grid: Int4}
	y := make([]float32, len(x))
	if err := tg.Set.Project32(y, x, tg.Layout); err != nil {
		t.Fatal(err)
	}
	w := snap(Int4, y, tg)
	for i := range y {
		if w.Values[i] != y[i] {
			t.Fatalf("int4 with the top level unused: snap moved %v to %v (scale %v)", y[i], w.Values[i], w.Scales[0])
		}
	}
	if w.Scales[0] != 0.2 {
		t.Fatalf("scale %v, want 0.2: the channel did not exercise an unused top level", w.Scales[0])
	}
}
