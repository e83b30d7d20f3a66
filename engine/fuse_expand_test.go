package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	onnxpb "github.com/qtool/qtool/onnxio/onnxpb"
)

// TestFuseExpandDW: a pointwise Conv whose output only a depthwise Conv reads (an
// inverted residual block's expansion) runs in one step with it, and the fused plan gives
// bit for bit the outputs of the plan that runs the two steps apart (each with its own
// activation and BatchNormalization fused as usual): 3×3 same-size planes, padded planes
// at unit stride and at stride 2, 5×5 windows, Clip, Relu, HardSwish and SiLU, folded
// BatchNormalizations, a GlobalAveragePool of the depthwise output, channel counts that
// are not whole row blocks, on 1–3 workers. Planes above a bound run in bands of output
// rows (all the MobileNetV2 and EfficientNet-B0 pairs at 112 × 112); the bands are checked
// at the real bound and, with it lowered, at smaller sizes with bands of a few rows: the
// first and last with rows of padding, odd heights, stride 2, 5×5 windows, SiLU; pairs
// whose planes' means are taken (a squeeze-excitation) stay apart above the bound. Against the unfused plan with no fusion at all (a different summation only
// where BatchNormalization is folded) the outputs agree to float rounding. Negative
// controls: an expansion with a second reader, and planes outside the sizes the fusion
// takes (14 × 14, 66 × 66), and batches smaller than the worker count, stay unfused.
func TestFuseExpandDW(t *testing.T) {
	type block struct {
		name            string
		x               []int // N, C, H, W
		M, K, stride    int
		act             string // Clip, Relu, HardSwish, SiLU
		bn, gap, shared bool
		wantFused       bool
		// bandAbove and bandRows set the graph's band bounds; banded says the pair
		// must run in bands.
		bandAbove, bandRows int
		banded              bool
	}
	cases := []block{
		{name: "3x3_same_clip", x: []int{2, 8, 16, 16}, M: 40, K: 3, stride: 1, act: "Clip", wantFused: true},
		{name: "3x3_padded_relu", x: []int{3, 6, 20, 20}, M: 36, K: 3, stride: 1, act: "Relu", wantFused: true},
		{name: "3x3_stride2_clip_bn", x: []int{2, 8, 21, 21}, M: 48, K: 3, stride: 2, act: "Clip", bn: true, wantFused: true},
		{name: "5x5_stride2_hardswish", x: []int{1, 16, 28, 28}, M: 72, K: 5, stride: 2, act: "HardSwish", wantFused: true},
		{name: "5x5_silu_gap", x: []int{2, 8, 16, 16}, M: 24, K: 5, stride: 1, act: "SiLU", gap: true, wantFused: true},
		{name: "3x3_relu_bn_gap", x: []int{1, 8, 16, 16}, M: 32, K: 3, stride: 1, act: "Relu", bn: true, gap: true, wantFused: true},
		{name: "large_plane", x: []int{2, 4, 64, 64}, M: 24, K: 3, stride: 2, act: "Clip", wantFused: true},
		{name: "shared_expansion", x: []int{2, 8, 16, 16}, M: 16, K: 3, stride: 1, act: "Clip", shared: true},
		{name: "small_planes", x: []int{4, 8, 14, 14}, M: 16, K: 3, stride: 1, act: "Clip"},
		{name: "larger_planes_banded", x: []int{1, 4, 66, 66}, M: 8, K: 3, stride: 2, act: "Relu", wantFused: true, banded: true},
		{name: "band_112_stride2_clip", x: []int{2, 16, 112, 112}, M: 24, K: 3, stride: 2, act: "Clip", wantFused: true, banded: true},
		{name: "band_112_stride2_silu_bn", x: []int{2, 16, 112, 112}, M: 16, K: 3, stride: 2, act: "SiLU", bn: true, wantFused: true, banded: true},
		// A squeeze-excitation's means of the depthwise planes keep large planes apart.
		{name: "band_112_stride2_silu_gap", x: []int{2, 16, 112, 112}, M: 16, K: 3, stride: 2, act: "SiLU", gap: true},
		{name: "band_rows3_stride2_odd", x: []int{3, 8, 41, 37}, M: 24, K: 3, stride: 2, act: "Clip", bn: true, bandAbove: 256, bandRows: 3, wantFused: true, banded: true},
		{name: "band_rows4_5x5_silu", x: []int{2, 8, 30, 27}, M: 20, K: 5, stride: 1, act: "SiLU", bandAbove: 256, bandRows: 4, wantFused: true, banded: true},
		{name: "band_rows4_5x5_silu_gap", x: []int{2, 8, 30, 27}, M: 20, K: 5, stride: 1, act: "SiLU", gap: true, bandAbove: 256, bandRows: 4},
		{name: "band_rows7_5x5_stride2_hardswish", x: []int{2, 8, 33, 30}, M: 16, K: 5, stride: 2, act: "HardSwish", bandAbove: 256, bandRows: 7, wantFused: true, banded: true},
		{name: "band_rows1_relu_bn", x: []int{2, 8, 24, 40}, M: 8, K: 3, stride: 1, act: "Relu", bn: true, bandAbove: 256, bandRows: 1, wantFused: true, banded: true},
		{name: "band_one_band", x: []int{2, 8, 24, 40}, M: 8, K: 3, stride: 1, act: "Relu", bandAbove: 256, bandRows: 100, wantFused: true, banded: true},
		// 3×3 "same" planes of at most 16 columns take dw3x3Planes, which makes whole
		// planes: above the bound they stay apart where that kernel runs.
		{name: "band_3x3_narrow_rows", x: []int{2, 8, 40, 16}, M: 16, K: 3, stride: 1, act: "Clip", bandAbove: 256, bandRows: 4, wantFused: !dw3x3Fast(16), banded: !dw3x3Fast(16)},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(41, uint64(workers)))
				m := expandDWModel(r, c.x, c.M, c.K, c.stride, c.act, c.bn, c.gap, c.shared)
				fused := fusedAgainstApart(t, m, c.x, workers, c.bandAbove, c.bandRows, r)
				// Without the assembly kernels (purego) nothing fuses: the pair would
				// take other paths.
				wantFused := c.wantFused && convDirectOK() && dwPlaneFast() && c.x[0] >= workers
				if n := fused.last.expandDW; (n == 1) != wantFused || n > 1 {
					t.Errorf("%d pointwise and depthwise pairs fused, want fused %v", n, wantFused)
				}
				if banded, wantBands := bandedRuns(fused), wantFused && c.banded; (banded > 0) != wantBands {
					t.Errorf("%d runs in bands, want bands %v", banded, wantBands)
				}
			})
		}
	}
}

