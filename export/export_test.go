package export

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestExportTestModels exports every shipped model in every format and on several grids
// projected by admmq, then checks the file with onnx.checker, runs it in onnxruntime
// against qtool's engine on the quantized float weights, decodes the stored weights in
// Go and in onnxruntime, and compares everything else with the input model.
func TestExportTestModels(t *testing.T) {
	requireChecker(t)
	ortref.Require(t)
	newest := checkerOpset(t)
	for _, path := range testModelPaths(t) {
		orig, err := onnxio.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		x, shape := samples(t, orig)
		for _, gc := range gridCases() {
			ws := quantize(t, orig, gc)
			base := orig
			if gc.name == "binary" {
				base = recalibrated(t, orig, ws, x, shape)
			}
			want := runEngine(t, withWeights(t, base, ws), x, shape)
			// onnxruntime on the float file: what the packed and qdq files must reproduce
			// exactly, since they hold the same weights.
			floatFile := filepath.Join(t.TempDir(), shortName(path)+"-"+gc.name+"-float.onnx")
			if err := WriteFile(floatFile, base, ws, Options{Format: Float}); err != nil {
				t.Fatal(err)
			}
			ortFloat := runORT(t, floatFile, base.Inputs()[0].Name, x, shape, false)
			for _, f := range []Format{Packed, QDQ, Float, MatMulNBits} {
				opts := Options{Format: f, Metadata: Metadata{Version: "test", Algorithm: "GD+Proj", Seed: 7}}
				if f == QDQ && base.Opset("") < 10 {
					opts.Opset = 10
				}
				t.Run(fmt.Sprintf("%s/%s/%s", shortName(path), gc.name, f), func(t *testing.T) {
					q := verifyExport(t, base, ws, opts, x, shape, want, gc.tol, newest)
					if f == Packed {
						// Same runtime, same weights: the same logits bit for bit.
						b, err := q.Marshal()
						if err != nil {
							t.Fatal(err)
						}
						got, err := ortref.Run(b, []ortref.Tensor{{Name: base.Inputs()[0].Name, Shape: int64s(shape), Data: x}})
						if err != nil {
							t.Fatal(err)
						}
						for i := range ortFloat {
							if math.Float32bits(got[0].Data[i]) != math.Float32bits(ortFloat[i]) {
								t.Fatalf("output %d: packed file gives %v in onnxruntime, the float file %v", i, got[0].Data[i], ortFloat[i])
							}
						}
					}
				})
			}
		}
	}
}

// verifyExport writes the export and checks it: onnx.checker (for opsets the installed
// onnx knows), onnxruntime against the engine's outputs want, the stored weights decoded
// in Go and unpacked by onnxruntime, the rest of the model unchanged, the metadata.
func verifyExport(t *testing.T, orig *onnxio.Model, ws []Weight, opts Options, x []float32, shape []int, want []float32, tol float64, newest int64) *onnxio.Model {
	t.Helper()
	f := opts.Format
	if f == "" {
		f = Packed
	}
	out := filepath.Join(t.TempDir(), "q.onnx")
	if err := WriteFile(out, orig, ws, opts); err != nil {
		t.Fatal(err)
	}
	q, err := onnxio.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if q.Opset("") <= newest {
		onnxCheck(t, out)
	} else {
		t.Logf("the installed onnx knows opsets up to %d: onnx.checker skipped for opset %d", newest, q.Opset(""))
	}
	checkStored(t, q, ws, f)
	checkUnpackInORT(t, q, ws)
	if f == MatMulNBits {
		checkNBits(t, orig, q, ws, opts.MinBits)
	}
	got := runORT(t, out, orig.Inputs()[0].Name, x, shape, f == QDQ)
	compareLogits(t, "onnxruntime vs engine", got, want, shape[0], tol)
	checkPreserved(t, orig, q, ws, opts.Opset != 0)
	checkMetadata(t, q, f)
	return q
}

