package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// backwardOnes runs forward and backward of n on in with gout[0] = upstream (all ones when
// nil) and returns the input gradients (nil for integer inputs).
func backwardOnes(t *testing.T, n *Node, in []*Tensor, upstream []float32) ([]*Tensor, []*Tensor) {
	t.Helper()
	k := buildKernel(t, n)
	out := runForward(t, k, in, 1)
	g := NewFloat(out[0].Shape, make([]float32, out[0].Len()))
	for i := range g.F {
		g.F[i] = 1
		if upstream != nil {
			g.F[i] = upstream[i]
		}
	}
	gin := make([]*Tensor, len(in))
	for i, x := range in {
		if x != nil && x.DType == Float32 {
			gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
		}
	}
	if err := k.(Differentiable).Backward(&Context{Workers: 1}, in, out, []*Tensor{g}, gin); err != nil {
		t.Fatal(err)
	}
	return out, gin
}

func f32(shape []int, v ...float32) *Tensor { return NewFloat(shape, v) }

func i64(shape []int, v ...int64) *Tensor { return NewInt(shape, v) }

func wantF(t *testing.T, what string, got []float32, want ...float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !closeTo(float64(got[i]), float64(want[i]), 1e-6, 1e-6) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// TestElementwiseKinkConventions pins the derivative chosen where one does not exist;
// finite differences cannot check these points.
func TestElementwiseKinkConventions(t *testing.T) {
	x := []float32{-1, 0, 2}
	t.Run("Relu", func(t *testing.T) {
		out, g := backwardOnes(t, testNode("Relu", 14, names(1)), []*Tensor{f32([]int{3}, x...)}, nil)
		wantF(t, "relu", out[0].F, 0, 0, 2)
		wantF(t, "d relu", g[0].F, 0, 0, 1)
	})
	t.Run("LeakyRelu", func(t *testing.T) {
		_, g := backwardOnes(t, testNode("LeakyRelu", 16, names(1), attrF("alpha", 0.25)), []*Tensor{f32([]int{3}, x...)}, nil)
		wantF(t, "d leaky", g[0].F, 0.25, 0.25, 1)
	})
	t.Run("PRelu", func(t *testing.T) {
		_, g := backwardOnes(t, testNode("PRelu", 16, names(2)), []*Tensor{f32([]int{3}, x...), f32([]int{1}, 0.5)}, nil)
		wantF(t, "d prelu/dx", g[0].F, 0.5, 0.5, 1)
		wantF(t, "d prelu/dslope", g[1].F, -1)
	})
	t.Run("Abs", func(t *testing.T) {
		_, g := backwardOnes(t, testNode("Abs", 13, names(1)), []*Tensor{f32([]int{3}, x...)}, nil)
		wantF(t, "d abs", g[0].F, -1, 0, 1)
	})
	t.Run("Clip_bounds_inclusive", func(t *testing.T) {
		in := []*Tensor{f32([]int{5}, -2, -1, 0, 1, 2), f32([]int{}, -1), f32([]int{}, 1)}
		out, g := backwardOnes(t, testNode("Clip", 13, names(3)), in, []float32{1, 2, 4, 8, 16})
		wantF(t, "clip", out[0].F, -1, -1, 0, 1, 1)
		wantF(t, "d clip/dx", g[0].F, 0, 2, 4, 8, 0)
		wantF(t, "d clip/dmin", g[1].F, 1)
		wantF(t, "d clip/dmax", g[2].F, 16)
	})
	t.Run("Clip_min_above_max", func(t *testing.T) {
		in := []*Tensor{f32([]int{3}, -2, 0.5, 2), f32([]int{}, 1), f32([]int{}, 0)}
		out, g := backwardOnes(t, testNode("Clip", 13, names(3)), in, []float32{1, 2, 4})
		wantF(t, "clip", out[0].F, 0, 0, 0)
		wantF(t, "d clip/dx", g[0].F, 0, 0, 0)
		wantF(t, "d clip/dmin", g[1].F, 0)
		wantF(t, "d clip/dmax", g[2].F, 7)
	})
	t.Run("HardSwish_ends", func(t *testing.T) {
		_, g := backwardOnes(t, testNode("HardSwish", 14, names(1)), []*Tensor{f32([]int{4}, -3, 3, -4, 4)}, nil)
		wantF(t, "d hardswish", g[0].F, -0.5, 1.5, 0, 1)
	})
	t.Run("HardSigmoid_ends", func(t *testing.T) {
		_, g := backwardOnes(t, testNode("HardSigmoid", 6, names(1)), []*Tensor{f32([]int{3}, -2.5, 2.5, 0)}, nil)
		wantF(t, "d hardsigmoid", g[0].F, 0, 0, 0.2)
	})
	t.Run("Max_ties_split", func(t *testing.T) {
		in := []*Tensor{f32([]int{3}, 1, 5, 2), f32([]int{3}, 1, 4, 2), f32([]int{3}, 1, 0, 0)}
		_, g := backwardOnes(t, testNode("Max", 13, names(3)), in, []float32{3, 1, 1})
		wantF(t, "d max/d0", g[0].F, 1, 1, 0.5)
		wantF(t, "d max/d1", g[1].F, 1, 0, 0.5)
		wantF(t, "d max/d2", g[2].F, 1, 0, 0)
	})
	t.Run("Min_broadcast_ties", func(t *testing.T) {
		in := []*Tensor{f32([]int{2, 2}, 1, 3, 0, 2), f32([]int{1}, 1)}
		_, g := backwardOnes(t, testNode("Min", 13, names(2)), in, nil)
		wantF(t, "d min/d0", g[0].F, 0.5, 0, 1, 0)
		wantF(t, "d min/d1", g[1].F, 0.5+1+1)
	})
	t.Run("ReduceMax_ties_split", func(t *testing.T) {
		in := []*Tensor{f32([]int{2, 3}, 4, 1, 4, 0, 2, -1)}
		_, g := backwardOnes(t, testNode("ReduceMax", 13, names(1), attrInts("axes", 1)), in, []float32{1, 3})
		wantF(t, "d reducemax", g[0].F, 0.5, 0, 0.5, 0, 3, 0)
	})
	t.Run("Pow_int_exponent", func(t *testing.T) {
		in := []*Tensor{f32([]int{3}, -1.5, 0.5, 2), i64([]int{}, 3)}
		out, g := backwardOnes(t, testNode("Pow", 15, names(2)), in, nil)
		wantF(t, "pow", out[0].F, -3.375, 0.125, 8)
		wantF(t, "d pow/dbase", g[0].F, 6.75, 0.75, 12)
	})
	t.Run("Pow_zero_exponent_and_base", func(t *testing.T) {
		in := []*Tensor{f32([]int{3}, 0, 0, 2), f32([]int{3}, 0, 2, 0)}
		out, g := backwardOnes(t, testNode("Pow", 15, names(2)), in, nil)
		wantF(t, "pow", out[0].F, 1, 0, 1)
		wantF(t, "d pow/dbase", g[0].F, 0, 0, 0)
		wantF(t, "d pow/dexp", g[1].F, 0, 0, float32(math.Log(2)))
	})
}

// TestElementwiseInt64 checks the integer forms that shape subgraphs use.
func TestElementwiseInt64(t *testing.T) {
	run := func(n *Node, in ...*Tensor) *Tensor {
		t.Helper()
		return runForward(t, buildKernel(t, n), in, 1)[0]
	}
	wantI := func(what string, got *Tensor, want ...int64) {
		t.Helper()
		if got.DType != Int64 || len(got.I) != len(want) {
			t.Fatalf("%s: got %s %v, want int64 %v", what, got.DType, got.I, want)
		}
		for i := range want {
			if got.I[i] != want[i] {
				t.Fatalf("%s = %v, want %v", what, got.I, want)
			}
		}
	}
	shape := i64([]int{3}, 8, 3, 224)
	wantI("add", run(testNode("Add", 14, names(2)), shape, i64([]int{}, 2)), 10, 5, 226)
	wantI("sub", run(testNode("Sub", 14, names(2)), i64([]int{}, 1), shape), -7, -2, -223)
	wantI("mul", run(testNode("Mul", 14, names(2)), shape, i64([]int{2, 1}, 2, -1)), 16, 6, 448, -8, -3, -224)
	wantI("div truncates toward zero", run(testNode("Div", 14, names(2)), i64([]int{4}, 7, -7, 7, -7), i64([]int{4}, 2, 2, -2, -2)), 3, -3, -3, 3)
	wantI("pow", run(testNode("Pow", 15, names(2)), i64([]int{4}, 3, -2, 2, 5), i64([]int{4}, 3, 3, 0, -1)), 27, -8, 1, 0)
	wantI("int base, float exponent", run(testNode("Pow", 15, names(2)), i64([]int{2}, 4, 9), f32([]int{}, 0.5)), 2, 3)
	got := run(testNode("Pow", 15, names(2)), f32([]int{2}, 1.5, -2), i64([]int{}, 2))
	wantF(t, "float base, int exponent", got.F, 2.25, 4)
	wantI("max", run(testNode("Max", 13, names(3)), i64([]int{3}, 1, 5, -3), i64([]int{}, 2), i64([]int{3}, 0, 7, -9)), 2, 7, 2)
	wantI("min", run(testNode("Min", 13, names(2)), i64([]int{3}, 1, 5, -3), i64([]int{}, 2)), 1, 2, -3)
	wantI("neg", run(testNode("Neg", 13, names(1)), i64([]int{2}, 4, -5)), -4, 5)
	wantI("abs", run(testNode("Abs", 13, names(1)), i64([]int{2}, 4, -5)), 4, 5)
	wantI("clip", run(testNode("Clip", 13, []string{"x", "", "hi"}), i64([]int{3}, -9, 4, 9), nil, i64([]int{}, 5)), -9, 4, 5)

	k := buildKernel(t, testNode("Div", 14, names(2)))
	in := []*Tensor{i64([]int{2}, 1, 2), i64([]int{2}, 1, 0)}
	outs, err := k.Infer(in)
	if err != nil {
		t.Fatal(err)
	}
	outs[0].I = make([]int64, 2)
	if err := k.Forward(&Context{}, in, outs); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("integer division by zero: err = %v", err)
	}
}

