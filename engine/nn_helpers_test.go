package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas/gonum"
	"google.golang.org/protobuf/proto"

	qblas "github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Helpers of the nn kernel tests: nodes built by hand, kernels run directly (without the
// graph executor), float64 reference implementations written as plain nested loops over
// multi-indices, and a finite-difference check of Backward.

// nntNode builds a node with nIn inputs and nOut outputs.
func nntNode(op string, opset int64, nIn, nOut int, attrs ...*onnxpb.AttributeProto) *Node {
	in := make([]string, nIn)
	for i := range in {
		in[i] = string(rune('a' + i))
	}
	out := make([]string, nOut)
	for i := range out {
		out[i] = string(rune('p' + i))
	}
	return &Node{
		Proto: &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String("t_" + op), Input: in, Output: out, Attribute: attrs},
		Opset: opset,
	}
}

// nntCtx returns a context with the BLAS that QTOOL_BLAS selects (auto: OpenBLAS when
// installed), so that the tests check the kernels on either backend.
func nntCtx(tb testing.TB, workers int) *Context {
	tb.Helper()
	bl, _, err := qblas.Select(qblas.ModeFromEnv())
	if err != nil {
		tb.Fatalf("blas: %v", err)
	}
	return &Context{BLAS: bl, Workers: workers}
}

// nntGoCtx returns a context with gonum's pure-Go BLAS.
func nntGoCtx(workers int) *Context {
	return &Context{BLAS: gonum.Implementation{}, Workers: workers}
}

// nntRun infers and runs k on in (outputs pre-filled with NaN, so that a kernel that
// leaves an element unwritten fails).
func nntRun(t testing.TB, k Kernel, ctx *Context, in []*Tensor) []*Tensor {
	t.Helper()
	shapes := make([]*Tensor, len(in))
	for i, x := range in {
		if x != nil {
			shapes[i] = &Tensor{DType: x.DType, Shape: x.Shape}
		}
	}
	outs, err := k.Infer(shapes)
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	for _, o := range outs {
		if o.DType == Float32 {
			o.F = make([]float32, o.Len())
			for i := range o.F {
				o.F[i] = float32(math.NaN())
			}
		} else {
			o.I = make([]int64, o.Len())
			for i := range o.I {
				o.I[i] = math.MinInt64
			}
		}
	}
	if err := k.Forward(ctx, in, outs); err != nil {
		t.Fatalf("forward: %v", err)
	}
	return outs
}

func nntRand(r *rand.Rand, shape []int, lo, hi float64) *Tensor {
	x := make([]float32, numel(shape))
	for i := range x {
		x[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return NewFloat(append([]int(nil), shape...), x)
}

// nntDistinct returns a tensor whose values are a random permutation of a grid with
// spacing 0.05, so that max-pooling has no ties and finite differences with a smaller
// step do not change any argmax.
func nntDistinct(r *rand.Rand, shape []int) *Tensor {
	n := numel(shape)
	x := make([]float32, n)
	for i, p := range r.Perm(n) {
		x[i] = float32(p)*0.05 - float32(n)*0.025
	}
	return NewFloat(append([]int(nil), shape...), x)
}

// nntClose compares got with want elementwise within atol + rtol·|want|.
func nntClose(t testing.TB, what string, got []float32, want []float64, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(g) || math.Abs(g-w) > atol+rtol*math.Abs(w) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(got))
	}
}

// nntUnravel writes the multi-index of flat index i in shape into idx.
func nntUnravel(i int, shape, idx []int) {
	for j := len(shape) - 1; j >= 0; j-- {
		idx[j] = i % shape[j]
		i /= shape[j]
	}
}

// nntRavel is the flat index of idx in shape.
func nntRavel(idx, shape []int) int {
	f := 0
	for j := range shape {
		f = f*shape[j] + idx[j]
	}
	return f
}

// nntGradCase is one finite-difference check of a kernel's Backward.
type nntGradCase struct {
	name     string
	op       string
	opset    int64
	attrs    []*onnxpb.AttributeProto
	inputs   func(r *rand.Rand) []*Tensor
	nOut     int   // node outputs, default 1
	lossOuts []int // outputs the loss weights, default all float outputs
	check    []int // inputs whose gradient is checked, default all float inputs
	training bool  // Context.Training
	step     float64
}

// nntGradCheck checks Backward against central differences of the loss L = Σ wᵢ·yᵢ over
// the weighted outputs (random weights). The forward pass runs in float32, so the
// step and the tolerance are those of float32 differences; the outputs a perturbation
// does not touch are recomputed bit-identically, so the noise is that of the touched
// outputs only. Backward must add into gin: it is pre-filled with 0.25.
func nntGradCheck(t *testing.T, c nntGradCase) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
	nOut := max(c.nOut, 1)
	n := nntNode(c.op, c.opset, 0, nOut, c.attrs...)
	in := c.inputs(r)
	for i := range in {
		n.Proto.Input = append(n.Proto.Input, string(rune('a'+i)))
	}
	k := buildKernel(t, n)
	ctx := nntCtx(t, 2)
	ctx.Training = c.training
	outs := nntRun(t, k, ctx, in)
	lossOuts := c.lossOuts
	if lossOuts == nil {
		for j, o := range outs {
			if o.DType == Float32 {
				lossOuts = append(lossOuts, j)
			}
		}
	}
	w := make([][]float32, len(outs))
	gout := make([]*Tensor, len(outs))
	for _, j := range lossOuts {
		w[j] = nntRand(r, outs[j].Shape, -1, 1).F
		gout[j] = NewFloat(outs[j].Shape, w[j])
	}
	loss := func() float64 {
		o := nntRun(t, k, ctx, in)
		var s float64
		for _, j := range lossOuts {
			for i, v := range o[j].F {
				s += float64(w[j][i]) * float64(v)
			}
		}
		return s
	}
	check := c.check
	if check == nil {
		for i, x := range in {
			if x != nil && x.DType == Float32 {
				check = append(check, i)
			}
		}
	}
	gin := make([]*Tensor, len(in))
	const prefill = 0.25
	for _, i := range check {
		g := make([]float32, in[i].Len())
		for j := range g {
			g[j] = prefill
		}
		gin[i] = NewFloat(in[i].Shape, g)
	}
	d, ok := k.(Differentiable)
	if !ok {
		t.Fatalf("%s has no Backward", c.op)
	}
	if err := d.Backward(ctx, in, outs, gout, gin); err != nil {
		t.Fatalf("backward: %v", err)
	}
	h := c.step
	if h == 0 {
		h = 1e-2
	}
	for _, i := range check {
		gi := gin[i].F
		fdCheck(t, fmt.Sprintf("%s: d/d input %d", c.name, i), in[i].F, func(j int) float64 { return float64(gi[j]) - prefill }, loss,
			fdSpec{step: fixedStep(h), atol: 2e-3, rtol: 2e-3}, c.op)
	}
}
