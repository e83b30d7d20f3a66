package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/qtool/qtool/engine"
)

// Kind is what a graph output holds; it decides how the output is matched with the
// full-precision model, supervised by labels and scored.
type Kind int

// The kinds of output.
const (
	// Feature is a feature map, an embedding or a regression: matched by normalised MSE.
	Feature Kind = iota
	// Logits are unnormalised class scores along Axis: matched by the KL divergence of
	// their softmaxes, supervised by cross-entropy.
	Logits
	// Probs are probabilities along Axis (a Softmax output).
	Probs
	// LogProbs are log-probabilities along Axis (a LogSoftmax output).
	LogProbs
	// Sigmoid is one independent probability per element in [0, 1] (a Sigmoid output, or
	// an [N, 1] output in [0, 1]): matched by the Bernoulli KL, supervised by BCE.
	Sigmoid
	// BinaryLogit is one logit per sample whose sigmoid is a probability (an [N, 1] head
	// trained with labels 0/1): matched by the Bernoulli KL of the sigmoids, supervised by
	// BCE on logits.
	BinaryLogit
	// Ignored outputs (not float32) take no part in the objective nor in fidelity.
	Ignored
)

var kindNames = [...]string{"feature", "logits", "probabilities", "log-probabilities", "sigmoid", "binary logit", "ignored"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// HasClassAxis reports whether outputs of kind k are distributions along a class axis.
func (k Kind) HasClassAxis() bool { return k == Logits || k == Probs || k == LogProbs }

// Binary reports whether outputs of kind k are one binary decision per element.
func (k Kind) Binary() bool { return k == Sigmoid || k == BinaryLogit }

// OutputSpec describes one output of a graph to the objective and to the fidelity
// metrics.
type OutputSpec struct {
	Name string
	Kind Kind
	// Axis is the class axis of the Logits, Probs and LogProbs kinds, non-negative;
	// ignored for the others.
	Axis int
	// Weight is the output's share of the objective; 0 leaves it out.
	Weight float64
}

func (s OutputSpec) String() string {
	obj := "nmse"
	switch {
	case s.Kind == Ignored:
		return s.Name + ": ignored"
	case s.Kind.HasClassAxis():
		obj = fmt.Sprintf("kl along axis %d", s.Axis)
	case s.Kind.Binary():
		obj = "bernoulli kl"
	}
	return fmt.Sprintf("%s (%s): %s ×%g", s.Name, s.Kind, obj, s.Weight)
}

// Objective is a loss over every output of a graph. Without labels it matches each output
// with the teacher's: the KL divergence per position along the class axis for logits and
// (log-)probabilities, the Bernoulli KL for sigmoid outputs and binary logits, and the
// normalised MSE Σ(s−t)²/Σt² (scale-free) for anything else. With Labelled, the output
// LabelOutput is instead supervised by the labels: cross-entropy per position (one label
// per position: [N] for [N, C], [N, T] for [N, T, C]) or binary cross-entropy for a binary
// head; the other outputs are still matched with the teacher. The outputs' losses are
// averaged with their weights.
type Objective struct {
	// Outputs has one entry per graph output, in graph order.
	Outputs []OutputSpec
	// Temperature softens Logits and LogProbs in the KL term (Hinton's T, with the T²
	// factor); 0 means 1. Probabilities are matched at T = 1.
	Temperature float64
	// Labelled makes the labels supervise output LabelOutput.
	Labelled    bool
	LabelOutput int
}

// GraphLoss is a loss over all of a graph's outputs. Fit, Evaluate and network use
// GraphValue when their loss implements it, and otherwise apply a plain Loss to the first
// output, which must then be [batch, classes] logits.
type GraphLoss interface {
	Loss
	// NeedsTeacher reports whether GraphValue reads the teacher's outputs.
	NeedsTeacher() bool
	// GraphValue returns the loss of a batch: outs are the model's outputs in graph order,
	// teacher the teacher's (nil unless NeedsTeacher), labels the batch's labels (nil
	// unless NeedsLabels). When grads is not nil it stores in grads[i], which has the
	// length of outs[i], the gradient of the loss with respect to outs[i] (zero for
	// outputs the loss leaves out); grads[i] is nil for outputs that are not float32.
	GraphValue(outs, teacher []*engine.Tensor, labels []int64, grads [][]float32) (float64, error)
}

// NeedsTeacher reports whether l reads a teacher model's outputs.
func NeedsTeacher(l Loss) bool {
	// A GraphLoss says, and so does a loss that reads both (Mixed).
	if tl, ok := l.(interface{ NeedsTeacher() bool }); ok {
		return tl.NeedsTeacher()
	}
	return !l.NeedsLabels()
}

// nmse reports whether output i's term is the normalised MSE to the teacher's output.
func (o *Objective) nmse(i int) bool {
	s := o.Outputs[i]
	return s.Weight > 0 && s.Kind != Ignored && !(o.Labelled && i == o.LabelOutput) && !s.Kind.HasClassAxis() && !s.Kind.Binary()
}

// NeedsLabels reports whether the objective reads labels.
func (o *Objective) NeedsLabels() bool { return o.Labelled }

// NeedsTeacher reports whether an output other than the labelled one takes part.
func (o *Objective) NeedsTeacher() bool {
	for i, s := range o.Outputs {
		if s.Weight > 0 && s.Kind != Ignored && !(o.Labelled && i == o.LabelOutput) {
			return true
		}
	}
	return false
}

func (o *Objective) String() string {
	var parts []string
	for i, s := range o.Outputs {
		if s.Weight == 0 || s.Kind == Ignored {
			continue
		}
		p := s.String()
		if o.Labelled && i == o.LabelOutput {
			p = fmt.Sprintf("%s (%s): labels ×%g", s.Name, s.Kind, s.Weight)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// Validate reports an objective that cannot be applied to outputs of these shapes.
func (o *Objective) Validate(shapes [][]int) error {
	if len(o.Outputs) != len(shapes) {
		return fmt.Errorf("objective: %d output specs for a model with %d outputs", len(o.Outputs), len(shapes))
	}
	var total float64
	for i, s := range o.Outputs {
		if s.Weight < 0 || math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) {
			return fmt.Errorf("objective: output %s has weight %v: want a finite weight ≥ 0", s.Name, s.Weight)
		}
		if s.Kind == Ignored {
			continue
		}
		total += s.Weight
		if s.Kind.HasClassAxis() && shapes[i] != nil && (s.Axis < 0 || s.Axis >= len(shapes[i])) {
			return fmt.Errorf("objective: output %s has %d dimensions: no class axis %d", s.Name, len(shapes[i]), s.Axis)
		}
	}
	if o.Labelled {
		if o.LabelOutput < 0 || o.LabelOutput >= len(o.Outputs) {
			return fmt.Errorf("objective: labelled output %d of %d", o.LabelOutput, len(o.Outputs))
		}
		if s := o.Outputs[o.LabelOutput]; !s.Kind.HasClassAxis() && !s.Kind.Binary() {
			return fmt.Errorf("objective: output %s is a %s: labels need class scores or a binary head", s.Name, s.Kind)
		}
	}
	if total == 0 {
		return fmt.Errorf("objective: every output has weight 0")
	}
	return nil
}

// Value implements Loss for a model whose single output is logits [N, classes]: it is
// GraphValue on that one output.
func (o *Objective) Value(logits []float32, classes int, t Target, grad []float32) (float64, error) {
	if classes < 1 || len(logits)%classes != 0 {
		return 0, fmt.Errorf("objective: %d values do not form a [batch, %d] matrix", len(logits), classes)
	}
	shape := []int{len(logits) / classes, classes}
	outs := []*engine.Tensor{{DType: engine.Float32, Shape: shape, F: logits}}
	var teacher []*engine.Tensor
	if t.Teacher != nil {
		teacher = []*engine.Tensor{{DType: engine.Float32, Shape: shape, F: t.Teacher}}
	}
	var grads [][]float32
	if grad != nil {
		grads = [][]float32{grad}
	}
	return o.GraphValue(outs, teacher, t.Labels, grads)
}

// GraphValue implements GraphLoss.
func (o *Objective) GraphValue(outs, teacher []*engine.Tensor, labels []int64, grads [][]float32) (float64, error) {
	return o.scaledValue(outs, teacher, labels, grads, nil)
}

// scaledValue is GraphValue with output i's term, and its gradient, multiplied by
// scale[i] (by 1 when scale is nil): the share of a batch's term that a chunk of it
// stands for.
func (o *Objective) scaledValue(outs, teacher []*engine.Tensor, labels []int64, grads [][]float32, scale []float64) (float64, error) {
	if len(outs) != len(o.Outputs) {
		return 0, fmt.Errorf("objective: %d outputs for %d output specs", len(outs), len(o.Outputs))
	}
	need := o.NeedsTeacher()
	if need && len(teacher) != len(outs) {
		return 0, fmt.Errorf("objective: %d teacher outputs for %d outputs: the objective needs the full-precision model", len(teacher), len(outs))
	}
	var wsum float64
	for _, s := range o.Outputs {
		if s.Kind != Ignored {
			wsum += s.Weight
		}
	}
	if wsum == 0 {
		return 0, fmt.Errorf("objective: every output has weight 0")
	}
	temp := o.Temperature
	if temp == 0 {
		temp = 1
	}
	var total float64
	for i, s := range o.Outputs {
		var g []float32
		if grads != nil {
			g = grads[i]
		}
		w := s.Weight / wsum
		if scale != nil {
			w *= scale[i]
		}
		if s.Kind == Ignored || w == 0 {
			clear(g)
			continue
		}
		y := outs[i]
		if y.DType != engine.Float32 {
			return 0, fmt.Errorf("objective: output %s is %v, not float32", s.Name, y.DType)
		}
		if g != nil && len(g) != len(y.F) {
			return 0, fmt.Errorf("objective: gradient buffer of %s holds %d values for %d", s.Name, len(g), len(y.F))
		}
		var t []float32
		if teacher != nil && teacher[i] != nil {
			t = teacher[i].F
		}
		var v float64
		var err error
		switch {
		case o.Labelled && i == o.LabelOutput && s.Kind.HasClassAxis():
			v, err = ClassCE(s.Kind, y.F, y.Shape, s.Axis, labels, g)
		case o.Labelled && i == o.LabelOutput:
			v, err = BinaryCE(s.Kind, y.F, labels, g)
		case s.Kind.HasClassAxis():
			v, err = ClassKL(s.Kind, y.F, t, y.Shape, s.Axis, temp, g)
		case s.Kind.Binary():
			v, err = BernoulliKL(s.Kind, y.F, t, g)
		default:
			v, err = NMSE(y.F, t, g)
		}
		if err != nil {
			return 0, fmt.Errorf("objective: output %s: %w", s.Name, err)
		}
		total += w * v
		if g != nil && w != 1 {
			for j := range g {
				g[j] = float32(float64(g[j]) * w)
			}
		}
	}
	return total, notFinite("objective", total)
}

// lanes splits shape at axis into the number of lanes before it, the classes and the
// stride of a class step (the product of the dimensions after it).
func lanes(n int, shape []int, axis int) (outer, classes, inner int, err error) {
	if axis < 0 || axis >= len(shape) {
		return 0, 0, 0, fmt.Errorf("shape %v has no class axis %d", shape, axis)
	}
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	classes = shape[axis]
	if classes < 1 || outer*classes*inner != n {
		return 0, 0, 0, fmt.Errorf("shape %v does not hold %d values with classes on axis %d", shape, n, axis)
	}
	return outer, classes, inner, nil
}

// tinyProb is the smallest probability taken to a logarithm: a probability that float32
// rounded to zero costs log(1e-30) ≈ −69 instead of an infinite loss, and its gradient
// stays finite in float32, so one saturated output cannot poison every weight.
const tinyProb = 1e-30

// logDist fills ls with the log-probabilities of lane x (values xs[k·inner], k < C) of an
// output of kind k, softened by temp for logits and log-probabilities.
func logDist(k Kind, x []float32, base, classes, inner int, temp float64, ls []float64) {
	if k == Probs {
		for c := range classes {
			ls[c] = math.Log(math.Max(float64(x[base+c*inner]), tinyProb))
		}
		return
	}
	scale := 1 / temp
	mx := math.Inf(-1)
	for c := range classes {
		mx = math.Max(mx, scale*float64(x[base+c*inner]))
	}
	var s float64
	for c := range classes {
		s += math.Exp(scale*float64(x[base+c*inner]) - mx)
	}
	lse := mx + math.Log(s)
	for c := range classes {
		ls[c] = scale*float64(x[base+c*inner]) - lse
	}
}

// ClassKL is the KL divergence KL(p ‖ q) along axis of each position, averaged over the
// positions (every index of the other axes): p is the teacher's distribution, q the
// student's. For Logits and LogProbs both are softmax(x/T) and the loss is scaled by T²
// (Hinton's distillation; at T = 1 and [N, C] it is Distillation); for Probs they are the
// outputs themselves. grad, when not nil, receives the gradient with respect to s:
// T·(q − p)/P for Logits and LogProbs, −p/q/P for Probs (P positions).
func ClassKL(k Kind, s, t []float32, shape []int, axis int, temp float64, grad []float32) (float64, error) {
	if !k.HasClassAxis() {
		return 0, fmt.Errorf("class KL of a %s output", k)
	}
	if len(t) != len(s) {
		return 0, fmt.Errorf("%d teacher values for %d outputs", len(t), len(s))
	}
	if !(temp > 0) {
		return 0, fmt.Errorf("temperature %v must be positive", temp)
	}
	outer, classes, inner, err := lanes(len(s), shape, axis)
	if err != nil {
		return 0, err
	}
	if k == Probs {
		temp = 1
	}
	positions := outer * inner
	inv := 1 / float64(positions)
	ls := make([]float64, classes)
	lt := make([]float64, classes)
	var total float64
	for o := range outer {
		for i := range inner {
			base := o*classes*inner + i
			logDist(k, s, base, classes, inner, temp, ls)
			logDist(k, t, base, classes, inner, temp, lt)
			for c := range classes {
				p := math.Exp(lt[c])
				if p > 0 {
					total += p * (lt[c] - ls[c])
				}
				if grad == nil {
					continue
				}
				if k == Probs {
					grad[base+c*inner] = float32(-p / math.Exp(ls[c]) * inv)
				} else {
					grad[base+c*inner] = float32(temp * (math.Exp(ls[c]) - p) * inv)
				}
			}
		}
	}
	total *= temp * temp * inv
	return total, notFinite("class KL", total)
}

// IgnoreLabel is the label of a position left out of the cross-entropies and the accuracy:
// the padding of variable-length sequences (PyTorch's ignore_index; calib.IgnoredLabel).
const IgnoreLabel = -100

// ClassCE is the cross-entropy −log q[label] of each position along axis, averaged over
// the positions: PyTorch's nn.CrossEntropyLoss for Logits (with the class axis 1 and the
// positions after it), nn.NLLLoss for LogProbs, and nn.NLLLoss on log q for Probs. labels
// has one class per position, in the order of the shape without its class axis ([N] for
// [N, C], [N, T] for [N, T, C]). Positions labelled IgnoreLabel are left out, of the mean
// too, as PyTorch's ignore_index does; their gradient is 0, and a batch of ignored
// positions only has loss 0.
func ClassCE(k Kind, s []float32, shape []int, axis int, labels []int64, grad []float32) (float64, error) {
	if !k.HasClassAxis() {
		return 0, fmt.Errorf("cross-entropy of a %s output", k)
	}
	outer, classes, inner, err := lanes(len(s), shape, axis)
	if err != nil {
		return 0, err
	}
	positions := outer * inner
	if len(labels) != positions {
		return 0, fmt.Errorf("%d labels for %d positions (shape %v, classes on axis %d): give one label per position", len(labels), positions, shape, axis)
	}
	counted := countLabelled(labels)
	if grad != nil && counted < positions {
		clear(grad)
	}
	if counted == 0 {
		return 0, nil
	}
	inv := 1 / float64(counted)
	ls := make([]float64, classes)
	var total float64
	for o := range outer {
		for i := range inner {
			y := labels[o*inner+i]
			if y == IgnoreLabel {
				continue
			}
			if y < 0 || y >= int64(classes) {
				return 0, fmt.Errorf("label %d of position %d is outside the output's %d classes", y, o*inner+i, classes)
			}
			base := o*classes*inner + i
			if k == LogProbs {
				// NLL reads the output as it is: renormalising would add float32's
				// rounding of the exporter's log-softmax.
				for c := range classes {
					ls[c] = float64(s[base+c*inner])
				}
			} else {
				logDist(k, s, base, classes, inner, 1, ls)
			}
			total -= ls[y]
			if grad == nil {
				continue
			}
			for c := range classes {
				var g float64
				switch k {
				case Logits:
					g = math.Exp(ls[c])
					if c == int(y) {
						g--
					}
				case LogProbs:
					if c == int(y) {
						g = -1
					}
				case Probs:
					if c == int(y) {
						g = -1 / math.Exp(ls[c])
					}
				}
				grad[base+c*inner] = float32(g * inv)
			}
		}
	}
	total *= inv
	return total, notFinite("cross-entropy", total)
}

// logSigmoid returns log σ(x) and log(1 − σ(x)) without overflow.
func logSigmoid(x float64) (float64, float64) {
	// log σ(x) = −softplus(−x), log(1 − σ(x)) = −softplus(x).
	sp := func(v float64) float64 { return math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v))) }
	return -sp(-x), -sp(x)
}

