package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

func attrStrings(name string, v ...string) *onnxpb.AttributeProto {
	a := &onnxpb.AttributeProto{Name: &name, Type: onnxpb.AttributeProto_STRINGS.Enum()}
	for _, s := range v {
		a.Strings = append(a.Strings, []byte(s))
	}
	return a
}

// rnnCase is one recurrent op configuration: T steps, N items, I inputs, H hidden.
type rnnCase struct {
	op        string
	dir       string
	layout    int64
	T, N, I   int
	H         int
	lens      []int64 // nil: no sequence_lens
	noB, noH0 bool
	peephole  bool
	attrs     []*onnxpb.AttributeProto
}

func (c rnnCase) gates() int {
	switch c.op {
	case "LSTM":
		return 4
	case "GRU":
		return 3
	}
	return 1
}

func (c rnnCase) dirs() int {
	if c.dir == "bidirectional" {
		return 2
	}
	return 1
}

func (c rnnCase) name() string {
	s := fmt.Sprintf("%s/%s/layout%d", c.op, c.dir, c.layout)
	if c.lens != nil {
		s += fmt.Sprintf("/lens%v", c.lens)
	}
	for _, a := range c.attrs {
		s += "/" + a.GetName()
	}
	return s
}

// inputs returns X, W, R, B, sequence_lens, initial_h (and initial_c, P for LSTM), with
// nil for the inputs the case leaves out.
func (c rnnCase) inputs(r *rand.Rand) []*Tensor {
	D, gh := c.dirs(), c.gates()*c.H
	x := []int{c.T, c.N, c.I}
	state := []int{D, c.N, c.H}
	if c.layout == 1 {
		x, state = []int{c.N, c.T, c.I}, []int{c.N, D, c.H}
	}
	in := []*Tensor{
		nntRand(r, x, -1, 1),
		nntRand(r, []int{D, gh, c.I}, -0.6, 0.6),
		nntRand(r, []int{D, gh, c.H}, -0.6, 0.6),
		nil, nil, nil,
	}
	if !c.noB {
		in[3] = nntRand(r, []int{D, 2 * gh}, -0.5, 0.5)
	}
	if c.lens != nil {
		in[4] = NewInt([]int{c.N}, append([]int64(nil), c.lens...))
	}
	if !c.noH0 {
		in[5] = nntRand(r, state, -0.8, 0.8)
	}
	if c.op == "LSTM" {
		in = append(in, nil, nil)
		if !c.noH0 {
			in[6] = nntRand(r, state, -0.8, 0.8)
		}
		if c.peephole {
			in[7] = nntRand(r, []int{D, 3 * c.H}, -0.5, 0.5)
		}
	}
	return in
}

func (c rnnCase) node() []*onnxpb.AttributeProto {
	a := []*onnxpb.AttributeProto{attrS("direction", c.dir), attrI("hidden_size", int64(c.H))}
	if c.layout != 0 {
		a = append(a, attrI("layout", c.layout))
	}
	return append(a, c.attrs...)
}

// rnnGradCases cover every op in every direction, both layouts, sequence_lens (one of
// them 0), initial states, peepholes, input_forget, both GRU reset variants and smooth
// alternative activations with alpha and beta.
func rnnGradCases() []rnnCase {
	var cs []rnnCase
	for _, dir := range []string{"forward", "reverse", "bidirectional"} {
		cs = append(cs,
			rnnCase{op: "LSTM", dir: dir, T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}, peephole: true},
			rnnCase{op: "GRU", dir: dir, T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}},
			rnnCase{op: "GRU", dir: dir, T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}, attrs: []*onnxpb.AttributeProto{attrI("linear_before_reset", 1)}},
			rnnCase{op: "RNN", dir: dir, T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}},
		)
	}
	cs = append(cs,
		rnnCase{op: "LSTM", dir: "bidirectional", layout: 1, T: 3, N: 3, I: 2, H: 3, lens: []int64{3, 0, 1}},
		rnnCase{op: "LSTM", dir: "forward", T: 3, N: 2, I: 2, H: 2, noB: true, noH0: true, peephole: true,
			attrs: []*onnxpb.AttributeProto{attrI("input_forget", 1)}},
		rnnCase{op: "GRU", dir: "bidirectional", layout: 1, T: 3, N: 2, I: 2, H: 3, lens: []int64{2, 3},
			attrs: []*onnxpb.AttributeProto{attrStrings("activations", "HardSigmoid", "Softsign", "Sigmoid", "Elu"), attrFloats("activation_alpha", 0.1, 1), attrFloats("activation_beta", 0.4)}},
		rnnCase{op: "RNN", dir: "reverse", layout: 1, T: 3, N: 2, I: 2, H: 2, noH0: true,
			attrs: []*onnxpb.AttributeProto{attrStrings("activations", "ScaledTanh"), attrFloats("activation_alpha", 1.5), attrFloats("activation_beta", 0.7)}},
	)
	return cs
}

// TestRNNGradient checks backpropagation through time of LSTM, GRU and RNN against
// finite differences, w.r.t. X, W, R, B, the initial states and the peepholes.
func TestRNNGradient(t *testing.T) {
	for _, c := range rnnGradCases() {
		t.Run(c.name(), func(t *testing.T) {
			nOut := 2
			if c.op == "LSTM" {
				nOut = 3
			}
			nntGradCheck(t, nntGradCase{name: c.name(), op: c.op, opset: 14, attrs: c.node(), inputs: c.inputs, nOut: nOut, step: 1e-2})
		})
	}
}

// TestRNNNoSteadyStateAllocs: after the first call the kernels reuse their scratch, in
// the forward and in the backward pass.
func TestRNNNoSteadyStateAllocs(t *testing.T) {
	for _, c := range []rnnCase{
		{op: "LSTM", dir: "bidirectional", T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}, peephole: true},
		{op: "GRU", dir: "reverse", layout: 1, T: 4, N: 3, I: 3, H: 2, lens: []int64{4, 2, 3}},
		{op: "RNN", dir: "forward", T: 4, N: 3, I: 3, H: 2},
	} {
		r := rand.New(rand.NewPCG(1, 2))
		nOut := 2
		if c.op == "LSTM" {
			nOut = 3
		}
		n := nntNode(c.op, 14, 0, nOut, c.node()...)
		in := c.inputs(r)
		for i := range in {
			n.Proto.Input = append(n.Proto.Input, string(rune('a'+i)))
		}
		k := buildKernel(t, n)
		ctx := nntGoCtx(1)
		outs := nntRun(t, k, ctx, in)
		gin := make([]*Tensor, len(in))
		for i, x := range in {
			if x != nil && x.DType == Float32 {
				gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
			}
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := k.Forward(ctx, in, outs); err != nil {
				t.Fatal(err)
			}
			if err := k.(Differentiable).Backward(ctx, in, outs, outs, gin); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per forward and backward", c.name(), allocs)
		}
	}
}
