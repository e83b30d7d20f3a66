package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	onnxpb "github.com/qtool/qtool/onnxio/onnxpb"
)

// projectBlock describes an inverted residual block for projectModel: an optional 1×1
// expansion from x's C channels to M (E false: M = C), its activation, a K×K depthwise
// Conv ("same" padding, the stride given) and its activation, then a 1×1 projection to P
// channels with activation pact ("" for none).
type projectBlock struct {
	x            []int // N, C, H, W
	E            bool
	M, K, stride int
	act, pact    string // Clip, Relu, HardSwish, SiLU
	P            int
	bn           bool
	residual     bool // the block's input added to the projection (P = C, stride 1)
	shared       bool // the depthwise output is a graph output too (a second reader)
}

// blockGraph accumulates the nodes and initializers of a test block's graph, with an
// input x and the Clip bounds lo = 0 and hi = 6 ("hi" a parameter tests write).
type blockGraph struct {
	r     *rand.Rand
	bn    bool // each conv followed by a BatchNormalization
	nodes []*onnxpb.NodeProto
	inits []*onnxpb.TensorProto
}

func newBlockGraph(r *rand.Rand, bn bool) *blockGraph {
	return &blockGraph{r: r, bn: bn, inits: []*onnxpb.TensorProto{
		onnxio.FloatTensor("lo", nil, []float32{0}), onnxio.FloatTensor("hi", nil, []float32{6}),
	}}
}

// act applies act (Clip, Relu, HardSwish, SiLU as Sigmoid·x, or "" for none) to in and
// returns its output's name: out, or in for none.
func (g *blockGraph) act(act, in, out string) string {
	switch act {
	case "":
		return in
	case "Clip":
		g.add("Clip", []string{in, "lo", "hi"}, out)
	case "SiLU":
		g.add("Sigmoid", []string{in}, out+"_s")
		g.add("Mul", []string{in, out + "_s"}, out)
	default:
		g.add(act, []string{in}, out)
	}
	return out
}

func (g *blockGraph) add(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) {
	g.nodes = append(g.nodes, gNode(op, in, []string{out}, attrs...))
}

// conv adds a K×K Conv of C input channels a group to M outputs, random weights and
// bias, and with g.bn a BatchNormalization after it; the output is named out.
func (g *blockGraph) conv(in, out string, M, C, K int, attrs ...*onnxpb.AttributeProto) {
	r := g.r
	g.inits = append(g.inits, randParam(r, 1.0/math.Sqrt(float64(C*K*K)), out+"_w", int64(M), int64(C), int64(K), int64(K)), randParam(r, 1.0/3, out+"_b", int64(M)))
	if !g.bn {
		g.add("Conv", []string{in, out + "_w", out + "_b"}, out, attrs...)
		return
	}
	g.add("Conv", []string{in, out + "_w", out + "_b"}, out+"_c", attrs...)
	g.add("BatchNormalization", []string{out + "_c", out + "_s", out + "_sh", out + "_m", out + "_v"}, out)
	v := make([]float32, M)
	for i := range v {
		v[i] = 0.5 + r.Float32()
	}
	g.inits = append(g.inits, randParam(r, 1, out+"_s", int64(M)), randParam(r, 0.5, out+"_sh", int64(M)),
		randParam(r, 0.5, out+"_m", int64(M)), onnxio.FloatTensor(out+"_v", []int64{int64(M)}, v))
}

func (g *blockGraph) model(x []int, outs ...string) *onnxio.Model {
	return gModel(14, g.nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, int64(x[0]), int64(x[1]), int64(x[2]), int64(x[3]))}, outs, g.inits...)
}

// projectModel builds b as an ONNX model: input x, output the projection's (its
// activation's, or the residual sum's), and with shared the depthwise activation's.
func projectModel(r *rand.Rand, b projectBlock) *onnxio.Model {
	g := newBlockGraph(r, b.bn)
	src := "x"
	if b.E {
		g.conv("x", "e", b.M, b.x[1], 1)
		src = g.act(b.act, "e", "ea")
	}
	p := int64(b.K / 2)
	g.conv(src, "d", b.M, 1, b.K, attrInts("pads", p, p, p, p), attrI("group", int64(b.M)), attrInts("strides", int64(b.stride), int64(b.stride)))
	da := g.act(b.act, "d", "da")
	g.conv(da, "q", b.P, b.M, 1)
	out := g.act(b.pact, "q", "qa")
	if b.residual {
		g.add("Add", []string{out, "x"}, "y")
		out = "y"
	}
	if b.shared {
		return g.model(b.x, out, da)
	}
	return g.model(b.x, out)
}

