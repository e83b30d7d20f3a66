package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// hardSwishPairs is Conv → hardswish as PyTorch writes it below opset 14 (HardSigmoid with
// alpha 1/6, beta 1/2, then Mul by its input, in both operand orders), twice, then a
// HardSigmoid of the spec's default line times its input and a squeeze-excitation gate
// (HardSigmoid of a pool times the tensor): the last two are not hardswish and must stay.
// sixth is the pairs' alpha; extra names values to list as graph outputs as well.
func hardSwishPairs(sixth float32, extra ...string) *onnxio.Model {
	r := rand.New(rand.NewPCG(3, 14))
	param := func(name string, dims ...int64) *onnxpb.TensorProto { return randParam(r, 1.5, name, dims...) }
	alpha := attrF("alpha", sixth)
	half := attrF("beta", 0.5)
	pad1 := attrInts("pads", 1, 1, 1, 1)
	nodes := []*onnxpb.NodeProto{
		gNode("Conv", []string{"x", "w1", "b1"}, []string{"c1"}, pad1),
		gNode("HardSigmoid", []string{"c1"}, []string{"h1"}, alpha, half),
		gNode("Mul", []string{"c1", "h1"}, []string{"y1"}),
		gNode("Conv", []string{"y1", "w2"}, []string{"c2"}, pad1),
		gNode("HardSigmoid", []string{"c2"}, []string{"h2"}, alpha, half),
		gNode("Mul", []string{"h2", "c2"}, []string{"y2"}),
		gNode("HardSigmoid", []string{"y2"}, []string{"h3"}),
		gNode("Mul", []string{"y2", "h3"}, []string{"y3"}),
		gNode("GlobalAveragePool", []string{"y3"}, []string{"p"}),
		gNode("HardSigmoid", []string{"p"}, []string{"hp"}, alpha, half),
		gNode("Mul", []string{"y3", "hp"}, []string{"y"}),
	}
	return gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 3, 9, 9)}, append([]string{"y"}, extra...),
		param("w1", 6, 3, 3, 3), param("b1", 6), param("w2", 6, 6, 3, 3))
}

func graphOps(g *Graph) map[string]int {
	ops := map[string]int{}
	for _, gn := range g.nodes {
		ops[gn.op]++
	}
	return ops
}

// TestHardSwishPairFused: the two hardswish pairs run as HardSwish nodes and the other
// HardSigmoid → Mul pairs stay; listing a HardSigmoid's output as a graph output keeps
// its pair apart (the negative control). The fused graph computes the unfused one's
// output bit for bit (onnxruntime: rewrite_ort_test.go); its gradients are the unfused
// graph's within rounding; and its training plan holds less memory than that of the same
// graph with alpha one ulp off 1/6: the HardSigmoid outputs it no longer keeps.
func TestHardSwishPairFused(t *testing.T) {
	fused := mustBuild(t, hardSwishPairs(1.0/6))
	plain := mustBuild(t, hardSwishPairs(1.0/6, "h1", "h2"))
	if ops := graphOps(fused); ops["HardSwish"] != 2 || ops["HardSigmoid"] != 2 || ops["Mul"] != 2 {
		t.Fatalf("fused graph runs %v: want the two hardswish pairs as HardSwish, the other pairs kept", ops)
	}
	if ops := graphOps(plain); ops["HardSwish"] != 0 || ops["HardSigmoid"] != 4 {
		t.Fatalf("graph with h1 and h2 as outputs runs %v: want no HardSwish", ops)
	}
	// Both orders and the exact ends of the line: -3 and 3 put the HardSigmoid at 0 and 1.
	x := nntRand(rand.New(rand.NewPCG(5, 5)), []int{4, 3, 9, 9}, -4, 4)
	x.F[0], x.F[1], x.F[2] = -3, 3, float32(math.Inf(1))
	for _, noFuse := range []bool{true, false} {
		fused.noFuse, plain.noFuse = noFuse, noFuse
		got, err := fused.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		if !noFuse {
			// Conv+HardSwish now fuse into the convolution, whose sum may run in another
			// order than the separate Conv's.
			if err := closeTensors(got[0], want[0], 1e-5, 1e-5); err != nil {
				t.Errorf("with plan fusion: %v", err)
			}
			continue
		}
		for i := range want[0].F {
			if a, b := got[0].F[i], want[0].F[i]; math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
				t.Fatalf("y[%d]: fused %v, unfused %v: want the same bits", i, a, b)
			}
		}
	}

	// Gradients: away from ±3 the two graphs differ only in rounding.
	x = nntRand(rand.New(rand.NewPCG(6, 6)), []int{2, 3, 9, 9}, -4, 4)
	sameTraining(t, fused, plain, x, "w1", "b1", "w2")

	// Memory against the same graph with alpha one ulp off 1/6, which is not hardswish:
	// the same plan but for the two HardSigmoid outputs kept for the backward pass.
	near := mustBuild(t, hardSwishPairs(math.Nextafter32(1.0/6, 1)))
	if ops := graphOps(near); ops["HardSwish"] != 0 {
		t.Fatalf("alpha one ulp off 1/6: graph runs %v, want no HardSwish", ops)
	}
	if err := near.SetTrainable("w1", "b1", "w2"); err != nil {
		t.Fatal(err)
	}
	fb, err := fused.PlanBytes(&Context{Training: true}, x)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := near.PlanBytes(&Context{Training: true}, x)
	if err != nil {
		t.Fatal(err)
	}
	if act := int64(2 * 6 * 9 * 9 * 4); fb > nb-2*act {
		t.Errorf("training plans hold %d bytes fused, %d unfused: want at least %d less", fb, nb, 2*act)
	}
}

