package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// foldModel is the packed export's unpacking chain before a Gemm: codes (UINT8) →
// Cast → Gather from a float lookup table → Reshape → Mul by per-row scales → the
// weight of Gemm(x, w, transB = 1), whose output is y [B, 3].
func foldModel(r *rand.Rand) *onnxio.Model {
	codes := make([]int64, 12)
	for i := range codes {
		codes[i] = int64(r.IntN(2))
	}
	f := onnxpb.TensorProto_FLOAT
	nodes := []*onnxpb.NodeProto{
		gNode("Cast", []string{"codes"}, []string{"idx"}, attrI("to", int64(onnxpb.TensorProto_INT64))),
		gNode("Gather", []string{"lut", "idx"}, []string{"flat"}),
		gNode("Reshape", []string{"flat", "shape"}, []string{"grid"}),
		gNode("Mul", []string{"grid", "scale"}, []string{"w"}),
		gNode("Gemm", []string{"x", "w"}, []string{"y"}, attrI("transB", 1)),
	}
	inits := []*onnxpb.TensorProto{intTensor("codes", onnxpb.TensorProto_UINT8, []int64{12}, codes),
		onnxio.FloatTensor("lut", []int64{2}, []float32{-1, 1}),
		onnxio.Int64Tensor("shape", []int64{2}, []int64{3, 4}),
		onnxio.FloatTensor("scale", []int64{3, 1}, []float32{0.5, 1.25, 2})}
	return &onnxio.Model{Name: "fold.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("fold"), Node: nodes, Initializer: inits,
			Input:  []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{-1, 4})},
			Output: []*onnxpb.ValueInfoProto{typedValue("y", f, []int64{-1, 3})}},
	}}
}

// TestFoldFrozenChains: an inference plan folds the unpacking chain through its frozen
// float parameters (the lookup table and the scales) once, so that only the Gemm runs;
// plans for two batch sizes share the one folded weight; the links before it are not
// held; the outputs are bit for bit those of a recording plan, which folds nothing; and
// a scale written in place and announced by Changed reaches the next run, while one not
// announced does not (the negative control: the fold really is kept between runs).
func TestFoldFrozenChains(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 1))
	m := foldModel(r)
	x := func(b int) *Tensor {
		v := make([]float32, b*4)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return NewFloat([]int{b, 4}, v)
	}
	x2, x5 := x(2), x(5)
	g := mustBuild(t, m)
	forward := func(g *Graph, in *Tensor) []float32 {
		out, err := g.Forward(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out[0].F)
	}
	y2 := forward(g, x2)
	p2 := g.last
	if len(p2.steps) != 1 || p2.steps[0].node.op != "Gemm" {
		ops := []string{}
		for _, st := range p2.steps {
			ops = append(ops, st.node.op)
		}
		t.Fatalf("inference plan runs %v, want only the Gemm", ops)
	}
	w := p2.steps[0].in[1]
	y5 := forward(g, x5)
	if p5 := g.last; p5 == p2 || p5.steps[0].in[1] != w {
		t.Error("the batch-5 plan folded its own copy of the weight, want the batch-2 plan's")
	}
	for _, name := range []string{"idx", "flat", "grid"} {
		for id, v := range p2.values {
			if v.name == name && p2.vals[id].Known() {
				t.Errorf("the plan still holds the folded link %s", name)
			}
		}
	}

	// The reference: the same graph recording (scale trainable), nothing folded.
	ref := mustBuild(t, m)
	if err := ref.SetTrainable("scale"); err != nil {
		t.Fatal(err)
	}
	if got := forward(ref, x2); !slices.Equal(got, y2) {
		t.Errorf("batch 2: folded %v, unfolded %v", y2, got)
	}
	if len(ref.last.steps) < 4 {
		t.Errorf("the recording plan runs %d steps, want the chain too", len(ref.last.steps))
	}
	if got := forward(ref, x5); !slices.Equal(got, y5) {
		t.Errorf("batch 5: folded %v, unfolded %v", y5, got)
	}

	// A scale written in place: not seen without Changed, seen with it.
	for _, gr := range []*Graph{g, ref} {
		gr.Param("scale").Value.F[1] = -3
	}
	if got := forward(g, x2); !slices.Equal(got, y2) {
		t.Error("a write without Changed reached the folded weight: the fold is not kept between runs")
	}
	g.Param("scale").Changed()
	want := forward(ref, x2)
	if slices.Equal(want, y2) {
		t.Fatal("the new scale changes nothing: the control is void")
	}
	if got := forward(g, x2); !slices.Equal(got, want) {
		t.Errorf("after Changed: %v, want %v", got, want)
	}
}

