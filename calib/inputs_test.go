package calib

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npz"
)

// vadInputs are the inputs of a recurrent voice-activity model: audio [N,T], a state
// [2,N,H] whose batch axis is 1, and an int64 sample rate without a batch axis.
func vadInputs(stateShape []int64) (Input, Options) {
	audio := Input{Name: "input", Shape: shape(-1, 4)}
	return audio, Options{Inputs: []Input{
		{Name: "state", Shape: stateShape},
		{Name: "sr", Shape: []int64{}, Int64: true},
	}}
}

// writeVAD writes 3 samples: audio[i][t] = 10i+t, state[l][i][h] = 100l+10i+h, sr 16000.
func writeVAD(t *testing.T, dir string, extra map[string]any) string {
	t.Helper()
	var audio [3][4]float32
	var state [2][3][2]float32
	for i := range 3 {
		for k := range 4 {
			audio[i][k] = float32(10*i + k)
		}
		for l := range 2 {
			for h := range 2 {
				state[l][i][h] = float32(100*l + 10*i + h)
			}
		}
	}
	vs := map[string]any{"input": audio, "state": state, "sr": int64(16000), "y": [3]int64{0, 1, 1}}
	for k, v := range extra {
		if v == nil {
			delete(vs, k)
		} else {
			vs[k] = v
		}
	}
	p := filepath.Join(dir, "vad.npz")
	if err := npz.Write(p, vs); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMultiInputNpz(t *testing.T) {
	dir := t.TempDir()
	p := writeVAD(t, dir, nil)
	in, o := vadInputs(shape(2, -1, 2))
	d := mustOpen(t, p, in, o)
	ex := ExtraInputs(d)
	if len(ex) != 2 || ex[0].Name != "state" || ex[0].Axis != 1 || ex[1].Name != "sr" || ex[1].Axis != -1 || !ex[1].Int64 {
		t.Fatalf("ExtraInputs = %+v", ex)
	}
	// A split view keeps the samples' entries together: samples 2 and 0, in this order.
	b, err := NewBatches(d, BatchOptions{Size: 2, Shuffle: true, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for b.Next() {
		idx := b.Indices()
		x := b.X()
		name, sh, axis, f, _ := b.ExtraInput(0)
		if name != "state" || axis != 1 || !slices.Equal(sh, []int64{2, int64(len(idx)), 2}) {
			t.Fatalf("state: %s %v axis %d", name, sh, axis)
		}
		for k, i := range idx {
			if x[k*4] != float32(10*i) || b.Y()[k] != []int64{0, 1, 1}[i] {
				t.Errorf("sample %d: x %v", i, x[k*4:k*4+4])
			}
			for l := range 2 {
				for h := range 2 {
					if got := f[(l*len(idx)+k)*2+h]; got != float32(100*l+10*i+h) {
						t.Errorf("state[%d][%d][%d] = %v for sample %d", l, k, h, got, i)
					}
				}
			}
		}
		name, sh, axis, _, iv := b.ExtraInput(1)
		if name != "sr" || len(sh) != 0 || axis != -1 || !slices.Equal(iv, []int64{16000}) {
			t.Errorf("sr: %s %v axis %d %v", name, sh, axis, iv)
		}
	}
	if b.Err() != nil {
		t.Fatal(b.Err())
	}
	// Through a split view, too.
	a, _, err := Split(mustOpen(t, p, in, o), 0.5, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	bb, _ := NewBatches(a, BatchOptions{Size: 8})
	for bb.Next() {
		_, _, _, f, _ := bb.ExtraInput(0)
		for k, i := range a.(*view).idx {
			if f[k*2] != float32(10*i) {
				t.Errorf("split: state of sample %d is %v", i, f[k*2])
			}
		}
	}
}

func TestMultiInputBatchAxis(t *testing.T) {
	dir := t.TempDir()
	p := writeVAD(t, dir, nil)
	// A fixed-batch model declares the state [2,1,2]: the axis equal to the declared batch
	// 1 is the batch axis, not axis 0 (2).
	in, o := vadInputs(shape(2, 1, 2))
	in.Batch = 1
	d := mustOpen(t, p, in, o)
	if ex := ExtraInputs(d); ex[0].Axis != 1 {
		t.Errorf("declared batch 1: axis %d, want 1", ex[0].Axis)
	}
	// Without a declared batch and without a symbolic dimension the state has no batch axis,
	// and a stored array of another shape is refused.
	in.Batch = 0
	_, err := openIn(p, in, o)
	var se *ShapeError
	if !errors.As(err, &se) || se.Input != "state" {
		t.Errorf("no batch axis: %v", err)
	}
	// Options.BatchAxes overrides the rule.
	o.BatchAxes = map[string]int{"state": 1}
	if ex := ExtraInputs(mustOpen(t, p, in, o)); ex[0].Axis != 1 {
		t.Errorf("override: axis %d", ex[0].Axis)
	}
	// One state for every sample: size 1 on the batch axis is shared.
	var one [2][1][2]float32
	one[1][0][1] = 7
	p1 := writeVAD(t, dir, map[string]any{"state": one})
	in, o = vadInputs(shape(2, -1, 2))
	b, _ := NewBatches(mustOpen(t, p1, in, o), BatchOptions{Size: 3})
	b.Next()
	_, sh, _, f, _ := b.ExtraInput(0)
	if !slices.Equal(sh, []int64{2, 3, 2}) || f[3*2+2*2+1] != 7 || f[3*2+1] != 7 {
		t.Errorf("shared state: %v %v", sh, f)
	}
}

func TestMultiInputMissing(t *testing.T) {
	dir := t.TempDir()
	p := writeVAD(t, dir, map[string]any{"sr": nil})
	in, o := vadInputs(shape(2, -1, 2))
	_, err := openIn(p, in, o)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Input != "sr" {
		t.Fatalf("missing sr: %v", err)
	}
	wantErr(t, err, `"sr"`, "vad.npz")
	// Another format cannot feed several inputs.
	npy := writeNpy(t, dir, "x.npy", [][]float32{{1, 2, 3, 4}})
	_, err = openIn(npy, in, o)
	if !errors.As(err, &ie) {
		t.Fatalf(".npy for two inputs: %v", err)
	}
	// The array named after the first input wins over XKey's default "x".
	p2 := writeVAD(t, dir, map[string]any{"x": [3][5]float32{}})
	if d := mustOpen(t, p2, in, o); !slices.Equal(d.SampleShape(), []int64{4}) {
		t.Errorf("first input read from %v", d.SampleShape())
	}
}
