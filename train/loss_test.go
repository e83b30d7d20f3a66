package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qtool/qtool/internal/fdcheck"
)

type lossCase struct {
	name string
	loss Loss
	key  string
}

var lossCases = []lossCase{
	{"cross-entropy", CrossEntropy{}, "ce"},
	{"squared hinge", SquaredHinge{}, "hinge"},
	{"distillation T=1", Distillation{}, "kd1"},
	{"distillation T=4", Distillation{Temperature: 4}, "kd4"},
	{"mse", MSE{}, "mse"},
}

// lossFixtures returns the logits, teacher logits and labels of testdata/losses.npz.
func lossFixtures(t *testing.T) (logits, teacher []float32, labels []int64) {
	t.Helper()
	logits = to32(fixture64(t, "losses.npz", "logits"))
	teacher = to32(fixture64(t, "losses.npz", "teacher"))
	fixture(t, "losses.npz", "labels", &labels)
	return logits, teacher, labels
}

// TestLossesMatchPyTorch compares values and gradients with torch's loss modules and
// autograd (testdata/make_fixtures.py), computed in float64 from the same float32 logits.
func TestLossesMatchPyTorch(t *testing.T) {
	logits, teacher, labels := lossFixtures(t)
	const classes = 5
	for _, c := range lossCases {
		t.Run(c.name, func(t *testing.T) {
			want := fixture64(t, "losses.npz", c.key+"_value")[0]
			wantGrad := fixture64(t, "losses.npz", c.key+"_grad")
			grad := make([]float32, len(logits))
			got, err := c.loss.Value(logits, classes, Target{Labels: labels, Teacher: teacher}, grad)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(got, want, 1e-300); e > 1e-12 {
				t.Errorf("loss %.17g, PyTorch %.17g (relative error %.3g)", got, want, e)
			}
			// The gradient is rounded to float32 once.
			for i := range grad {
				if e := relErr(float64(grad[i]), wantGrad[i], 1e-30); e > 1e-7 {
					t.Errorf("grad[%d] = %.9g, PyTorch %.9g", i, grad[i], wantGrad[i])
				}
			}
			// Without a gradient buffer the value is the same.
			v, err := c.loss.Value(logits, classes, Target{Labels: labels, Teacher: teacher}, nil)
			if err != nil || v != got {
				t.Errorf("value without gradient %v (%v), with %v", v, err, got)
			}
		})
	}
}

// TestLossGradientsFiniteDifferences checks each gradient against central differences of
// the loss, on random logits (some hinge margins active, some not) at several batch sizes.
func TestLossGradientsFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range lossCases {
		for _, shape := range [][2]int{{1, 2}, {3, 4}, {8, 10}} {
			n, classes := shape[0], shape[1]
			logits := make([]float32, n*classes)
			teacher := make([]float32, n*classes)
			labels := make([]int64, n)
			for i := range logits {
				logits[i] = float32(r.NormFloat64() * 1.5)
				teacher[i] = float32(r.NormFloat64() * 1.5)
			}
			for i := range labels {
				labels[i] = int64(r.IntN(classes))
			}
			tg := Target{Labels: labels, Teacher: teacher}
			grad := make([]float32, len(logits))
			if _, err := c.loss.Value(logits, classes, tg, grad); err != nil {
				t.Fatal(err)
			}
			// float32 logits: a step large against float32 rounding of the inputs.
			fdcheck.Check(t, fmt.Sprintf("%s %dx%d", c.name, n, classes), logits,
				func(j int) float64 { return float64(grad[j]) },
				func() float64 { v, _ := c.loss.Value(logits, classes, tg, nil); return v },
				fdcheck.Spec{Step: fdcheck.Fixed(1.0 / 1024), Atol: 1e-5, Rtol: 1e-4})
		}
	}
}

// TestLossHandComputed checks a few values worked out by hand.
func TestLossHandComputed(t *testing.T) {
	// Equal logits: cross-entropy log C.
	ce, _ := CrossEntropy{}.Value([]float32{0, 0, 0, 0}, 4, Target{Labels: []int64{2}}, nil)
	if math.Abs(ce-math.Log(4)) > 1e-15 {
		t.Errorf("cross-entropy of equal logits %v, want log 4", ce)
	}
	// Hinge, x = [1, 0, 0.5], y = 0: terms max(0, 1−1+0)² = 0 and max(0, 1−1+0.5)² = 0.25,
	// divided by C = 3.
	hg, _ := SquaredHinge{}.Value([]float32{1, 0, 0.5}, 3, Target{Labels: []int64{0}}, nil)
	if math.Abs(hg-0.25/3) > 1e-15 {
		t.Errorf("hinge %v, want %v", hg, 0.25/3)
	}
	// Distillation from itself is zero at any temperature.
	x := []float32{0.3, -1, 2, 0.5, 0.5, 0.5}
	kd, _ := Distillation{Temperature: 3}.Value(x, 3, Target{Teacher: x}, nil)
	if math.Abs(kd) > 1e-15 {
		t.Errorf("distillation from itself %v, want 0", kd)
	}
	mse, _ := MSE{}.Value([]float32{1, 2}, 2, Target{Teacher: []float32{0, 0}}, nil)
	if mse != 2.5 {
		t.Errorf("mse %v, want 2.5", mse)
	}
}

