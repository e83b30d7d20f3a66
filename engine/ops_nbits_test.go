package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// nbitsCase is one MatMulNBits node: widths, optional inputs, a K that does or does not
// fill its last block, and A of rank 2 or 3.
type nbitsCase struct {
	bits, k, block int
	zp, bias       bool
	a              []int64 // A's shape; its last dimension is K
	n              int     // N, output columns; 5 when 0
}

func (c nbitsCase) String() string {
	return fmt.Sprintf("bits=%d K=%d N=%d block=%d zp=%v bias=%v A=%v", c.bits, c.k, c.cols(), c.block, c.zp, c.bias, c.a)
}

func (c nbitsCase) cols() int {
	if c.n == 0 {
		return 5
	}
	return c.n
}

// model builds the node with random codes, scales, zero points and bias; B and the zero
// points are packed as the contrib spec says: row n, block b, code j at bits j·bits of
// the block's bytes, least significant first.
func (c nbitsCase) model(r *rand.Rand) *onnxio.Model {
	n := c.cols()
	kb, blob := (c.k+c.block-1)/c.block, c.block*c.bits/8
	b := make([]int64, n*kb*blob)
	for row := range n {
		for k := range c.k {
			q := int64(r.IntN(1 << c.bits))
			bit := (k % c.block) * c.bits
			b[(row*kb+k/c.block)*blob+bit/8] |= q << (bit % 8)
		}
	}
	scales := make([]float32, n*kb)
	for i := range scales {
		scales[i] = float32(0.01 + r.Float64())
	}
	f := onnxpb.TensorProto_FLOAT
	inputs := []string{"a", "b", "s"}
	inits := []*onnxpb.TensorProto{intTensor("b", onnxpb.TensorProto_UINT8, []int64{int64(n), int64(kb), int64(blob)}, b),
		onnxio.FloatTensor("s", []int64{int64(n), int64(kb)}, scales)}
	if c.zp {
		row := (kb*c.bits + 7) / 8
		z := make([]int64, n*row)
		for i := range n {
			for blk := range kb {
				bit := blk * c.bits
				z[i*row+bit/8] |= int64(r.IntN(1<<c.bits)) << (bit % 8)
			}
		}
		inits = append(inits, intTensor("z", onnxpb.TensorProto_UINT8, []int64{int64(n), int64(row)}, z))
		inputs = append(inputs, "z")
	}
	if c.bias {
		bias := make([]float32, n)
		for i := range bias {
			bias[i] = float32(r.NormFloat64())
		}
		for len(inputs) < 5 {
			inputs = append(inputs, "")
		}
		inits = append(inits, onnxio.FloatTensor("bias", []int64{int64(n)}, bias))
		inputs = append(inputs, "bias")
	}
	node := gNode("MatMulNBits", inputs, []string{"y"}, attrI("K", int64(c.k)), attrI("N", int64(n)), attrI("bits", int64(c.bits)),
		attrI("block_size", int64(c.block)), attrI("accuracy_level", 1))
	node.Domain = proto.String(MSDomain)
	out := append([]int64(nil), c.a...)
	out[len(out)-1] = int64(n)
	return &onnxio.Model{Name: "matmulnbits.onnx", Proto: &onnxpb.ModelProto{
		IrVersion: proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)},
			{Domain: proto.String(MSDomain), Version: proto.Int64(1)}},
		Graph: &onnxpb.GraphProto{Name: proto.String("matmulnbits"), Node: []*onnxpb.NodeProto{node}, Initializer: inits,
			Input:  []*onnxpb.ValueInfoProto{typedValue("a", f, c.a)},
			Output: []*onnxpb.ValueInfoProto{typedValue("y", f, out)}},
	}}
}