// checkStored decodes each weight from what the file stores, in Go, without the
// exporter's code paths: packed bytes through the file's own LUT, trim, reshape and
// scale tensor; qdq integers times the scale; float tensors as they are. The result must
// equal the algorithm's values bit for bit.
func checkStored(t *testing.T, q *onnxio.Model, ws []Weight, f Format) {
	t.Helper()
	init := map[string]*onnxio.Tensor{}
	for _, p := range q.Params() {
		tt, err := q.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		init[p.Name] = tt
	}
	nbits := nbitsWeights(t, q)
	for _, w := range ws {
		if nbits[w.Name] != nil {
			continue // checkNBits decodes these
		}
		var got []float32
		switch f {
		case Float:
			got = init[w.Name].Float
		case Packed, MatMulNBits:
			data := init["qtool/"+w.Name+"/packed"]
			if data == nil || data.Type != onnxpb.TensorProto_UINT8 {
				t.Fatalf("%s: no UINT8 packed tensor", w.Name)
			}
			lut := lutOf(t, q, w.Name)
			per := int(lut.Dims[1])
			for _, b := range data.Int {
				got = append(got, lut.Float[int(b)*per:(int(b)+1)*per]...)
			}
			if len(got) < len(w.Values) || len(got)-len(w.Values) >= per {
				t.Fatalf("%s: %d packed values for %d weights at %d per byte", w.Name, len(got), len(w.Values), per)
			}
			got = got[:len(w.Values)]
			if s := init["qtool/"+w.Name+"/scale"]; s != nil {
				got = applyScale(got, s, init["qtool/"+w.Name+"/shape"].Int, w.Grid.Axis)
			}
			// The stored width is the one promised: 1 bit for two levels, and so on.
			if want := (len(w.Values)*w.Grid.Bits() + 7) / 8; len(data.Int) != want {
				t.Fatalf("%s: %d packed bytes, want %d", w.Name, len(data.Int), want)
			}
		case QDQ:
			data := init["qtool/"+w.Name+"/int8"]
			if data == nil {
				data = init["qtool/"+w.Name+"/int4"]
			}
			if data == nil {
				t.Fatalf("%s: no integer tensor", w.Name)
			}
			got = make([]float32, len(data.Int))
			for i, v := range data.Int {
				got[i] = float32(v)
			}
			if s := init["qtool/"+w.Name+"/scale"]; s != nil {
				got = applyScale(got, s, data.Dims, w.Grid.Axis)
			}
		}
		for i := range w.Values {
			if math.Float32bits(got[i]) != math.Float32bits(w.Values[i]) {
				t.Fatalf("%s: stored value %d decodes to %v, the algorithm produced %v", w.Name, i, got[i], w.Values[i])
			}
		}
	}
}

// lutOf finds the LUT the weight's Gather node reads.
func lutOf(t *testing.T, q *onnxio.Model, name string) *onnxio.Tensor {
	t.Helper()
	for _, n := range q.Proto.GetGraph().GetNode() {
		if n.GetName() == "qtool/"+name+"/Gather" {
			p, ok := q.Param(n.GetInput()[0])
			if !ok {
				t.Fatalf("%s: Gather reads %q, not a parameter", name, n.GetInput()[0])
			}
			tt, err := q.Tensor(p.Tensor)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.Dims) != 2 || tt.Dims[0] != 256 {
				t.Fatalf("%s: LUT has shape %v, want [256, k]", name, tt.Dims)
			}
			return tt
		}
	}
	t.Fatalf("%s: no Gather node", name)
	return nil
}

// applyScale multiplies by a stored scale tensor: one scale for all, or one per index
// of the weight's channel axis, whose elements are inner apart.
func applyScale(v []float32, s *onnxio.Tensor, dims []int64, axis int) []float32 {
	out := make([]float32, len(v))
	inner := 1
	if len(s.Float) > 1 {
		for _, d := range dims[axis+1:] {
			inner *= int(d)
		}
	}
	for i := range v {
		out[i] = v[i] * s.Float[(i/inner)%len(s.Float)]
	}
	return out
}