func TestLossErrors(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6}
	for _, c := range []struct {
		loss    Loss
		classes int
		tg      Target
		grad    []float32
		want    string
	}{
		{CrossEntropy{}, 4, Target{Labels: []int64{0}}, nil, "do not form"},
		{CrossEntropy{}, 3, Target{}, nil, "labelled data"},
		{CrossEntropy{}, 3, Target{Labels: []int64{0, 3}}, nil, "outside the model's 3 classes"},
		{SquaredHinge{}, 3, Target{Labels: []int64{0, -1}}, nil, "outside"},
		{CrossEntropy{}, 3, Target{Labels: []int64{0, 1}}, make([]float32, 5), "gradient buffer"},
		{Distillation{}, 3, Target{Labels: []int64{0, 1}}, nil, "teacher"},
		{Distillation{Temperature: -1}, 3, Target{Teacher: x}, nil, "temperature"},
		{MSE{}, 3, Target{Teacher: x[:3]}, nil, "teacher"},
		{CrossEntropy{}, 3, Target{Labels: []int64{0, 1}}, nil, ""},
	} {
		_, err := c.loss.Value(x, c.classes, c.tg, c.grad)
		if c.want == "" {
			if err != nil {
				t.Errorf("%T: %v", c.loss, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: error %v, want one containing %q", c.loss, err, c.want)
		}
	}
	nan := []float32{float32(math.NaN()), 0}
	if _, err := (CrossEntropy{}).Value(nan, 2, Target{Labels: []int64{0}}, nil); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN logits: error %v", err)
	}
}

func TestLossAllocations(t *testing.T) {
	for _, classes := range []int{10, 1000} {
		x := make([]float32, 64*classes)
		g := make([]float32, len(x))
		y := make([]int64, 64)
		for _, c := range lossCases {
			allocs := testing.AllocsPerRun(10, func() {
				if _, err := c.loss.Value(x, classes, Target{Labels: y, Teacher: x}, g); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s with %d classes allocates %v times per call", c.name, classes, allocs)
			}
		}
	}
}

// TestMixedLoss checks Mixed, half cross-entropy and half distillation at T = 4, against
// the same mean of PyTorch's two losses and gradients (the fixtures of
// TestLossesMatchPyTorch), against central differences of its own value, and that it asks
// for both the labels and the teacher.
func TestMixedLoss(t *testing.T) {
	logits, teacher, labels := lossFixtures(t)
	const classes = 5
	m := Mixed{Label: CrossEntropy{}, Teacher: Distillation{Temperature: 4}, Weight: 0.5}
	if !m.NeedsLabels() || !NeedsTeacher(m) {
		t.Fatalf("labels %v, teacher %v: want both", m.NeedsLabels(), NeedsTeacher(m))
	}
	tg := Target{Labels: labels, Teacher: teacher}
	grad := make([]float32, len(logits))
	got, err := m.Value(logits, classes, tg, grad)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.5*fixture64(t, "losses.npz", "ce_value")[0] + 0.5*fixture64(t, "losses.npz", "kd4_value")[0]
	if e := relErr(got, want, 1e-300); e > 1e-12 {
		t.Errorf("loss %.17g, PyTorch's mean %.17g (relative error %.3g)", got, want, e)
	}
	gce, gkd := fixture64(t, "losses.npz", "ce_grad"), fixture64(t, "losses.npz", "kd4_grad")
	for i := range grad {
		// Each half's gradient is rounded to float32 (half an ulp of each, 2⁻²⁴ relative),
		// then their mean once more: the bound is in the halves' magnitudes, which may
		// cancel.
		w := 0.5*gce[i] + 0.5*gkd[i]
		if math.Abs(float64(grad[i])-w) > 0x1p-24*(math.Abs(gce[i])+math.Abs(gkd[i])+math.Abs(w))+1e-30 {
			t.Errorf("grad[%d] = %.9g, PyTorch's mean %.9g", i, grad[i], w)
		}
	}
	fdcheck.Check(t, "mixed", logits,
		func(j int) float64 { return float64(grad[j]) },
		func() float64 { v, _ := m.Value(logits, classes, tg, nil); return v },
		fdcheck.Spec{Step: fdcheck.Fixed(1.0 / 1024), Atol: 1e-5, Rtol: 1e-4})
	// Weight 1 is cross-entropy alone, bit for bit.
	ce, _ := CrossEntropy{}.Value(logits, classes, tg, nil)
	if v, _ := (Mixed{Label: CrossEntropy{}, Teacher: Distillation{}, Weight: 1}).Value(logits, classes, tg, nil); v != ce {
		t.Errorf("weight 1: %v, cross-entropy %v", v, ce)
	}
	for _, bad := range []Mixed{{Label: Distillation{}, Teacher: CrossEntropy{}, Weight: 0.5}, {Label: CrossEntropy{}, Teacher: Distillation{}, Weight: 1.5}, {Weight: 0.5}} {
		if _, err := bad.Value(logits, classes, tg, nil); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