// TestElementwiseErrors checks that bad models are reported with the node's name.
func TestElementwiseErrors(t *testing.T) {
	build := func(n *Node) error {
		_, err := opBuilder(n.Proto.GetOpType())(n)
		return err
	}
	infer := func(n *Node, in ...*Tensor) error {
		k, err := opBuilder(n.Proto.GetOpType())(n)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		_, err = k.Infer(in)
		return err
	}
	shp := func(s ...int) *Tensor { return &Tensor{DType: Float32, Shape: s} }
	cases := []struct {
		name string
		err  error
	}{
		{"no broadcast", infer(testNode("Add", 14, names(2)), shp(3, 4), shp(5))},
		{"mixed types", infer(testNode("Mul", 14, names(2)), shp(3), &Tensor{DType: Int64, Shape: []int{3}})},
		{"prelu slope too big", infer(testNode("PRelu", 16, names(2)), shp(3), shp(2, 3))},
		{"softmax axis", infer(testNode("Softmax", 13, names(1), attrI("axis", 3)), shp(2, 3, 4))},
		{"reduce axis range", infer(testNode("ReduceSum", 11, names(1), attrInts("axes", 3)), shp(2, 3, 4))},
		{"reduce axis twice", infer(testNode("ReduceMax", 11, names(1), attrInts("axes", 1, -2)), shp(2, 3, 4))},
		{"reduce axes unknown", infer(testNode("ReduceSum", 13, names(2)), shp(2, 3), &Tensor{DType: Int64, Shape: []int{1}})},
		{"relu on int", infer(testNode("Relu", 14, names(1)), &Tensor{DType: Int64, Shape: []int{3}})},
		{"clip bound shape", infer(testNode("Clip", 13, names(3)), shp(3), shp(2), shp())},
		{"clip attrs at 13", build(testNode("Clip", 13, names(1), attrF("min", 0)))},
		{"axes attribute at 13", build(testNode("ReduceSum", 13, names(1), attrInts("axes", 0)))},
		{"axes input at 13 for ReduceMean", build(testNode("ReduceMean", 13, names(2)))},
		{"legacy broadcast axis", build(testNode("Add", 6, names(2), attrI("broadcast", 1), attrI("axis", 1)))},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(c.err.Error(), `node "test_`) {
			t.Errorf("%s: error %q does not name the node", c.name, c.err)
		}
	}
}