// TestMatMulNBitsHeldAsBytes: Build keeps MatMulNBits' UINT8 codes and zero points as
// bytes (not int64, eight times larger), the kernel dequantizes W a chunk at a time, and
// the output is the contrib spec's (q − z)·scale product computed here independently
// (per code, from the initializers' bytes, summed in float64); the same file with the
// codes stored as int32_data (Build holds int64) gives the same bits, and so does one in
// which another node also reads the codes, which Build must then hold as int64.
func TestMatMulNBitsHeldAsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 3))
	for _, c := range []nbitsCase{
		{bits: 4, k: 1000, block: 64, zp: true, bias: true, a: []int64{1, 1000}, n: 600},
		{bits: 2, k: 1000, block: 32, zp: true, bias: false, a: []int64{3, 1000}, n: 600},
		{bits: 8, k: 100, block: 16, zp: false, bias: true, a: []int64{2, 100}, n: 7},
		// One row of A takes forwardRow: every width, a last block that ends inside a byte
		// (1001 and 1002 values), and a block larger than its buffer (the chunked path).
		{bits: 2, k: 1002, block: 32, zp: true, a: []int64{1, 1002}, n: 9},
		{bits: 8, k: 100, block: 16, bias: true, a: []int64{1, 100}, n: 7},
		{bits: 4, k: 1001, block: 64, zp: true, a: []int64{1, 1001}, n: 5},
		{bits: 4, k: 3000, block: 2048, zp: true, bias: true, a: []int64{1, 3000}, n: 3},
		{bits: 4, k: 2500, block: 16, zp: true, bias: true, a: []int64{1, 2500}, n: 6}, // three segments, the last with a tail
	} {
		t.Run(c.String(), func(t *testing.T) {
			m := c.model(r)
			x := make([]float32, c.a[0]*int64(c.k))
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			shape := []int{int(c.a[0]), c.k}
			run := func(m *onnxio.Model) (*Graph, []*Tensor) {
				g := mustBuild(t, m)
				out, err := g.Forward(nil, NewFloat(shape, x))
				if err != nil {
					t.Fatal(err)
				}
				return g, out
			}
			g, got := run(m)
			for _, name := range []string{"b", "z"} {
				if !c.zp && name == "z" {
					continue
				}
				if v := g.Param(name).Value; v.u8 == nil || v.I != nil {
					t.Errorf("%s: held as %d int64 values and %d bytes, want bytes only", name, len(v.I), len(v.u8))
				}
			}
			// The reference, from the file's bytes.
			init := map[string]*onnxpb.TensorProto{}
			for _, ti := range m.Proto.GetGraph().GetInitializer() {
				init[ti.GetName()] = ti
			}
			n, kb, blob := c.cols(), (c.k+c.block-1)/c.block, c.block*c.bits/8
			floats := func(name string) []float32 {
				v, err := onnxio.DecodeTensor(init[name], "")
				if err != nil {
					t.Fatal(err)
				}
				return v.Float
			}
			codes, scales := init["b"].GetRawData(), floats("s")
			// weight is W[col][k], (q − z)·scale per code from the file's bytes.
			weight := func(col, k int) float32 {
				blk, bit := k/c.block, (k%c.block)*c.bits
				q := int(codes[(col*kb+blk)*blob+bit/8]>>(bit%8)) & (1<<c.bits - 1)
				z := 1 << (c.bits - 1)
				if c.zp {
					zb := blk * c.bits
					z = int(init["z"].GetRawData()[col*((kb*c.bits+7)/8)+zb/8]>>(zb%8)) & (1<<c.bits - 1)
				}
				return float32(q-z) * scales[col*kb+blk]
			}
			norm := 1.0
			want := make([]float64, int(c.a[0])*n)
			for row := range int(c.a[0]) {
				for col := range n {
					sum := 0.0
					for k := range c.k {
						sum += float64(weight(col, k)) * float64(x[row*c.k+k])
					}
					if c.bias {
						sum += float64(floats("bias")[col])
					}
					want[row*n+col] = sum
					norm = max(norm, math.Abs(sum))
				}
			}
			for i, v := range got[0].F {
				if d := math.Abs(float64(v) - want[i]); !(d <= 1e-5*norm) {
					t.Fatalf("y[%d] = %g, want %g (the spec's product in float64)", i, v, want[i])
				}
			}
			// One row of A (forwardRow): each output is dotF32 of the row of W, dequantized
			// here per code in float32, and A, then the bias, to the bit.
			if c.a[0] == 1 && c.block <= nbitsRowBlock {
				row := make([]float32, c.k)
				for col := range n {
					for k := range c.k {
						row[k] = weight(col, k)
					}
					w := dotF32(row, x)
					if c.bias {
						w += floats("bias")[col]
					}
					if v := got[0].F[col]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("y[%d] = %v, want %v (dotF32 of the dequantized row)", col, v, w)
					}
				}
			}

			// The codes as int32_data: Build decodes them to int64.
			m2 := &onnxio.Model{Name: m.Name, Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto)}
			for _, ti := range m2.Proto.GetGraph().GetInitializer() {
				if ti.GetName() == "b" {
					for _, v := range ti.GetRawData() {
						ti.Int32Data = append(ti.Int32Data, int32(v))
					}
					ti.RawData = nil
				}
			}
			g2, got2 := run(m2)
			if v := g2.Param("b").Value; v.u8 != nil || len(v.I) != len(codes) {
				t.Errorf("int32_data codes: held as %d int64 values and %d bytes, want int64 only", len(v.I), len(v.u8))
			}
			if !slices.Equal(got[0].F, got2[0].F) {
				t.Error("codes held as int64 give other bits than codes held as bytes")
			}

			// Another node reads the codes too: Build widens them.
			m3 := &onnxio.Model{Name: m.Name, Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto)}
			gp := m3.Proto.GetGraph()
			gp.Node = append(gp.Node, gNode("Identity", []string{"b"}, []string{"bcopy"}))
			gp.Output = append(gp.Output, typedValue("bcopy", onnxpb.TensorProto_UINT8, []int64{int64(n), int64(kb), int64(blob)}))
			g3, got3 := run(m3)
			if v := g3.Param("b").Value; v.u8 != nil || len(v.I) != len(codes) {
				t.Errorf("codes read by Identity too: held as %d int64 values and %d bytes, want int64 only", len(v.I), len(v.u8))
			}
			if !slices.Equal(got[0].F, got3[0].F) {
				t.Error("widened codes give other bits")
			}
			for i, v := range got3[1].I {
				if v != int64(codes[i]) {
					t.Fatalf("Identity of the codes: [%d] = %d, want %d", i, v, codes[i])
				}
			}
		})
	}
}

