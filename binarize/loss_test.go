package binarize

import (
	"context"
	"errors"
	"testing"
)

// TestMixedLossRun: --loss ce+distill trains the chain with train.Mixed (labels and the
// full-precision teacher both read), reports its name, and refuses data without labels
// with a LabelsError, as cross-entropy does.
func TestMixedLossRun(t *testing.T) {
	m := chainModel(1)
	d := chainData(t, m, 400)
	o := chainOptions()
	o.Loss = LossCEDistill
	res, err := Run(context.Background(), m, Data{Calib: d}, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Loss != LossCEDistill {
		t.Errorf("loss %q, want %q", res.Loss, LossCEDistill)
	}
	if _, err := Run(context.Background(), m, Data{Calib: &unlabelled{d}}, o); err == nil {
		t.Error("no error without labels")
	} else if le := (*LabelsError)(nil); !errors.As(err, &le) || le.Loss != LossCEDistill {
		t.Errorf("without labels: %v, want a LabelsError for %s", err, LossCEDistill)
	}
}