// bernoulli returns the log-probabilities of 1 and 0 of one output value of kind k.
func bernoulli(k Kind, v float32) (float64, float64) {
	if k == BinaryLogit {
		return logSigmoid(float64(v))
	}
	p := float64(v)
	return math.Log(math.Max(p, tinyProb)), math.Log(math.Max(1-p, tinyProb))
}

// BernoulliKL is the mean over elements of the Bernoulli KL divergence
// p log(p/q) + (1−p) log((1−p)/(1−q)), p the teacher's probability and q the student's:
// the outputs themselves for Sigmoid, their sigmoids for BinaryLogit. It is binary
// cross-entropy with the teacher's probability as a soft target, minus the target's
// entropy, so it is 0 when the outputs agree. The gradient is (q − p)/(q(1−q))/M for
// Sigmoid and (q − p)/M for BinaryLogit (M elements).
func BernoulliKL(k Kind, s, t []float32, grad []float32) (float64, error) {
	if !k.Binary() {
		return 0, fmt.Errorf("Bernoulli KL of a %s output", k)
	}
	if len(t) != len(s) || len(s) == 0 {
		return 0, fmt.Errorf("%d teacher values for %d outputs", len(t), len(s))
	}
	inv := 1 / float64(len(s))
	var total float64
	for i := range s {
		l1s, l0s := bernoulli(k, s[i])
		l1t, l0t := bernoulli(k, t[i])
		p := math.Exp(l1t)
		if p > 0 {
			total += p * (l1t - l1s)
		}
		if p < 1 {
			total += (1 - p) * (l0t - l0s)
		}
		if grad != nil {
			q := math.Exp(l1s)
			if k == BinaryLogit {
				grad[i] = float32((q - p) * inv)
			} else {
				// d/dq of −p log q − (1−p) log(1−q), with q clamped as the loss is.
				grad[i] = float32((-p/math.Exp(l1s) + (1-p)/math.Exp(l0s)) * inv)
			}
		}
	}
	total *= inv
	return total, notFinite("Bernoulli KL", total)
}