// expandDWModel is an inverted residual block's first two layers: a 1×1 Conv from x's C
// channels to M, its activation, then a K×K depthwise Conv ("same" padding, the stride
// given) and its activation; with bn, each Conv is followed by a BatchNormalization;
// with gap, a squeeze-excitation's GlobalAveragePool reads the depthwise output beside
// the graph's output, and is an output too; with shared, the expansion is an output as
// well (a second reader).
func expandDWModel(r *rand.Rand, x []int, M, K, stride int, act string, bn, gap, shared bool) *onnxio.Model {
	var nodes []*onnxpb.NodeProto
	inits := []*onnxpb.TensorProto{
		randParam(r, 1.0/3, "we", int64(M), int64(x[1]), 1, 1), randParam(r, 1.0/3, "be", int64(M)),
		randParam(r, 1.0/3, "wd", int64(M), 1, int64(K), int64(K)), randParam(r, 1.0/3, "bd", int64(M)),
		onnxio.FloatTensor("lo", nil, []float32{0}), onnxio.FloatTensor("hi", nil, []float32{6}),
	}
	activate := func(in, out string) {
		switch act {
		case "Clip":
			nodes = append(nodes, gNode("Clip", []string{in, "lo", "hi"}, []string{out}))
		case "SiLU":
			nodes = append(nodes, gNode("Sigmoid", []string{in}, []string{out + "_s"}), gNode("Mul", []string{in, out + "_s"}, []string{out}))
		default:
			nodes = append(nodes, gNode(act, []string{in}, []string{out}))
		}
	}
	conv := func(in, w, b, out string, attrs ...*onnxpb.AttributeProto) {
		if !bn {
			nodes = append(nodes, gNode("Conv", []string{in, w, b}, []string{out}, attrs...))
			return
		}
		nodes = append(nodes, gNode("Conv", []string{in, w, b}, []string{out + "_c"}, attrs...),
			gNode("BatchNormalization", []string{out + "_c", out + "_s", out + "_b", out + "_m", out + "_v"}, []string{out}))
		v := make([]float32, M)
		for i := range v {
			v[i] = 0.5 + r.Float32()
		}
		inits = append(inits, randParam(r, 1, out+"_s", int64(M)), randParam(r, 0.5, out+"_b", int64(M)),
			randParam(r, 0.5, out+"_m", int64(M)), onnxio.FloatTensor(out+"_v", []int64{int64(M)}, v))
	}
	conv("x", "we", "be", "e")
	activate("e", "ea")
	p := int64(K / 2)
	conv("ea", "wd", "bd", "d", attrInts("pads", p, p, p, p), attrI("group", int64(M)), attrInts("strides", int64(stride), int64(stride)))
	activate("d", "y")
	outs := []string{"y"}
	if gap {
		nodes = append(nodes, gNode("GlobalAveragePool", []string{"y"}, []string{"g"}))
		outs = append(outs, "g")
	}
	if shared {
		outs = append(outs, "ea")
	}
	return gModel(14, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, int64(x[0]), int64(x[1]), int64(x[2]), int64(x[3]))}, outs, inits...)
}

