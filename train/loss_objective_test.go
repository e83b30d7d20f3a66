package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/fdcheck"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
)

// TestObjectiveLossesMatchPyTorch compares each per-output loss of the objective with
// torch's functions and autograd (testdata/make_objective_fixtures.py).
func TestObjectiveLossesMatchPyTorch(t *testing.T) {
	const file = "objective.npz"
	f := func(key string) []float32 { return to32(fixture64(t, file, key)) }
	var seqLabels, yb []int64
	fixture(t, file, "seq_labels", &seqLabels)
	fixture(t, file, "yb", &yb)
	s3, t3 := f("s3"), f("t3")
	cases := []struct {
		key string
		x   []float32
		fn  func(x, g []float32) (float64, error)
	}{
		{"kl_logits1", s3, func(x, g []float32) (float64, error) { return ClassKL(Logits, x, t3, []int{2, 3, 4}, 1, 1, g) }},
		{"kl_logits2", s3, func(x, g []float32) (float64, error) { return ClassKL(Logits, x, t3, []int{2, 3, 4}, 1, 2, g) }},
		{"kl_probs", f("ps"), func(x, g []float32) (float64, error) { return ClassKL(Probs, x, f("pt"), []int{2, 3, 4}, 1, 1, g) }},
		{"kl_logprobs2", f("ls"), func(x, g []float32) (float64, error) { return ClassKL(LogProbs, x, f("lt"), []int{2, 3, 4}, 1, 2, g) }},
		{"ce_seq", f("seq"), func(x, g []float32) (float64, error) { return ClassCE(Logits, x, []int{2, 5, 3}, 2, seqLabels, g) }},
		{"nll_seq", f("seq_lp"), func(x, g []float32) (float64, error) { return ClassCE(LogProbs, x, []int{2, 5, 3}, 2, seqLabels, g) }},
		{"nll_probs", f("seq_p"), func(x, g []float32) (float64, error) { return ClassCE(Probs, x, []int{2, 5, 3}, 2, seqLabels, g) }},
		{"bkl_sigmoid", f("q"), func(x, g []float32) (float64, error) { return BernoulliKL(Sigmoid, x, f("p"), g) }},
		{"bkl_logit", f("zs"), func(x, g []float32) (float64, error) { return BernoulliKL(BinaryLogit, x, f("zt"), g) }},
		{"bce_sigmoid", f("q"), func(x, g []float32) (float64, error) { return BinaryCE(Sigmoid, x, yb, g) }},
		{"bce_logit", f("zs"), func(x, g []float32) (float64, error) { return BinaryCE(BinaryLogit, x, yb, g) }},
		{"nmse", s3, func(x, g []float32) (float64, error) { return NMSE(x, t3, g) }},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			want := fixture64(t, file, c.key+"_value")[0]
			wantGrad := fixture64(t, file, c.key+"_grad")
			grad := make([]float32, len(c.x))
			got, err := c.fn(c.x, grad)
			if err != nil {
				t.Fatal(err)
			}
			// The references subtract entropies for the Bernoulli KL: the absolute error
			// is that of the terms, not of their small difference.
			if e := relErr(got, want, 1e-3); e > 1e-12 {
				t.Errorf("loss %.17g, PyTorch %.17g (relative error %.3g)", got, want, e)
			}
			for i := range grad {
				// The gradient is rounded to float32 once.
				if e := relErr(float64(grad[i]), wantGrad[i], 1e-30); e > 1e-7 {
					t.Errorf("grad[%d] = %.9g, PyTorch %.9g", i, grad[i], wantGrad[i])
				}
			}
			if v, err := c.fn(c.x, nil); err != nil || v != got {
				t.Errorf("value without gradient %v (%v), with %v", v, err, got)
			}
		})
	}
}

