package train

import (
	"fmt"
	"math"
)

// Target is what a loss compares the logits with: the labels of the batch, the logits of
// a teacher (reference) model on the same batch, or both.
type Target struct {
	// Labels holds one class index per sample, or is nil.
	Labels []int64
	// Teacher holds the teacher's logits, laid out as the student's ([N, C] row-major), or is nil.
	Teacher []float32
}

// Loss is a training loss on logits [N, C] (row-major, N samples of C classes).
//
// Value returns the mean loss over the batch and, when grad is not nil, stores the
// gradient of that mean with respect to the logits in grad, which must have the length of
// logits. Sums run in float64. Implementations allocate nothing.
type Loss interface {
	Value(logits []float32, classes int, t Target, grad []float32) (float64, error)
	// NeedsLabels reports whether Value reads Target.Labels; otherwise it reads
	// Target.Teacher.
	NeedsLabels() bool
}

// checkShape validates the arguments shared by every loss and returns the batch size.
func checkShape(name string, logits []float32, classes int, grad []float32) (int, error) {
	if classes < 1 {
		return 0, fmt.Errorf("%s: %d classes: the model output must be [batch, classes]", name, classes)
	}
	if len(logits)%classes != 0 || len(logits) == 0 {
		return 0, fmt.Errorf("%s: %d logits do not form a [batch, %d] matrix", name, len(logits), classes)
	}
	if grad != nil && len(grad) != len(logits) {
		return 0, fmt.Errorf("%s: gradient buffer holds %d values for %d logits", name, len(grad), len(logits))
	}
	return len(logits) / classes, nil
}

// IgnoredLabelError reports a label IgnoreLabel given to a loss that needs a label for
// every sample (CrossEntropy, SquaredHinge); an Objective leaves such labels out.
type IgnoredLabelError struct {
	Loss   string
	Sample int
}

func (e *IgnoredLabelError) Error() string {
	return fmt.Sprintf("%s: sample %d has the ignored label %d, but this loss takes a label for every sample: train with an Objective, which leaves ignored labels out", e.Loss, e.Sample, IgnoreLabel)
}

func checkLabels(name string, labels []int64, n, classes int) error {
	if len(labels) != n {
		return fmt.Errorf("%s: %d labels for a batch of %d: the loss needs labelled data", name, len(labels), n)
	}
	for i, y := range labels {
		if y == IgnoreLabel {
			// Only Objective's cross-entropies skip positions; this loss would have to
			// change its mean, which its bit-for-bit PyTorch equivalence rules out.
			return &IgnoredLabelError{Loss: name, Sample: i}
		}
		if y < 0 || y >= int64(classes) {
			return fmt.Errorf("%s: label %d of sample %d is outside the model's %d classes", name, y, i, classes)
		}
	}
	return nil
}

func checkTeacher(name string, teacher []float32, n int) error {
	if len(teacher) != n {
		return fmt.Errorf("%s: %d teacher logits for %d student logits: the loss needs a teacher model with the same output", name, len(teacher), n)
	}
	return nil
}

// logSumExp returns log Σ exp(scale·x) of one row, in float64; log softmax(scale·x)[j] is
// then scale·x[j] minus it, with no buffer.
func logSumExp(x []float32, scale float64) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, scale*float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(scale*float64(v) - mx)
	}
	return mx + math.Log(s)
}

// notFinite reports a NaN or infinite loss as an error, since one bad batch would
// otherwise silently poison every parameter through the optimizer.
func notFinite(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s: loss is %v: the logits hold NaN or infinite values (lower the learning rate)", name, v)
	}
	return nil
}

// CrossEntropy is the softmax cross-entropy −log softmax(x)[y], averaged over the batch
// (PyTorch's nn.CrossEntropyLoss with the default mean reduction).
type CrossEntropy struct{}

// NeedsLabels reports true.
func (CrossEntropy) NeedsLabels() bool { return true }

// Value implements Loss. The gradient is (softmax(x) − onehot(y))/N.
func (CrossEntropy) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	const name = "cross-entropy loss"
	n, err := checkShape(name, logits, classes, grad)
	if err != nil {
		return 0, err
	}
	if err := checkLabels(name, t.Labels, n, classes); err != nil {
		return 0, err
	}
	var total float64
	inv := 1 / float64(n)
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		lse := logSumExp(row, 1)
		y := int(t.Labels[i])
		total += lse - float64(row[y])
		if grad != nil {
			g := grad[i*classes : (i+1)*classes]
			for j := range g {
				p := math.Exp(float64(row[j]) - lse)
				if j == y {
					p--
				}
				g[j] = float32(p * inv)
			}
		}
	}
	total *= inv
	return total, notFinite(name, total)
}

// SquaredHinge is the squared multi-class hinge loss of the paper's reference code,
// PyTorch's nn.MultiMarginLoss(p=2, margin=1):
//
//	loss(x, y) = 1/C · Σ_{i≠y} max(0, margin − x[y] + x[i])²
//
// averaged over the batch. Note the division by the number of classes C, which PyTorch
// applies.
type SquaredHinge struct {
	// Margin is the margin; 0 means 1, PyTorch's default.
	Margin float64
}

// NeedsLabels reports true.
func (SquaredHinge) NeedsLabels() bool { return true }

