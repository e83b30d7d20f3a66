//go:build cgo

package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// cacheNet is a chain of Conv → Relu from an 8×8 plane down to 1×1, the shapes of
// ResNet's stages on small inputs: a 3×3 convolution of the 8×8 plane (the direct path,
// whose packed weights are kept), stride-2 ones down to 2×2, one from 2×2 to 1×1 whose
// first row and column of taps read only padding, and a 3×3 "same" one of the 1×1 plane,
// which trims to a 1×1 convolution.
func cacheNet(weights map[string][]float32) (*onnxio.Model, []byte, error) {
	type layer struct {
		name            string
		cin, cout, s, k int
	}
	layers := []layer{{"c8", 8, 16, 1, 3}, {"c4", 16, 16, 2, 3}, {"c2", 16, 24, 2, 3}, {"c1", 24, 32, 2, 3}, {"same1", 32, 32, 1, 3}}
	var nodes []*onnxpb.NodeProto
	var inits []*onnxpb.TensorProto
	prev := "x"
	for _, l := range layers {
		w, b := l.name+".w", l.name+".b"
		inits = append(inits,
			onnxio.FloatTensor(w, []int64{int64(l.cout), int64(l.cin), int64(l.k), int64(l.k)}, weights[w]),
			onnxio.FloatTensor(b, []int64{int64(l.cout)}, weights[b]))
		nodes = append(nodes,
			gNode("Conv", []string{prev, w, b}, []string{l.name}, attrInts("pads", 1, 1, 1, 1), attrInts("strides", int64(l.s), int64(l.s))),
			gNode("Relu", []string{l.name}, []string{l.name + ".r"}))
		prev = l.name + ".r"
	}
	m := gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 8, 8, 8)}, []string{prev}, inits...)
	m.Proto.Graph.Output[0].Type = gInputAny(prev, onnxpb.TensorProto_FLOAT).Type
	b, err := proto.Marshal(m.Proto)
	return m, b, err
}

// convKeeps sums, over the graph's Conv kernels, how often packed weights and trimmed
// weights were made.
func convKeeps(g *Graph) (packs, trims int) {
	for i := range g.nodes {
		if k, ok := g.nodes[i].k.(*convKernel); ok {
			packs += k.direct.packs
			trims += k.trim.trims
		}
	}
	return packs, trims
}

// TestConvKeptWeightsAgainstOnnxruntime checks that weights kept between runs (packed for
// the direct path, trimmed of taps that read only padding) give onnxruntime's outputs, are
// really kept (no packing or trimming on a second run), and are remade after an in-place
// change announced with Param.Changed, again matching onnxruntime on the changed model.
// An unannounced change is, as documented, not seen: the negative control that the kept
// forms are what runs.
func TestConvKeptWeightsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(16, 3))
	weights := map[string][]float32{}
	shapes := map[string]int{"c8.w": 16 * 8 * 9, "c4.w": 16 * 16 * 9, "c2.w": 24 * 16 * 9, "c1.w": 32 * 24 * 9, "same1.w": 32 * 32 * 9,
		"c8.b": 16, "c4.b": 16, "c2.b": 24, "c1.b": 32, "same1.b": 32}
	for name, n := range shapes {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.3)
		}
		weights[name] = w
	}
	x := NewFloat([]int{2, 8, 8, 8}, make([]float32, 2*8*8*8))
	for i := range x.F {
		x.F[i] = float32(r.NormFloat64())
	}
	m, _, err := cacheNet(weights)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(m, Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		_, b, err := cacheNet(weights)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: []int64{2, 8, 8, 8}, Data: x.F}})
		if err != nil {
			t.Fatalf("onnxruntime: %v", err)
		}
		got, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		// Sums of at most 288 products of values of order 1, in other orders.
		if err := closeTensors(got[0], NewFloat([]int{2, 32, 1, 1}, ref[0].Data), 1e-4, 1e-4); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	check("first run")
	packs, trims := convKeeps(g)
	if trims != 2 {
		t.Errorf("first run trimmed %d weights, want 2 (c1 and same1)", trims)
	}
	if convTileOK() && packs == 0 {
		t.Errorf("first run packed no weights for the direct path")
	}
	check("second run")
	if p2, t2 := convKeeps(g); p2 != packs || t2 != trims {
		t.Errorf("second run packed %d and trimmed %d times more, want 0: the kept forms were not used", p2-packs, t2-trims)
	}
	// Change every weight in place, announce it, and compare with the changed model.
	for _, name := range []string{"c8.w", "same1.w", "c1.w"} {
		p := g.Param(name)
		for i := range p.Value.F {
			p.Value.F[i] = -0.5 * p.Value.F[i]
		}
		copy(weights[name], p.Value.F)
		p.Changed()
	}
	check("after Changed")
	if p3, t3 := convKeeps(g); t3 != trims+2 || (convTileOK() && p3 == packs) {
		t.Errorf("after Changed: %d packs and %d trims more, want some packs and 2 trims", p3-packs, t3-trims)
	}
	// The same change unannounced: the engine keeps computing with the forms it kept.
	before, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	stale := append([]float32(nil), before[0].F...)
	p := g.Param("same1.w")
	for i := range p.Value.F {
		p.Value.F[i] *= 2
	}
	after, err := g.Forward(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after[0].F) != fmt.Sprint(stale) {
		t.Errorf("an unannounced change of a trimmed weight changed the output: the trimmed form is not what runs")
	}
	copy(weights["same1.w"], p.Value.F)
	p.Changed()
	check("after the late Changed")
}