// countLabelled is the number of labels other than IgnoreLabel.
func countLabelled(labels []int64) int {
	n := 0
	for _, y := range labels {
		if y != IgnoreLabel {
			n++
		}
	}
	return n
}

// BinaryCE is binary cross-entropy −y log q − (1−y) log(1−q) against labels 0 or 1, one
// per element, averaged: nn.BCELoss for Sigmoid outputs (q is the output) and
// nn.BCEWithLogitsLoss for BinaryLogit (q = σ(output)). Elements labelled IgnoreLabel are
// left out, as in ClassCE.
func BinaryCE(k Kind, s []float32, labels []int64, grad []float32) (float64, error) {
	if !k.Binary() {
		return 0, fmt.Errorf("binary cross-entropy of a %s output", k)
	}
	if len(labels) != len(s) || len(s) == 0 {
		return 0, fmt.Errorf("%d labels for %d outputs: a binary head takes one label 0 or 1 per output", len(labels), len(s))
	}
	counted := countLabelled(labels)
	if grad != nil && counted < len(s) {
		clear(grad)
	}
	if counted == 0 {
		return 0, nil
	}
	inv := 1 / float64(counted)
	var total float64
	for i, y := range labels {
		if y == IgnoreLabel {
			continue
		}
		if y != 0 && y != 1 {
			return 0, fmt.Errorf("label %d of sample %d: a binary head takes labels 0 and 1", y, i)
		}
		l1, l0 := bernoulli(k, s[i])
		if y == 1 {
			total -= l1
		} else {
			total -= l0
		}
		if grad != nil {
			q, yf := math.Exp(l1), float64(y)
			if k == BinaryLogit {
				grad[i] = float32((q - yf) * inv)
			} else {
				grad[i] = float32((-yf/q + (1-yf)/math.Exp(l0)) * inv)
			}
		}
	}
	total *= inv
	return total, notFinite("binary cross-entropy", total)
}

// NMSE is the normalised mean squared error Σ(s − t)²/Σt², the MSE divided by the
// teacher's mean square, so that an output's scale does not weigh in the objective (a
// feature map of magnitude 100 and an embedding of norm 1 count the same). When the
// teacher's outputs are all zero it is the plain MSE. The gradient is 2(s − t)/Σt².
func NMSE(s, t []float32, grad []float32) (float64, error) {
	if len(t) != len(s) || len(s) == 0 {
		return 0, fmt.Errorf("%d teacher values for %d outputs", len(t), len(s))
	}
	var den, num float64
	for i := range s {
		d := float64(s[i]) - float64(t[i])
		num += d * d
		den += float64(t[i]) * float64(t[i])
	}
	if den == 0 {
		den = float64(len(s))
	}
	if grad != nil {
		for i := range s {
			grad[i] = float32(2 * (float64(s[i]) - float64(t[i])) / den)
		}
	}
	v := num / den
	return v, notFinite("normalised MSE", v)
}