// checkUnpackInORT runs the added nodes alone in onnxruntime, with the weights as
// outputs, and compares them bit for bit with the algorithm's values.
func checkUnpackInORT(t *testing.T, q *onnxio.Model, ws []Weight) {
	t.Helper()
	sub := cloneModel(q)
	g := sub.Proto.Graph
	g.Node = slices.DeleteFunc(g.Node, func(n *onnxpb.NodeProto) bool {
		return !strings.HasPrefix(n.GetName(), "qtool/") && n.GetOpType() != "Constant"
	})
	// The nodes the matmulnbits format put around a MatMulNBits (a Transpose of A, a Mul
	// of the product, an Add after it) read values that are gone with that node, or
	// are computed from them: drop nodes until every input left is known.
	for {
		known := map[string]bool{}
		for _, p := range sub.Params() {
			known[p.Name] = true
		}
		for _, n := range g.Node {
			for _, o := range n.GetOutput() {
				known[o] = true
			}
		}
		before := len(g.Node)
		g.Node = slices.DeleteFunc(g.Node, func(n *onnxpb.NodeProto) bool {
			return slices.ContainsFunc(n.GetInput(), func(in string) bool { return in != "" && !known[in] })
		})
		if len(g.Node) == before {
			break
		}
	}
	g.ValueInfo = nil
	g.Output = nil
	nbits := nbitsWeights(t, q)
	ws = slices.DeleteFunc(slices.Clone(ws), func(w Weight) bool { return nbits[w.Name] != nil })
	if len(ws) == 0 {
		return
	}
	for _, w := range ws {
		p, ok := q.Param(w.Name)
		if ok { // float format: the tensor itself is the output, through Identity
			g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Identity"), Input: []string{p.Name}, Output: []string{"out/" + w.Name}})
		} else {
			g.Node = append(g.Node, &onnxpb.NodeProto{OpType: proto.String("Identity"), Input: []string{w.Name}, Output: []string{"out/" + w.Name}})
		}
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String("out/" + w.Name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT))},
		}}})
	}
	// Keep the parameters the kept nodes read, and the feeds of the graph.
	b, err := sub.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ortref.NewSession(b, ortref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var feeds []ortref.Tensor
	for _, in := range sub.Inputs() {
		// The main input is not read by the unpacking nodes, but the session wants it fed.
		shape := make([]int64, len(in.Shape))
		for i, d := range in.Shape {
			shape[i] = max(d.Value, 1)
		}
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		feeds = append(feeds, ortref.Tensor{Name: in.Name, Shape: shape, Data: make([]float32, n)})
	}
	outs, err := s.Run(feeds)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		got := outs[i].Data
		if len(got) != len(w.Values) {
			t.Fatalf("%s: onnxruntime unpacks %d values, want %d", w.Name, len(got), len(w.Values))
		}
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(w.Values[j]) {
				t.Fatalf("%s: onnxruntime unpacks value %d as %v, the algorithm produced %v", w.Name, j, got[j], w.Values[j])
			}
		}
	}
}

