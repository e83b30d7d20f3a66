package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	onnxpb "github.com/qtool/qtool/onnxio/onnxpb"
)

// scaleBlock describes a squeeze-excitation's scaling and the projection after it for
// scaleModel: x (N × C × H × W) times s, then a 1×1 Conv to M channels.
type scaleBlock struct {
	x []int
	M int
	// se makes s of x itself, as a squeeze-excitation does (GlobalAveragePool, 1×1 Conv,
	// Relu, 1×1 Conv, Sigmoid: N × C × 1 × 1); else s is a parameter of 1 × C × 1 × 1.
	se     bool
	sFirst bool   // Mul(s, x) rather than Mul(x, s)
	act    string // after the projection: "", Clip, Relu, HardSwish, SiLU
	bn     bool
	res    bool // x added to the projection (M = C)
	shared bool // the Mul's output a graph output too (a second reader)
}

func scaleModel(r *rand.Rand, b scaleBlock) *onnxio.Model {
	C := b.x[1]
	g := newBlockGraph(r, false)
	if b.se {
		R := max(2, C/4)
		g.add("GlobalAveragePool", []string{"x"}, "g")
		g.conv("g", "g1", R, C, 1)
		g.act("Relu", "g1", "g2")
		g.conv("g2", "g3", C, R, 1)
		g.act("Sigmoid", "g3", "s")
	} else {
		g.inits = append(g.inits, randParam(r, 1, "s", 1, int64(C), 1, 1))
	}
	mul := []string{"x", "s"}
	if b.sFirst {
		mul = []string{"s", "x"}
	}
	g.add("Mul", mul, "m")
	g.bn = b.bn
	g.conv("m", "q", b.M, C, 1)
	q := "q"
	if b.res {
		g.add("Add", []string{q, "x"}, "qr")
		q = "qr"
	}
	q = g.act(b.act, q, "y")
	if b.shared {
		return g.model(b.x, q, "m")
	}
	return g.model(b.x, q)
}

// TestFuseScaleProject: a Mul that scales each channel of an image (a
// squeeze-excitation's output times the depthwise planes) and whose output only a 1×1
// Conv reads runs in one step with it, a few pixels of every channel scaled at a time,
// and gives bit for bit the outputs of the plan with the two apart (and, to float
// rounding, of the plan with no fusion at all): scales per image and per channel only,
// either operand order, EfficientNet-B0's projections at 7 × 7, 14 × 14 and 56 × 56 and
// odd planes, chunks of pixels lowered to 16 and 48, a residual, Clip, Relu, HardSwish
// and SiLU, a folded BatchNormalization, two images split by output channels as well,
// 1–3 workers. Negative controls stay apart: a Mul output with a second reader, a Mul of
// two whole tensors, batches smaller than the worker count.
func TestFuseScaleProject(t *testing.T) {
	type tc struct {
		name  string
		b     scaleBlock
		chunk int
		want  bool
	}
	cases := []tc{
		{name: "effnet_1152to320_7x7", b: scaleBlock{x: []int{2, 1152, 7, 7}, M: 320, se: true}, want: true},
		{name: "effnet_672to112_14x14_res", b: scaleBlock{x: []int{3, 112, 14, 14}, M: 112, se: true, res: true, bn: true}, want: true},
		{name: "effnet_144to24_56x56", b: scaleBlock{x: []int{2, 144, 56, 56}, M: 24, se: true, sFirst: true}, want: true},
		{name: "two_images_parts_silu", b: scaleBlock{x: []int{2, 96, 9, 11}, M: 40, se: true, act: "SiLU"}, want: true},
		// Batches smaller than the worker count stay apart.
		{name: "batch1_silu", b: scaleBlock{x: []int{1, 96, 9, 11}, M: 40, se: true, act: "SiLU"}, want: true},
		{name: "param_scale_clip_chunks", b: scaleBlock{x: []int{2, 24, 13, 17}, M: 20, act: "Clip", sFirst: true}, chunk: 48, want: true},
		{name: "chunks16_hardswish_res", b: scaleBlock{x: []int{2, 16, 10, 10}, M: 16, se: true, act: "HardSwish", res: true}, chunk: 16, want: true},
		{name: "relu_bn", b: scaleBlock{x: []int{4, 40, 6, 6}, M: 12, se: true, act: "Relu", bn: true}, want: true},
		{name: "shared_mul", b: scaleBlock{x: []int{2, 32, 8, 8}, M: 16, se: true, shared: true}},
	}
	for _, c := range cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(67, uint64(workers)))
				fused, apart := fusedAgainst(t, scaleModel(r, c.b), c.b.x, workers, r, func(g *Graph, apart bool) {
					g.noScaleProject, g.scaleChunk = apart, c.chunk
				})
				want := c.want && convDirectOK() && c.b.x[0] >= workers
				if n := fused.last.scaleProject; (n == 1) != want || n > 1 {
					t.Errorf("%d Muls joined, want joined %v", n, want)
				}
				if apart.last.scaleProject != 0 {
					t.Errorf("the plan with the fusion off joined %d", apart.last.scaleProject)
				}
			})
		}
	}
	// A Mul of two whole tensors scales no channel.
	t.Run("whole_tensors", func(t *testing.T) {
		x := []int{2, 8, 6, 6}
		r := rand.New(rand.NewPCG(71, 1))
		m := gModel(14, []*onnxpb.NodeProto{gNode("Mul", []string{"x", "x"}, []string{"m"}), gNode("Conv", []string{"m", "qw", "qb"}, []string{"y"})},
			[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 8, 6, 6)}, []string{"y"},
			randParam(r, 0.3, "qw", 4, 8, 1, 1), randParam(r, 0.3, "qb", 4))
		fused, _ := fusedAgainst(t, m, x, 2, r, func(g *Graph, apart bool) { g.noScaleProject = apart })
		if n := fused.last.scaleProject; n != 0 {
			t.Errorf("%d Muls of whole tensors joined", n)
		}
	})
}

// TestFuseScaleProjectApart: a joined Mul whose projection's Clip bound turns NaN after
// planning runs the two apart, an image at a time, and gives bit for bit what the plan
// with them apart gives.
func TestFuseScaleProjectApart(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no fusion without the direct path")
	}
	r := rand.New(rand.NewPCG(73, 1))
	b := scaleBlock{x: []int{3, 24, 14, 14}, M: 24, se: true, act: "Clip", res: true}
	nanAgainstApart(t, scaleModel(r, b), b.x, r, func(g *Graph, apart bool) { g.noScaleProject = apart },
		func(p *plan) int { return p.scaleProject })
}
