package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	qblas "github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// fusedPair returns a test model's graph, which fuses, and a second graph of the same
// model that does not, with the model's samples.
func fusedPair(t *testing.T, name string, opts Options) (fused, plain *Graph, x *Tensor) {
	t.Helper()
	m, _, x, _ := loadTestModel(t, name, "fmnist-calib.npz")
	fused, err := Build(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	plain, err = Build(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	plain.noFuse = true
	return fused, plain, x
}

// fusedSteps counts the last plan's fused steps and its BatchNormalization steps.
func fusedSteps(g *Graph) (fused, bn int) {
	fused, bn, _ = fusedActs(g)
	return fused, bn
}

// fusedActs also counts the fused steps that apply an activation.
func fusedActs(g *Graph) (fused, bn, act int) {
	for _, st := range g.last.steps {
		switch k := st.node.k.(type) {
		case *convBNKernel:
			fused++
			if k.act != nil {
				act++
			}
		case *batchNormKernel:
			bn++
		}
	}
	return fused, bn, act
}

// convBNParams returns the names of the parameters of every Conv that feeds a
// BatchNormalization: weight, then the BatchNormalization's scale, B, mean and var, then
// the bounds of a Clip that follows the BatchNormalization.
func convBNParams(g *Graph) [][]string {
	var out [][]string
	for i, gn := range g.nodes {
		if gn.op != "Conv" || i+1 >= len(g.nodes) || g.nodes[i+1].op != "BatchNormalization" || g.nodes[i+1].in[0] != gn.out[0] {
			continue
		}
		names := []string{g.values[gn.in[1]].name}
		for _, id := range g.nodes[i+1].in[1:] {
			names = append(names, g.values[id].name)
		}
		if a, ok := convBNAct(g, i); ok && a.op == "Clip" {
			for _, id := range a.in[1:] {
				if id >= 0 {
					names = append(names, g.values[id].name)
				}
			}
		}
		out = append(out, names)
	}
	return out
}

// convBNAct returns the Relu, Clip or HardSwish node that reads the output of the
// BatchNormalization after Conv node i.
func convBNAct(g *Graph, i int) (gnode, bool) {
	if i+2 >= len(g.nodes) {
		return gnode{}, false
	}
	a := g.nodes[i+2]
	return a, (a.op == "Relu" || a.op == "Clip" || a.op == "HardSwish") && a.in[0] == g.nodes[i+1].out[0]
}

// TestFuseConvBNMatchesUnfused checks that inference plans of the convolutional test
// models fold every Conv → BatchNormalization pair, with the Relu, Clip or HardSwish
// that follows it, every residual Add with its activation and every MaxPool, and that
// the fused logits agree with the unfused executor's within 1e-5 absolute
// plus 1e-5 relative.
func TestFuseConvBNMatchesUnfused(t *testing.T) {
	for _, name := range []string{"fmnist-cnn", "fmnist-resnet"} {
		t.Run(name, func(t *testing.T) {
			fused, plain, x := fusedPair(t, name, Options{Workers: 2})
			pairs := len(convBNParams(fused))
			if pairs == 0 {
				t.Fatalf("%s has no Conv → BatchNormalization pair to fuse", name)
			}
			acts := 0
			for i := range fused.nodes {
				if _, ok := convBNAct(fused, i); ok && fused.nodes[i].op == "Conv" && fused.nodes[i+1].op == "BatchNormalization" {
					acts++
				}
			}
			// Residual blocks: Conv → BatchNormalization → Add → activation, the Add
			// reading the output of an earlier node; its activation joins the later
			// Conv's step.
			adds := 0
			for _, gn := range fused.nodes {
				if gn.op != "Add" {
					continue
				}
				adds++
				for _, a := range fused.nodes {
					if (a.op == "Relu" || a.op == "Clip" || a.op == "HardSwish") && a.in[0] == gn.out[0] {
						acts++
					}
				}
			}
			if acts == 0 {
				t.Fatalf("%s has no Conv → BatchNormalization → Relu/Clip chain", name)
			}
			xb := rows(x, 0, min(256, x.Shape[0]))
			got, err := fused.Forward(nil, xb)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Forward(nil, xb)
			if err != nil {
				t.Fatal(err)
			}
			if err := closeTensors(got[0], want[0], 1e-5, 1e-5); err != nil {
				t.Error(err)
			}
			if f, bn, a := fusedActs(fused); f != pairs || bn != 0 || a != acts {
				t.Errorf("fused plan has %d fused steps (%d with an activation) and %d BatchNormalization steps, want %d (%d) and 0", f, a, bn, pairs, acts)
			}
			if f, _ := fusedSteps(plain); f != 0 {
				t.Errorf("unfused graph has %d fused steps", f)
			}
			for _, st := range fused.last.steps {
				if st.node.op == "Add" {
					t.Errorf("fused plan still runs Add %q apart", st.node.n.Name())
				}
			}
			if res := 0; name == "fmnist-resnet" {
				for _, st := range fused.last.steps {
					if k, ok := st.node.k.(*convBNKernel); ok && k.res {
						res++
					}
				}
				if res != adds {
					t.Errorf("fused plan adds %d residuals in Conv steps, the model has %d Adds", res, adds)
				}
			}
			// Every MaxPool of these models reads a fused step's activation alone.
			pools, fusedPools := 0, 0
			for _, gn := range fused.nodes {
				if gn.op == "MaxPool" {
					pools++
				}
			}
			for _, st := range fused.last.steps {
				if k, ok := st.node.k.(*convBNKernel); ok && k.pool != nil {
					fusedPools++
				}
				if _, ok := st.node.k.(*poolKernel); ok {
					t.Errorf("fused plan still runs MaxPool %q apart", st.node.n.Name())
				}
			}
			if fusedPools != pools {
				t.Errorf("fused plan pools in %d Conv steps, the model has %d MaxPools", fusedPools, pools)
			}
		})
	}
}

// TestFuseConvBNFollowsParams changes, between runs, each Conv weight and each of the
// four BatchNormalization tensors, and the bounds of Clips fused after them, in place,
// as optimizers and quantizers do, and checks
// that the fused result follows the unfused one. Each change is undone before the next,
// so that the network stays in the range where its logits are well conditioned.
func TestFuseConvBNFollowsParams(t *testing.T) {
	fused, plain, x := fusedPair(t, "fmnist-resnet", Options{Workers: 2})
	xb := rows(x, 0, 64)
	run := func() (got, want *Tensor) {
		t.Helper()
		g, err := fused.Forward(nil, xb)
		if err != nil {
			t.Fatal(err)
		}
		w, err := plain.Forward(nil, xb)
		if err != nil {
			t.Fatal(err)
		}
		return NewFloat(g[0].Shape, append([]float32(nil), g[0].F...)), w[0]
	}
	before, _ := run()
	for i, names := range convBNParams(fused) {
		for j, name := range names {
			// Weight sign flips, a larger scale, shifted B and mean, a smaller var:
			// every term of the fold changes.
			edit := func(v []float32) {
				for k := range v {
					switch j {
					case 0:
						if k%3 == 0 {
							v[k] = -v[k]
						}
					case 1:
						v[k] *= 1.5
					case 2, 3:
						v[k] += 0.25
					case 4:
						v[k] *= 0.5
					case 5: // Clip min
						v[k] -= 0.5
					case 6: // Clip max
						v[k] *= 0.25
					}
				}
			}
			fv, pv := fused.Param(name).Value.F, plain.Param(name).Value.F
			saved := append([]float32(nil), fv...)
			edit(fv)
			edit(pv)
			// In-place writes are announced (Param.Changed), as the kept packed weights need.
			fused.Param(name).Changed()
			plain.Param(name).Changed()
			got, want := run()
			if err := closeTensors(got, want, 1e-5, 1e-5); err != nil {
				t.Errorf("after changing %q (pair %d): %v", name, i, err)
			}
			if err := closeTensors(got, before, 1e-4, 1e-4); err == nil {
				t.Errorf("changing %q (pair %d) did not change the logits; the check proves nothing", name, i)
			}
			copy(fv, saved)
			copy(pv, saved)
			fused.Param(name).Changed()
			plain.Param(name).Changed()
		}
	}
	got, _ := run()
	if err := closeTensors(got, before, 0, 0); err != nil {
		t.Errorf("after restoring every parameter: %v", err)
	}
}

// TestFuseConvBNOnlyFrozenInference checks that training-mode plans, plans that record
// for Backward, and pairs with a trainable parameter are not fused, and that gradients
// are those of the unfused graph bit for bit.
func TestFuseConvBNOnlyFrozenInference(t *testing.T) {
	fused, plain, x := fusedPair(t, "fmnist-cnn", Options{Workers: 2})
	xb := rows(x, 0, 32)
	// Both graphs: a training-mode run updates the running statistics.
	for _, g := range []*Graph{fused, plain} {
		if _, err := g.Forward(&Context{Training: true}, xb); err != nil {
			t.Fatal(err)
		}
	}
	if f, _ := fusedSteps(fused); f != 0 {
		t.Errorf("training-mode plan has %d fused steps, want 0", f)
	}
	pairs := convBNParams(fused)
	if len(pairs) < 2 {
		t.Fatalf("fmnist-cnn has %d Conv → BatchNormalization pairs, want at least 2", len(pairs))
	}
	// Trainable: the first pair's BatchNormalization scale.
	train := pairs[0][1]
	for _, g := range []*Graph{fused, plain} {
		if err := g.SetTrainable(train); err != nil {
			t.Fatal(err)
		}
	}
	// Evaluation during training: nothing is recorded, so only the pair without a
	// trainable parameter folds.
	if _, err := fused.Forward(&Context{NoGrad: true}, xb); err != nil {
		t.Fatal(err)
	}
	if f, bn := fusedSteps(fused); f != len(pairs)-1 || bn != 1 {
		t.Errorf("with %q trainable: %d fused steps and %d BatchNormalization steps, want %d and 1", train, f, bn, len(pairs)-1)
	}
	// Recording inference plan: nothing folds, and gradients match the unfused graph's.
	var grads [2][]float32
	for i, g := range []*Graph{fused, plain} {
		g.ZeroGrad()
		out, err := g.Forward(nil, xb)
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := fusedSteps(g); f != 0 {
			t.Errorf("recording plan has %d fused steps, want 0", f)
		}
		gy := NewFloat(out[0].Shape, make([]float32, out[0].Len()))
		for k := range gy.F {
			gy.F[k] = float32(k%7) - 3
		}
		if err := g.Backward(nil, gy); err != nil {
			t.Fatal(err)
		}
		grads[i] = append([]float32(nil), g.Param(train).Grad.F...)
	}
	for k := range grads[0] {
		if grads[0][k] != grads[1][k] {
			t.Fatalf("gradient of %q element %d: %g with fusion enabled, %g without", train, k, grads[0][k], grads[1][k])
		}
	}
}

// TestFuseConvBNAllocations checks that a steady-state fused inference run allocates no
// more than the unfused one (only the closures handed to Context.Parallel; with one
// worker and products small enough that gonum's Sgemm stays on one goroutine).
func TestFuseConvBNAllocations(t *testing.T) {
	fused, plain, x := fusedPair(t, "fmnist-resnet", Options{Workers: 1})
	xb := rows(x, 0, 1)
	var allocs [2]float64
	for i, g := range []*Graph{fused, plain} {
		step := func() {
			if _, err := g.Forward(nil, xb); err != nil {
				t.Fatal(err)
			}
		}
		step()
		allocs[i] = testing.AllocsPerRun(10, step)
	}
	if f, _ := fusedSteps(fused); f == 0 {
		t.Fatal("no step was fused")
	}
	if allocs[0] > allocs[1] {
		t.Errorf("%v allocations per fused run, %v unfused: fusion must not allocate", allocs[0], allocs[1])
	}
	t.Logf("allocations per run: fused %v, unfused %v", allocs[0], allocs[1])
}

// BenchmarkFuseConvBN runs the convolutional test models at batch 256 with and without
// the Conv → BatchNormalization fold, alternating in one process so that a shared
// machine's load affects both alike. It uses OpenBLAS when it loads, gonum otherwise.
//
//	go test ./engine -run '^$' -bench FuseConvBN -count 3
func BenchmarkFuseConvBN(b *testing.B) {
	opts := Options{}
	if ob, err := qblas.LoadOpenBLAS(qblas.Options{}); err == nil {
		opts.BLAS = ob
	} else {
		b.Logf("gonum BLAS (OpenBLAS: %v)", err)
	}
	for _, name := range []string{"fmnist-cnn", "fmnist-resnet"} {
		m, err := onnxio.Load(filepath.Join(testmodelsDir, name+".onnx"))
		if err != nil {
			b.Skipf("%v; install with %s", err, testmodelsInstall)
		}
		var x []float32
		shape, err := npzArray(filepath.Join(testmodelsDir, "fmnist-calib.npz"), "x", &x)
		if err != nil {
			b.Skipf("%v; install with %s", err, testmodelsInstall)
		}
		xb := rows(NewFloat(shape, x), 0, 256)
		for _, fuse := range []bool{false, true} {
			g, err := Build(m, opts)
			if err != nil {
				b.Fatal(err)
			}
			g.noFuse = !fuse
			b.Run(fmt.Sprintf("%s/fused=%v", name, fuse), func(b *testing.B) {
				for b.Loop() {
					if _, err := g.Forward(nil, xb); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}

// TestNNClampEdgeValues checks the fused bias-and-activation pass against the ONNX
// definitions on signed zeros, infinities and NaNs of either sign: Relu is max(x, 0) with
// −0 and sign-set NaNs mapped to +0, as the Relu kernel does; Clip keeps NaN.
func TestNNClampEdgeValues(t *testing.T) {
	nan := float32(math.NaN())
	negNaN := math.Float32frombits(math.Float32bits(nan) | 1<<31)
	inf := float32(math.Inf(1))
	src := []float32{-2, -0.5, float32(math.Copysign(0, -1)), 0, 0.5, 3, 7, inf, -inf, nan, negNaN}
	relu := func(v float32) float32 {
		switch {
		case v > 0:
			return v
		case v != v && !math.Signbit(float64(v)):
			return v
		}
		return 0
	}
	clip := func(lo, hi float32) func(float32) float32 {
		return func(v float32) float32 {
			if v != v {
				return v
			}
			if v < lo || (v == 0 && lo == 0 && math.Signbit(float64(v))) {
				return lo
			}
			if v > hi {
				return hi
			}
			return v
		}
	}
	for _, c := range []struct {
		name string
		cl   nnClamp
		ref  func(float32) float32
	}{
		{"relu", nnClamp{relu: true}, relu},
		{"clip0_6", nnClamp{lo: 0, hi: 6}, clip(0, 6)},
		{"clip-1_1", nnClamp{lo: -1, hi: 1}, clip(-1, 1)},
	} {
		for _, bias := range []float32{0.25, -1} {
			got := make([]float32, len(src))
			c.cl.apply(got, src, bias)
			for i, v := range src {
				w := c.ref(v + bias)
				if math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
					t.Errorf("%s, bias %g: %g → %g, want %g", c.name, bias, v, got[i], w)
				}
			}
		}
		got := make([]float32, len(src))
		c.cl.applyNoBias(got, src)
		for i, v := range src {
			if w := c.ref(v); math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
				t.Errorf("%s, no bias: %g → %g, want %g", c.name, v, got[i], w)
			}
		}
	}
}

// TestFuseConvWithoutBN checks the fusion of what follows a Conv that no
// BatchNormalization follows, as in models whose exporter folded BatchNormalization into
// the weights: Relu, a residual Add with its Relu, Clip with parameter bounds then a
// MaxPool, a depthwise Conv with HardSwish, and a SiLU (which the graph runs as one
// QuickGelu, rewrite.go). The fused plan must agree with the unfused one within float
// rounding.
func TestFuseConvWithoutBN(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 7))
	param := func(name string, dims ...int64) *onnxpb.TensorProto { return randParam(r, 1.0/3, name, dims...) }
	pad1 := attrInts("pads", 1, 1, 1, 1)
	nodes := []*onnxpb.NodeProto{
		gNode("Conv", []string{"x", "w1", "b1"}, []string{"c1"}, pad1),
		gNode("Relu", []string{"c1"}, []string{"r1"}),
		gNode("Conv", []string{"r1", "w2"}, []string{"c2"}, pad1),
		gNode("Add", []string{"c2", "r1"}, []string{"a2"}),
		gNode("Relu", []string{"a2"}, []string{"r2"}),
		gNode("Conv", []string{"r2", "w3", "b3"}, []string{"c3"}, pad1),
		gNode("Clip", []string{"c3", "lo", "hi"}, []string{"k3"}),
		gNode("MaxPool", []string{"k3"}, []string{"p3"}, attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2)),
		gNode("Conv", []string{"p3", "w4", "b4"}, []string{"c4"}, pad1, attrI("group", 8)),
		gNode("HardSwish", []string{"c4"}, []string{"h4"}),
		gNode("Conv", []string{"h4", "w5"}, []string{"c5"}),
		gNode("Sigmoid", []string{"c5"}, []string{"s5"}),
		gNode("Mul", []string{"c5", "s5"}, []string{"y"}),
	}
	m := gModel(14, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 3, 4, 18, 18)}, []string{"y"},
		param("w1", 8, 4, 3, 3), param("b1", 8), param("w2", 8, 8, 3, 3), param("w3", 8, 8, 3, 3), param("b3", 8),
		onnxio.FloatTensor("lo", nil, []float32{-0.25}), onnxio.FloatTensor("hi", nil, []float32{0.5}),
		param("w4", 8, 1, 3, 3), param("b4", 8), param("w5", 16, 8, 1, 1))
	fused, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	plain.noFuse = true
	x := nntRand(r, []int{3, 4, 18, 18}, -1, 1)
	got, err := fused.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeTensors(got[0], want[0], 1e-5, 1e-5); err != nil {
		t.Error(err)
	}
	var ops []string
	for _, st := range fused.last.steps {
		ops = append(ops, st.node.op)
	}
	wantOps := []string{"Conv+Relu", "Conv+Add+Relu", "Conv+Clip+MaxPool", "Conv+HardSwish", "Conv+QuickGelu"}
	if !slices.Equal(ops, wantOps) {
		t.Errorf("fused plan runs %v, want %v", ops, wantOps)
	}
}