// TestFuseExpandDWApart: a fused pair whose Clip bound turns NaN after planning (a
// parameter written in place) cannot keep the activation in the tile kernel; the step then
// runs the two convolutions one after the other, an image at a time, and gives bit for bit
// what the plan with the steps apart gives under the same bounds, NaN lanes included.
func TestFuseExpandDWApart(t *testing.T) {
	if !convDirectOK() || !dwPlaneFast() {
		t.Skip("no fusion without the assembly kernels")
	}
	r := rand.New(rand.NewPCG(47, 1))
	x := []int{3, 8, 20, 20}
	m := expandDWModel(r, x, 24, 3, 2, "Clip", true, true, false)
	nanAgainstApart(t, m, x, r, func(g *Graph, apart bool) { g.noExpandDW = apart }, func(p *plan) int { return p.expandDW })
}

// nanAgainstApart runs m (its Clip's upper bound the parameter "hi") fused and apart
// (set(g, true) turns the fusion under test off) on two workers, with hi 6, NaN, then 6
// again on the same input of shape x, and fails t unless the fused plan's outputs are bit
// for bit the other's on every run and fused(p), what the fused plan joined, is 1.
func nanAgainstApart(t *testing.T, m *onnxio.Model, x []int, r *rand.Rand, set func(g *Graph, apart bool), fused func(p *plan) int) {
	t.Helper()
	build := func(apart bool) *Graph {
		g, err := Build(m, Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		set(g, apart)
		return g
	}
	f, apart := build(false), build(true)
	in := nntRand(r, x, -2, 2)
	for run, hi := range []float32{6, float32(math.NaN()), 6} {
		for _, g := range []*Graph{f, apart} {
			g.Param("hi").Value.F[0] = hi
			g.ParamsChanged()
		}
		got, err := f.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := apart.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if n := fused(f.last); n != 1 {
			t.Fatalf("run %d: %d steps joined, want 1", run, n)
		}
		for o := range got {
			for i, v := range got[o].F {
				if math.Float32bits(v) != math.Float32bits(want[o].F[i]) {
					t.Fatalf("run %d (hi %v), output %d [%d] = %v fused, %v apart", run, hi, o, i, v, want[o].F[i])
				}
			}
		}
	}
}

// BenchmarkExpandDW times inverted residual pairs of MobileNetV2 and EfficientNet-B0
// (expansion, its activation, the depthwise Conv and its activation) at batch 32, the
// steps fused and apart, in one process: the measurements behind expandDWMinPlane,
// expandDWMaxPlane and expandDWPlane. Compare the two sub-benchmarks of each pair:
//
//	go test ./engine -run '^$' -bench ExpandDW -benchtime 20x
func BenchmarkExpandDW(b *testing.B) {
	for _, s := range []struct {
		C, M, HW, K, S int
		act            string
		gap            bool // the depthwise output's means too, as a squeeze-excitation's
	}{
		{16, 96, 112, 3, 2, "Clip", false}, {24, 144, 56, 3, 1, "Clip", false}, {24, 144, 56, 3, 2, "Clip", false},
		{32, 192, 28, 3, 1, "Clip", false}, {32, 192, 28, 3, 2, "Clip", false}, {96, 576, 14, 3, 1, "Clip", false},
		{24, 144, 56, 5, 2, "SiLU", false}, {40, 240, 28, 3, 2, "SiLU", false}, {16, 96, 112, 3, 2, "SiLU", true},
	} {
		for _, fused := range []bool{true, false} {
			act := s.act
			if s.gap {
				act += "_gap"
			}
			name := fmt.Sprintf("%dto%d@%d_k%ds%d_%s/apart", s.C, s.M, s.HW, s.K, s.S, act)
			if fused {
				name = name[:len(name)-len("apart")] + "fused"
			}
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				x := []int{32, s.C, s.HW, s.HW}
				g, err := Build(expandDWModel(r, x, s.M, s.K, s.S, s.act, false, s.gap, false), Options{Workers: 2})
				if err != nil {
					b.Fatal(err)
				}
				g.noExpandDW = !fused
				in := nntRand(r, x, -2, 2)
				if _, err := g.Forward(nil, in); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := g.Forward(nil, in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(g.last.expandDW), "fused-pairs")
			})
		}
	}
}

