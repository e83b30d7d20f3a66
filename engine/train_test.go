package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// mlpNodes is Gemm → BatchNormalization → Relu → Gemm, the block of the paper's MLP.
func mlpNodes(in string) []*onnxpb.NodeProto {
	return []*onnxpb.NodeProto{
		gNode("Gemm", []string{in, "w1", "b1"}, []string{"h1"}, attrI("transB", 1)),
		gNode("BatchNormalization", []string{"h1", "gamma", "beta", "mean", "var"}, []string{"h2"}, attrF("epsilon", 1e-5), attrF("momentum", 0.9)),
		gNode("Relu", []string{"h2"}, []string{"h3"}),
		gNode("Gemm", []string{"h3", "w2", "b2"}, []string{"logits"}, attrI("transB", 1)),
	}
}

func mlpParams(r *rand.Rand, in, hidden, out int) []*onnxpb.TensorProto {
	pos := func(n int) []float32 {
		v := gFloats(r, n)
		for i := range v {
			v[i] = 0.5 + v[i]*v[i]
		}
		return v
	}
	return []*onnxpb.TensorProto{
		onnxio.FloatTensor("w1", []int64{int64(hidden), int64(in)}, gFloats(r, hidden*in)),
		onnxio.FloatTensor("b1", []int64{int64(hidden)}, gFloats(r, hidden)),
		onnxio.FloatTensor("gamma", []int64{int64(hidden)}, pos(hidden)),
		onnxio.FloatTensor("beta", []int64{int64(hidden)}, gFloats(r, hidden)),
		onnxio.FloatTensor("mean", []int64{int64(hidden)}, gFloats(r, hidden)),
		onnxio.FloatTensor("var", []int64{int64(hidden)}, pos(hidden)),
		onnxio.FloatTensor("w2", []int64{int64(out), int64(hidden)}, gFloats(r, out*hidden)),
		onnxio.FloatTensor("b2", []int64{int64(out)}, gFloats(r, out)),
	}
}

var mlpTrainable = []string{"w1", "b1", "gamma", "beta", "w2", "b2"}

// TestMLPGradients checks the executor's reverse pass over a block with a shared input
// (x feeds the first Gemm; BatchNormalization's batch statistics couple all samples)
// against finite differences, also for the input itself.
func TestMLPGradients(t *testing.T) {
	c := gradCase{name: "Gemm+BN+Relu+Gemm", opset: 15, nodes: mlpNodes("x"), out: []string{"logits"},
		params: []gradParam{{name: "x", shape: []int64{6, 5}}}}
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range mlpParams(r, 5, 7, 3) {
		c.params = append(c.params, gradParam{p.GetName(), p.GetDims(), p.GetName() == "var" || p.GetName() == "gamma"})
	}
	// The running statistics are inputs of BatchNormalization that training mode does
	// not read for its output; keeping them trainable checks that their gradient is 0.
	checkGraphGrad(t, c)
	// In inference mode BatchNormalization reads the running statistics, and gradients
	// flow into them.
	c.name, c.eval = "Gemm+BN+Relu+Gemm/eval", true
	checkGraphGrad(t, c)
}

func newMLPGraph(t testing.TB, batch, in, hidden, out int) (*Graph, *Tensor) {
	r := rand.New(rand.NewPCG(5, 6))
	m := gModel(15, mlpNodes("x"), []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, int64(in))},
		[]string{"logits"}, mlpParams(r, in, hidden, out)...)
	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetTrainable(mlpTrainable...); err != nil {
		t.Fatal(err)
	}
	return g, NewFloat([]int{batch, in}, gFloats(r, batch*in))
}

// TestTrainStepAllocations checks that a steady-state training step (Forward and
// Backward at a fixed batch size) allocates almost nothing: the plan, activations and
// gradient buffers are made once.
func TestTrainStepAllocations(t *testing.T) {
	g, x := newMLPGraph(t, 32, 20, 64, 10)
	gout := NewFloat([]int{32, 10}, make([]float32, 320))
	ctx := &Context{Training: true, Rand: rand.New(rand.NewPCG(1, 1)), Workers: 2}
	step := func() {
		if _, err := g.Forward(ctx, x); err != nil {
			t.Fatal(err)
		}
		for i := range gout.F {
			gout.F[i] = float32(i%7) - 3
		}
		if err := g.Backward(ctx, gout); err != nil {
			t.Fatal(err)
		}
	}
	step()
	allocs := testing.AllocsPerRun(50, step)
	t.Logf("%.1f allocations per training step", allocs)
	// Goroutines that kernels start for parallel work cost a few allocations each;
	// buffers would cost many more.
	if allocs > 20 {
		t.Errorf("%.1f allocations per steady-state training step, want at most 20", allocs)
	}
}