// TestElementwiseLargeParallel runs tensors big enough to be split over workers and
// checks that results match the reference and do not depend on the worker count.
func TestElementwiseLargeParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cases := []struct {
		node   *Node
		shapes [][]int
	}{
		{testNode("Add", 14, names(2)), [][]int{{32, 16, 12, 12}, {16, 1, 1}}},
		{testNode("Mul", 14, names(2)), [][]int{{64, 1200}, {1200}}},
		{testNode("Div", 14, names(2)), [][]int{{3, 1, 200}, {1, 300, 1}}},
		{testNode("Max", 13, names(2)), [][]int{{300, 250}, {300, 1}}},
		{testNode("Sigmoid", 13, names(1)), [][]int{{300, 250}}},
		{testNode("Softmax", 13, names(1), attrI("axis", 1)), [][]int{{20, 50, 100}}},
		{testNode("Softmax", 13, names(1), attrI("axis", 0)), [][]int{{120, 600}}},
		{testNode("ReduceMean", 13, names(1), attrInts("axes", 0, 2)), [][]int{{40, 30, 80}}},
		{testNode("ReduceMax", 13, names(1), attrInts("axes", 1)), [][]int{{40, 30, 80}}},
		// A scalar operand's gradient and whole-tensor reductions take the blocked path;
		// rows longer than reduceColumns are split by columns.
		{testNode("Mul", 14, names(2)), [][]int{{300, 250}, {}}},
		{testNode("ReduceMean", 13, names(1), attrI("keepdims", 0)), [][]int{{300, 250}}},
		{testNode("ReduceMax", 13, names(1)), [][]int{{300, 250}}},
		{testNode("ReduceSum", 11, names(1), attrInts("axes", 0)), [][]int{{20, 5000}}},
		{testNode("Sub", 14, names(2)), [][]int{{20, 5000}, {5000}}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.node.Proto.GetOpType(), c.shapes), func(t *testing.T) {
			var in []*Tensor
			for _, s := range c.shapes {
				in = append(in, randTensor(r, s, awayFromZero))
			}
			// Every output against the float64 reference, computed without broadcasting
			// plans: elementwise ops through refElementwise, reductions through refReduce.
			checkLargeForward(t, c.node, in)
			var ref []*Tensor
			for _, workers := range []int{1, 2, 3} {
				k := buildKernel(t, c.node)
				out := runForward(t, k, in, workers)
				if out[0].Len() < 2*ewGrain && len(c.shapes[0]) > 0 && numel(c.shapes[0]) < 2*ewGrain {
					t.Fatalf("case too small to split")
				}
				g := randTensor(rand.New(rand.NewPCG(1, 2)), out[0].Shape, uniform(-1, 1))
				gin := make([]*Tensor, len(in))
				for i, x := range in {
					gin[i] = NewFloat(x.Shape, make([]float32, x.Len()))
				}
				if err := k.(Differentiable).Backward(&Context{Workers: workers}, in, out, []*Tensor{g}, gin); err != nil {
					t.Fatal(err)
				}
				res := append(out, gin...)
				if ref == nil {
					ref = res
					continue
				}
				for i := range res {
					for j := range res[i].F {
						if math.Float32bits(res[i].F[j]) != math.Float32bits(ref[i].F[j]) {
							t.Fatalf("workers %d: tensor %d element %d = %v, with 1 worker %v", workers, i, j, res[i].F[j], ref[i].F[j])
						}
					}
				}
			}
			// The broadcast operand's gradient of Add is the sum of the upstream gradient
			// over the broadcast axes, computed here directly in float64.
			if c.node.Proto.GetOpType() == "Mul" && len(c.shapes[1]) == 0 {
				g := randTensor(rand.New(rand.NewPCG(1, 2)), c.shapes[0], uniform(-1, 1))
				s := 0.0
				for i, v := range in[0].F {
					s += float64(g.F[i]) * float64(v)
				}
				if !closeTo(float64(ref[2].F[0]), s, 1e-4, 1e-5) {
					t.Fatalf("scalar gradient = %v, want %v", ref[2].F[0], s)
				}
			}
			if c.node.Proto.GetOpType() == "Add" {
				g := randTensor(rand.New(rand.NewPCG(1, 2)), []int{32, 16, 12, 12}, uniform(-1, 1))
				for ch := 0; ch < 16; ch++ {
					s := 0.0
					for n := 0; n < 32; n++ {
						for p := 0; p < 144; p++ {
							s += float64(g.F[(n*16+ch)*144+p])
						}
					}
					if !closeTo(float64(ref[2].F[ch]), s, 1e-4, 1e-5) {
						t.Fatalf("bias gradient %d = %v, want %v", ch, ref[2].F[ch], s)
					}
				}
			}
		})
	}
}