// TestNibbles: the 4-bit lookup (AVX-512 or AVX2 where the CPU has it, for whole groups
// of 16 or 8 bytes, the rest in Go; .ci/run runs the engine's tests again with
// GODEBUG=cpu.avx512f=off for the AVX2 path) gives the bits of its Go definition, on tables holding NaN,
// −0, subnormals and infinities, for lengths around the groups' edges.
func TestNibbles(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4))
	var lut [16]float32
	for i := range lut {
		lut[i] = math.Float32frombits(r.Uint32())
	}
	lut[0], lut[1], lut[2], lut[3] = float32(math.NaN()), float32(math.Copysign(0, -1)), math.Float32frombits(1), float32(math.Inf(-1))
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 48, 64, 100, 1024} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		got, want := make([]float32, 2*n+1), make([]float32, 2*n+1)
		got[2*n], want[2*n] = 7, 7 // past the end: untouched
		nibbles(got, data[:n], &lut)
		nibblesGo(want, data[:n], &lut)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: out[%d] = %#x, want %#x", n, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
}

// TestMatMulNBitsRefusesSignedCodes: codes stored as INT8 are no MatMulNBits file; Build
// says so, naming B, rather than reading them as bytes.
func TestMatMulNBitsRefusesSignedCodes(t *testing.T) {
	m := nbitsCase{bits: 4, k: 64, block: 16, a: []int64{1, 64}}.model(rand.New(rand.NewPCG(16, 5)))
	for _, ti := range m.Proto.GetGraph().GetInitializer() {
		if ti.GetName() == "b" {
			ti.DataType = proto.Int32(int32(onnxpb.TensorProto_INT8))
		}
	}
	if _, err := Build(m, Options{}); err == nil || !strings.Contains(err.Error(), "B is of type INT8") {
		t.Errorf("Build gives %v, want a refusal naming B's type", err)
	}
}

// BenchmarkMatMulNBits times one MatMulNBits node of the paper MLP's size (K = N = 4096,
// 4-bit codes, blocks of 128, zero points) at batch 1 and 256 with the BLAS of
// QTOOL_BLAS (OpenBLAS by default) on GOMAXPROCS workers, in weights a second.
func BenchmarkMatMulNBits(b *testing.B) {
	ctx := benchCtx(b)
	for _, m := range []int64{1, 256} {
		c := nbitsCase{bits: 4, k: 4096, block: 128, zp: true, a: []int64{m, 4096}, n: 4096}
		r := rand.New(rand.NewPCG(7, 7))
		g, err := Build(c.model(r), Options{BLAS: ctx.BLAS, Workers: ctx.Workers})
		if err != nil {
			b.Fatal(err)
		}
		x := NewFloat([]int{int(m), 4096}, gFloats(r, int(m)*4096))
		b.Run(fmt.Sprintf("batch%d", m), func(b *testing.B) {
			for b.Loop() {
				if _, err := g.Forward(nil, x); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(4096*4096)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		})
	}
}

// TestDot32 checks dot32 (AVX2 where the CPU has it) bit for bit against dot32Go on
// lengths of 32 to 4096 values with NaNs, infinities, signed zeros and subnormals among
// them, adding into sums that start non-zero; and that the test data tell a fused
// multiply-add from the definition's rounded product (the negative control: a kernel
// with FMA would fail), and dotF32 against the float64 dot product within rounding.
func TestDot32(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 32))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, 1e-40, -3e-39}
	fused := false
	for trial := range 300 {
		n := 32 * (1 + r.IntN(128))
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			if trial%3 == 2 && r.IntN(50) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		var got, want [32]float32
		for j := range got {
			got[j] = float32(r.NormFloat64())
			want[j] = got[j]
		}
		dot32(x, y, &got)
		dot32Go(x, y, &want)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
				t.Fatalf("trial %d (n=%d): s[%d] = %v (%#x), want %v (%#x)", trial, n, j, got[j], math.Float32bits(got[j]), want[j], math.Float32bits(want[j]))
			}
		}
		if trial%3 != 2 {
			// The same sums with each product fused into its addition.
			var f [32]float32
			for i := range x {
				f[i%32] = float32(math.FMA(float64(x[i]), float64(y[i]), float64(f[i%32])))
			}
			var d [32]float32
			dot32Go(x, y, &d)
			if f != d {
				fused = true
			}
			exact := 0.0
			for i := range x {
				exact += float64(x[i]) * float64(y[i])
			}
			if g := float64(dotF32(x, y)); math.Abs(g-exact) > 1e-5*float64(n) {
				t.Fatalf("trial %d: dotF32 = %v, the float64 dot %v", trial, g, exact)
			}
		}
	}
	if !fused {
		t.Fatal("no trial tells a fused multiply-add from the rounded product: the test could not catch an FMA kernel")
	}
}