// fusedAgainstApart runs fusedAgainst with the pointwise and depthwise steps apart in
// the plan compared with, and the band bounds given, and checks that plan joined none.
func fusedAgainstApart(t *testing.T, m *onnxio.Model, x []int, workers, bandAbove, bandRows int, r *rand.Rand) *Graph {
	t.Helper()
	fused, apart := fusedAgainst(t, m, x, workers, r, func(g *Graph, apart bool) {
		g.noExpandDW = apart
		g.expandBandAbove, g.expandBandRows = bandAbove, bandRows
	})
	if apart.last.expandDW != 0 || apart.last.project != 0 {
		t.Errorf("the plan with the fusion off fused %d pairs and joined %d projections", apart.last.expandDW, apart.last.project)
	}
	return fused
}

// fusedAgainst builds m three times with the workers given — fused, apart (set(g, true)
// turns the fusion under test off, every other on) and with no fusion at all — runs each
// on the same two random inputs of shape x, and fails t unless the fused plan's outputs
// are bit for bit those of the plan apart and agree with the unfused plan's to float
// rounding. It returns the first two, whose last plans tests inspect.
func fusedAgainst(t *testing.T, m *onnxio.Model, x []int, workers int, r *rand.Rand, set func(g *Graph, apart bool)) (fused, apart *Graph) {
	t.Helper()
	build := func(a, noFuse bool) *Graph {
		g, err := Build(m, Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		g.noFuse = noFuse
		set(g, a)
		return g
	}
	fused, apart = build(false, false), build(true, false)
	plain := build(true, true)
	for run := range 2 {
		in := nntRand(r, x, -2, 2)
		got, err := fused.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := apart.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := plain.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		for o := range got {
			for i, v := range got[o].F {
				if math.Float32bits(v) != math.Float32bits(want[o].F[i]) {
					t.Fatalf("run %d, output %d [%d] = %v fused, %v with the steps apart", run, o, i, v, want[o].F[i])
				}
			}
			if err := closeTensors(got[o], ref[o], 1e-4, 1e-4); err != nil {
				t.Fatalf("run %d, output %d against the unfused plan: %v", run, o, err)
			}
		}
	}
	return fused, apart
}

// bandedRuns counts the runs g's last plan made in bands of rows (runBands).
func bandedRuns(g *Graph) int {
	n := 0
	for _, st := range g.last.steps {
		if k, ok := st.node.k.(*expandDWKernel); ok {
			n += k.banded
		}
	}
	return n
}
