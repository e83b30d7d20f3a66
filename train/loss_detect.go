package train

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// NoClassAxis, as a DetectOptions.ClassAxis value, declares that an output has no class
// axis: an [N, D] embedding or regression that the classifier convention would read as
// logits becomes a Feature.
const NoClassAxis = math.MinInt32

// DetectOptions overrides what DetectOutputs infers from the graph.
type DetectOptions struct {
	// ClassAxis declares the class axis of outputs by name, the key "" for every output not
	// named; a negative axis counts from the end. The output becomes Logits on that axis,
	// or stays Probs or LogProbs on it when a Softmax or LogSoftmax produces it.
	ClassAxis map[string]int
	// Weights sets outputs' weights by name; outputs not named weigh 1.
	Weights map[string]float64
	// Labelled reports that the data carry labels: an [N, 1] output that is not a sigmoid
	// is then a single-logit binary head rather than a regression.
	Labelled bool
}

// OutputError reports an option that names a graph output the model does not have, or
// that does not fit the output.
type OutputError struct {
	// Option is the DetectOptions field: "ClassAxis" or "Weights".
	Option  string
	Output  string
	Reason  string
	Outputs []string // the model's outputs
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("%s of output %q: %s (the model's outputs: %s)", e.Option, e.Output, e.Reason, strings.Join(e.Outputs, ", "))
}

// producer returns the node that computes value name, looking through Identity nodes
// (exporters add them to rename outputs), or nil for a graph input or initializer.
func producer(m *onnxio.Model, name string) *onnxpb.NodeProto {
	if m == nil || m.Proto.GetGraph() == nil {
		return nil
	}
	by := map[string]*onnxpb.NodeProto{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			by[o] = n
		}
	}
	for range len(by) + 1 {
		n := by[name]
		if n == nil || n.GetOpType() != "Identity" || len(n.GetInput()) == 0 || n.GetDomain() != "" {
			return n
		}
		name = n.GetInput()[0]
	}
	return nil
}

func axisAttr(n *onnxpb.NodeProto, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == "axis" {
			return a.GetI()
		}
	}
	return def
}

// DetectOutputs describes each output of g (built from m; m may be nil) for the objective
// and the fidelity metrics:
//   - an output of Softmax or LogSoftmax is Probs or LogProbs along the node's axis;
//   - an output of Sigmoid is Sigmoid;
//   - an [N, C] output with C ≥ 2 is Logits along axis 1 (qtool's classifier
//     convention);
//   - an [N, 1] or [N] output is Sigmoid when sample shows it in [0, 1], otherwise a
//     BinaryLogit with labels and a Feature without;
//   - anything else is a Feature, and an output that is not float32 is Ignored.
//
// The shapes are the sample's, the model's outputs on a batch (nil: the declared shapes).
// Before opset 13 Softmax flattens every axis from its axis on: that is a class axis only
// when it is the last, and otherwise the output is a Feature. Options override the
// inference; a name that is not an output is an *OutputError.
func DetectOutputs(m *onnxio.Model, g *engine.Graph, sample []*engine.Tensor, o DetectOptions) ([]OutputSpec, error) {
	outs := g.Outputs()
	names := make([]string, len(outs))
	for i, v := range outs {
		names[i] = v.Name
	}
	for _, opt := range []struct {
		field string
		keys  []string
	}{{"ClassAxis", keysOf(o.ClassAxis)}, {"Weights", keysOf(o.Weights)}} {
		for _, k := range opt.keys {
			if k == "" && opt.field == "ClassAxis" {
				continue
			}
			found := false
			for _, n := range names {
				found = found || n == k
			}
			if !found {
				return nil, &OutputError{Option: opt.field, Output: k, Reason: "no output of that name", Outputs: names}
			}
		}
	}
	var opset int64 = 13
	if m != nil {
		opset = m.Opset("")
	}
	specs := make([]OutputSpec, len(outs))
	for i, v := range outs {
		s := OutputSpec{Name: v.Name, Kind: Feature, Weight: 1}
		if w, ok := o.Weights[v.Name]; ok {
			s.Weight = w
		}
		shape := v.Shape
		var vals []float32
		if i < len(sample) && sample[i] != nil {
			shape, vals = sample[i].Shape, sample[i].F
			if sample[i].DType != engine.Float32 {
				s.Kind = Ignored
			}
		}
		if v.DType != engine.Float32 {
			s.Kind = Ignored
		}
		if s.Kind == Ignored {
			specs[i] = s
			continue
		}
		rank := len(shape)
		p := producer(m, v.Name)
		switch op := p.GetOpType(); {
		case p != nil && p.GetDomain() == "" && (op == "Softmax" || op == "LogSoftmax"):
			def := int64(-1)
			if opset < 13 {
				def = 1
			}
			a := int(axisAttr(p, def))
			if rank > 0 && a < 0 {
				a += rank
			}
			if rank > 0 && a >= 0 && a < rank && (opset >= 13 || a == rank-1) {
				s.Kind, s.Axis = Probs, a
				if op == "LogSoftmax" {
					s.Kind = LogProbs
				}
			}
		case p != nil && p.GetDomain() == "" && op == "Sigmoid":
			s.Kind = Sigmoid
		case rank == 2 && shape[1] >= 2:
			s.Kind, s.Axis = Logits, 1
		case rank == 1 || rank == 2 && shape[1] == 1:
			switch {
			case vals != nil && inUnit(vals):
				s.Kind = Sigmoid
			case o.Labelled:
				s.Kind = BinaryLogit
			}
		}
		a, ok := o.ClassAxis[v.Name]
		if !ok {
			a, ok = o.ClassAxis[""]
		}
		if ok && a == NoClassAxis {
			if s.Kind.HasClassAxis() || s.Kind == BinaryLogit {
				s.Kind, s.Axis = Feature, 0
			}
		} else if ok {
			if a < 0 && rank > 0 {
				a += rank
			}
			if shape != nil && (a < 0 || a >= rank) {
				return nil, &OutputError{Option: "ClassAxis", Output: v.Name, Reason: fmt.Sprintf("axis %d is outside its %d dimensions", o.ClassAxis[v.Name], rank), Outputs: names}
			}
			if !s.Kind.HasClassAxis() {
				s.Kind = Logits
			}
			s.Axis = a
		}
		specs[i] = s
	}
	return specs, nil
}

func keysOf[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func inUnit(v []float32) bool {
	for _, x := range v {
		if !(x >= 0 && x <= 1) {
			return false
		}
	}
	return len(v) > 0
}

// LabelOutput returns the output labels supervise: the first whose kind has a class axis
// or is binary, or −1 when there is none.
func LabelOutput(specs []OutputSpec) int {
	for i, s := range specs {
		if s.Kind.HasClassAxis() || s.Kind.Binary() {
			return i
		}
	}
	return -1
}

// LabelClasses is the number of classes labels of output spec may take: 2 for a binary
// head, the class axis' size otherwise (0: unknown). shape is the output's.
func LabelClasses(s OutputSpec, shape []int) int {
	switch {
	case s.Kind.Binary():
		return 2
	case s.Kind.HasClassAxis() && s.Axis < len(shape) && shape[s.Axis] > 0:
		return shape[s.Axis]
	}
	return 0
}