// TestCodesHeldAsBytes: Build keeps the UINT8 and INT8 codes that Cast and
// DequantizeLinear read (the packed and qdq exports' weights) as bytes, and the graph
// computes what it computes from the same codes decoded to int64 (stored as int32_data),
// negative int8 codes and zero points included; a code tensor another node also reads
// is held as int64.
func TestCodesHeldAsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 2))
	codes := make([]int64, 24)
	for i := range codes {
		codes[i] = int64(r.IntN(256) - 128)
	}
	f := onnxpb.TensorProto_FLOAT
	model := func(raw bool, alsoIdentity bool) *onnxio.Model {
		q := intTensor("q", onnxpb.TensorProto_INT8, []int64{6, 4}, codes)
		zp := intTensor("zp", onnxpb.TensorProto_INT8, []int64{6}, []int64{-3, 0, 5, -128, 127, 1})
		if !raw {
			for _, ti := range []*onnxpb.TensorProto{q, zp} {
				for _, b := range ti.RawData {
					ti.Int32Data = append(ti.Int32Data, int32(int8(b)))
				}
				ti.RawData = nil
			}
		}
		nodes := []*onnxpb.NodeProto{
			gNode("DequantizeLinear", []string{"q", "s", "zp"}, []string{"w"}, attrI("axis", 0)),
			gNode("Gemm", []string{"x", "w"}, []string{"y"}, attrI("transB", 1)),
		}
		outs := []*onnxpb.ValueInfoProto{typedValue("y", f, []int64{-1, 6})}
		if alsoIdentity {
			nodes = append(nodes, gNode("Identity", []string{"q"}, []string{"qcopy"}))
			outs = append(outs, typedValue("qcopy", onnxpb.TensorProto_INT8, []int64{6, 4}))
		}
		return &onnxio.Model{Name: "qdq.onnx", Proto: &onnxpb.ModelProto{
			IrVersion:   proto.Int64(8),
			OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
			Graph: &onnxpb.GraphProto{Name: proto.String("qdq"), Node: nodes,
				Initializer: []*onnxpb.TensorProto{q, zp, onnxio.FloatTensor("s", []int64{6}, []float32{0.5, 0.25, 1, 2, 0.125, 3})},
				Input:       []*onnxpb.ValueInfoProto{typedValue("x", f, []int64{-1, 4})},
				Output:      outs},
		}}
	}
	x := NewFloat([]int{3, 4}, []float32{1, -2, 0.5, 3, 0, 1, -1, 2, 4, 0.25, -0.5, 1})
	run := func(m *onnxio.Model) (*Graph, []*Tensor) {
		g := mustBuild(t, m)
		out, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		return g, out
	}
	g, got := run(model(true, false))
	if v := g.Param("q").Value; v.u8 == nil || v.I != nil || !v.s8 {
		t.Errorf("int8 codes read by DequantizeLinear: held as %d int64 values, %d bytes (signed %v); want signed bytes", len(v.I), len(v.u8), v.s8)
	}
	_, want := run(model(false, false))
	if !slices.Equal(got[0].F, want[0].F) {
		t.Errorf("codes held as bytes give %v, as int64 %v", got[0].F, want[0].F)
	}
	// The definition, (q − zp)·s row by row, for the first row of x.
	zps, ss := []int64{-3, 0, 5, -128, 127, 1}, []float32{0.5, 0.25, 1, 2, 0.125, 3}
	for n := range 6 {
		sum := 0.0
		for k := range 4 {
			sum += float64(float32(codes[n*4+k]-zps[n])*ss[n]) * float64(x.F[k])
		}
		if d := float64(got[0].F[n]) - sum; d > 1e-4 || d < -1e-4 {
			t.Errorf("y[0][%d] = %g, want %g", n, got[0].F[n], sum)
		}
	}
	g3, got3 := run(model(true, true))
	if v := g3.Param("q").Value; v.u8 != nil || len(v.I) != len(codes) {
		t.Errorf("codes also read by Identity: held as %d int64 values and %d bytes, want int64", len(v.I), len(v.u8))
	}
	if !slices.Equal(got3[0].F, got[0].F) || !slices.Equal(got3[1].I, codes) {
		t.Error("widened codes give other values")
	}

	// The packed chain's UINT8 codes, read by Cast.
	gp := mustBuild(t, foldModel(r))
	if v := gp.Param("codes").Value; v.u8 == nil || v.s8 {
		t.Errorf("uint8 codes read by Cast: held as %d int64 values and %d bytes (signed %v), want unsigned bytes", len(v.I), len(v.u8), v.s8)
	}
}
