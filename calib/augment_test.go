package calib

import (
	"slices"
	"testing"
)

// memImages is an in-memory data set of n samples of the given shape, value v of sample
// i being i·1000 + v, with label i%5.
type memImages struct {
	n     int
	shape []int64
}

func (m memImages) Len() int             { return m.n }
func (m memImages) HasLabels() bool      { return true }
func (m memImages) SampleShape() []int64 { return m.shape }
func (m memImages) Close() error         { return nil }
func (m memImages) Read(idx []int, x []float32, y []int64) error {
	sz := prod64(m.shape)
	for k, i := range idx {
		for v := range sz {
			x[k*sz+v] = float32(i*1000 + v)
		}
		if y != nil {
			y[k] = int64(i % 5)
		}
	}
	return nil
}

// shifted is the reference transform, written as pad-then-crop: the plane extended by
// edge repetition by k on every side, the window at (k−dy, k−dx), then mirrored.
func shifted(p []float32, h, w, k, dy, dx int, flip bool) []float32 {
	ph, pw := h+2*k, w+2*k
	pad := make([]float32, ph*pw)
	for i := range ph {
		for j := range pw {
			pad[i*pw+j] = p[min(max(i-k, 0), h-1)*w+min(max(j-k, 0), w-1)]
		}
	}
	out := make([]float32, h*w)
	for i := range h {
		for j := range w {
			out[i*w+j] = pad[(i+k-dy)*pw+j+k-dx]
		}
		if flip {
			slices.Reverse(out[i*w : (i+1)*w])
		}
	}
	return out
}

// TestAugment checks that every augmented image is one of the reference transforms of
// its sample (the same one for all its channels) with labels untouched, that all
// offsets and both flips occur, that a seed and epoch give the same batches and another
// epoch others, and that samples that are not images, or Augment{}, pass unchanged.
func TestAugment(t *testing.T) {
	const C, H, W, k = 2, 5, 6, 2
	d := memImages{n: 300, shape: []int64{C, H, W}}
	run := func(a Augment, seed uint64, epochs int) ([][]float32, []int64) {
		b, err := NewBatches(d, BatchOptions{Size: 64, Shuffle: true, Seed: seed, Augment: a})
		if err != nil {
			t.Fatal(err)
		}
		var xs [][]float32
		var ys []int64
		for e := range epochs {
			if e > 0 {
				b.Reset()
			}
			for b.Next() {
				x := b.X()
				for s := range b.Len() {
					xs = append(xs, slices.Clone(x[s*C*H*W:(s+1)*C*H*W]))
				}
				ys = append(ys, b.Y()...)
			}
		}
		return xs, ys
	}
	plain, plainY := run(Augment{}, 9, 2)
	aug, augY := run(Augment{Shift: k, Flip: true}, 9, 2)
	if !slices.Equal(plainY, augY) {
		t.Fatal("augmentation changed the labels or the order")
	}
	type form struct {
		dy, dx int
		flip   bool
	}
	seen := map[form]int{}
	forms := make([]form, len(aug))
	for s, x := range aug {
		src := plain[s]
		var match []form
		for dy := -k; dy <= k; dy++ {
			for dx := -k; dx <= k; dx++ {
				for _, flip := range []bool{false, true} {
					ok := true
					for c := 0; c < C && ok; c++ {
						ok = slices.Equal(x[c*H*W:(c+1)*H*W], shifted(src[c*H*W:(c+1)*H*W], H, W, k, dy, dx, flip))
					}
					if ok {
						match = append(match, form{dy, dx, flip})
					}
				}
			}
		}
		if len(match) != 1 {
			t.Fatalf("sample %d (label %d): matches %d transforms %v, want exactly 1", s, augY[s], len(match), match)
		}
		seen[match[0]]++
		forms[s] = match[0]
	}
	if len(seen) != (2*k+1)*(2*k+1)*2 {
		t.Errorf("%d of the %d shift and flip combinations occurred in %d samples", len(seen), (2*k+1)*(2*k+1)*2, len(aug))
	}
	again, _ := run(Augment{Shift: k, Flip: true}, 9, 2)
	for s := range aug {
		if !slices.Equal(aug[s], again[s]) {
			t.Fatalf("sample %d differs between two runs of the same seed", s)
		}
	}
	// Epoch 1 of the same run draws other transforms than epoch 0, sample by sample.
	byID := [2]map[int]form{{}, {}}
	for s := range aug {
		byID[s/300][int(plain[s][0])/1000] = forms[s]
	}
	same := 0
	for id, f := range byID[0] {
		if byID[1][id] == f {
			same++
		}
	}
	if same > 30 {
		t.Errorf("%d of 300 samples had the same transform in epochs 0 and 1 (1 in 50 expected)", same)
	}
	for _, a := range []Augment{{}, {Shift: 0}} {
		if x, _ := run(a, 9, 1); !slices.EqualFunc(x, plain[:300], slices.Equal) {
			t.Errorf("%v changed the samples", a)
		}
	}
	flat := memImages{n: 50, shape: []int64{30}}
	b, err := NewBatches(flat, BatchOptions{Size: 50, Augment: Augment{Shift: 2, Flip: true}})
	if err != nil {
		t.Fatal(err)
	}
	b.Next()
	for i, v := range b.X() {
		if v != float32(i/30*1000+i%30) {
			t.Fatalf("a vector sample was changed at %d: %v", i, v)
		}
	}
}