// TestObjectiveGradientsFiniteDifferences checks the objective's gradient over two
// outputs (every kind in turn with a feature map) against central differences.
func TestObjectiveGradientsFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	rnd := func(n int, lo, hi float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(lo + (hi-lo)*r.Float64())
		}
		return v
	}
	softmax := func(x []float32, log bool) []float32 { // along the last axis of [*, 3]
		out := make([]float32, len(x))
		for i := 0; i < len(x); i += 3 {
			lse := logSumExp(x[i:i+3], 1)
			for j := range 3 {
				v := float64(x[i+j]) - lse
				if !log {
					v = math.Exp(v)
				}
				out[i+j] = float32(v)
			}
		}
		return out
	}
	feat := rnd(8, -2, 2)
	kinds := []struct {
		spec    OutputSpec
		shape   []int
		s, t    []float32
		labels  []int64
		labeled bool
	}{
		{OutputSpec{Name: "l", Kind: Logits, Axis: 1, Weight: 2}, []int{2, 3, 2}, rnd(12, -2, 2), rnd(12, -2, 2), nil, false},
		{OutputSpec{Name: "p", Kind: Probs, Axis: 2, Weight: 1}, []int{2, 2, 3}, softmax(rnd(12, -2, 2), false), softmax(rnd(12, -2, 2), false), nil, false},
		{OutputSpec{Name: "lp", Kind: LogProbs, Axis: 2, Weight: 1}, []int{2, 2, 3}, softmax(rnd(12, -2, 2), true), softmax(rnd(12, -2, 2), true), nil, false},
		{OutputSpec{Name: "sig", Kind: Sigmoid, Weight: 1}, []int{4, 1}, rnd(4, 0.1, 0.9), rnd(4, 0.1, 0.9), nil, false},
		{OutputSpec{Name: "z", Kind: BinaryLogit, Weight: 1}, []int{4, 1}, rnd(4, -3, 3), rnd(4, -3, 3), nil, false},
		{OutputSpec{Name: "ce", Kind: Logits, Axis: 2, Weight: 1}, []int{2, 2, 3}, rnd(12, -2, 2), nil, []int64{0, 2, 1, 1}, true},
		{OutputSpec{Name: "bce", Kind: Sigmoid, Weight: 1}, []int{4, 1}, rnd(4, 0.1, 0.9), nil, []int64{0, 1, 1, 0}, true},
		{OutputSpec{Name: "bcel", Kind: BinaryLogit, Weight: 1}, []int{4, 1}, rnd(4, -3, 3), nil, []int64{0, 1, 1, 0}, true},
	}
	for _, k := range kinds {
		t.Run(k.spec.Name, func(t *testing.T) {
			obj := &Objective{Outputs: []OutputSpec{k.spec, {Name: "f", Kind: Feature, Weight: 0.5}}, Temperature: 1.5, Labelled: k.labeled}
			teach := k.t
			if teach == nil {
				teach = make([]float32, len(k.s))
			}
			outs := []*engine.Tensor{engine.NewFloat(k.shape, k.s), engine.NewFloat([]int{2, 4}, append([]float32(nil), feat...))}
			touts := []*engine.Tensor{engine.NewFloat(k.shape, teach), engine.NewFloat([]int{2, 4}, rnd(8, -2, 2))}
			grads := [][]float32{make([]float32, len(k.s)), make([]float32, 8)}
			if _, err := obj.GraphValue(outs, touts, k.labels, grads); err != nil {
				t.Fatal(err)
			}
			for o, out := range outs {
				fdcheck.Check(t, fmt.Sprintf("output %d", o), out.F,
					func(j int) float64 { return float64(grads[o][j]) },
					func() float64 {
						v, err := obj.GraphValue(outs, touts, k.labels, nil)
						if err != nil {
							t.Fatal(err)
						}
						return v
					},
					fdcheck.Spec{Step: fdcheck.Fixed(1.0 / 4096), Atol: 1e-5, Rtol: 1e-3})
			}
		})
	}
}