// TestFuseConvSiLUExact: a Conv fused with the SiLU after it (applied to each tile's rows
// once the kernel has stored them, or to the planes on the other paths) gives bit for bit
// the unfused plan's output, which runs the same convolution and then QuickGelu's own
// pass over the stored values: the direct path (with packed panels along padded rows on
// AVX-512, a 2×2 pool), the tile path of small planes, the narrow path and depthwise
// planes (the SiLU on each plane as it is made), on 1–3 workers.
func TestFuseConvSiLUExact(t *testing.T) {
	cases := []struct {
		name  string
		x     []int
		nodes func() []*onnxpb.NodeProto
	}{
		{"direct_rows27", []int{3, 5, 27, 27}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"c", "s"}, []string{"y"})}
		}},
		{"direct_pool", []int{2, 5, 16, 16}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"s", "c"}, []string{"m"}),
				gNode("MaxPool", []string{"m"}, []string{"y"}, attrInts("kernel_shape", 2, 2), attrInts("strides", 2, 2))}
		}},
		{"small_planes", []int{4, 5, 3, 3}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"c", "s"}, []string{"y"})}
		}},
		{"depthwise_planes", []int{2, 40, 20, 20}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1), attrI("group", 40)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"c", "s"}, []string{"y"})}
		}},
		{"depthwise_stride2", []int{2, 40, 21, 21}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1), attrI("group", 40), attrInts("strides", 2, 2)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"c", "s"}, []string{"y"})}
		}},
		{"narrow_one_item", []int{1, 5, 2, 2}, func() []*onnxpb.NodeProto {
			return []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1)),
				gNode("Sigmoid", []string{"c"}, []string{"s"}), gNode("Mul", []string{"c", "s"}, []string{"y"})}
		}},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(23, uint64(workers)))
				const M = 40
				cin := int64(c.x[1])
				if strings.HasPrefix(c.name, "depthwise") {
					cin = 1
				}
				m := gModel(14, c.nodes(), []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, int64(c.x[0]), int64(c.x[1]), int64(c.x[2]), int64(c.x[3]))}, []string{"y"},
					randParam(r, 1.0/3, "w", M, cin, 3, 3), randParam(r, 1.0/3, "b", M))
				fused, err := Build(m, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				plain, err := Build(m, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				plain.noFuse = true
				x := nntRand(r, c.x, -3, 3)
				got, err := fused.Forward(nil, x)
				if err != nil {
					t.Fatal(err)
				}
				want, err := plain.Forward(nil, x)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(fused.last.steps[0].node.op, "QuickGelu") {
					t.Fatalf("fused plan's first step is %s, want the Conv with its SiLU", fused.last.steps[0].node.op)
				}
				for i, v := range got[0].F {
					if math.Float32bits(v) != math.Float32bits(want[0].F[i]) {
						t.Fatalf("y[%d] = %v fused, %v unfused", i, v, want[0].F[i])
					}
				}
			})
		}
	}
}

