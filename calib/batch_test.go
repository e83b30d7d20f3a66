package calib

import (
	"slices"
	"testing"
)

// seqSet opens an idx data set of n 1×2 samples where sample i holds (i, i+1) unscaled and
// has label i%7.
func seqSet(t testing.TB, n int, mem int64) Dataset {
	t.Helper()
	dir := t.TempDir()
	px := make([]byte, 0, 2*n)
	lb := make([]byte, 0, n)
	for i := range n {
		px = append(px, byte(i), byte(i+1))
		lb = append(lb, byte(i%7))
	}
	p := writeFile(t, dir, "s-images-idx3-ubyte", idxBytes(0x08, []int{n, 1, 2}, px), false)
	writeFile(t, dir, "s-labels-idx1-ubyte", idxBytes(0x08, []int{n}, lb), false)
	return mustOpen(t, p, Input{Shape: shape(-1, 2), Classes: 7}, Options{NoScale: true, MaxMemory: mem})
}

// epoch collects the first values of every sample of one epoch, checking labels on the way.
func epoch(t *testing.T, b *Batches) []int {
	t.Helper()
	var seen []int
	for b.Next() {
		x, y := b.X(), b.Y()
		if len(x) != 2*b.Len() || len(y) != b.Len() || b.Shape()[0] != int64(b.Len()) {
			t.Fatalf("batch of %d: %d values, %d labels, shape %v", b.Len(), len(x), len(y), b.Shape())
		}
		for k := range b.Len() {
			i := int(x[2*k])
			if x[2*k+1] != float32(byte(i+1)) || y[k] != int64(i%7) || b.Indices()[k] != i {
				t.Fatalf("sample %d: x %v y %d index %d", i, x[2*k:2*k+2], y[k], b.Indices()[k])
			}
			seen = append(seen, i)
		}
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

func TestBatches(t *testing.T) {
	d := seqSet(t, 100, 0)
	b, err := NewBatches(d, BatchOptions{Size: 32, Shuffle: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	e0 := epoch(t, b)
	b.Reset()
	e1 := epoch(t, b)
	if len(e0) != 100 || slices.Equal(e0, e1) {
		t.Fatalf("epochs: %d samples, equal %v", len(e0), slices.Equal(e0, e1))
	}
	for _, e := range [][]int{e0, e1} {
		s := slices.Clone(e)
		slices.Sort(s)
		for i, v := range s {
			if v != i {
				t.Fatalf("an epoch does not visit every sample once: %v", s)
			}
		}
	}
	// Same seed, same batches, also when streamed from disk.
	b2, _ := NewBatches(seqSet(t, 100, 1), BatchOptions{Size: 32, Shuffle: true, Seed: 7})
	if f0 := epoch(t, b2); !slices.Equal(f0, e0) {
		t.Error("same seed gave another order")
	}
	b2.Reset()
	if f1 := epoch(t, b2); !slices.Equal(f1, e1) {
		t.Error("same seed gave another second epoch")
	}
	b3, _ := NewBatches(d, BatchOptions{Size: 32, Shuffle: true, Seed: 8})
	if slices.Equal(epoch(t, b3), e0) {
		t.Error("another seed gave the same order")
	}

	// In order, with the short last batch, or without it.
	b4, _ := NewBatches(d, BatchOptions{Size: 32})
	if e := epoch(t, b4); len(e) != 100 || !slices.IsSorted(e) {
		t.Errorf("unshuffled epoch %v", e)
	}
	b5, _ := NewBatches(d, BatchOptions{Size: 32, DropLast: true})
	if e := epoch(t, b5); len(e) != 96 {
		t.Errorf("DropLast epoch has %d samples", len(e))
	}

	// A batch larger than the data set is the whole set, shuffled, and reserves no more
	// than it: binarize's default 512 over 256 images of 224 px reserved 900 MB.
	for _, shuffle := range []bool{false, true} {
		b6, _ := NewBatches(d, BatchOptions{Size: 512, Shuffle: shuffle, Seed: 7})
		if e := epoch(t, b6); len(e) != 100 || slices.IsSorted(e) == shuffle {
			t.Errorf("batch of 512 over 100 samples, shuffle %v: epoch %v", shuffle, e)
		}
		if cap(b6.x) != 100*2 || cap(b6.y) != 100 {
			t.Errorf("batch of 512 over 100 samples: buffers of %d values and %d labels, want 200 and 100", cap(b6.x), cap(b6.y))
		}
	}
}

func TestBatchesDoNotAllocate(t *testing.T) {
	for _, mem := range []int64{0, 1} {
		b, _ := NewBatches(seqSet(t, 1000, mem), BatchOptions{Size: 64, Shuffle: true, Seed: 1})
		allocs := testing.AllocsPerRun(100, func() {
			if !b.Next() {
				b.Reset()
			}
		})
		if allocs != 0 {
			t.Errorf("mem %d: %v allocations per batch", mem, allocs)
		}
	}
}

func TestSplitAndLimit(t *testing.T) {
	d := seqSet(t, 200, 0)
	a, e, err := Split(d, 0.75, 0.25, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != 150 || e.Len() != 50 {
		t.Fatalf("split sizes %d %d", a.Len(), e.Len())
	}
	xa, ya := readAll(t, a)
	xe, _ := readAll(t, e)
	seen := map[float32]bool{}
	for i, v := range evens(xa) {
		if ya[i] != int64(int(v)%7) {
			t.Fatalf("label of %v is %d", v, ya[i])
		}
		seen[v] = true
	}
	for _, v := range evens(xe) {
		if seen[v] {
			t.Fatalf("sample %v is in both parts", v)
		}
		seen[v] = true
	}
	if len(seen) != 200 {
		t.Errorf("the parts cover %d samples", len(seen))
	}
	a2, _, _ := Split(d, 0.75, 0.25, 3)
	if x2, _ := readAll(t, a2); !slices.Equal(x2, xa) {
		t.Error("same seed, another split")
	}
	a3, _, _ := Split(d, 0.75, 0.25, 4)
	if x3, _ := readAll(t, a3); slices.Equal(x3, xa) {
		t.Error("another seed, same split")
	}
	// Fractions may leave data unused.
	p, q, _ := Split(d, 0.1, 0.2, 3)
	if p.Len() != 20 || q.Len() != 40 {
		t.Errorf("0.1:0.2 of 200 gave %d and %d", p.Len(), q.Len())
	}
	if _, _, err := Split(d, 0.9, 0.2, 1); err == nil {
		t.Error("fractions over 1 accepted")
	}

	dir := t.TempDir()
	px := make([]byte, 50)
	for i := range px {
		px[i] = byte(i)
	}
	path := writeFile(t, dir, "l-images-idx3-ubyte", idxBytes(0x08, []int{50, 1, 1}, px), false)
	l := mustOpen(t, path, Input{Shape: shape(-1, 1)}, Options{Limit: 10, Seed: 5, NoScale: true})
	x, _ := readAll(t, l)
	if l.Len() != 10 || !slices.IsSorted(x) || x[9] < 10 {
		t.Errorf("limit 10 of 50: %v", x)
	}
	l2 := mustOpen(t, path, Input{Shape: shape(-1, 1)}, Options{Limit: 10, Seed: 5, NoScale: true})
	if x2, _ := readAll(t, l2); !slices.Equal(x, x2) {
		t.Error("same seed, another subset")
	}
}

func TestParseSplitAndSize(t *testing.T) {
	for s, want := range map[string][2]float64{"0.8:0.2": {0.8, 0.2}, "4:1": {0.8, 0.2}, "0.1:0.3": {0.1, 0.3}, "80:20": {0.8, 0.2}} {
		a, b, err := ParseSplit(s)
		if err != nil || a != want[0] || b != want[1] {
			t.Errorf("ParseSplit(%q) = %v, %v, %v", s, a, b, err)
		}
	}
	for _, s := range []string{"0.8", "a:b", "0:1", "-1:2", "0.8:0.2x", ""} {
		if _, _, err := ParseSplit(s); err == nil {
			t.Errorf("ParseSplit(%q) accepted", s)
		}
	}
	for s, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1.5G": 1500000000, "1000": 1000, "64kB": 64000, "3 MB": 3000000} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "MiB", "12XB", "1e30", "-5"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}

func evens(x []float32) []float32 {
	var r []float32
	for i := 0; i < len(x); i += 2 {
		r = append(r, x[i])
	}
	return r
}
