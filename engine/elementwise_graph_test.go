package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Gradients of the element-wise ops through the graph executor: chains of several ops,
// with broadcasting and reductions, checked against float64 references and against
// the single-op forms they expand.

func ewModel(opset int64, nodes []*onnxpb.NodeProto, out []string, inits ...*onnxpb.TensorProto) *onnxio.Model {
	gp := &onnxpb.GraphProto{Name: proto.String("ew"), Node: nodes, Initializer: inits}
	for _, o := range out {
		gp.Output = append(gp.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	return &onnxio.Model{Name: "ew.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:       gp,
	}}
}

func ewNode(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(op + "_" + out), Input: in, Output: []string{out}, Attribute: attrs}
}

// graphGrads builds m, marks params trainable, runs forward and backward with upstream
// gradient w and returns the output and each parameter's gradient.
func graphGrads(t *testing.T, m *onnxio.Model, w []float32, params ...string) ([]float32, [][]float32) {
	t.Helper()
	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetTrainable(params...); err != nil {
		t.Fatal(err)
	}
	ctx := &Context{Training: true, Workers: 2}
	outs, err := g.Forward(ctx)
	if err != nil {
		t.Fatal(err)
	}
	y := append([]float32(nil), outs[0].F...)
	if err := g.Backward(ctx, NewFloat(outs[0].Shape, w)); err != nil {
		t.Fatal(err)
	}
	var grads [][]float32
	for _, p := range params {
		grads = append(grads, append([]float32(nil), g.Param(p).Grad.F...))
	}
	return y, grads
}

// TestElementwiseGraphSoftmaxExpanded compares Softmax and LogSoftmax with the graphs the
// ONNX function bodies expand them to (ReduceMax, Sub, Exp, ReduceSum, Div or Log, Sub):
// outputs and input gradients must agree, which exercises the backward passes of the
// reductions and of broadcasting Sub and Div through the executor.
func TestElementwiseGraphSoftmaxExpanded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 60)
	for i := range x {
		x[i] = float32(3 * r.NormFloat64())
	}
	w := make([]float32, 60)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for _, log := range []bool{false, true} {
		for _, axis := range []int64{0, 1, 2, -1} {
			op := "Softmax"
			if log {
				op = "LogSoftmax"
			}
			t.Run(fmt.Sprintf("%s/axis%d", op, axis), func(t *testing.T) {
				xt := onnxio.FloatTensor("x", []int64{3, 4, 5}, x)
				single := ewModel(13, []*onnxpb.NodeProto{ewNode(op, []string{"x"}, "y", attrI("axis", axis))}, []string{"y"}, xt)
				nodes := []*onnxpb.NodeProto{
					ewNode("ReduceMax", []string{"x"}, "m", attrInts("axes", axis), attrI("keepdims", 1)),
					ewNode("Sub", []string{"x", "m"}, "s"),
					ewNode("Exp", []string{"s"}, "e"),
					ewNode("ReduceSum", []string{"e", "axes"}, "z", attrI("keepdims", 1)),
				}
				if log {
					nodes = append(nodes, ewNode("Log", []string{"z"}, "lz"), ewNode("Sub", []string{"s", "lz"}, "y"))
				} else {
					nodes = append(nodes, ewNode("Div", []string{"e", "z"}, "y"))
				}
				expanded := ewModel(13, nodes, []string{"y"}, xt, onnxio.Int64Tensor("axes", []int64{1}, []int64{axis}))
				y1, g1 := graphGrads(t, single, w, "x")
				y2, g2 := graphGrads(t, expanded, w, "x")
				for i := range y1 {
					if !closeTo(float64(y2[i]), float64(y1[i]), 1e-6, 1e-5) {
						t.Fatalf("output %d: expanded %v, single %v", i, y2[i], y1[i])
					}
				}
				for i := range g1[0] {
					if !closeTo(float64(g2[0][i]), float64(g1[0][i]), 1e-5, 1e-4) {
						t.Fatalf("gradient %d: expanded %v, single %v", i, g2[0][i], g1[0][i])
					}
				}
			})
		}
	}
}

// TestElementwiseGraphChain checks the parameter gradients of a chain of broadcasting
// ops through the executor against central differences of a float64 reference:
// y_n = sqrt(clip(mean_j(leaky(x_nj·w_j + b_j)²), 0.5, ∞)) · s, a per-row RMS.
func TestElementwiseGraphChain(t *testing.T) {
	const N, F = 4, 6
	r := rand.New(rand.NewPCG(5, 6))
	gen := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	x, wt, b, s, up := gen(N*F), gen(F), gen(F), gen(1), gen(N)
	m := ewModel(14, []*onnxpb.NodeProto{
		ewNode("Mul", []string{"x", "w"}, "xw"),
		ewNode("Add", []string{"xw", "b"}, "h"),
		ewNode("LeakyRelu", []string{"h"}, "a", attrF("alpha", 0.1)),
		ewNode("Pow", []string{"a", "two"}, "sq"),
		ewNode("ReduceMean", []string{"sq"}, "ms", attrInts("axes", 1), attrI("keepdims", 0)),
		ewNode("Clip", []string{"ms", "lo", ""}, "c"),
		ewNode("Sqrt", []string{"c"}, "rms"),
		ewNode("Mul", []string{"rms", "s"}, "y"),
	}, []string{"y"},
		onnxio.FloatTensor("x", []int64{N, F}, x),
		onnxio.FloatTensor("w", []int64{F}, wt),
		onnxio.FloatTensor("b", []int64{1, F}, b),
		onnxio.FloatTensor("s", []int64{}, s),
		onnxio.FloatTensor("two", []int64{}, []float32{2}),
		onnxio.FloatTensor("lo", []int64{}, []float32{0.5}),
	)
	_, grads := graphGrads(t, m, up, "x", "w", "b", "s")
	p := [][]float64{to64(x), to64(wt), to64(b), to64(s)}
	loss := func() float64 {
		l := 0.0
		for n := 0; n < N; n++ {
			ms := 0.0
			for j := 0; j < F; j++ {
				h := p[0][n*F+j]*p[1][j] + p[2][j]
				if h < 0 {
					h *= float64(float32(0.1))
				}
				ms += h * h / F
			}
			l += float64(up[n]) * math.Sqrt(math.Max(ms, 0.5)) * p[3][0]
		}
		return l
	}
	var ops []string
	for _, n := range m.Proto.GetGraph().GetNode() {
		ops = append(ops, n.GetOpType())
	}
	for i := range p {
		gi := grads[i]
		fdCheck(t, fmt.Sprintf("parameter %d", i), p[i], func(j int) float64 { return float64(gi[j]) }, loss,
			fdSpec{step: fixedStep(1e-6), atol: 1e-4, rtol: 1e-3}, ops...)
	}
}
