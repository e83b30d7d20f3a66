package network

import (
	"slices"
	"testing"
)

// seqBatcher is one batch of n samples with per labels each.
type seqBatcher struct {
	n, per int
	done   bool
}

func (b *seqBatcher) Next() bool {
	if b.done {
		return false
	}
	b.done = true
	return true
}
func (b *seqBatcher) X() []float32   { return make([]float32, b.n) }
func (b *seqBatcher) Shape() []int64 { return []int64{int64(b.n), 1} }
func (b *seqBatcher) Err() error     { return nil }
func (b *seqBatcher) Reset()         { b.done = false }
func (b *seqBatcher) Y() []int64 {
	y := make([]int64, b.n*b.per)
	for i := range y {
		y[i] = int64(i)
	}
	return y
}

// TestSplitLabels: the pieces of a batch carry their samples' labels, one per sample or
// one per position of a sequence.
func TestSplitLabels(t *testing.T) {
	for _, per := range []int{1, 3} {
		s := splitBy(&seqBatcher{n: 5, per: per}, 2)
		var got []int64
		for s.Next() {
			n := int(s.Shape()[0])
			if y := s.Y(); len(y) != n*per {
				t.Fatalf("per %d: a piece of %d samples has %d labels", per, n, len(y))
			}
			got = append(got, s.Y()...)
		}
		if want := (&seqBatcher{n: 5, per: per}).Y(); !slices.Equal(got, want) {
			t.Errorf("per %d: pieces' labels %v, want %v", per, got, want)
		}
	}
}