// TestElementwiseEmpty runs tensors with a zero dimension: no panic, and reductions over
// nothing give numpy's identities (sum 0, mean NaN, max −inf).
func TestElementwiseEmpty(t *testing.T) {
	empty := f32([]int{0, 3})
	for _, n := range []*Node{
		testNode("Add", 14, names(2)), testNode("Max", 13, names(2)), testNode("Pow", 15, names(2)),
	} {
		out, g := backwardOnes(t, n, []*Tensor{empty, f32([]int{3}, 1, 2, 3)}, nil)
		if !sameShape(out[0].Shape, []int{0, 3}) {
			t.Errorf("%s: shape %v", n.Proto.GetOpType(), out[0].Shape)
		}
		wantF(t, n.Proto.GetOpType()+" broadcast gradient", g[1].F, 0, 0, 0)
	}
	for _, op := range []string{"Relu", "Softmax", "Exp"} {
		backwardOnes(t, testNode(op, 13, names(1)), []*Tensor{empty}, nil)
	}
	for op, want := range map[string]float32{"ReduceSum": 0, "ReduceMean": float32(math.NaN()), "ReduceMax": float32(math.Inf(-1))} {
		out := runForward(t, buildKernel(t, testNode(op, 11, names(1), attrInts("axes", 0))), []*Tensor{empty}, 1)
		wantF(t, op+" over nothing", out[0].F, want, want, want)
	}
}

