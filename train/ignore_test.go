package train

import (
	"errors"
	"testing"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
)

// TestIgnoreLabel: positions labelled IgnoreLabel (calib's padding) leave the
// cross-entropies, their mean, their gradient and the accuracy, as PyTorch's ignore_index
// does: the loss of [N=1, T=3, C=2] logits with the last position ignored is the loss of
// the first two positions alone.
func TestIgnoreLabel(t *testing.T) {
	if IgnoreLabel != calib.IgnoredLabel {
		t.Fatalf("train.IgnoreLabel %d ≠ calib.IgnoredLabel %d", IgnoreLabel, calib.IgnoredLabel)
	}
	x := []float32{1, -1, 0.5, 2, 3, -4}
	g := make([]float32, 6)
	for i := range g {
		g[i] = 9 // stale values must be cleared
	}
	v, err := ClassCE(Logits, x, []int{1, 3, 2}, 2, []int64{0, 1, IgnoreLabel}, g)
	if err != nil {
		t.Fatal(err)
	}
	g2 := make([]float32, 4)
	w, err := ClassCE(Logits, x[:4], []int{1, 2, 2}, 2, []int64{0, 1}, g2)
	if err != nil {
		t.Fatal(err)
	}
	if v != w {
		t.Errorf("loss with an ignored position %v, without it %v", v, w)
	}
	for i := range 4 {
		if g[i] != g2[i] {
			t.Errorf("gradient %d: %v, want %v", i, g[i], g2[i])
		}
	}
	if g[4] != 0 || g[5] != 0 {
		t.Errorf("gradient of the ignored position %v, want 0", g[4:])
	}
	// Every position ignored: no loss, no gradient.
	if v, err := ClassCE(Logits, x, []int{1, 3, 2}, 2, []int64{IgnoreLabel, IgnoreLabel, IgnoreLabel}, g); err != nil || v != 0 || g[0] != 0 {
		t.Errorf("all ignored: loss %v, err %v, gradient %v", v, err, g)
	}
	// Binary heads the same way.
	b, err := BinaryCE(BinaryLogit, []float32{2, -1, 5}, []int64{1, IgnoreLabel, 0}, g[:3])
	if err != nil {
		t.Fatal(err)
	}
	c, _ := BinaryCE(BinaryLogit, []float32{2, 5}, []int64{1, 0}, nil)
	if b != c || g[1] != 0 {
		t.Errorf("BCE with an ignored element %v (gradient %v), without it %v", b, g[:3], c)
	}
	// Accuracy counts the labelled positions only: argmax is 0, 0, 0.
	hits, n, err := labelHits(OutputSpec{Kind: Logits, Axis: 2}, &engine.Tensor{DType: engine.Float32, Shape: []int{1, 3, 2}, F: []float32{1, -1, 0.5, -2, 3, -4}}, []int64{0, 1, IgnoreLabel})
	if err != nil || hits != 1 || n != 2 {
		t.Errorf("label hits %d of %d (%v), want 1 of 2", hits, n, err)
	}
	if !labelled([]int64{0, IgnoreLabel}) || labelled([]int64{-1, -1}) {
		t.Error("labelled: padding must count as labelled data, -1 (no labels) must not")
	}
}

// TestIgnoredLabelInPlainLosses: CrossEntropy keeps PyTorch's mean over every sample, so
// it refuses an ignored label with a typed error rather than miscount.
func TestIgnoredLabelInPlainLosses(t *testing.T) {
	_, err := CrossEntropy{}.Value([]float32{1, 2, 3, 4}, 2, Target{Labels: []int64{0, IgnoreLabel}}, nil)
	var ie *IgnoredLabelError
	if !errors.As(err, &ie) || ie.Sample != 1 {
		t.Errorf("cross-entropy with an ignored label: %v, want an *IgnoredLabelError for sample 1", err)
	}
}
