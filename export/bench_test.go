package export

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
)

// benchWeight is a 4096×4096 (16.8M-weight) binary tensor with per-row scales.
func benchWeight() (Grid, []float32, []int64) {
	rng := rand.New(rand.NewPCG(5, 6))
	dims := []int64{4096, 4096}
	g := Grid{Levels: []int{-1, 1}, Axis: 0}
	for range dims[0] {
		g.Scales = append(g.Scales, float32(rng.Float64()))
	}
	codes := make([]uint8, dims[0]*dims[1])
	for i := range codes {
		codes[i] = uint8(rng.IntN(2))
	}
	return g, g.Values(codes, dims), dims
}

// BenchmarkPack16M packs 16.8M 1-bit codes.
func BenchmarkPack16M(b *testing.B) {
	g, vals, dims := benchWeight()
	codes, err := g.Codes(vals, dims)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(codes)))
	for b.Loop() {
		if _, err := Pack(codes, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodes16M derives and checks the codes of 16.8M per-channel ±α values.
func BenchmarkCodes16M(b *testing.B) {
	g, vals, dims := benchWeight()
	b.SetBytes(int64(4 * len(vals)))
	for b.Loop() {
		if _, err := g.Codes(vals, dims); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExportLeavesInputAndIsDeterministic checks that Export does not touch the model
// it is given and that the same request gives the same bytes.
func TestExportLeavesInputAndIsDeterministic(t *testing.T) {
	m := smallNet(3, 9, 1)
	before := proto.Clone(m.Proto)
	rng := rand.New(rand.NewPCG(9, 9))
	var ws []Weight
	for _, name := range []string{"conv.w", "fc.w", "mm.w"} {
		p, _ := m.Param(name)
		n := 1
		for _, d := range p.Tensor.GetDims() {
			n *= int(d)
		}
		g := Grid{Levels: []int{-1, 0, 1}, Scales: []float32{float32(rng.Float64())}}
		codes := make([]uint8, n)
		for i := range codes {
			codes[i] = uint8(rng.IntN(3))
		}
		ws = append(ws, Weight{Name: name, Values: g.Values(codes, p.Tensor.GetDims()), Grid: g})
	}
	var outs [][]byte
	for range 2 {
		q, err := Export(m, ws, Options{Metadata: Metadata{Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := q.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	if !proto.Equal(before, m.Proto) {
		t.Fatal("Export changed its input model")
	}
	if string(outs[0]) != string(outs[1]) {
		t.Fatal("two exports of the same weights differ")
	}
}
