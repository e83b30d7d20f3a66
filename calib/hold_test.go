package calib

import (
	"slices"
	"testing"
)

// fakeSet is an in-memory data set whose sample i is the value i with label i%10; it
// records whether it was closed.
type fakeSet struct {
	n      int
	closed bool
}

func (f *fakeSet) Len() int             { return f.n }
func (f *fakeSet) HasLabels() bool      { return true }
func (f *fakeSet) SampleShape() []int64 { return []int64{1} }
func (f *fakeSet) Close() error         { f.closed = true; return nil }
func (f *fakeSet) Read(idx []int, x []float32, y []int64) error {
	for k, i := range idx {
		x[k] = float32(i)
		if y != nil {
			y[k] = int64(i % 10)
		}
	}
	return nil
}

// samples reads every sample of d back as the underlying indices.
func samples(t *testing.T, d Dataset) []int {
	t.Helper()
	idx := make([]int, d.Len())
	for i := range idx {
		idx[i] = i
	}
	x := make([]float32, d.Len())
	if err := d.Read(idx, x, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}

// TestHoldDisjoint: Hold's two views partition the data set (disjoint, together every
// sample), the held part has the size asked, the same seed gives the same split and
// another seed another, and closing the views leaves the caller's set open.
func TestHoldDisjoint(t *testing.T) {
	d := &fakeSet{n: 1000}
	rest, held, err := Hold(d, 137, 5)
	if err != nil {
		t.Fatal(err)
	}
	r, h := samples(t, rest), samples(t, held)
	if len(h) != 137 || len(r) != 863 {
		t.Fatalf("sizes %d + %d, want 863 + 137", len(r), len(h))
	}
	all := append(slices.Clone(r), h...)
	slices.Sort(all)
	for i, v := range all {
		if v != i {
			t.Fatalf("the views do not partition the set: sorted union[%d] = %d", i, v)
		}
	}
	_, again, _ := Hold(d, 137, 5)
	if !slices.Equal(samples(t, again), h) {
		t.Error("the same seed gave another split")
	}
	_, other, _ := Hold(d, 137, 6)
	if slices.Equal(samples(t, other), h) {
		t.Error("another seed gave the same split")
	}
	rest.Close()
	held.Close()
	if d.closed {
		t.Error("closing Hold's views closed the caller's data set")
	}
	for _, n := range []int{0, 1000, -1} {
		if _, _, err := Hold(d, n, 1); err == nil {
			t.Errorf("Hold(%d of 1000) did not fail", n)
		}
	}
}
