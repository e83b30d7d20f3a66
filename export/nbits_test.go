package export

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// nbitsWeights returns the MatMulNBits node of each weight the file stores in it.
func nbitsWeights(t testing.TB, q *onnxio.Model) map[string]*onnxpb.NodeProto {
	t.Helper()
	m, err := nbitsNodes(q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nbitsNode is what checkNBits reads of a MatMulNBits node, by the contrib spec.
type nbitsNode struct {
	k, n, bits, block int
	b, zp             []int64
	scales            []float32
}

func readNBits(t testing.TB, q *onnxio.Model, node *onnxpb.NodeProto) nbitsNode {
	t.Helper()
	attr := map[string]int{}
	for _, a := range node.GetAttribute() {
		attr[a.GetName()] = int(a.GetI())
	}
	r := nbitsNode{k: attr["K"], n: attr["N"], bits: attr["bits"], block: attr["block_size"]}
	if attr["accuracy_level"] != 1 {
		t.Fatalf("node %q: accuracy_level %d, want 1 (float32 activations)", node.GetName(), attr["accuracy_level"])
	}
	tensor := func(i int) *onnxio.Tensor {
		in := node.GetInput()
		if i >= len(in) || in[i] == "" {
			return nil
		}
		p, ok := q.Param(in[i])
		if !ok {
			t.Fatalf("node %q: input %d %q is not a parameter", node.GetName(), i, in[i])
		}
		tt, err := q.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	r.b, r.scales = tensor(1).Int, tensor(2).Float
	if z := tensor(3); z != nil {
		r.zp = z.Int
	}
	return r
}

// weight decodes W [N, K] as the spec defines it: (q − zero point) · scale.
func (r nbitsNode) weight() []float32 {
	kb, blob := (r.k+r.block-1)/r.block, r.block*r.bits/8
	mask := int64(1)<<r.bits - 1
	w := make([]float32, r.n*r.k)
	for n := range r.n {
		for k := range r.k {
			blk, j := k/r.block, (k%r.block)*r.bits
			q := r.b[(n*kb+blk)*blob+j/8] >> (j % 8) & mask
			z := int64(1) << (r.bits - 1)
			if r.zp != nil {
				zb := blk * r.bits
				z = r.zp[n*((kb*r.bits+7)/8)+zb/8] >> (zb % 8) & mask
			}
			w[n*r.k+k] = float32(q-z) * r.scales[n*kb+blk]
		}
	}
	return w
}

// checkNBits checks every weight stored in MatMulNBits: the node replaced the weight's
// only reader in the input model, a MatMul or Gemm, with the right K, N and layout; its
// codes decode in Go by the spec, and in onnxruntime (the node applied to the identity
// matrix, which adds exact zeros to each weight), to the algorithm's values bit for bit;
// the width is the narrowest of 2, 4 and 8 bits that holds the grid.
func checkNBits(t *testing.T, orig, q *onnxio.Model, ws []Weight, minBits int) {
	t.Helper()
	nodes := nbitsWeights(t, q)
	byName := map[string]*onnxpb.NodeProto{}
	for _, n := range orig.Proto.GetGraph().GetNode() {
		byName[n.GetName()] = n
	}
	for _, w := range ws {
		node := nodes[w.Name]
		if node == nil {
			continue
		}
		was := byName[node.GetName()]
		if was == nil || len(was.GetInput()) < 2 || was.GetInput()[1] != w.Name || (was.GetOpType() != "MatMul" && was.GetOpType() != "Gemm") {
			t.Fatalf("%s: MatMulNBits %q replaced %v, not the MatMul or Gemm that read the weight", w.Name, node.GetName(), was)
		}
		transB := false
		for _, a := range was.GetAttribute() {
			if a.GetName() == "transB" && a.GetI() != 0 {
				transB = true
			}
		}
		r := readNBits(t, q, node)
		p, _ := orig.Param(w.Name)
		dims := p.Tensor.GetDims()
		if want := map[bool][2]int64{true: {dims[0], dims[1]}, false: {dims[1], dims[0]}}[transB]; int64(r.n) != want[0] || int64(r.k) != want[1] {
			t.Fatalf("%s: N=%d K=%d for weight %v (transB=%v)", w.Name, r.n, r.k, dims, transB)
		}
		// The narrowest width onnxruntime runs for which some zero point maps every level
		// into [0, 2^bits).
		bits := 0
		for _, b := range []int{8, 4, 2} {
			if b < cmp.Or(minBits, DefaultMinBits) {
				continue
			}
			for z := range 1 << b {
				if w.Grid.Levels[0]+z >= 0 && w.Grid.Levels[len(w.Grid.Levels)-1]+z < 1<<b {
					bits = b
				}
			}
		}
		if r.bits != bits {
			t.Fatalf("%s: %d-bit codes for levels %v, want %d", w.Name, r.bits, w.Grid.Levels, bits)
		}
		// values puts W [N, K] back in the weight's layout.
		values := func(nk []float32) []float32 {
			if transB {
				return nk
			}
			out := make([]float32, len(nk))
			for n := range r.n {
				for k := range r.k {
					out[k*r.n+n] = nk[n*r.k+k]
				}
			}
			return out
		}
		same := func(what string, got []float32) {
			for i, v := range got {
				if math.Float32bits(v) != math.Float32bits(w.Values[i]) {
					t.Fatalf("%s: %s value %d is %v, the algorithm produced %v", w.Name, what, i, v, w.Values[i])
				}
			}
		}
		same("decoded", values(r.weight()))
		same("onnxruntime's", values(nbitsInORT(t, q, node, r.k)))
	}
}

// nbitsInORT runs a copy of the node, without bias, on the K×K identity matrix in
// onnxruntime: row k of the result is column k of W, that is Wᵀ [K, N].
func nbitsInORT(t *testing.T, q *onnxio.Model, node *onnxpb.NodeProto, k int) []float32 {
	t.Helper()
	n := proto.Clone(node).(*onnxpb.NodeProto)
	n.Input = slices.Clone(n.GetInput()[:min(4, len(n.GetInput()))])
	n.Input[0] = "eye"
	n.Output = []string{"wt"}
	var inits []*onnxpb.TensorProto
	for _, in := range n.GetInput()[1:] {
		if p, ok := q.Param(in); ok {
			inits = append(inits, p.Tensor)
		}
	}
	f := int32(onnxpb.TensorProto_FLOAT)
	vi := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(f)}}}}
	}
	m := &onnxpb.ModelProto{IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}, {Domain: proto.String(MSDomain), Version: proto.Int64(1)}},
		Graph:       &onnxpb.GraphProto{Name: proto.String("w"), Node: []*onnxpb.NodeProto{n}, Initializer: inits, Input: []*onnxpb.ValueInfoProto{vi("eye")}, Output: []*onnxpb.ValueInfoProto{vi("wt")}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	eye := make([]float32, k*k)
	for i := range k {
		eye[i*k+i] = 1
	}
	out, err := ortref.Run(b, []ortref.Tensor{{Name: "eye", Shape: []int64{int64(k), int64(k)}, Data: eye}})
	if err != nil {
		t.Fatal(err)
	}
	wt := out[0].Data
	nOut := len(wt) / k
	w := make([]float32, len(wt))
	for i := range k {
		for j := range nOut {
			w[j*k+i] = wt[i*nOut+j]
		}
	}
	return w
}