// checkPreserved compares the exported model with the input: after taking away the
// added nodes, initializers, graph inputs and metadata, and the replaced tensors from
// both, the two must be equal protobufs.
func checkPreserved(t *testing.T, orig, q *onnxio.Model, ws []Weight, raised bool) {
	t.Helper()
	replaced := map[string]bool{}
	for _, w := range ws {
		replaced[w.Name] = true
	}
	// The nodes MatMulNBits replaced are compared by checkNBits.
	rewritten := map[string]bool{}
	for _, n := range nbitsWeights(t, q) {
		rewritten[n.GetName()] = true
	}
	a, b := proto.Clone(orig.Proto).(*onnxpb.ModelProto), proto.Clone(q.Proto).(*onnxpb.ModelProto)
	strip := func(m *onnxpb.ModelProto) {
		g := m.Graph
		g.Node = slices.DeleteFunc(g.Node, func(n *onnxpb.NodeProto) bool {
			return strings.HasPrefix(n.GetName(), "qtool/") || n.GetOpType() == "Constant" && replaced[n.GetOutput()[0]] || rewritten[n.GetName()]
		})
		m.OpsetImport = slices.DeleteFunc(m.OpsetImport, func(o *onnxpb.OperatorSetIdProto) bool { return o.GetDomain() == MSDomain })
		g.Initializer = slices.DeleteFunc(g.Initializer, func(t *onnxpb.TensorProto) bool {
			return strings.HasPrefix(t.GetName(), "qtool/") || replaced[t.GetName()]
		})
		g.Input = slices.DeleteFunc(g.Input, func(v *onnxpb.ValueInfoProto) bool {
			return strings.HasPrefix(v.GetName(), "qtool/") || replaced[v.GetName()]
		})
		m.MetadataProps = slices.DeleteFunc(m.MetadataProps, func(p *onnxpb.StringStringEntryProto) bool {
			return strings.HasPrefix(p.GetKey(), "qtool.")
		})
	}
	strip(a)
	strip(b)
	if raised { // on purpose; TestOpsetPolicy checks the versions
		b.OpsetImport, b.IrVersion = a.OpsetImport, a.IrVersion
	}
	if !proto.Equal(a, b) {
		t.Fatalf("the exported model differs from the input beyond the quantized tensors")
	}
	// The full-precision parameters are byte-identical.
	for _, p := range orig.Params() {
		if replaced[p.Name] {
			continue
		}
		qp, ok := q.Param(p.Name)
		if !ok || !proto.Equal(p.Tensor, qp.Tensor) {
			t.Fatalf("full-precision parameter %q changed", p.Name)
		}
	}
}

func checkMetadata(t *testing.T, q *onnxio.Model, f Format) {
	t.Helper()
	got := map[string]string{}
	for _, p := range q.Proto.GetMetadataProps() {
		got[p.GetKey()] = p.GetValue()
	}
	for k, v := range map[string]string{"qtool.version": "test", "qtool.algorithm": "GD+Proj", "qtool.seed": "7", "qtool.format": string(f)} {
		if got[k] != v {
			t.Fatalf("metadata %s = %q, want %q", k, got[k], v)
		}
	}
	if got["qtool.grid"] == "" {
		t.Fatal("no qtool.grid metadata")
	}
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, d := range v {
		out[i] = int64(d)
	}
	return out
}

// TestCheckMatchesExport: Check refuses exactly what Export refuses for reasons that do
// not depend on the weights (format, opset), and accepts what Export accepts.
func TestCheckMatchesExport(t *testing.T) {
	m, err := onnxio.Load(filepath.Join("..", "testmodels", "digits-mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Format: QDQ},            // opset 9: no DequantizeLinear
		{Format: QDQ, Opset: 10}, // raised: fine
		{Format: Packed},         // fine at 9
		{Format: "int3"},         // unknown format
		{Format: Packed, Opset: 99},
		{Format: Packed, Opset: 8}, // below the model's
		{Format: MatMulNBits},      // fine: the com.microsoft domain has no opset floor
		{Format: MatMulNBits, BlockSize: 24},
		{Format: MatMulNBits, BlockSize: 8},
		{Format: MatMulNBits, MinBits: 3}, // onnxruntime's CPU kernel refuses 3 bits
	} {
		_, xerr := Export(m, nil, o)
		cerr := Check(m, o)
		if (xerr == nil) != (cerr == nil) || (xerr != nil && xerr.Error() != cerr.Error()) {
			t.Errorf("%+v: Check gives %v, Export %v", o, cerr, xerr)
		}
	}
	if err := Check(m, Options{Format: QDQ}); err == nil {
		t.Error("Check accepted qdq at opset 9")
	}
}
