package binarize

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/testmodels"
)

// countingSet counts the samples read from a data set and gives every one label 3: a
// held-out set of one class, whose accuracies cannot pass for the validation split's.
type countingSet struct {
	calib.Dataset
	read int
}

func (c *countingSet) Read(idx []int, x []float32, y []int64) error {
	c.read += len(idx)
	if err := c.Dataset.Read(idx, x, y); err != nil {
		return err
	}
	for i := range y {
		y[i] = 3
	}
	return nil
}

// TestValidationSplitOnly: with a held-out set given, the run measures its in-loop
// accuracy on the validation split carved from the calibration data — the held-out set
// is read once for the full-precision model before the training and once for the
// exported model after it, never during the iterations — and reports the split sizes and
// the small-split warnings.
func TestValidationSplitOnly(t *testing.T) {
	m, data, o := small(t)
	o.Iters = 2
	path := filepath.Join(t.TempDir(), "eval.npz")
	if err := os.WriteFile(path, testmodels.FMNISTCalib, 0o644); err != nil {
		t.Fatal(err)
	}
	ev, err := calib.Open(path, calib.Options{Input: calib.Input{Name: "input", Shape: []int64{-1, 784}, Classes: 10}, Limit: 100, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	held := &countingSet{Dataset: ev}
	data.Eval = held
	var during []int
	o.Progress = func(p network.Progress) {
		if p.Done {
			during = append(during, held.read)
		}
	}
	res, err := Run(context.Background(), m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || during[0] != 100 || during[1] != 100 {
		t.Errorf("held-out samples read by the end of each iteration: %v, want [100 100] (the full-precision evaluation only)", during)
	}
	if held.read != 200 {
		t.Errorf("held-out samples read in all: %d, want 200", held.read)
	}
	// ValidationSize(200, 0.1) = 50: a quarter, as 1000 would leave too little to train.
	if res.TrainSamples != 150 || res.ValidationSamples != 50 || res.HeldOutSamples != 100 || res.ReportSplit != SplitHeldOut {
		t.Errorf("splits train %d / validation %d / held-out %d on %s, want 150 / 50 / 100 on held-out",
			res.TrainSamples, res.ValidationSamples, res.HeldOutSamples, res.ReportSplit)
	}
	for _, h := range res.History {
		if !h.HasAccuracy {
			t.Fatalf("iteration %d has no in-loop accuracy", h.Iter)
		}
	}
	if res.Binarized.Positions != 100 {
		t.Errorf("binarized accuracy over %d positions, want the 100 held-out samples", res.Binarized.Positions)
	}
	var small []SmallSplit
	for _, w := range res.Warnings {
		if s, ok := w.(SmallSplit); ok {
			small = append(small, s)
		}
	}
	want := []SmallSplit{{SplitValidation, 50}, {SplitHeldOut, 100}}
	if !slices.Equal(small, want) {
		t.Errorf("small-split warnings %v, want %v", small, want)
	}
}

// TestNoValidationSplit: a negative Validation trains on every calibration sample, with no
// in-loop accuracy, and without a held-out set the report is on the training samples and
// says so; the default without a held-out set reports on the validation split.
func TestNoValidationSplit(t *testing.T) {
	m, data, o := small(t)
	o.Validation = -1
	res, err := Run(context.Background(), m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.TrainSamples != 200 || res.ValidationSamples != 0 || res.ReportSplit != SplitTrain {
		t.Errorf("train %d / validation %d on %s, want 200 / 0 on train", res.TrainSamples, res.ValidationSamples, res.ReportSplit)
	}
	if res.History[0].HasAccuracy {
		t.Error("an in-loop accuracy without a validation split")
	}
	o.Validation = 0
	if res, err = Run(context.Background(), m, data, o); err != nil {
		t.Fatal(err)
	}
	if res.ReportSplit != SplitValidation || res.Binarized.Positions != 50 {
		t.Errorf("report on %s over %d positions, want the validation split's 50", res.ReportSplit, res.Binarized.Positions)
	}
}

// TestValidationSize: the default tenth, raised to 1000 while three quarters remain to
// train on.
func TestValidationSize(t *testing.T) {
	for _, c := range []struct {
		n    int
		frac float64
		want int
	}{
		{200, 0.1, 50}, {2000, 0.1, 500}, {4000, 0.1, 1000}, {8000, 0.1, 1000},
		{10000, 0.1, 1000}, {60000, 0.1, 6000}, {8000, 0.2, 1600}, {8000, -1, 0}, {3, 0.1, 0},
	} {
		if got := ValidationSize(c.n, c.frac); got != c.want {
			t.Errorf("ValidationSize(%d, %g) = %d, want %d", c.n, c.frac, got, c.want)
		}
	}
}
