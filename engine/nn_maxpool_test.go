package engine

import (
	"math"
	"testing"
)

// TestMaxPoolRowsFastTakes checks that the 3×3 stride-2 pools of ResNet (padding 1) and
// SqueezeNet (no padding, ceil mode) take the assembly form of maxPoolRows on CPUs with
// AVX-512, or AVX2 and FMA (GODEBUG=cpu.avx512f=off), so that TestMaxPoolRows, which
// compares maxPoolRows with poolMaxValues bit for bit, tests it there; and that it
// leaves other windows to the Go loops.
func TestMaxPoolRowsFastTakes(t *testing.T) {
	if !convDirectOK() { // AVX-512, or AVX2 and FMA
		t.Skip("no AVX-512 or AVX2 on this CPU (or a purego build): maxPoolRows runs in Go only, which TestMaxPoolRows tests")
	}
	for _, c := range []struct {
		H, W, k, s, pb, pe int
		want               bool
	}{
		{112, 112, 3, 2, 1, 1, true},
		{111, 111, 3, 2, 0, 1, true},
		{13, 13, 3, 2, 0, 0, true},
		{12, 12, 2, 2, 0, 0, false},
		{12, 12, 3, 1, 1, 1, false},
	} {
		oh, ow := (c.H+c.pb+c.pe-c.k)/c.s+1, (c.W+c.pb+c.pe-c.k)/c.s+1
		g := nnGeom{nd: 2, in: [nnMaxSpatial]int{1, c.H, c.W}, out: [nnMaxSpatial]int{1, oh, ow}, k: [nnMaxSpatial]int{1, c.k, c.k},
			s: [nnMaxSpatial]int{1, c.s, c.s}, d: [nnMaxSpatial]int{1, 1, 1}, pb: [nnMaxSpatial]int{0, c.pb, c.pb}, pe: [nnMaxSpatial]int{0, c.pe, c.pe}}
		var tab poolTables
		tab.fill(&g)
		x := make([]float32, c.H*c.W)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)))
		}
		want, got := make([]float32, oh*ow), make([]float32, oh*ow)
		ok := maxPoolRowsFast(&g, &tab, x, got, 0, g.out[1], 0)
		if ok != c.want {
			t.Fatalf("%+v: maxPoolRowsFast = %v, want %v", c, ok, c.want)
		}
		if !ok {
			continue
		}
		poolMaxValues(&g, &tab, x, want, float32(math.Inf(-1)))
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: y[%d] = %v, want %v", c, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkMaxPoolRows3s2 times ResNet-18's stem pool (3×3, stride 2, padding 1, on a
// 112×112 plane) in Go and, where the CPU has it, in AVX-512, one after the other:
//
//	go test ./engine -run '^$' -bench MaxPoolRows3s2
func BenchmarkMaxPoolRows3s2(b *testing.B) {
	g := nnGeom{nd: 2, in: [nnMaxSpatial]int{1, 112, 112}, out: [nnMaxSpatial]int{1, 56, 56}, k: [nnMaxSpatial]int{1, 3, 3},
		s: [nnMaxSpatial]int{1, 2, 2}, d: [nnMaxSpatial]int{1, 1, 1}, pb: [nnMaxSpatial]int{0, 1, 1}, pe: [nnMaxSpatial]int{0, 1, 1}}
	var tab poolTables
	tab.fill(&g)
	x, y := make([]float32, 112*112), make([]float32, 56*56)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			maxPoolRowsGo(&g, &tab, x, y, 0, g.out[1], 0)
		}
	})
	b.Run("avx512", func(b *testing.B) {
		if !convTileOK() {
			b.Skip("no AVX-512")
		}
		for b.Loop() {
			maxPoolRowsFast(&g, &tab, x, y, 0, g.out[1], 0)
		}
	})
}