// TestObjectiveSingleSigmoidNotZero is the case that motivated the objective: a 1-class
// softmax distillation is identically 0 on a sigmoid head, the Bernoulli KL is not.
func TestObjectiveSingleSigmoidNotZero(t *testing.T) {
	s, tt := []float32{0.2, 0.9}, []float32{0.6, 0.4}
	kd, err := Distillation{}.Value(s, 1, Target{Teacher: tt}, nil)
	if err != nil || kd != 0 {
		t.Fatalf("1-class distillation %v (%v): the premise changed", kd, err)
	}
	v, err := BernoulliKL(Sigmoid, s, tt, nil)
	// 0.6 log(0.6/0.2) + 0.4 log(0.4/0.8) and 0.4 log(0.4/0.9) + 0.6 log(0.6/0.1), halved.
	want := (0.6*math.Log(3) + 0.4*math.Log(0.5) + 0.4*math.Log(0.4/0.9) + 0.6*math.Log(6)) / 2
	if err != nil || math.Abs(v-want) > 1e-7 {
		t.Errorf("Bernoulli KL %v (%v), want %v", v, err, want)
	}
	// Scale-free: NMSE of 10× the outputs is the same.
	a, _ := NMSE([]float32{1, 2}, []float32{1.5, 1}, nil)
	b, _ := NMSE([]float32{10, 20}, []float32{15, 10}, nil)
	if math.Abs(a-b) > 1e-15 || math.Abs(a-1.25/3.25) > 1e-15 {
		t.Errorf("NMSE %v and ×10 %v, want 1.25/3.25 both", a, b)
	}
}

// headsModel is x[N,4] → Gemm → logits[N,3], with probs = Softmax(logits), lp =
// LogSoftmax(logits), sig = Sigmoid(Gemm → [N,1]), head = Gemm → [N,1] (large values, no
// sigmoid), fmap = Reshape(Gemm → [N,6]) to [N,3,2], and emb = Gemm → [N,5].
func headsModel(opset int64) *onnxio.Model {
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int, scale, shift float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64()*scale + shift)
		}
		return v
	}
	node := func(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(op + "_" + out[0]), Input: in, Output: out, Attribute: attrs}
	}
	transB := &onnxpb.AttributeProto{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}
	vi := func(name string, d ...int64) *onnxpb.ValueInfoProto {
		sh := &onnxpb.TensorShapeProto{}
		for _, x := range d {
			if x < 0 {
				sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}})
			} else {
				sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: x}})
			}
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: sh}}}}
	}
	shape := &onnxpb.TensorProto{Name: proto.String("shape"), Dims: []int64{3}, DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{-1, 3, 2}}
	g := &onnxpb.GraphProto{
		Name: proto.String("heads"),
		Node: []*onnxpb.NodeProto{
			node("Gemm", []string{"x", "w1", "b1"}, []string{"logits"}, transB),
			node("Softmax", []string{"logits"}, []string{"probs"}),
			node("LogSoftmax", []string{"logits"}, []string{"lp0"}),
			node("Identity", []string{"lp0"}, []string{"lp"}),
			node("Gemm", []string{"x", "w2", "b2"}, []string{"z"}, transB),
			node("Sigmoid", []string{"z"}, []string{"sig"}),
			node("Gemm", []string{"x", "w3", "b3"}, []string{"head"}, transB),
			node("Gemm", []string{"x", "w4", "b4"}, []string{"f6"}, transB),
			node("Reshape", []string{"f6", "shape"}, []string{"fmap"}),
			node("Gemm", []string{"x", "w5", "b5"}, []string{"emb"}, transB),
		},
		Input:  []*onnxpb.ValueInfoProto{vi("x", -1, 4)},
		Output: []*onnxpb.ValueInfoProto{vi("logits", -1, 3), vi("probs", -1, 3), vi("lp", -1, 3), vi("sig", -1, 1), vi("head", -1, 1), vi("fmap", -1, 3, 2), vi("emb", -1, 5)},
		Initializer: []*onnxpb.TensorProto{
			onnxio.FloatTensor("w1", []int64{3, 4}, rnd(12, 1, 0)), onnxio.FloatTensor("b1", []int64{3}, rnd(3, 0.1, 0)),
			onnxio.FloatTensor("w2", []int64{1, 4}, rnd(4, 1, 0)), onnxio.FloatTensor("b2", []int64{1}, rnd(1, 0.1, 0)),
			onnxio.FloatTensor("w3", []int64{1, 4}, rnd(4, 0.1, 0)), onnxio.FloatTensor("b3", []int64{1}, []float32{5}),
			onnxio.FloatTensor("w4", []int64{6, 4}, rnd(24, 1, 0)), onnxio.FloatTensor("b4", []int64{6}, rnd(6, 0.1, 0)),
			onnxio.FloatTensor("w5", []int64{5, 4}, rnd(20, 1, 0)), onnxio.FloatTensor("b5", []int64{5}, rnd(5, 0.1, 0)),
			shape,
		},
	}
	return &onnxio.Model{Name: "heads.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:       g,
	}}
}