// checkLargeForward compares the output of n on in with the float64 reference.
func checkLargeForward(t *testing.T, n *Node, in []*Tensor) {
	t.Helper()
	var xs [][]float64
	var shapes [][]int
	for _, x := range in {
		xs, shapes = append(xs, to64(x.F)), append(shapes, x.Shape)
	}
	var want []float64
	switch op := n.Proto.GetOpType(); op {
	case "Add", "Mul", "Div", "Sub", "Max":
		want, _ = refElementwise(xs, shapes, func(v []float64) float64 {
			return map[string]float64{"Add": v[0] + v[1], "Mul": v[0] * v[1], "Div": v[0] / v[1], "Sub": v[0] - v[1], "Max": math.Max(v[0], v[1])}[op]
		})
	case "Sigmoid":
		want, _ = refElementwise(xs, shapes, func(v []float64) float64 { return 1 / (1 + math.Exp(-v[0])) })
	case "Softmax":
		want, _ = refSoftmax(int(n.Int("axis", -1)), true, false)(xs, shapes)
	default:
		kind := map[string]string{"ReduceMean": "mean", "ReduceMax": "max", "ReduceSum": "sum"}[op]
		var axes []int
		for _, a := range n.Ints("axes", nil) {
			axes = append(axes, int(a))
		}
		want, _ = refReduce(kind, axes, n.Int("keepdims", 1) != 0)(xs, shapes)
	}
	got := runForward(t, buildKernel(t, n), in, 2)[0].F
	for i, w := range want {
		if !closeTo(float64(got[i]), w, 1e-5, 1e-5) {
			t.Fatalf("element %d = %v, want %v", i, got[i], w)
		}
	}
}
