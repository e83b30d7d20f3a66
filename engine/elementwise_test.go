package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// inSpec describes one input of a test case.
type inSpec struct {
	shape  []int
	gen    func(*rand.Rand) float64 // nil: uniform on (−2, 2)
	fixed  *Tensor                  // a given tensor (axes, a constant exponent)
	absent bool                     // an optional input left empty
	noGrad bool                     // not checked by finite differences
}

func fin(shape ...int) inSpec { return inSpec{shape: shape} }

func finGen(gen func(*rand.Rand) float64, shape ...int) inSpec {
	return inSpec{shape: shape, gen: gen}
}

func axesIn(axes ...int64) inSpec {
	return inSpec{fixed: NewInt([]int{len(axes)}, axes)}
}

func scalarIn(v float32) inSpec {
	return inSpec{fixed: NewFloat([]int{}, []float32{v}), noGrad: true}
}

var absentIn = inSpec{absent: true}

// ewCase is one op, attribute variant and input shapes, with a float64 reference.
type ewCase struct {
	name  string
	op    string
	opset int64
	attrs []*onnxpb.AttributeProto
	in    []inSpec
	// ref computes the output from the float inputs (absent and integer inputs are nil)
	// in float64 and returns it with its shape.
	ref func(x [][]float64, shapes [][]int) ([]float64, []int)
}

// awayFromZero draws |v| in (0.5, 2) with a random sign: divisors and reciprocals.
func awayFromZero(r *rand.Rand) float64 {
	v := 0.5 + 1.5*r.Float64()
	if r.IntN(2) == 0 {
		return -v
	}
	return v
}

// awayFromIntegers draws v in [-3, 3) at least 0.2 from every integer, where a
// finite-difference step does not cross a jump of Floor or Ceil.
func awayFromIntegers(r *rand.Rand) float64 {
	return float64(r.IntN(6)-3) + 0.2 + 0.6*r.Float64()
}

func ew(f func(v []float64) float64) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return func(x [][]float64, shapes [][]int) ([]float64, []int) {
		var xs [][]float64
		var ss [][]int
		for i := range x {
			if x[i] != nil {
				xs, ss = append(xs, x[i]), append(ss, shapes[i])
			}
		}
		return refElementwise(xs, ss, f)
	}
}

func unaryRef(f func(float64) float64) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return ew(func(v []float64) float64 { return f(v[0]) })
}

// refClip clips x with the given bounds (absent bounds are infinite), numpy's
// min(max(x, lo), hi).
func refClip(lo, hi int) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return func(x [][]float64, shapes [][]int) ([]float64, []int) {
		y := make([]float64, len(x[0]))
		for i, v := range x[0] {
			if lo >= 0 {
				v = math.Max(v, x[lo][0])
			}
			if hi >= 0 {
				v = math.Min(v, x[hi][0])
			}
			y[i] = v
		}
		return y, shapes[0]
	}
}

func refClipConst(lo, hi float64) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return unaryRef(func(v float64) float64 { return math.Min(math.Max(v, lo), hi) })
}

// refSoftmax normalises along axis with the given opset's semantics.
func refSoftmax(axis int, opset13, log bool) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return func(x [][]float64, shapes [][]int) ([]float64, []int) {
		shape := shapes[0]
		if axis < 0 {
			axis += len(shape)
		}
		outer := numel(shape[:axis])
		d, inner := numel(shape[axis:]), 1
		if opset13 {
			d, inner = shape[axis], numel(shape[axis+1:])
		}
		y := make([]float64, len(x[0]))
		for o := 0; o < outer; o++ {
			for in := 0; in < inner; in++ {
				at := func(j int) int { return (o*d+j)*inner + in }
				m := math.Inf(-1)
				for j := 0; j < d; j++ {
					m = math.Max(m, x[0][at(j)])
				}
				s := 0.0
				for j := 0; j < d; j++ {
					s += math.Exp(x[0][at(j)] - m)
				}
				for j := 0; j < d; j++ {
					if log {
						y[at(j)] = x[0][at(j)] - m - math.Log(s)
					} else {
						y[at(j)] = math.Exp(x[0][at(j)]-m) / s
					}
				}
			}
		}
		return y, shape
	}
}