// layerNormPattern is layer normalisation over the last axis as PyTorch 1.13 exports
// nn.LayerNorm at opset 13 (exponent and ε in Constant nodes), twice in a row with a Relu
// between, γ of the second an Identity of a parameter as the exporter writes shared
// weights. epsInit stores the first ε as an initializer instead; extra names values to
// list as graph outputs as well.
func layerNormPattern(epsInit bool, extra ...string) *onnxio.Model {
	r := rand.New(rand.NewPCG(9, 9))
	const D = 12
	nodes := []*onnxpb.NodeProto{
		gNode("Constant", nil, []string{"two"}, attrT("value", onnxio.FloatTensor("", nil, []float32{2}))),
		gNode("Identity", []string{"g1"}, []string{"g2"}),
	}
	var inits []*onnxpb.TensorProto
	if epsInit {
		inits = append(inits, onnxio.FloatTensor("eps1", nil, []float32{1e-5}))
	} else {
		nodes = append(nodes, gNode("Constant", nil, []string{"eps1"}, attrT("value", onnxio.FloatTensor("", nil, []float32{1e-5}))))
	}
	nodes = append(nodes, gNode("Constant", nil, []string{"eps2"}, attrT("value", onnxio.FloatTensor("", nil, []float32{1e-6}))))
	ln := func(x, p, g, b, y string) {
		nodes = append(nodes,
			gNode("ReduceMean", []string{x}, []string{p + "m"}, attrInts("axes", -1)),
			gNode("Sub", []string{x, p + "m"}, []string{p + "d"}),
			gNode("Pow", []string{p + "d", "two"}, []string{p + "p"}),
			gNode("ReduceMean", []string{p + "p"}, []string{p + "v"}, attrInts("axes", -1)),
			gNode("Add", []string{p + "v", "eps" + p[1:]}, []string{p + "ve"}),
			gNode("Sqrt", []string{p + "ve"}, []string{p + "s"}),
			gNode("Div", []string{p + "d", p + "s"}, []string{p + "n"}),
			gNode("Mul", []string{p + "n", g}, []string{p + "g"}),
			gNode("Add", []string{p + "g", b}, []string{y}))
	}
	ln("x", "l1", "g1", "b1", "y1")
	nodes = append(nodes, gNode("Relu", []string{"y1"}, []string{"r1"}))
	ln("r1", "l2", "g2", "b2", "y")
	inits = append(inits, randParam(r, 1, "g1", D), randParam(r, 1, "b1", D), randParam(r, 1, "b2", D))
	return gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 5, D)}, append([]string{"y"}, extra...), inits...)
}

// TestLayerNormPatternFused: both layer normalisations run as LayerNormalization; with ε
// in an initializer the first stays apart, and with a centred value listed as a graph
// output the second does (the negative controls). The fused graph computes the unfused
// one's output and gradients within float rounding (onnxruntime: rewrite_ort_test.go).
func TestLayerNormPatternFused(t *testing.T) {
	fused := mustBuild(t, layerNormPattern(false))
	if ops := graphOps(fused); ops["LayerNormalization"] != 2 || ops["ReduceMean"] != 0 || ops["Pow"] != 0 {
		t.Fatalf("graph runs %v: want both patterns as LayerNormalization", ops)
	}
	if ops := graphOps(mustBuild(t, layerNormPattern(true))); ops["LayerNormalization"] != 1 || ops["ReduceMean"] != 2 {
		t.Fatalf("ε in an initializer: graph runs %v, want the first pattern kept apart", ops)
	}
	plain := mustBuild(t, layerNormPattern(false, "l1d", "l2d"))
	if ops := graphOps(plain); ops["LayerNormalization"] != 0 {
		t.Fatalf("centred values as outputs: graph runs %v, want no LayerNormalization", ops)
	}
	x := nntRand(rand.New(rand.NewPCG(4, 4)), []int{3, 5, 12}, -3, 5)
	sameTraining(t, fused, plain, x, "g1", "b1", "b2")
}

// sameTraining trains the named parameters of a rewritten graph and of the same graph
// left apart (whose extra outputs get zero gradients) through one training-mode forward
// and backward pass on x, and checks that the first output and the gradients agree within
// float rounding.
func sameTraining(t *testing.T, fused, plain *Graph, x *Tensor, params ...string) {
	t.Helper()
	got := map[*Graph][][]float32{}
	for _, g := range []*Graph{fused, plain} {
		if err := g.SetTrainable(params...); err != nil {
			t.Fatal(err)
		}
		ctx := &Context{Training: true}
		outs, err := g.Forward(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		vals := [][]float32{slices.Clone(outs[0].F)}
		gy := make([]*Tensor, len(outs))
		gy[0] = nntRand(rand.New(rand.NewPCG(8, 8)), outs[0].Shape, -1, 1)
		for i := 1; i < len(outs); i++ {
			gy[i] = NewFloat(slices.Clone(outs[i].Shape), make([]float32, outs[i].Len()))
		}
		if err := g.Backward(ctx, gy...); err != nil {
			t.Fatal(err)
		}
		for _, p := range params {
			vals = append(vals, slices.Clone(g.Param(p).Grad.F))
		}
		got[g] = vals
	}
	for i, what := range append([]string{"output"}, params...) {
		f, p := got[fused][i], got[plain][i]
		if i > 0 {
			what = "d/d" + what
		}
		if err := closeTensors(NewFloat([]int{len(f)}, f), NewFloat([]int{len(p)}, p), 1e-5, 1e-4); err != nil {
			t.Errorf("%s: rewritten against unrewritten: %v", what, err)
		}
	}
}
