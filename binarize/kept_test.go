package binarize

import (
	"math"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/engine"
)

// TestKeptMagnitudes: the weights left in full precision get their mean |w| as their rate
// factor, computed here from the model's own values; targets keep theirs; biases get none.
func TestKeptMagnitudes(t *testing.T) {
	m := chainModel(1)
	g, err := engine.Build(m, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := network.Targets(m, network.Binary, network.Selection{Only: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gridMagnitudes(g, ts)
	if err != nil {
		t.Fatal(err)
	}
	keptMagnitudes(g, m, ts, f)
	if len(f) != 3 || f["a"] != 1 {
		t.Fatalf("factors %v, want a: 1 and b, c", f)
	}
	for _, name := range []string{"b", "c"} {
		p, _ := m.Param(name)
		w, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, v := range w.Float {
			sum += math.Abs(float64(v))
		}
		if want := sum / float64(len(w.Float)); math.Abs(f[name]-want) > 1e-12*want {
			t.Errorf("%s: factor %v, want mean |w| = %v", name, f[name], want)
		}
	}
}