// refReduce reduces over axes (nil: all; empty and noop: none) with keepdims.
func refReduce(kind string, axes []int, keep bool) func(x [][]float64, shapes [][]int) ([]float64, []int) {
	return func(x [][]float64, shapes [][]int) ([]float64, []int) {
		shape := shapes[0]
		red := make([]bool, len(shape))
		for _, a := range axes {
			if a < 0 {
				a += len(shape)
			}
			red[a] = true
		}
		if axes == nil {
			for i := range red {
				red[i] = true
			}
		}
		var kept, outShape []int
		for i, s := range shape {
			switch {
			case !red[i]:
				kept, outShape = append(kept, s), append(outShape, s)
			case keep:
				kept, outShape = append(kept, 1), append(outShape, 1)
			default:
				kept = append(kept, 1)
			}
		}
		n := numel(kept)
		y := make([]float64, n)
		cnt := make([]int, n)
		if kind == "l2" && axes != nil && len(axes) == 0 {
			// noop_with_empty_axes: the spec's output is the input, not |x|.
			return slices.Clone(x[0]), outShape
		}
		for i := range y {
			switch kind {
			case "max":
				y[i] = math.Inf(-1)
			case "prod":
				y[i] = 1
			}
		}
		for i, v := range x[0] {
			// The output element of input element i: its coordinates with reduced ones 0.
			j := 0
			st, ks := strides(shape), strides(kept)
			for d := range shape {
				if !red[d] {
					j += ((i / st[d]) % shape[d]) * ks[d]
				}
			}
			cnt[j]++
			switch kind {
			case "max":
				y[j] = math.Max(y[j], v)
			case "prod":
				y[j] *= v
			case "l2":
				y[j] += v * v
			default:
				y[j] += v
			}
		}
		if kind == "l2" {
			for i := range y {
				y[i] = math.Sqrt(y[i])
			}
		}
		if kind == "mean" {
			for i := range y {
				y[i] /= float64(cnt[i])
			}
		}
		return y, outShape
	}
}

func variadic(isMax bool) func(v []float64) float64 {
	return func(v []float64) float64 {
		m := v[0]
		for _, x := range v[1:] {
			if isMax {
				m = math.Max(m, x)
			} else {
				m = math.Min(m, x)
			}
		}
		return m
	}
}