// gemmNet builds x[batch,6] → Gemm(g1.w [6,5], no transB, C g1.c [1,5]) → Gemm(g2.w
// [4,5], transB, bias g2.b [4], beta 1 stated) → MatMul(mm.w [4,3]) → Add → MatMul(sh.w
// [3,3]) twice (a shared weight) → y, with attrs for the first Gemm.
func gemmNet(g1 ...*onnxpb.AttributeProto) *onnxio.Model {
	rng := rand.New(rand.NewPCG(5, 5))
	n := func(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(name), Input: in, Output: out, Attribute: attrs}
	}
	beta := &onnxpb.AttributeProto{Name: proto.String("beta"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(1)}
	return &onnxio.Model{Name: "gemm.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("gemm"),
			Node: []*onnxpb.NodeProto{
				n("Gemm", "g1", []string{"x", "g1.w", "g1.c"}, []string{"h1"}, g1...),
				n("Gemm", "g2", []string{"h1", "g2.w", "g2.b"}, []string{"h2"}, attrInt("transB", 1), beta),
				n("MatMul", "mm", []string{"h2", "mm.w"}, []string{"h3"}),
				n("MatMul", "sh1", []string{"h3", "sh.w"}, []string{"h4"}),
				n("MatMul", "sh2", []string{"h4", "sh.w"}, []string{"y"}),
			},
			Initializer: []*onnxpb.TensorProto{
				onnxio.FloatTensor("g1.w", []int64{6, 5}, randFloats(rng, 30)),
				onnxio.FloatTensor("g1.c", []int64{1, 5}, randFloats(rng, 5)),
				onnxio.FloatTensor("g2.w", []int64{4, 5}, randFloats(rng, 20)),
				onnxio.FloatTensor("g2.b", []int64{4}, randFloats(rng, 4)),
				onnxio.FloatTensor("mm.w", []int64{4, 3}, randFloats(rng, 12)),
				onnxio.FloatTensor("sh.w", []int64{3, 3}, randFloats(rng, 9)),
			},
			Input:  []*onnxpb.ValueInfoProto{tensorInfo("x", onnxpb.TensorProto_FLOAT, "batch", 6)},
			Output: []*onnxpb.ValueInfoProto{tensorInfo("y", onnxpb.TensorProto_FLOAT, "batch", 3)},
		},
	}}
}