// TestExecutorTrainingAllocatesNothing isolates the executor from kernels that start
// goroutines: a training step over shape ops only must not allocate at all.
func TestExecutorTrainingAllocatesNothing(t *testing.T) {
	nodes := []*onnxpb.NodeProto{
		gNode("Transpose", []string{"x"}, []string{"a"}),
		gNode("Concat", []string{"a", "w"}, []string{"b"}, attrI("axis", 0)),
		gNode("Pad", []string{"b", "p"}, []string{"c"}, attrS("mode", "reflect")),
		gNode("Slice", []string{"c", "s", "e"}, []string{"d"}),
		gNode("Dropout", []string{"d", "r"}, []string{"y"}),
	}
	r := rand.New(rand.NewPCG(8, 9))
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 4, -1)}, []string{"y", "b"},
		onnxio.FloatTensor("w", []int64{2, 4}, gFloats(r, 8)), onnxio.FloatTensor("r", nil, []float32{0.1}),
		ints("p", 1, 1, 1, 1), ints("s", 1), ints("e", -1))
	g := mustBuild(t, m)
	if err := g.SetTrainable("w"); err != nil {
		t.Fatal(err)
	}
	x := NewFloat([]int{4, 4}, gFloats(r, 16))
	gy := NewFloat([]int{6, 6}, gFloats(r, 36))
	gb := NewFloat([]int{6, 4}, gFloats(r, 24))
	ctx := &Context{Training: true, Rand: rand.New(rand.NewPCG(1, 1))}
	step := func() {
		if _, err := g.Forward(ctx, x); err != nil {
			t.Fatal(err)
		}
		if err := g.Backward(ctx, gy, gb); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
		t.Errorf("%.1f allocations per training step, want 0", allocs)
	}
}