func TestDetectOutputs(t *testing.T) {
	m := headsModel(15)
	g := buildTiny(t, m)
	x := engine.NewFloat([]int{5, 4}, make([]float32, 20))
	for i := range x.F {
		x.F[i] = float32(i%7) / 7
	}
	outs, err := g.Forward(&engine.Context{NoGrad: true}, x)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		kind Kind
		axis int
	}
	check := func(name string, specs []OutputSpec, w map[string]want) {
		t.Helper()
		for _, s := range specs {
			if got := (want{s.Kind, s.Axis}); got != w[s.Name] {
				t.Errorf("%s: output %s is %v axis %d, want %v axis %d", name, s.Name, s.Kind, s.Axis, w[s.Name].kind, w[s.Name].axis)
			}
		}
	}
	specs, err := DetectOutputs(m, g, outs, DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]want{"logits": {Logits, 1}, "probs": {Probs, 1}, "lp": {LogProbs, 1}, "sig": {Sigmoid, 0},
		"head": {Feature, 0}, "fmap": {Feature, 0}, "emb": {Logits, 1}}
	check("unlabelled", specs, base)
	specs, _ = DetectOutputs(m, g, outs, DetectOptions{Labelled: true})
	base["head"] = want{BinaryLogit, 0}
	check("labelled", specs, base)
	specs, err = DetectOutputs(m, g, outs, DetectOptions{ClassAxis: map[string]int{"fmap": -1, "emb": NoClassAxis}, Weights: map[string]float64{"probs": 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	base["head"], base["fmap"], base["emb"] = want{Feature, 0}, want{Logits, 2}, want{Feature, 0}
	check("overridden", specs, base)
	if specs[1].Weight != 0.5 || specs[0].Weight != 1 {
		t.Errorf("weights %v %v, want 1 and 0.5", specs[0].Weight, specs[1].Weight)
	}
	if LabelOutput(specs) != 0 {
		t.Errorf("label output %d, want 0", LabelOutput(specs))
	}
	var oe *OutputError
	if _, err := DetectOutputs(m, g, outs, DetectOptions{Weights: map[string]float64{"nope": 1}}); !errors.As(err, &oe) || oe.Output != "nope" {
		t.Errorf("unknown output: %v, want an *OutputError", err)
	}
	if _, err := DetectOutputs(m, g, outs, DetectOptions{ClassAxis: map[string]int{"fmap": 3}}); !errors.As(err, &oe) {
		t.Errorf("axis 3 of a 3-D output: %v, want an *OutputError", err)
	}
	// Without a sample the sigmoid's range is unknown: still a Sigmoid by its producer.
	specs, _ = DetectOutputs(m, g, nil, DetectOptions{})
	if specs[3].Kind != Sigmoid || specs[4].Kind != Feature {
		t.Errorf("declared shapes: sig %v head %v", specs[3].Kind, specs[4].Kind)
	}
}

// TestFitObjectiveAllOutputs trains every parameter of the seven-output model to match a
// teacher with different weights: the objective over all outputs must fall, and each
// output's fidelity be measured.
func TestFitObjectiveAllOutputs(t *testing.T) {
	teacherM := headsModel(15)
	teacher := buildTiny(t, teacherM)
	student := buildTiny(t, headsModel(15), "w1", "b1", "w2", "b2", "w3", "b3", "w4", "b4", "w5", "b5")
	for _, p := range student.Params() {
		if p.Trainable {
			for i := range p.Value.F {
				p.Value.F[i] *= 0.7
			}
		}
	}
	x := engine.NewFloat([]int{1, 4}, nil)
	outs, err := teacher.Forward(&engine.Context{NoGrad: true}, engine.NewFloat([]int{1, 4}, []float32{0.1, 0.2, 0.3, 0.4}))
	if err != nil {
		t.Fatal(err)
	}
	_ = x
	specs, err := DetectOutputs(teacherM, teacher, outs, DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := &Objective{Outputs: specs}
	data := newSliceBatcher(newBlobs(1, 64, 4, 3), 16, true, 1)
	data.nolabel = true
	before, err := Evaluate(context.Background(), student, data, EvalOptions{Loss: obj, Reference: teacher, Outputs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Fit(context.Background(), student, data, Options{Epochs: 30, Loss: obj, Teacher: teacher, Schedule: Constant{LR: 1e-2}}); err != nil {
		t.Fatal(err)
	}
	after, err := Evaluate(context.Background(), student, data, EvalOptions{Loss: obj, Reference: teacher, Outputs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if !before.HasLoss || !(after.Loss < before.Loss/4) {
		t.Errorf("objective %v → %v: want it to fall by 4×", before.Loss, after.Loss)
	}
	if len(after.Outputs) != 7 {
		t.Fatalf("%d output fidelities, want 7", len(after.Outputs))
	}
	for i, f := range after.Outputs {
		if !(f.SQNR > before.Outputs[i].SQNR) {
			t.Errorf("output %s: SQNR %v dB → %v dB, want it to rise", f.Name, before.Outputs[i].SQNR, f.SQNR)
		}
		if f.HasAgreement != (specs[i].Kind.HasClassAxis() || specs[i].Kind.Binary()) {
			t.Errorf("output %s (%v): agreement %v", f.Name, f.Kind, f.HasAgreement)
		}
	}
}

func TestFidelityHandComputed(t *testing.T) {
	var a fidelityAcc
	spec := OutputSpec{Name: "y", Kind: Logits, Axis: 1}
	y := engine.NewFloat([]int{2, 2}, []float32{1, 2, 3, 0})
	r := engine.NewFloat([]int{2, 2}, []float32{1, 3, 4, 0})
	if err := a.add(spec, y, r); err != nil {
		t.Fatal(err)
	}
	f := a.result(spec)
	// Σt² = 26, Σ(t−s)² = 2; Σst = 19, Σs² = 14.
	if math.Abs(f.SQNR-10*math.Log10(13)) > 1e-12 || math.Abs(f.Cosine-19/math.Sqrt(14*26)) > 1e-12 || f.MaxAbsErr != 1 || f.Agreement != 1 {
		t.Errorf("fidelity %+v", f)
	}
	var b fidelityAcc
	sig := OutputSpec{Name: "p", Kind: Sigmoid}
	_ = b.add(sig, engine.NewFloat([]int{4, 1}, []float32{0.4, 0.6, 0.5, 0.1}), engine.NewFloat([]int{4, 1}, []float32{0.6, 0.7, 0.49, 0.2}))
	if g := b.result(sig); g.Agreement != 0.5 {
		t.Errorf("decision agreement %v, want 0.5 (0.4/0.6 and 0.5/0.49 differ)", g.Agreement)
	}
	var c fidelityAcc
	_ = c.add(sig, y, y)
	if g := c.result(sig); !math.IsInf(g.SQNR, 1) || g.Cosine != 1 {
		t.Errorf("identical outputs: SQNR %v cosine %v", g.SQNR, g.Cosine)
	}
}

// TestFidelityExpectedDrop checks ExpectedDrop against the reference's probabilities
// written out by hand for each kind: the mean over positions of p(reference's top-1) −
// p(model's top-1), 0 where they agree (the control: the same outputs give 0).
func TestFidelityExpectedDrop(t *testing.T) {
	// Two samples of three classes, the model disagreeing on the second only.
	y := []float32{2, 1, 0, 0, 0, 1}
	ref := []float32{0.5, 0.25, 0.25, 0.1, 0.6, 0.3}
	logs := make([]float32, len(ref))
	for i, p := range ref {
		logs[i] = float32(math.Log(float64(p)))
	}
	// Logits whose softmax is ref: their logs shifted by 3.
	logits := make([]float32, len(ref))
	for i, l := range logs {
		logits[i] = l + 3
	}
	// Sample 2: p(class 1) − p(class 2) = 0.6 − 0.3, over 2 positions.
	want := (0.6 - 0.3) / 2
	for _, c := range []struct {
		kind Kind
		ref  []float32
	}{{Probs, ref}, {LogProbs, logs}, {Logits, logits}} {
		spec := OutputSpec{Name: "y", Kind: c.kind, Axis: 1}
		var a fidelityAcc
		if err := a.add(spec, engine.NewFloat([]int{2, 3}, y), engine.NewFloat([]int{2, 3}, c.ref)); err != nil {
			t.Fatal(err)
		}
		if f := a.result(spec); math.Abs(f.ExpectedDrop-want) > 1e-6 || f.Agreement != 0.5 {
			t.Errorf("%v: expected drop %v, agreement %v; want %v, 0.5", c.kind, f.ExpectedDrop, f.Agreement, want)
		}
		var same fidelityAcc
		_ = same.add(spec, engine.NewFloat([]int{2, 3}, c.ref), engine.NewFloat([]int{2, 3}, c.ref))
		if f := same.result(spec); f.ExpectedDrop != 0 || f.Agreement != 1 {
			t.Errorf("%v, the reference itself: expected drop %v, agreement %v; want 0, 1", c.kind, f.ExpectedDrop, f.Agreement)
		}
	}
	// Binary heads: p(the reference's decision) − p(the other) = |2p − 1| where they differ.
	sig := OutputSpec{Name: "p", Kind: Sigmoid}
	var b fidelityAcc
	_ = b.add(sig, engine.NewFloat([]int{3, 1}, []float32{0.4, 0.9, 0.2}), engine.NewFloat([]int{3, 1}, []float32{0.8, 0.7, 0.45}))
	// Only the first differs (0.4 against 0.8): |2·0.8 − 1| over 3 positions.
	if f := b.result(sig); math.Abs(f.ExpectedDrop-0.6/3) > 1e-6 {
		t.Errorf("sigmoid: expected drop %v, want %v", f.ExpectedDrop, 0.6/3)
	}
	bl := OutputSpec{Name: "l", Kind: BinaryLogit}
	var d fidelityAcc
	l := math.Log(0.8 / 0.2) // σ(l) = 0.8
	_ = d.add(bl, engine.NewFloat([]int{2, 1}, []float32{-1, 1}), engine.NewFloat([]int{2, 1}, []float32{float32(l), 2}))
	if f := d.result(bl); math.Abs(f.ExpectedDrop-0.6/2) > 1e-6 {
		t.Errorf("binary logit: expected drop %v, want %v", f.ExpectedDrop, 0.3)
	}
}