// ternaryWeights puts every weight of m on {−1, 0, 1} × α per output channel (axis
// gives it per weight).
func ternaryWeights(m *onnxio.Model, axis map[string]int) []Weight {
	rng := rand.New(rand.NewPCG(6, 6))
	var ws []Weight
	for _, name := range []string{"g1.w", "g2.w", "mm.w", "sh.w"} {
		p, _ := m.Param(name)
		dims := p.Tensor.GetDims()
		g := Grid{Levels: []int{-1, 0, 1}, Axis: axis[name]}
		for range dims[g.Axis] {
			g.Scales = append(g.Scales, float32(0.05+rng.Float64()))
		}
		codes := make([]uint8, dims[0]*dims[1])
		for i := range codes {
			codes[i] = uint8(rng.IntN(3))
		}
		ws = append(ws, Weight{Name: name, Values: g.Values(codes, dims), Grid: g})
	}
	return ws
}

// TestMatMulNBitsGemmForms, at 2 bits: a Gemm without transB (W stored transposed) whose
// C is [1, N] (an Add after MatMulNBits), a Gemm with transB whose C is [N] (MatMulNBits'
// bias input), a MatMul on levels {0..3} (an explicit zero point), and a weight two MatMuls share (kept packed: one MatMulNBits
// node cannot serve two readers), each against the engine in onnxruntime, bit-exact
// weights, onnx.checker.
func TestMatMulNBitsGemmForms(t *testing.T) {
	requireChecker(t)
	ortref.Require(t)
	orig := gemmNet()
	ws := ternaryWeights(orig, map[string]int{"g1.w": 1, "g2.w": 0, "mm.w": 1, "sh.w": 1})
	// mm.w on {0, 1, 2, 3}: 2-bit codes need an explicit zero point, 0.
	for i := range ws[2].Values {
		ws[2].Values[i] = (ws[2].Values[i]/ws[2].Grid.Scales[i%3] + 1) * ws[2].Grid.Scales[i%3]
		if i%5 == 0 {
			ws[2].Values[i] = 3 * ws[2].Grid.Scales[i%3]
		}
	}
	ws[2].Grid.Levels = []int{0, 1, 2, 3}
	x := randFloats(rand.New(rand.NewPCG(7, 7)), 8*6)
	shape := []int{8, 6}
	want := runEngine(t, withWeights(t, orig, ws), x, shape)
	opts := Options{Format: MatMulNBits, BlockSize: 16, MinBits: 2, Metadata: Metadata{Version: "test", Algorithm: "GD+Proj", Seed: 7}}
	q := verifyExport(t, orig, ws, opts, x, shape, want, 1e-5, checkerOpset(t))
	// The same inputs give the same bytes.
	var files [2][]byte
	for i := range files {
		m, err := Export(orig, ws, opts)
		if err != nil {
			t.Fatal(err)
		}
		if files[i], err = m.Marshal(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two exports of the same weights differ")
	}
	ops := map[string]string{}
	for _, n := range q.Proto.GetGraph().GetNode() {
		ops[n.GetName()] = n.GetOpType()
		if n.GetName() == "g2" && (len(n.GetInput()) != 6 || n.GetInput()[5] != "g2.b") {
			t.Errorf("g2: inputs %q, want g2.b as MatMulNBits' bias (input 5)", n.GetInput())
		}
	}
	for name, op := range map[string]string{"g1": "MatMulNBits", "qtool/g1/Add": "Add", "g2": "MatMulNBits", "mm": "MatMulNBits", "sh1": "MatMul", "sh2": "MatMul"} {
		if ops[name] != op {
			t.Errorf("node %q is %q, want %s (nodes %v)", name, ops[name], op, ops)
		}
	}
}

// TestMatMulNBitsGemmAttributes: a Gemm with transA, alpha ≠ 1, beta ≠ 1 with a C of
// [1, N] or [N] (the bias input), or all at once, still becomes MatMulNBits (a Transpose
// in front for transA, alpha in the scales, a Mul by beta in front of C), and onnxruntime
// runs the file to the engine's output of the float model within float rounding.
func TestMatMulNBitsGemmAttributes(t *testing.T) {
	requireChecker(t)
	ortref.Require(t)
	f := func(name string, v float32) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
	}
	for _, c := range []struct {
		name  string
		attrs []*onnxpb.AttributeProto
		cN    bool // g1's C as [N]: MatMulNBits' bias input when alpha is 1
		want  map[string]int
	}{
		{"transA", []*onnxpb.AttributeProto{attrInt("transA", 1)}, false, map[string]int{"Transpose": 1, "Add": 1}},
		{"alpha", []*onnxpb.AttributeProto{f("alpha", 2.5)}, false, map[string]int{"Mul": 1, "Add": 1}},
		{"alpha bias", []*onnxpb.AttributeProto{f("alpha", 2.5)}, true, map[string]int{"Mul": 1, "Add": 1}},
		{"beta", []*onnxpb.AttributeProto{f("beta", 0.5)}, false, map[string]int{"Mul": 1, "Add": 1}},
		{"beta bias", []*onnxpb.AttributeProto{f("beta", -3)}, true, map[string]int{"Mul": 1}},
		{"all", []*onnxpb.AttributeProto{attrInt("transA", 1), f("alpha", 0.75), f("beta", 2)}, true, map[string]int{"Transpose": 1, "Mul": 2, "Add": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := gemmNet(c.attrs...)
			x := randFloats(rand.New(rand.NewPCG(7, 7)), 8*6)
			shape := []int{8, 6}
			if c.attrs[0].GetName() == "transA" {
				// transA reads A as [K, M]: x [6, batch] keeps the model valid.
				m.Proto.Graph.Input[0] = tensorInfo("x", onnxpb.TensorProto_FLOAT, 6, "batch")
				shape = []int{6, 8}
			}
			if c.cN {
				for i, init := range m.Proto.Graph.Initializer {
					if init.GetName() == "g1.c" {
						m.Proto.Graph.Initializer[i] = onnxio.FloatTensor("g1.c", []int64{5}, randFloats(rand.New(rand.NewPCG(8, 8)), 5))
					}
				}
			}
			ws := ternaryWeights(m, map[string]int{"g1.w": 1, "g2.w": 0, "mm.w": 1, "sh.w": 1})
			want := runEngine(t, withWeights(t, m, ws), x, shape)
			opts := Options{Format: MatMulNBits, BlockSize: 16, Metadata: Metadata{Version: "test", Algorithm: "GD+Proj", Seed: 7}}
			q := verifyExport(t, m, ws, opts, x, shape, want, 1e-5, checkerOpset(t))
			ops := map[string]int{}
			var g1 *onnxpb.NodeProto
			for _, n := range q.Proto.GetGraph().GetNode() {
				if n.GetOpType() == "Gemm" || strings.HasPrefix(n.GetName(), "qtool/g1/") {
					ops[n.GetOpType()]++
				}
				if n.GetName() == "g1" {
					g1 = n
				}
			}
			if g1 == nil || g1.GetOpType() != "MatMulNBits" || ops["Gemm"] != 0 {
				t.Fatalf("g1 is %v, nodes %v: want every Gemm replaced by MatMulNBits", g1.GetOpType(), ops)
			}
			for _, op := range []string{"Transpose", "Mul", "Add"} {
				if ops[op] != c.want[op] {
					t.Errorf("nodes %v: want %d %s around g1", ops, c.want[op], op)
				}
			}
			if hasBias, want := len(g1.GetInput()) == 6, c.want["Add"] == 0; hasBias != want {
				t.Errorf("g1 inputs %q: bias input %v, want %v", g1.GetInput(), hasBias, want)
			}
		})
	}
}