// Value implements Loss.
func (h SquaredHinge) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	const name = "squared hinge loss"
	n, err := checkShape(name, logits, classes, grad)
	if err != nil {
		return 0, err
	}
	if err := checkLabels(name, t.Labels, n, classes); err != nil {
		return 0, err
	}
	margin := h.Margin
	if margin == 0 {
		margin = 1
	}
	scale := 1 / (float64(n) * float64(classes))
	var total float64
	for i := range n {
		row := logits[i*classes : (i+1)*classes]
		y := int(t.Labels[i])
		xy := float64(row[y])
		var gy float64
		for j, v := range row {
			if j == y {
				continue
			}
			d := margin - xy + float64(v)
			if d <= 0 {
				if grad != nil {
					grad[i*classes+j] = 0
				}
				continue
			}
			total += d * d
			if grad != nil {
				grad[i*classes+j] = float32(2 * d * scale)
				gy -= 2 * d * scale
			}
		}
		if grad != nil {
			grad[i*classes+y] = float32(gy)
		}
	}
	total *= scale
	return total, notFinite(name, total)
}

// Distillation is Hinton et al.'s knowledge-distillation loss for data without labels:
//
//	T² · Σ_c p_c (log p_c − log q_c),  p = softmax(teacher/T), q = softmax(student/T)
//
// that is the KL divergence KL(p ‖ q) of the softened outputs, scaled by T² so that the
// gradient's magnitude does not shrink as T grows, averaged over the batch (PyTorch:
// T*T * nn.KLDivLoss(reduction="batchmean")(log_softmax(s/T), softmax(t/T))). The gradient
// with respect to the student's logits is T·(q − p)/N.
type Distillation struct {
	// Temperature is T; 0 means 1.
	Temperature float64
}

// NeedsLabels reports false: the loss reads the teacher's logits.
func (Distillation) NeedsLabels() bool { return false }

// Value implements Loss.
func (d Distillation) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	const name = "distillation loss"
	n, err := checkShape(name, logits, classes, grad)
	if err != nil {
		return 0, err
	}
	if err := checkTeacher(name, t.Teacher, len(logits)); err != nil {
		return 0, err
	}
	temp := d.Temperature
	if temp == 0 {
		temp = 1
	}
	if temp < 0 || math.IsNaN(temp) || math.IsInf(temp, 0) {
		return 0, fmt.Errorf("%s: temperature %v must be positive", name, temp)
	}
	inv := 1 / float64(n)
	scale := 1 / temp
	var total float64
	for i := range n {
		xs, xt := logits[i*classes:(i+1)*classes], t.Teacher[i*classes:(i+1)*classes]
		lseS, lseT := logSumExp(xs, scale), logSumExp(xt, scale)
		for j := range classes {
			ls := scale*float64(xs[j]) - lseS
			lt := scale*float64(xt[j]) - lseT
			p := math.Exp(lt)
			if p > 0 {
				total += p * (lt - ls)
			}
			if grad != nil {
				grad[i*classes+j] = float32(temp * (math.Exp(ls) - p) * inv)
			}
		}
	}
	total *= temp * temp * inv
	return total, notFinite(name, total)
}

// MSE is the mean squared error between the student's and the teacher's logits, averaged
// over all N·C values (PyTorch's nn.MSELoss with the default mean reduction).
type MSE struct{}

// NeedsLabels reports false: the loss reads the teacher's logits.
func (MSE) NeedsLabels() bool { return false }

// Value implements Loss. The gradient is 2(x − t)/(N·C).
func (MSE) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	const name = "MSE loss"
	if _, err := checkShape(name, logits, classes, grad); err != nil {
		return 0, err
	}
	if err := checkTeacher(name, t.Teacher, len(logits)); err != nil {
		return 0, err
	}
	inv := 1 / float64(len(logits))
	var total float64
	for i, v := range logits {
		d := float64(v) - float64(t.Teacher[i])
		total += d * d
		if grad != nil {
			grad[i] = float32(2 * d * inv)
		}
	}
	total *= inv
	return total, notFinite(name, total)
}

// Mixed is the mean of a loss of the labels and a loss of the teacher's logits, weighed
// Weight and 1 − Weight: Hinton et al.'s (2015) cross-entropy with distillation mixed in,
// for a student that should both fit the labels and stay close to a teacher whose own
// mistakes are part of what it knows.
type Mixed struct {
	Label   Loss // reads the labels (CrossEntropy)
	Teacher Loss // reads the teacher's logits (Distillation)
	Weight  float64
}

// NeedsLabels reports true.
func (Mixed) NeedsLabels() bool { return true }

// NeedsTeacher reports true: the loss reads the teacher's logits as well.
func (Mixed) NeedsTeacher() bool { return true }

// Value implements Loss: Weight·Label + (1 − Weight)·Teacher, and so their gradients.
func (m Mixed) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	if m.Label == nil || m.Teacher == nil || !m.Label.NeedsLabels() || m.Teacher.NeedsLabels() {
		return 0, fmt.Errorf("mixed loss: want a loss of the labels and one of the teacher")
	}
	if !(m.Weight >= 0 && m.Weight <= 1) {
		return 0, fmt.Errorf("mixed loss: weight %v outside [0, 1]", m.Weight)
	}
	var gt []float32
	if grad != nil {
		gt = make([]float32, len(grad))
	}
	a, err := m.Label.Value(logits, classes, t, grad)
	if err != nil {
		return 0, err
	}
	b, err := m.Teacher.Value(logits, classes, t, gt)
	if err != nil {
		return 0, err
	}
	w := m.Weight
	for i := range grad {
		grad[i] = float32(w*float64(grad[i]) + (1-w)*float64(gt[i]))
	}
	return w*a + (1-w)*b, nil
}
