package export

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

func tensorInfo(name string, dt onnxpb.TensorProto_DataType, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case int64:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: shape},
	}}}
}

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * 0.3)
	}
	return v
}

// smallNet builds x[batch,1,5,5] → Conv(conv.w [3,1,3,3], conv.b) → Relu → Flatten →
// Gemm(fc.w [4,27] held by a Constant node, transB, fc.b) → MatMul(mm.w [4,5]) → y.
// With ir < 4 every initializer is also listed as a graph input, as such files do. The
// weight counts 27, 108 and 20 leave padding in the last packed byte at every width.
func smallNet(ir, opset int64, seed uint64) *onnxio.Model {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := func(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: in, Output: out, Attribute: attrs}
	}
	inits := []*onnxpb.TensorProto{
		onnxio.FloatTensor("conv.w", []int64{3, 1, 3, 3}, randFloats(rng, 27)),
		onnxio.FloatTensor("conv.b", []int64{3}, randFloats(rng, 3)),
		onnxio.FloatTensor("fc.b", []int64{4}, randFloats(rng, 4)),
		onnxio.FloatTensor("mm.w", []int64{4, 5}, randFloats(rng, 20)),
	}
	fcw := onnxio.FloatTensor("fc.w", []int64{4, 27}, randFloats(rng, 108))
	g := &onnxpb.GraphProto{
		Name: proto.String("small"),
		Node: []*onnxpb.NodeProto{
			n("Conv", "conv", []string{"x", "conv.w", "conv.b"}, []string{"c"}, attrInts("kernel_shape", 3, 3)),
			n("Relu", "relu", []string{"c"}, []string{"r"}),
			n("Flatten", "flatten", []string{"r"}, []string{"f"}),
			n("Constant", "fc.w.const", nil, []string{"fc.w"}, &onnxpb.AttributeProto{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: fcw}),
			n("Gemm", "fc", []string{"f", "fc.w", "fc.b"}, []string{"h"}, attrInt("transB", 1)),
			n("MatMul", "mm", []string{"h", "mm.w"}, []string{"y"}),
		},
		Initializer: inits,
		Input:       []*onnxpb.ValueInfoProto{tensorInfo("x", onnxpb.TensorProto_FLOAT, "batch", 1, 5, 5)},
		Output:      []*onnxpb.ValueInfoProto{tensorInfo("y", onnxpb.TensorProto_FLOAT, "batch", 5)},
		ValueInfo:   []*onnxpb.ValueInfoProto{tensorInfo("h", onnxpb.TensorProto_FLOAT, "batch", 4)},
		DocString:   proto.String("a graph doc string that must survive"),
	}
	if ir < 4 {
		for _, t := range inits {
			g.Input = append(g.Input, tensorInput(t))
		}
	}
	return &onnxio.Model{Name: "small.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:     proto.Int64(ir),
		ProducerName:  proto.String("export test"),
		OpsetImport:   []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(opset)}},
		Graph:         g,
		MetadataProps: []*onnxpb.StringStringEntryProto{{Key: proto.String("author"), Value: proto.String("someone")}},
	}}
}