// TestReportMatMulNBits: the report of a matmulnbits file finds each Gemm weight's codes
// behind its MatMulNBits node — 4 bits per ±α weight plus the padding of the last block,
// the per-block scales apart — and states the runtime memory of the format, measured,
// with the note that MatMulNBits weights stay packed in memory.
func TestReportMatMulNBits(t *testing.T) {
	origPath := filepath.Join("..", "testmodels", "fmnist-mlp.onnx")
	orig, err := onnxio.Load(origPath)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("%v: run testmodels/make.py", err))
	}
	ws := quantize(t, orig, gridCases()[1])
	quantPath := filepath.Join(t.TempDir(), "mlp-nbits.onnx")
	if err := WriteFile(quantPath, orig, ws, Options{Format: MatMulNBits}); err != nil {
		t.Fatal(err)
	}
	quant, err := onnxio.Load(quantPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(orig, quant, origPath, quantPath, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]TensorReport{}
	for _, tr := range r.Tensors {
		byName[tr.Name] = tr
	}
	var f32 int64
	for _, w := range ws {
		tr := byName[w.Name]
		n, k := tr.Shape[0], tr.Shape[1] // Gemm with transB: [N, K]
		kb := (k + DefaultBlockSize - 1) / DefaultBlockSize
		if !tr.Binarized || tr.Format != "matmulnbits" || tr.StoredBytes != n*kb*DefaultBlockSize/2 || tr.ScaleBytes != 4*n*kb {
			t.Fatalf("%s: %+v; want matmulnbits, %d B of 4-bit codes and %d B of scales", w.Name, tr, n*kb*DefaultBlockSize/2, 4*n*kb)
		}
		f32 += 4 * tr.Count
	}
	if tot := r.Totals; tot.FileBytesAfter != fileSize(t, quantPath) {
		t.Fatalf("file %d B, disk has %d", tot.FileBytesAfter, fileSize(t, quantPath))
	}
	if len(r.Runtime) != 1 || r.Runtime[0].Format != "matmulnbits" || r.Runtime[0].Bits != 4 || r.Runtime[0].Float32Bytes != f32 ||
		r.Runtime[0].MeasuredRatio <= 0 || r.Runtime[0].RuntimeBytes >= f32/4 {
		t.Fatalf("runtime memory %+v: want one 4-bit matmulnbits group of %d float32 bytes, measured at under a quarter of them", r.Runtime, f32)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{NBitsNote, "Runtime memory, matmulnbits (4-bit)", "bench/nbits"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, text.String())
		}
	}
	t.Log("\n" + text.String())
}
