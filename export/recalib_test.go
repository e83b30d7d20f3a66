package export

import (
	"context"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// recalibrated returns m with the quantized weights ws set and every BatchNormalization's
// running statistics re-estimated over the samples, as qtool binarize does after its
// algorithm. Plain ±1 weights are 10–30× the trained ones; with the old statistics the
// activations reach 1e4 before normalisation subtracts nearly equal numbers, and no two
// float32 evaluation orders agree to 1e-4 — not a property of the export.
func recalibrated(t testing.TB, m *onnxio.Model, ws []Weight, x []float32, shape []int) *onnxio.Model {
	t.Helper()
	q := withWeights(t, m, ws)
	g, err := engine.Build(q, engine.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &sampleBatches{x: x, shape: shape, size: 250}
	if err := train.RecalibrateBN(context.Background(), g, q, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteParams(q); err != nil {
		t.Fatal(err)
	}
	return q
}

// sampleBatches serves the shipped samples in order, in batches of size.
type sampleBatches struct {
	x     []float32
	shape []int
	size  int
	next  int
	cur   []int64
	lo    int
	hi    int
}

func (b *sampleBatches) Next() bool {
	n := b.shape[0]
	if b.next >= n {
		return false
	}
	b.lo, b.hi = b.next, min(b.next+b.size, n)
	b.next = b.hi
	b.cur = append(b.cur[:0], int64(b.hi-b.lo))
	for _, d := range b.shape[1:] {
		b.cur = append(b.cur, int64(d))
	}
	return true
}

func (b *sampleBatches) X() []float32 {
	per := len(b.x) / b.shape[0]
	return b.x[b.lo*per : b.hi*per]
}
func (b *sampleBatches) Shape() []int64 { return b.cur }
func (b *sampleBatches) Y() []int64     { return nil }
func (b *sampleBatches) Reset()         { b.next = 0 }
func (b *sampleBatches) Err() error     { return nil }
