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
	grads := map[string][]float32{}
	for name, g := range map[string]*Graph{"fused": fused, "plain": plain} {
		if err := g.SetTrainable("w1", "b1", "w2"); err != nil {
			t.Fatal(err)
		}
		ctx := &Context{Training: true}
		outs, err := g.Forward(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		gy := make([]*Tensor, len(outs))
		gy[0] = nntRand(rand.New(rand.NewPCG(7, 7)), outs[0].Shape, -1, 1)
		for i := 1; i < len(outs); i++ {
			gy[i] = NewFloat(slices.Clone(outs[i].Shape), make([]float32, outs[i].Len()))
		}
		if err := g.Backward(ctx, gy...); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"w1", "b1", "w2"} {
			grads[name+p] = slices.Clone(g.Param(p).Grad.F)
		}
	}
	for _, p := range []string{"w1", "b1", "w2"} {
		if err := closeTensors(NewFloat([]int{len(grads["fused"+p])}, grads["fused"+p]), NewFloat([]int{len(grads["plain"+p])}, grads["plain"+p]), 1e-5, 1e-4); err != nil {
			t.Errorf("d/d%s: fused against unfused: %v", p, err)
		}
	}

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