// TestFuseDepthwiseGAP: a depthwise Conv whose output a GlobalAveragePool reads (beside
// the Mul of a squeeze-excitation block) takes the pool into its step, and the fused plan
// gives bit for bit the unfused one's outputs: planes the padded-plane path makes (the
// mean taken as each plane is made) and small "same" planes (the means after), on 1–3
// workers. A pool of a non-depthwise Conv, or of a Conv without its activation, stays
// apart.
func TestFuseDepthwiseGAP(t *testing.T) {
	se := func(act string, group int64) []*onnxpb.NodeProto {
		nodes := []*onnxpb.NodeProto{gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("pads", 1, 1, 1, 1), attrI("group", group))}
		a := "c"
		if act != "" {
			nodes = append(nodes, gNode(act, []string{"c"}, []string{"a"}))
			a = "a"
		}
		return append(nodes,
			gNode("GlobalAveragePool", []string{a}, []string{"g"}),
			gNode("Sigmoid", []string{"g"}, []string{"s"}),
			gNode("Mul", []string{a, "s"}, []string{"y"}))
	}
	cases := []struct {
		name   string
		x      []int
		act    string
		group  int64
		fused  bool
		wantOp string
	}{
		{"padded_planes_relu", []int{2, 24, 20, 20}, "Relu", 24, true, "Conv+Relu+GlobalAveragePool"},
		// A Conv whose own output has two readers does not fuse at all.
		{"padded_planes_no_act", []int{2, 24, 20, 20}, "", 24, false, "Conv"},
		{"small_planes_hardswish", []int{3, 16, 7, 7}, "HardSwish", 16, true, "Conv+HardSwish+GlobalAveragePool"},
		{"dense", []int{2, 8, 10, 10}, "Relu", 1, false, "Conv+Relu"},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(31, uint64(workers)))
				C := int64(c.x[1])
				m := gModel(14, se(c.act, c.group), []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, int64(c.x[0]), C, int64(c.x[2]), int64(c.x[3]))}, []string{"y", "g"},
					randParam(r, 1.0/3, "w", C, C/c.group, 3, 3), randParam(r, 1.0/3, "b", C))
				fused, err := Build(m, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				plain, err := Build(m, Options{Workers: workers})
				if err != nil {
					t.Fatal(err)
				}
				plain.noFuse = true
				for run := range 2 {
					x := nntRand(r, c.x, -2, 2)
					got, err := fused.Forward(nil, x)
					if err != nil {
						t.Fatal(err)
					}
					want, err := plain.Forward(nil, x)
					if err != nil {
						t.Fatal(err)
					}
					for o := range got {
						for i, v := range got[o].F {
							if math.Float32bits(v) != math.Float32bits(want[o].F[i]) {
								t.Fatalf("run %d, output %d [%d] = %v fused, %v unfused", run, o, i, v, want[o].F[i])
							}
						}
					}
				}
				if op := fused.last.steps[0].node.op; op != c.wantOp {
					t.Errorf("fused plan's first step is %s, want %s", op, c.wantOp)
				}
			})
		}
	}
}
