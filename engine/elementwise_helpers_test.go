package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Helpers shared by the element-wise tests: building nodes, running kernels directly
// (without the graph executor) and a float64 reference of numpy broadcasting that is
// written independently of bcastPlan (plain index arithmetic per element).

// testNode builds a node of op with the given input names ("" for an absent optional
// input) and attributes.
func testNode(op string, opset int64, inputs []string, attrs ...*onnxpb.AttributeProto) *Node {
	return &Node{
		Proto: &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String("test_" + op), Input: inputs, Output: []string{"y"}, Attribute: attrs},
		Opset: opset,
	}
}

func names(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = string(rune('a' + i))
	}
	return s
}

// shapeOnly returns in with the values of float tensors dropped, as the executor's
// shape inference sees run-time inputs.
func shapeOnly(in []*Tensor) []*Tensor {
	out := make([]*Tensor, len(in))
	for i, t := range in {
		if t == nil {
			continue
		}
		if t.DType == Float32 {
			out[i] = &Tensor{DType: t.DType, Shape: t.Shape}
		} else {
			out[i] = t
		}
	}
	return out
}

// runForward infers and runs k on in and returns the outputs.
func runForward(t testing.TB, k Kernel, in []*Tensor, workers int) []*Tensor {
	t.Helper()
	outs, err := k.Infer(shapeOnly(in))
	if err != nil {
		t.Fatalf("infer: %v", err)
	}
	for _, o := range outs {
		if o.DType == Float32 {
			o.F = make([]float32, o.Len())
			for i := range o.F {
				o.F[i] = float32(math.NaN()) // Forward must overwrite everything.
			}
		} else {
			o.I = make([]int64, o.Len())
		}
	}
	ctx := &Context{Workers: workers}
	if err := k.Forward(ctx, in, outs); err != nil {
		t.Fatalf("forward: %v", err)
	}
	return outs
}

// strides returns row-major strides of shape.
func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// refBroadcastShape is numpy's rule, written out directly.
func refBroadcastShape(shapes ...[]int) []int {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for j, d := range s {
			k := r - len(s) + j
			if d != 1 {
				out[k] = d
			}
		}
	}
	return out
}

// refIndex maps the flat index i of a tensor of shape out to the flat index of an
// operand of shape s broadcast to out.
func refIndex(i int, out, s []int) int {
	os := strides(out)
	ss := strides(s)
	idx := 0
	for d := range out {
		c := (i / os[d]) % out[d]
		if k := d - (len(out) - len(s)); k >= 0 && s[k] != 1 {
			idx += c * ss[k]
		}
	}
	return idx
}

// refElementwise applies f to the broadcast inputs in float64.
func refElementwise(xs [][]float64, shapes [][]int, f func(v []float64) float64) ([]float64, []int) {
	out := refBroadcastShape(shapes...)
	n := numel(out)
	y := make([]float64, n)
	v := make([]float64, len(xs))
	for i := range y {
		for j := range xs {
			v[j] = xs[j][refIndex(i, out, shapes[j])]
		}
		y[i] = f(v)
	}
	return y, out
}

// randTensor fills a float tensor of shape with values from gen.
func randTensor(r *rand.Rand, shape []int, gen func(*rand.Rand) float64) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(gen(r))
	}
	return NewFloat(append([]int(nil), shape...), d)
}

func uniform(lo, hi float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return lo + (hi-lo)*r.Float64() }
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}