func ewCases() []ewCase {
	var cs []ewCase
	binShapes := [][2][]int{
		{{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {5}}, {{3, 4, 5}, {}}, {{}, {2, 3}},
		{{2, 3, 4, 5}, {1, 3, 1, 1}}, {{4, 6}, {6}}, {{3, 1, 5}, {4, 1}},
		{{2, 1, 3, 1}, {1, 4, 1, 5}}, {{1}, {1}}, {{2, 3, 1}, {2, 3, 4}},
	}
	bin := map[string]func(a, b float64) float64{
		"Add": func(a, b float64) float64 { return a + b },
		"Sub": func(a, b float64) float64 { return a - b },
		"Mul": func(a, b float64) float64 { return a * b },
		"Div": func(a, b float64) float64 { return a / b },
		"Pow": math.Pow,
	}
	for _, op := range []string{"Add", "Sub", "Mul", "Div", "Pow"} {
		f := bin[op]
		for _, s := range binShapes {
			a, b := fin(s[0]...), fin(s[1]...)
			switch op {
			case "Div":
				b.gen = awayFromZero
			case "Pow":
				a.gen, b.gen = uniform(0.5, 2), uniform(-2, 2)
			}
			cs = append(cs, ewCase{name: fmt.Sprintf("%v_%v", s[0], s[1]), op: op, opset: 14, in: []inSpec{a, b},
				ref: ew(func(v []float64) float64 { return f(v[0], v[1]) })})
		}
	}
	pow := func(v []float64) float64 { return math.Pow(v[0], v[1]) }
	cs = append(cs,
		ewCase{name: "square_negative_base", op: "Pow", opset: 15, in: []inSpec{fin(3, 4), scalarIn(2)}, ref: ew(pow)},
		ewCase{name: "sqrt_exponent", op: "Pow", opset: 15, in: []inSpec{finGen(uniform(0.1, 3), 3, 4), scalarIn(0.5)}, ref: ew(pow)},
		ewCase{name: "cube_negative_base", op: "Pow", opset: 7, in: []inSpec{fin(3, 4), scalarIn(3)}, ref: ew(pow)},
		ewCase{name: "legacy_opset6_same_shape", op: "Add", opset: 6, in: []inSpec{fin(2, 3), fin(2, 3)}, ref: ew(func(v []float64) float64 { return v[0] + v[1] })},
	)
	prelu := ew(func(v []float64) float64 {
		if v[0] < 0 {
			return v[1] * v[0]
		}
		return v[0]
	})
	for _, s := range [][2][]int{{{3, 4, 5}, {5}}, {{3, 4, 5}, {3, 4, 5}}, {{2, 3, 4, 4}, {3, 1, 1}}, {{4, 6}, {}}} {
		cs = append(cs, ewCase{name: fmt.Sprintf("%v_%v", s[0], s[1]), op: "PRelu", opset: 16, in: []inSpec{fin(s[0]...), fin(s[1]...)}, ref: prelu})
	}
	for _, isMax := range []bool{false, true} {
		op := "Min"
		if isMax {
			op = "Max"
		}
		f := ew(variadic(isMax))
		for _, shapes := range [][][]int{{{3}}, {{3}, {3}}, {{3}, {3}, {3}}, {{3, 1}, {1, 4}, {4}}, {{2, 3}, {}}, {{}, {}, {2, 5}}, {{2, 3, 4}, {3, 4}}} {
			var in []inSpec
			for _, s := range shapes {
				in = append(in, fin(s...))
			}
			cs = append(cs, ewCase{name: fmt.Sprint(shapes), op: op, opset: 13, in: in, ref: f})
		}
	}
	erf := math.Erf
	unary := []struct {
		op  string
		gen func(*rand.Rand) float64
		f   func(float64) float64
	}{
		{"Sqrt", uniform(0.1, 3), math.Sqrt},
		{"Neg", nil, func(v float64) float64 { return -v }},
		{"Floor", awayFromIntegers, math.Floor},
		{"Ceil", awayFromIntegers, math.Ceil},
		{"Abs", nil, math.Abs},
		{"Exp", nil, math.Exp},
		{"Log", uniform(0.1, 3), math.Log},
		{"Erf", nil, erf},
		{"Reciprocal", awayFromZero, func(v float64) float64 { return 1 / v }},
		{"Relu", nil, func(v float64) float64 { return math.Max(v, 0) }},
		{"Sigmoid", uniform(-6, 6), func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
		{"Tanh", nil, math.Tanh},
		{"Sin", uniform(-7, 7), math.Sin},
		{"Cos", uniform(-7, 7), math.Cos},
		{"HardSwish", uniform(-5, 5), func(v float64) float64 { return v * math.Max(0, math.Min(1, v/6+0.5)) }},
	}
	for _, u := range unary {
		cs = append(cs, ewCase{name: "3x4x5", op: u.op, opset: 14, in: []inSpec{finGen(u.gen, 3, 4, 5)}, ref: unaryRef(u.f)})
	}
	gelu := func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
	geluTanh := func(v float64) float64 {
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	quickGelu := func(a float64) func(float64) float64 {
		return func(v float64) float64 { return v / (1 + math.Exp(-a*v)) }
	}
	cs = append(cs,
		ewCase{name: "silu", op: MSDomain + ".QuickGelu", opset: 1, attrs: []*onnxpb.AttributeProto{attrF("alpha", 1)}, in: []inSpec{finGen(uniform(-8, 8), 3, 4, 5)}, ref: unaryRef(quickGelu(1))},
		ewCase{name: "default", op: MSDomain + ".QuickGelu", opset: 1, in: []inSpec{finGen(uniform(-6, 6), 3, 4, 5)}, ref: unaryRef(quickGelu(float64(float32(1.702))))},
	)
	cs = append(cs,
		ewCase{name: "none", op: "Gelu", opset: 20, in: []inSpec{finGen(uniform(-5, 5), 3, 4, 5)}, ref: unaryRef(gelu)},
		ewCase{name: "tanh", op: "Gelu", opset: 20, attrs: []*onnxpb.AttributeProto{attrS("approximate", "tanh")}, in: []inSpec{finGen(uniform(-5, 5), 3, 4, 5)}, ref: unaryRef(geluTanh)},
	)
	leaky := func(a float64) func(float64) float64 {
		return func(v float64) float64 {
			if v < 0 {
				return a * v
			}
			return v
		}
	}
	hsig := func(a, b float64) func(float64) float64 {
		return func(v float64) float64 { return math.Max(0, math.Min(1, a*v+b)) }
	}
	cs = append(cs,
		ewCase{name: "default", op: "LeakyRelu", opset: 16, in: []inSpec{fin(3, 4, 5)}, ref: unaryRef(leaky(float64(float32(0.01))))},
		ewCase{name: "alpha", op: "LeakyRelu", opset: 6, attrs: []*onnxpb.AttributeProto{attrF("alpha", 0.1)}, in: []inSpec{fin(3, 4, 5)}, ref: unaryRef(leaky(float64(float32(0.1))))},
		ewCase{name: "default", op: "HardSigmoid", opset: 6, in: []inSpec{finGen(uniform(-5, 5), 3, 4, 5)}, ref: unaryRef(hsig(float64(float32(0.2)), 0.5))},
		ewCase{name: "alpha_beta", op: "HardSigmoid", opset: 6, attrs: []*onnxpb.AttributeProto{attrF("alpha", 0.5), attrF("beta", 0.6)}, in: []inSpec{fin(3, 4, 5)}, ref: unaryRef(hsig(float64(float32(0.5)), float64(float32(0.6))))},

		ewCase{name: "inputs", op: "Clip", opset: 13, in: []inSpec{fin(3, 4, 5), finGen(uniform(-1, -0.5), []int{}...), finGen(uniform(0.5, 1), []int{}...)}, ref: refClip(1, 2)},
		ewCase{name: "min_only", op: "Clip", opset: 13, in: []inSpec{fin(3, 4, 5), finGen(uniform(-1, 0), []int{}...)}, ref: refClip(1, -1)},
		ewCase{name: "max_only", op: "Clip", opset: 13, in: []inSpec{fin(3, 4, 5), absentIn, finGen(uniform(0, 1), []int{}...)}, ref: refClip(-1, 2)},
		ewCase{name: "no_bounds", op: "Clip", opset: 13, in: []inSpec{fin(3), absentIn, absentIn}, ref: refClip(-1, -1)},
		ewCase{name: "min_above_max", op: "Clip", opset: 11, in: []inSpec{fin(3, 4), finGen(uniform(0.5, 1), []int{}...), finGen(uniform(-1, -0.5), []int{}...)}, ref: refClip(1, 2)},
		ewCase{name: "attributes", op: "Clip", opset: 6, attrs: []*onnxpb.AttributeProto{attrF("min", -0.5), attrF("max", 0.7)}, in: []inSpec{fin(3, 4, 5)}, ref: refClipConst(float64(float32(-0.5)), float64(float32(0.7)))},
		ewCase{name: "attribute_defaults", op: "Clip", opset: 6, in: []inSpec{fin(3, 4)}, ref: refClipConst(-math.MaxFloat32, math.MaxFloat32)},
	)
	for _, log := range []bool{false, true} {
		op := "Softmax"
		if log {
			op = "LogSoftmax"
		}
		for _, ax := range []int{0, 1, 2, -1} {
			cs = append(cs, ewCase{name: fmt.Sprintf("opset13_axis%d", ax), op: op, opset: 13, attrs: []*onnxpb.AttributeProto{attrI("axis", int64(ax))}, in: []inSpec{fin(3, 4, 5)}, ref: refSoftmax(ax, true, log)})
			cs = append(cs, ewCase{name: fmt.Sprintf("opset11_axis%d", ax), op: op, opset: 11, attrs: []*onnxpb.AttributeProto{attrI("axis", int64(ax))}, in: []inSpec{fin(3, 4, 5)}, ref: refSoftmax(ax, false, log)})
		}
		cs = append(cs,
			ewCase{name: "opset13_default", op: op, opset: 13, in: []inSpec{fin(3, 4, 5)}, ref: refSoftmax(-1, true, log)},
			ewCase{name: "opset11_default", op: op, opset: 11, in: []inSpec{fin(3, 4, 5)}, ref: refSoftmax(1, false, log)},
			ewCase{name: "opset7_default_2d", op: op, opset: 7, in: []inSpec{fin(2, 6)}, ref: refSoftmax(1, false, log)},
			ewCase{name: "opset13_axis0_several_lane_blocks", op: op, opset: 13, attrs: []*onnxpb.AttributeProto{attrI("axis", 0)}, in: []inSpec{fin(2, 300)}, ref: refSoftmax(0, true, log)},
			ewCase{name: "large_numbers", op: op, opset: 13, in: []inSpec{finGen(uniform(1e4, 1e4+5), 2, 4)}, ref: refSoftmax(-1, true, log)},
		)
	}
	type redCase struct {
		name  string
		axes  []int64 // nil: not given
		keep  int64   // -1: attribute absent (default 1)
		noop  bool
		ref   []int
		shape []int
	}
	redCases := []redCase{
		{"axis1_keepdims", []int64{1}, 1, false, []int{1}, []int{3, 2, 2}},
		{"axis1_no_keepdims", []int64{1}, 0, false, []int{1}, []int{3, 2, 2}},
		{"negative_axis", []int64{-2}, -1, false, []int{-2}, []int{3, 2, 2}},
		{"two_axes", []int64{0, 2}, 0, false, []int{0, 2}, []int{3, 4, 5}},
		{"all_default", nil, 1, false, nil, []int{3, 2, 2}},
		{"all_default_no_keepdims", nil, 0, false, nil, []int{3, 2, 2}},
		{"per_channel", []int64{0, 2, 3}, 1, false, []int{0, 2, 3}, []int{2, 3, 2, 2}},
		{"outer", []int64{0}, 0, false, []int{0}, []int{4, 6}},
	}
	for _, kind := range []string{"sum", "mean", "max", "prod", "l2"} {
		op := map[string]string{"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "prod": "ReduceProd", "l2": "ReduceL2"}[kind]
		inputSince := int64(18)
		if kind == "sum" {
			inputSince = 13
		}
		for _, rc := range redCases {
			var attrs []*onnxpb.AttributeProto
			if rc.keep >= 0 {
				attrs = append(attrs, attrI("keepdims", rc.keep))
			}
			keep := rc.keep != 0
			// Attribute form.
			attrForm := append([]*onnxpb.AttributeProto(nil), attrs...)
			if rc.axes != nil {
				attrForm = append(attrForm, attrInts("axes", rc.axes...))
			}
			cs = append(cs, ewCase{name: rc.name + "_attr", op: op, opset: 11, attrs: attrForm, in: []inSpec{fin(rc.shape...)}, ref: refReduce(kind, rc.ref, keep)})
			// Input form.
			in := []inSpec{fin(rc.shape...)}
			if rc.axes != nil {
				in = append(in, axesIn(rc.axes...))
			}
			cs = append(cs, ewCase{name: rc.name + "_input", op: op, opset: inputSince, attrs: attrs, in: in, ref: refReduce(kind, rc.ref, keep)})
		}
		cs = append(cs,
			ewCase{name: "empty_axes_noop", op: op, opset: inputSince, attrs: []*onnxpb.AttributeProto{attrI("noop_with_empty_axes", 1)}, in: []inSpec{fin(3, 2, 2), axesIn()}, ref: refReduce(kind, []int{}, true)},
			ewCase{name: "empty_axes_all", op: op, opset: inputSince, attrs: []*onnxpb.AttributeProto{attrI("keepdims", 0)}, in: []inSpec{fin(3, 2, 2), axesIn()}, ref: refReduce(kind, nil, false)},
			ewCase{name: "absent_axes_noop", op: op, opset: inputSince, attrs: []*onnxpb.AttributeProto{attrI("noop_with_empty_axes", 1)}, in: []inSpec{fin(3, 2, 2)}, ref: refReduce(kind, []int{}, true)},
		)
	}
	// ReduceProd's gradient with zeros in a lane (one zero: only it gets a gradient;
	// two: none does) and ReduceL2's at a lane of zeros.
	someZeros := func(r *rand.Rand) float64 {
		if r.IntN(3) == 0 {
			return 0
		}
		return r.NormFloat64()
	}
	cs = append(cs,
		ewCase{name: "zeros", op: "ReduceProd", opset: 18, attrs: []*onnxpb.AttributeProto{attrI("keepdims", 0)}, in: []inSpec{finGen(someZeros, 6, 4), axesIn(1)}, ref: refReduce("prod", []int{1}, false)},
		ewCase{name: "zeros_inner_kept", op: "ReduceProd", opset: 13, attrs: []*onnxpb.AttributeProto{attrInts("axes", 0)}, in: []inSpec{finGen(someZeros, 4, 6)}, ref: refReduce("prod", []int{0}, true)},
	)
	return cs
}

// makeInputs draws the inputs of c and returns them as tensors and in float64.
func makeInputs(c ewCase, seed uint64) ([]*Tensor, [][]float64, [][]int) {
	r := rand.New(rand.NewPCG(seed, 1))
	in := make([]*Tensor, len(c.in))
	xs := make([][]float64, len(c.in))
	shapes := make([][]int, len(c.in))
	for i, s := range c.in {
		switch {
		case s.absent:
		case s.fixed != nil:
			in[i] = s.fixed
			if s.fixed.DType == Float32 {
				xs[i], shapes[i] = to64(s.fixed.F), s.fixed.Shape
			}
		default:
			gen := s.gen
			if gen == nil {
				gen = uniform(-2, 2)
			}
			in[i] = randTensor(r, s.shape, gen)
			xs[i], shapes[i] = to64(in[i].F), in[i].Shape
		}
	}
	return in, xs, shapes
}

func caseNode(c ewCase) *Node {
	inputs := names(len(c.in))
	for i, s := range c.in {
		if s.absent {
			inputs[i] = ""
		}
	}
	return testNode(c.op, c.opset, inputs, c.attrs...)
}

// TestElementwiseForward checks every case's output against its float64 reference, with
// one and with several workers.
func TestElementwiseForward(t *testing.T) {
	for ci, c := range ewCases() {
		t.Run(c.op+"/"+c.name, func(t *testing.T) {
			in, xs, shapes := makeInputs(c, uint64(ci))
			want, wantShape := c.ref(xs, shapes)
			for _, workers := range []int{1, 3} {
				out := runForward(t, buildKernel(t, caseNode(c)), in, workers)[0]
				if !sameShape(out.Shape, wantShape) {
					t.Fatalf("shape %v, want %v", out.Shape, wantShape)
				}
				for i, w := range want {
					if !closeTo(float64(out.F[i]), w, 1e-6, 1e-5) {
						t.Fatalf("workers %d: element %d = %v, want %v", workers, i, out.F[i], w)
					}
				}
			}
		})
	}
}

// retained returns the tensors the backward pass may read: non-retained ones are
// replaced by nil so that a kernel that reads them fails the test.
func retained(k Kernel, in, out []*Tensor) ([]*Tensor, []*Tensor) {
	r, ok := k.(Retainer)
	if !ok {
		return in, out
	}
	ri, ro := r.Retains()
	in2 := make([]*Tensor, len(in))
	out2 := make([]*Tensor, len(out))
	for i := range in {
		if i < len(ri) && ri[i] {
			in2[i] = in[i]
		}
	}
	for i := range out {
		if i < len(ro) && ro[i] {
			out2[i] = out[i]
		}
	}
	return in2, out2
}

// TestElementwiseGradients checks every case's vector-Jacobian product against central
// differences of the float64 reference, for every float input, and that Backward adds
// to the gradient buffers instead of overwriting them.
func TestElementwiseGradients(t *testing.T) {
	for ci, c := range ewCases() {
		t.Run(c.op+"/"+c.name, func(t *testing.T) {
			in, xs, shapes := makeInputs(c, uint64(ci))
			k := buildKernel(t, caseNode(c))
			out := runForward(t, k, in, 2)
			r := rand.New(rand.NewPCG(uint64(ci), 2))
			w := randTensor(r, out[0].Shape, uniform(-1, 1))
			const prior = 0.25
			gin := make([]*Tensor, len(in))
			for i, s := range c.in {
				if in[i] != nil && in[i].DType == Float32 && !s.noGrad {
					gin[i] = NewFloat(in[i].Shape, make([]float32, in[i].Len()))
					for j := range gin[i].F {
						gin[i].F[j] = prior
					}
				}
			}
			rin, rout := retained(k, in, out)
			d, ok := k.(Differentiable)
			if !ok {
				t.Fatalf("%s is not differentiable", c.op)
			}
			if err := d.Backward(&Context{Workers: 2}, rin, rout, []*Tensor{w}, gin); err != nil {
				t.Fatalf("backward: %v", err)
			}
			loss := func() float64 {
				y, _ := c.ref(xs, shapes)
				s := 0.0
				for i, v := range y {
					s += float64(w.F[i]) * v
				}
				return s
			}
			step := func(x float64) float64 { return 1e-6 * math.Max(1, math.Abs(x)) }
			for i := range gin {
				if gin[i] == nil {
					continue
				}
				gi := gin[i].F
				fdCheck(t, fmt.Sprintf("d/d input %d", i), xs[i], func(j int) float64 { return float64(gi[j]) - prior }, loss,
					fdSpec{step: step, atol: 1e-4, rtol: 1e-3}, c.op)
			}
		})
	}
}

// TestMulScaleGrad checks the gradient of a Mul's operand that scales whole trailing
// blocks of the other (squeeze-and-excitation's [N, C, 1, 1] against [N, C, H, W]), which
// mulScaleGrad sums without writing the products out, against the products written out
// and reduced as the reducer does, bit for bit, for either operand order, with NaN,
// infinities and −0 among the values; and that shapes it must not take (a leading
// broadcast axis, one unit of a long block, both operands broadcast) go the other way.
func TestMulScaleGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	ctx := nntCtx(t, 2)
	for _, c := range []struct {
		x, s []int
		take bool
	}{
		{[]int{4, 6, 7, 7}, []int{4, 6, 1, 1}, true},
		{[]int{2, 16, 3, 48}, []int{2, 16, 1, 1}, true},
		{[]int{3, 5, 6, 10}, []int{3, 5, 6, 1}, true},
		{[]int{2, 3, 9}, []int{2, 3, 1}, true},
		{[]int{3, 4, 5, 5}, []int{1, 4, 1, 1}, false},
		{[]int{1, 1, 300, 300}, []int{1, 1, 1, 1}, false},
		{[]int{4, 6, 1, 7}, []int{4, 6, 5, 1}, false},
	} {
		for wrt := range 2 {
			name := fmt.Sprintf("%v*%v/wrt%d", c.x, c.s, wrt)
			out := make([]int, len(c.x))
			for d := range out {
				out[d] = max(c.x[d], c.s[d])
			}
			x, s := nntRand(r, c.x, -2, 2), nntRand(r, c.s, -2, 2)
			x.F[0], x.F[len(x.F)/3] = float32(math.Inf(1)), float32(math.NaN())
			x.F[len(x.F)-1] = float32(math.Copysign(0, -1))
			g := nntRand(r, out, -1, 1)
			in := []*Tensor{x, s}
			if wrt == 1 {
				in = []*Tensor{s, x}
			}
			// gi is the gradient of s, input 1 − wrt.
			si := 1 - wrt
			gi := nntRand(r, c.s, -1, 1)
			want := append([]float32(nil), gi.F...)
			if !slices.Equal(c.x, out) {
				// x broadcast too: the path must decline; the kernel's result is not checked here.
				if mulScaleGrad(ctx, g, x, NewFloat(c.s, append([]float32(nil), gi.F...))) {
					t.Errorf("%s: took a Mul whose other operand is broadcast", name)
				}
				continue
			}
			tmp := make([]float32, len(g.F))
			for i := range tmp {
				tmp[i] += g.F[i] * x.F[i]
			}
			var red reducer
			red.reduceTo(ctx, tmp, out, c.s, want, 1, nil)
			k := buildKernel(t, nntNode("Mul", 14, 2, 1)).(*binaryKernel)
			outs := nntRun(t, k, ctx, in)
			gin := []*Tensor{nil, nil}
			gin[si] = gi
			if err := k.Backward(ctx, in, outs, []*Tensor{g}, gin); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(gi.F[i]) != math.Float32bits(want[i]) && !(gi.F[i] != gi.F[i] && want[i] != want[i]) {
					t.Fatalf("%s: g[%d] = %v, the reduced products %v", name, i, gi.F[i], want[i])
				}
			}
			if got := mulScaleGrad(ctx, g, x, NewFloat(c.s, make([]float32, len(gi.F)))); got != c.take {
				t.Errorf("%s: mulScaleGrad took it: %v, want %v", name, got, c.take)
			}
		}
	}
}