// TestBackwardGuards checks that Backward refuses to run without a recording Forward,
// twice for one Forward, or with a gradient of the wrong shape.
func TestBackwardGuards(t *testing.T) {
	g, x := newMLPGraph(t, 4, 3, 5, 2)
	gy := NewFloat([]int{4, 2}, make([]float32, 8))
	if err := g.SetTrainable(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Forward(nil, x); err != nil {
		t.Fatal(err)
	}
	if err := g.Backward(nil, gy); err == nil {
		t.Fatal("Backward succeeded with nothing trainable")
	}
	if err := g.SetTrainable("w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Forward(&Context{Training: true}, x); err != nil {
		t.Fatal(err)
	}
	if err := g.Backward(nil, NewFloat([]int{4, 3}, make([]float32, 12))); err == nil {
		t.Fatal("Backward accepted a gradient of the wrong shape")
	}
	if err := g.Backward(nil, gy); err != nil {
		t.Fatal(err)
	}
	if err := g.Backward(nil, gy); err == nil {
		t.Fatal("Backward ran twice for one Forward")
	}
	if _, err := g.Forward(&Context{NoGrad: true}, x); err != nil {
		t.Fatal(err)
	}
	if err := g.Backward(nil, gy); err == nil {
		t.Fatal("Backward succeeded after a NoGrad Forward")
	}
}

// BenchmarkTrainStep measures one Forward+Backward of a 784-256-10 block with BatchNorm
// at batch 64; allocs/op shows the steady state.
func BenchmarkTrainStep(b *testing.B) {
	g, x := newMLPGraph(b, 64, 784, 256, 10)
	gout := NewFloat([]int{64, 10}, gFloats(rand.New(rand.NewPCG(2, 2)), 640))
	ctx := &Context{Training: true, Rand: rand.New(rand.NewPCG(1, 1))}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Forward(ctx, x); err != nil {
			b.Fatal(err)
		}
		if err := g.Backward(ctx, gout); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrainingDeterministic runs the same SGD steps on two graphs built from the same
// model with the same seeds, Dropout included, and requires bit-identical parameters.
func TestTrainingDeterministic(t *testing.T) {
	nodes := append(mlpNodes("xd"), gNode("Dropout", []string{"x", "ratio"}, []string{"xd"}))
	r := rand.New(rand.NewPCG(5, 6))
	inits := append(mlpParams(r, 12, 32, 5), onnxio.FloatTensor("ratio", nil, []float32{0.3}))
	m := gModel(15, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 12)}, []string{"logits"}, inits...)
	x := NewFloat([]int{16, 12}, gFloats(r, 16*12))
	gout := NewFloat([]int{16, 5}, gFloats(r, 16*5))
	run := func() []*Param {
		g, err := Build(m, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetTrainable(mlpTrainable...); err != nil {
			t.Fatal(err)
		}
		ctx := &Context{Training: true, Rand: rand.New(rand.NewPCG(3, 3))}
		for range 3 {
			g.ZeroGrad()
			if _, err := g.Forward(ctx, x); err != nil {
				t.Fatal(err)
			}
			if err := g.Backward(ctx, gout); err != nil {
				t.Fatal(err)
			}
			for _, p := range g.Params() {
				if p.Trainable {
					for i, d := range p.Grad.F {
						p.Value.F[i] -= 0.1 * d
					}
				}
			}
		}
		return g.Params()
	}
	a, b := run(), run()
	for i := range a {
		for j := range a[i].Value.F {
			if math.Float32bits(a[i].Value.F[j]) != math.Float32bits(b[i].Value.F[j]) {
				t.Fatalf("%s[%d]: %g vs %g", a[i].Name, j, a[i].Value.F[j], b[i].Value.F[j])
			}
		}
	}
}

// TestGradClearSplit checks the clearing of gradient buffers over the workers
// (Context.clearGrad): a 3·gradZeroGrain + 5 value activation a = x·w is read by a Relu
// and a Sigmoid, so its gradient buffer is cleared before the first of their backward
// passes adds into it and then summed. Over three steps with ZeroGrad between them, w's
// gradient must be x·(relu'(a) + σ'(a))·gy, the float64 definition, to float32 rounding,
// on every step (a chunk left uncleared doubles its part from the second step on), and
// the same bits on one worker and on two.
func TestGradClearSplit(t *testing.T) {
	n := 3*gradZeroGrain + 5
	r := rand.New(rand.NewPCG(41, 42))
	nodes := []*onnxpb.NodeProto{
		gNode("Mul", []string{"x", "w"}, []string{"a"}),
		gNode("Relu", []string{"a"}, []string{"b"}),
		gNode("Sigmoid", []string{"a"}, []string{"c"}),
		gNode("Add", []string{"b", "c"}, []string{"y"}),
	}
	wv := gFloats(r, n)
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, int64(n))}, []string{"y"},
		onnxio.FloatTensor("w", []int64{int64(n)}, wv))
	x := NewFloat([]int{n}, gFloats(r, n))
	gy := NewFloat([]int{n}, gFloats(r, n))
	run := func(workers int) [][]float32 {
		g, err := Build(m, Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetTrainable("w"); err != nil {
			t.Fatal(err)
		}
		ctx := &Context{Training: true}
		var grads [][]float32
		for range 3 {
			g.ZeroGrad()
			if _, err := g.Forward(ctx, x); err != nil {
				t.Fatal(err)
			}
			if err := g.Backward(ctx, gy); err != nil {
				t.Fatal(err)
			}
			grads = append(grads, append([]float32(nil), g.Param("w").Grad.F...))
		}
		return grads
	}
	one, two := run(1), run(2)
	for s := range one {
		for i := range one[s] {
			if math.Float32bits(one[s][i]) != math.Float32bits(two[s][i]) {
				t.Fatalf("step %d, w[%d]: %g on two workers, %g on one", s, i, two[s][i], one[s][i])
			}
			a := float64(x.F[i]) * float64(wv[i])
			sg := 1 / (1 + math.Exp(-a))
			d := sg * (1 - sg)
			if a > 0 {
				d++
			}
			want := float64(x.F[i]) * d * float64(gy.F[i])
			if got := float64(two[s][i]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("step %d, w[%d] = %g, want %g", s, i, got, want)
			}
		}
	}
}