// TestExportSmallNets covers what the shipped models may not: IR 3 files listing their
// initializers as inputs, opset 9 (Slice with attributes), a Constant-held Gemm weight
// with transB, per-channel scales on Conv, Gemm and MatMul axes, padded last bytes at
// every width, qdq at opsets 10 (per-channel Mul after DequantizeLinear), 13 (axis) and
// 21 (INT4), and grids of 2, 3, 15 and 255 levels.
func TestExportSmallNets(t *testing.T) {
	requireChecker(t)
	ortref.Require(t)
	newest := checkerOpset(t)
	levels := func(lo, hi int) []int {
		var l []int
		for v := lo; v <= hi; v++ {
			l = append(l, v)
		}
		return l
	}
	type grid struct {
		name       string
		levels     []int
		perChannel bool
		scaled     bool
	}
	grids := []grid{
		{"binary", []int{-1, 1}, false, false},
		{"binary-tensor", []int{-1, 1}, false, true},
		{"binary-channel", []int{-1, 1}, true, true},
		{"ternary-channel", []int{-1, 0, 1}, true, true},
		{"int4-channel", levels(-7, 7), true, true},
		{"int8", levels(-127, 127), false, true},
		// Levels off the spec's default zero point: MatMulNBits stores an explicit one.
		{"offset2-channel", levels(0, 3), true, true},
		{"offset4", levels(2, 14), false, true},
	}
	axes := map[string]int{"conv.w": 0, "fc.w": 0, "mm.w": 1}
	cases := []struct {
		ir, opset int64
		format    Format
		raise     int64
	}{
		{3, 9, Packed, 0}, {3, 9, Float, 0}, {3, 9, QDQ, 10}, {3, 9, QDQ, 13},
		{7, 13, Packed, 0}, {7, 13, QDQ, 0}, {10, 21, Packed, 0}, {10, 21, QDQ, 0}, {7, 13, QDQ, 21},
		{3, 9, MatMulNBits, 0}, {7, 13, MatMulNBits, 0}, {10, 21, MatMulNBits, 0},
	}
	for _, c := range cases {
		orig := smallNet(c.ir, c.opset, 1)
		rng := rand.New(rand.NewPCG(2, 0))
		x := randFloats(rng, 8*25)
		shape := []int{8, 1, 5, 5}
		for _, gr := range grids {
			var ws []Weight
			for _, name := range []string{"conv.w", "fc.w", "mm.w"} {
				p, _ := orig.Param(name)
				dims := p.Tensor.GetDims()
				g := Grid{Levels: gr.levels, Axis: axes[name]}
				nch := 1
				if gr.perChannel {
					nch = int(dims[g.Axis])
				}
				if gr.scaled {
					for range nch {
						// Random float32 scales: any value works, the products are what is stored.
						g.Scales = append(g.Scales, float32(0.01+rng.Float64()*0.1))
					}
				}
				n := 1
				for _, d := range dims {
					n *= int(d)
				}
				codes := make([]uint8, n)
				for i := range codes {
					codes[i] = uint8(rng.IntN(len(gr.levels)))
				}
				ws = append(ws, Weight{Name: name, Values: g.Values(codes, dims), Grid: g})
			}
			want := runEngine(t, withWeights(t, orig, ws), x, shape)
			name := strings.Join([]string{"ir", itoa(c.ir), "opset", itoa(c.opset), string(c.format), "to", itoa(c.raise), gr.name}, "_")
			t.Run(name, func(t *testing.T) {
				opts := Options{Format: c.format, Opset: c.raise, Metadata: Metadata{Version: "test", Algorithm: "GD+Proj", Seed: 7}}
				q := verifyExport(t, orig, ws, opts, x, shape, want, 1e-4, newest)
				nodes := map[string]int{}
				for _, n := range q.Proto.GetGraph().GetNode() {
					nodes[n.GetOpType()]++
				}
				target := max(c.opset, c.raise)
				switch c.format {
				case Packed:
					padded := 0
					for _, w := range ws {
						if len(w.Values)%(8/w.Grid.Bits()) != 0 {
							padded++
						}
					}
					if nodes["Gather"] != 3 || nodes["Slice"] != padded {
						t.Fatalf("nodes %v: want 3 Gathers and %d Slices, one per tensor whose last byte is padded", nodes, padded)
					}
				case QDQ:
					if nodes["DequantizeLinear"] != 3 {
						t.Fatalf("nodes %v: want 3 DequantizeLinear", nodes)
					}
					if gr.perChannel && target < 13 && nodes["Mul"] != 3 {
						t.Fatalf("opset %d, per-channel: nodes %v, want a Mul after each DequantizeLinear", target, nodes)
					}
					int4 := 0
					for _, it := range q.Proto.GetGraph().GetInitializer() {
						if onnxio.DataType(it.GetDataType()) == onnxpb.TensorProto_INT4 {
							int4++
						}
					}
					if wantInt4 := target >= 21 && gr.levels[0] >= -8 && gr.levels[len(gr.levels)-1] <= 7; (int4 == 3) != wantInt4 {
						t.Fatalf("opset %d, %d levels: %d INT4 tensors", target, len(gr.levels), int4)
					}
				case MatMulNBits:
					// The Gemm and the MatMul carry their weights; the Conv's stays packed.
					if nodes["MatMulNBits"] != 2 || nodes["Gemm"] != 0 || nodes["MatMul"] != 0 || nodes["Gather"] != 1 || nodes["Conv"] != 1 {
						t.Fatalf("nodes %v: want 2 MatMulNBits and the Conv's weight packed", nodes)
					}
					if q.Opset(MSDomain) != 1 {
						t.Fatalf("the file imports com.microsoft opset %d, want 1", q.Opset(MSDomain))
					}
				}
				wantIR := c.ir
				if c.raise != 0 {
					wantIR = max(c.ir, onnxio.IRVersionOf(target))
				}
				if q.Opset("") != target || q.Proto.GetIrVersion() != wantIR {
					t.Fatalf("opset %d, IR %d; want opset %d and IR %d", q.Opset(""), q.Proto.GetIrVersion(), target, wantIR)
				}
			})
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