// TestFuseProjection: a pointwise Conv that alone reads the output of depthwise planes
// made in bands of rows (a fused expansion's at 112 × 112, or a depthwise Conv's alone on
// planes as large: MobileNetV2's first two blocks) runs in the same step, from each
// band while it is in the cache, and gives bit for bit the outputs of the plan with the
// steps apart (and, to float rounding, of the plan with no fusion at all): with and
// without the expansion, strides 1 and 2, 3×3 and 5×5, Clip, Relu, HardSwish and SiLU
// before it, none, Relu or SiLU after it, folded BatchNormalizations, the real 112 × 112
// blocks and smaller planes with the bands lowered to a few rows, on 1–3 workers.
// Negative controls stay apart: a projection that adds a residual (its Add fused into
// it), a depthwise output with a second reader, planes below the bands' bound, and on
// the AVX2 path rows narrow enough for the depthwise lanes.
func TestFuseProjection(t *testing.T) {
	type tc struct {
		name                string
		b                   projectBlock
		bandAbove, bandRows int
		want                bool
	}
	cases := []tc{
		{name: "mv2_block1", b: projectBlock{x: []int{2, 32, 112, 112}, M: 32, K: 3, stride: 1, act: "Clip", P: 16, bn: true}, want: true},
		{name: "mv2_block2", b: projectBlock{x: []int{2, 16, 112, 112}, E: true, M: 96, K: 3, stride: 2, act: "Clip", P: 24, bn: true}, want: true},
		{name: "alone_5x5_stride2_silu_relu", b: projectBlock{x: []int{3, 16, 30, 40}, M: 16, K: 5, stride: 2, act: "SiLU", pact: "Relu", P: 12}, bandAbove: 256, bandRows: 3, want: true},
		{name: "alone_plain_projection", b: projectBlock{x: []int{2, 8, 30, 40}, M: 8, K: 3, stride: 1, act: "Clip", P: 12}, bandAbove: 256, bandRows: 5, want: true},
		// Rows of at most 16 outputs take the lanes on the AVX2 path, which bands do not.
		{name: "alone_narrow_rows", b: projectBlock{x: []int{2, 16, 30, 27}, M: 16, K: 5, stride: 2, act: "SiLU", pact: "Relu", P: 12}, bandAbove: 256, bandRows: 3, want: !dwLanesFast() || convTileOK()},
		{name: "expand_3x3_hardswish_silu", b: projectBlock{x: []int{2, 8, 33, 30}, E: true, M: 24, K: 3, stride: 1, act: "HardSwish", pact: "SiLU", P: 20, bn: true}, bandAbove: 256, bandRows: 4, want: true},
		{name: "expand_5x5_stride2_relu_rows1", b: projectBlock{x: []int{2, 8, 49, 45}, E: true, M: 16, K: 5, stride: 2, act: "Relu", P: 9}, bandAbove: 256, bandRows: 1, want: true},
		{name: "residual", b: projectBlock{x: []int{2, 16, 30, 27}, M: 16, K: 3, stride: 1, act: "Relu", P: 16, residual: true}, bandAbove: 256, bandRows: 3},
		{name: "shared_depthwise", b: projectBlock{x: []int{2, 16, 30, 27}, M: 16, K: 3, stride: 1, act: "Relu", P: 8, shared: true}, bandAbove: 256, bandRows: 3},
		{name: "shared_depthwise_expand", b: projectBlock{x: []int{2, 8, 30, 27}, E: true, M: 16, K: 3, stride: 1, act: "Relu", P: 8, shared: true}, bandAbove: 256, bandRows: 3},
		{name: "below_the_bound", b: projectBlock{x: []int{2, 16, 56, 56}, E: true, M: 48, K: 3, stride: 1, act: "Clip", P: 16}},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(53, uint64(workers)))
				m := projectModel(r, c.b)
				fused := fusedAgainstApart(t, m, c.b.x, workers, c.bandAbove, c.bandRows, r)
				want := c.want && convDirectOK() && dwPlaneFast() && c.b.x[0] >= workers
				if n := fused.last.project; (n == 1) != want || n > 1 {
					t.Errorf("%d projections joined, want joined %v", n, want)
				}
				if want && bandedRuns(fused) == 0 {
					t.Errorf("the projection joined, but no run in bands")
				}
			})
		}
	}
}

// TestFuseProjectionApart: a joined projection whose depthwise Clip bound turns NaN after
// planning runs the steps one after the other, an image at a time, and gives bit for bit
// what the plan with the steps apart gives, with and without the expansion.
func TestFuseProjectionApart(t *testing.T) {
	if !convDirectOK() || !dwPlaneFast() {
		t.Skip("no fusion without the assembly kernels")
	}
	for _, E := range []bool{false, true} {
		t.Run(fmt.Sprintf("expansion_%v", E), func(t *testing.T) {
			r := rand.New(rand.NewPCG(59, 1))
			b := projectBlock{x: []int{3, 8, 30, 40}, E: E, M: 8, K: 3, stride: 2, act: "Clip", P: 12, bn: true}
			if E {
				b.M = 24
			}
			nanAgainstApart(t, projectModel(r, b), b.x, r, func(g *Graph, apart bool) {
				g.noExpandDW = apart
				g.expandBandAbove, g.expandBandRows = 256, 4
			}, func(p *plan) int { return p.project })
		})
	}
}
