package calib

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npz"
)

// seqNpz writes 4 sequences of 2 features × 3 steps and their [4, 3] labels, −1 padding the
// shorter sequences.
func seqNpz(t *testing.T, y any) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seq.npz")
	x := make([][][]float32, 4)
	for i := range x {
		x[i] = [][]float32{{float32(i), 1, 2}, {3, 4, float32(10 * i)}}
	}
	if err := npz.Write(p, map[string]any{"x": toArrays(x), "y": y}); err != nil {
		t.Fatal(err)
	}
	return p
}

var seqLabels = [][3]int64{{0, 1, 2}, {2, 2, -1}, {1, -1, -1}, {0, 0, 1}}

// TestSequenceLabels reads [N, T] labels as T labels per sample, in every reader path
// (in memory and from disk), through Read, Batches and the views of Limit and Split, with
// the −1 padding read as IgnoredLabel.
func TestSequenceLabels(t *testing.T) {
	p := seqNpz(t, seqLabels)
	want := []int64{0, 1, 2, 2, 2, IgnoredLabel, 1, IgnoredLabel, IgnoredLabel, 0, 0, 1}
	for _, mem := range []int64{0, 1} {
		d := mustOpen(t, p, Input{Shape: shape(-1, 2, 3), Classes: 3}, Options{MaxMemory: mem})
		if w := LabelsPerSample(d); w != 3 {
			t.Fatalf("%d labels per sample, want 3", w)
		}
		_, y := readAll(t, d)
		if !slices.Equal(y, want) {
			t.Errorf("labels %v, want %v", y, want)
		}
		// A y too short for the positions is refused rather than overrun.
		if err := d.Read([]int{0, 1}, make([]float32, 12), make([]int64, 2)); err == nil {
			t.Error("Read with one label per sample for [N, 3] labels: no error")
		}
		b, err := NewBatches(d, BatchOptions{Size: 3})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for b.Next() {
			if len(b.Y()) != 3*b.Len() {
				t.Errorf("batch of %d samples has %d labels", b.Len(), len(b.Y()))
			}
			got = append(got, b.Y()...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("batched labels %v, want %v", got, want)
		}
		// Views keep the samples' labels together.
		a, e, err := Split(d, 0.5, 0.5, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []Dataset{a, e, limit(d, 3, 1)} {
			if w := LabelsPerSample(v); w != 3 {
				t.Errorf("view: %d labels per sample, want 3", w)
			}
			_, y := readAll(t, v)
			for k, i := range v.(*view).idx {
				if !slices.Equal(y[3*k:3*k+3], want[3*i:3*i+3]) {
					t.Errorf("view sample %d (sample %d): labels %v, want %v", k, i, y[3*k:3*k+3], want[3*i:3*i+3])
				}
			}
		}
	}
}

// TestIgnoreLabels: Options.IgnoreLabels replaces the default padding values, and a label
// that is neither ignored nor a class is a *LabelError naming its sample and position.
func TestIgnoreLabels(t *testing.T) {
	// 0 as the padding class: −1 is then an error, not padding.
	p := seqNpz(t, [][3]int64{{1, 2, 0}, {2, 0, 0}, {1, 1, 0}, {2, 1, 2}})
	d := mustOpen(t, p, Input{Shape: shape(-1, 2, 3), Classes: 3}, Options{IgnoreLabels: []int64{0}})
	_, y := readAll(t, d)
	want := []int64{1, 2, IgnoredLabel, 2, IgnoredLabel, IgnoredLabel, 1, 1, IgnoredLabel, 2, 1, 2}
	if !slices.Equal(y, want) {
		t.Errorf("labels %v, want %v", y, want)
	}
	_, err := openIn(seqNpz(t, seqLabels), Input{Shape: shape(-1, 2, 3), Classes: 3}, Options{IgnoreLabels: []int64{}})
	var le *LabelError
	if !errors.As(err, &le) || le.Label != -1 {
		t.Fatalf("−1 with no ignored labels: %v, want a *LabelError for −1", err)
	}
	wantErr(t, err, "sample 1, position 2")

	_, err = openIn(seqNpz(t, [][3]int64{{0, 1, 2}, {2, 3, 0}, {0, 0, 0}, {1, 1, 1}}), Input{Shape: shape(-1, 2, 3), Classes: 3}, Options{})
	if !errors.As(err, &le) || le.Label != 3 {
		t.Fatalf("label 3 of 3 classes: %v, want a *LabelError", err)
	}
	wantErr(t, err, "sample 1, position 1")

	// One label per sample: −1 stays an error unless asked for.
	q := filepath.Join(t.TempDir(), "one.npz")
	if err := npz.Write(q, map[string]any{"x": []float32{1, 2, 3}, "y": []int64{1, -1, 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := openIn(q, Input{Shape: shape(-1, 1), Classes: 2}, Options{}); !errors.As(err, &le) {
		t.Errorf("[N] label −1 by default: %v, want a *LabelError", err)
	}
	d = mustOpen(t, q, Input{Shape: shape(-1, 1), Classes: 2}, Options{IgnoreLabels: []int64{-1}})
	if _, y := readAll(t, d); !slices.Equal(y, []int64{1, IgnoredLabel, 0}) {
		t.Errorf("[N] labels with −1 ignored: %v", y)
	}
}
