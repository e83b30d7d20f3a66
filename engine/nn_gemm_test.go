package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// refGemm computes alpha·op(A)·op(B) + beta·C in float64 with C broadcast by index
// arithmetic.
func refGemm(a []float64, as []int, b []float64, bs []int, c []float64, cs []int, alpha, beta float64, ta, tb bool) []float64 {
	M, K := as[0], as[1]
	if ta {
		M, K = K, M
	}
	N := bs[1]
	if tb {
		N = bs[0]
	}
	y := make([]float64, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var s float64
			for k := 0; k < K; k++ {
				av := a[i*K+k]
				if ta {
					av = a[k*M+i]
				}
				bv := b[k*N+j]
				if tb {
					bv = b[j*K+k]
				}
				s += av * bv
			}
			y[i*N+j] = alpha * s
			if c != nil {
				cm, cn := 1, 1
				switch len(cs) {
				case 1:
					cn = cs[0]
				case 2:
					cm, cn = cs[0], cs[1]
				}
				y[i*N+j] += beta * c[(i%cm)*cn+j%cn]
			}
		}
	}
	return y
}

type gemmCase struct {
	name        string
	a, b, c     []int // c nil: no C
	alpha, beta float32
	ta, tb      bool
}

var gemmCases = []gemmCase{
	{name: "all_attributes", a: []int{4, 3}, b: []int{5, 4}, c: []int{1, 5}, alpha: 0.25, beta: 0.35, ta: true, tb: true},
	{name: "alpha", a: []int{3, 5}, b: []int{5, 4}, c: []int{1, 4}, alpha: 0.5, beta: 1},
	{name: "beta", a: []int{2, 7}, b: []int{7, 4}, c: []int{1, 4}, alpha: 1, beta: 0.5},
	{name: "matrix_bias", a: []int{3, 6}, b: []int{6, 4}, c: []int{3, 4}, alpha: 1, beta: 1},
	{name: "no_bias", a: []int{2, 10}, b: []int{10, 3}, alpha: 1, beta: 1},
	{name: "scalar_bias", a: []int{2, 3}, b: []int{3, 4}, c: []int{}, alpha: 1, beta: 1},
	{name: "single_elem_vector_bias", a: []int{3, 7}, b: []int{7, 3}, c: []int{1}, alpha: 1, beta: 1},
	{name: "vector_bias", a: []int{2, 7}, b: []int{7, 4}, c: []int{4}, alpha: 1, beta: 1},
	{name: "column_bias", a: []int{3, 5}, b: []int{5, 4}, c: []int{3, 1}, alpha: 1.5, beta: -2},
	{name: "transA", a: []int{6, 3}, b: []int{6, 4}, c: []int{1, 4}, alpha: 1, beta: 1, ta: true},
	{name: "transB", a: []int{3, 6}, b: []int{4, 6}, c: []int{1, 4}, alpha: 1, beta: 1, tb: true},
}

func (c gemmCase) node() *Node {
	attrs := []*onnxpb.AttributeProto{attrF("alpha", c.alpha), attrF("beta", c.beta)}
	if c.ta {
		attrs = append(attrs, attrI("transA", 1))
	}
	if c.tb {
		attrs = append(attrs, attrI("transB", 1))
	}
	nIn := 2
	if c.c != nil {
		nIn = 3
	}
	return nntNode("Gemm", 13, nIn, 1, attrs...)
}

func (c gemmCase) inputs(r *rand.Rand) []*Tensor {
	in := []*Tensor{nntRand(r, c.a, -1, 1), nntRand(r, c.b, -1, 1)}
	if c.c != nil {
		in = append(in, nntRand(r, c.c, -1, 1))
	}
	return in
}

func TestGemmForward(t *testing.T) {
	for _, c := range gemmCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			in := c.inputs(r)
			out := nntRun(t, buildKernel(t, c.node()), nntCtx(t, 2), in)
			var cv []float64
			if c.c != nil {
				cv = to64(in[2].F)
			}
			want := refGemm(to64(in[0].F), c.a, to64(in[1].F), c.b, cv, c.c, float64(c.alpha), float64(c.beta), c.ta, c.tb)
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
		})
	}
}

func TestGemmGradient(t *testing.T) {
	for _, c := range gemmCases {
		t.Run(c.name, func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: c.name, op: "Gemm", opset: 13, attrs: c.node().Proto.Attribute, inputs: c.inputs})
		})
	}
}

// refMatMul is numpy's matmul in float64, batch broadcasting by index arithmetic.
func refMatMul(a []float64, as []int, b []float64, bs []int) ([]float64, []int) {
	as2, bs2 := append([]int(nil), as...), append([]int(nil), bs...)
	if len(as) == 1 {
		as2 = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs2 = []int{bs[0], 1}
	}
	M, K, N := as2[len(as2)-2], as2[len(as2)-1], bs2[len(bs2)-1]
	ab, bb := as2[:len(as2)-2], bs2[:len(bs2)-2]
	r := max(len(ab), len(bb))
	pad := func(s []int) []int { return append(nntOnes(r-len(s), 1), s...) }
	ab, bb = pad(ab), pad(bb)
	yb := make([]int, r)
	for i := range yb {
		yb[i] = max(ab[i], bb[i])
	}
	P := numel(yb)
	y := make([]float64, P*M*N)
	idx, ai, bi := make([]int, r), make([]int, r), make([]int, r)
	for p := 0; p < P; p++ {
		nntUnravel(p, yb, idx)
		for i := range idx {
			ai[i], bi[i] = idx[i]%ab[i], idx[i]%bb[i]
		}
		ao, bo := nntRavel(ai, ab)*M*K, nntRavel(bi, bb)*K*N
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				var s float64
				for k := 0; k < K; k++ {
					s += a[ao+i*K+k] * b[bo+k*N+j]
				}
				y[p*M*N+i*N+j] = s
			}
		}
	}
	shape := yb
	if len(as) > 1 {
		shape = append(shape, M)
	}
	if len(bs) > 1 {
		shape = append(shape, N)
	}
	return y, shape
}

var matMulCases = []struct {
	name string
	a, b []int
}{
	{"2d", []int{3, 4}, []int{4, 3}},
	{"3d", []int{2, 3, 4}, []int{2, 4, 3}},
	{"4d", []int{1, 2, 3, 4}, []int{1, 2, 4, 3}},
	{"shared_b", []int{2, 3, 5, 4}, []int{4, 6}},
	{"shared_a", []int{5, 4}, []int{3, 4, 2}},
	{"broadcast_both", []int{2, 1, 3, 4}, []int{3, 4, 5}},
	{"broadcast_unit_b", []int{3, 2, 4}, []int{1, 4, 2}},
	{"vec_a", []int{4}, []int{2, 4, 3}},
	{"vec_b", []int{2, 3, 4}, []int{4}},
	{"vec_vec", []int{4}, []int{4}},
	// Attention's shapes, and item sizes that leave partial row blocks and panels, on
	// the tile path; the last above matMulSmall, one BLAS call per item.
	{"attention", []int{2, 4, 16, 16}, []int{2, 4, 16, 16}},
	{"ragged", []int{3, 13, 19}, []int{3, 19, 21}},
	{"ragged_broadcast", []int{1, 13, 19}, []int{3, 19, 37}},
	{"large_items", []int{2, 70, 70}, []int{2, 70, 70}},
}

func TestMatMulForward(t *testing.T) {
	for _, c := range matMulCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(8, 9))
			in := []*Tensor{nntRand(r, c.a, -1, 1), nntRand(r, c.b, -1, 1)}
			out := nntRun(t, buildKernel(t, nntNode("MatMul", 13, 2, 1)), nntCtx(t, 2), in)
			want, shape := refMatMul(to64(in[0].F), c.a, to64(in[1].F), c.b)
			if !nnShapeEq(out[0].Shape, shape) {
				t.Fatalf("shape %v, want %v", out[0].Shape, shape)
			}
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
		})
	}
}

func TestMatMulGradient(t *testing.T) {
	for _, c := range matMulCases {
		t.Run(c.name, func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: c.name, op: "MatMul", opset: 13, inputs: func(r *rand.Rand) []*Tensor {
				return []*Tensor{nntRand(r, c.a, -1, 1), nntRand(r, c.b, -1, 1)}
			}})
		})
	}
}

// TestMatMulSmallExact holds the small-matrix path to its contract bit for bit: every
// output is the chain of float32 FMAs over k in order, whatever the worker count; the
// gradients are the same chains over the transposed operands, added to what the buffer
// held.
func TestMatMulSmallExact(t *testing.T) {
	d := matMulDims{m: 13, n: 21, k: 19, batch: 6}
	if !d.small() {
		t.Skip("no tile kernel on this CPU (needs AVX-512F, or AVX2 and FMA); the BLAS path runs instead")
	}
	r := rand.New(rand.NewPCG(3, 4))
	as, bs := []int{6, 13, 19}, []int{6, 19, 21}
	a, b := nntRand(r, as, -1, 1), nntRand(r, bs, -1, 1)
	chain := func(x, y []float32, xs, ys, n int, init float32) float32 {
		s := init
		for i := range n {
			s = float32(math.FMA(float64(x[i*xs]), float64(y[i*ys]), float64(s)))
		}
		return s
	}
	for _, workers := range []int{1, 2, 3} {
		k := buildKernel(t, nntNode("MatMul", 13, 2, 1))
		ctx := nntCtx(t, workers)
		out := nntRun(t, k, ctx, []*Tensor{a, b})[0]
		for bi := range 6 {
			for i := range 13 {
				for j := range 21 {
					want := chain(a.F[bi*13*19+i*19:], b.F[bi*19*21+j:], 1, 21, 19, 0)
					if got := out.F[bi*13*21+i*21+j]; got != want {
						t.Fatalf("%d workers: Y[%d,%d,%d] = %v, want %v", workers, bi, i, j, got, want)
					}
				}
			}
		}
		g := nntRand(r, out.Shape, -1, 1)
		ga, gb := nntRand(r, as, -1, 1), nntRand(r, bs, -1, 1)
		ga0, gb0 := append([]float32(nil), ga.F...), append([]float32(nil), gb.F...)
		if err := k.(Differentiable).Backward(ctx, []*Tensor{a, b}, []*Tensor{out}, []*Tensor{g}, []*Tensor{ga, gb}); err != nil {
			t.Fatal(err)
		}
		for bi := range 6 {
			gi := g.F[bi*13*21:]
			for i := range 13 {
				for p := range 19 {
					want := chain(gi[i*21:], b.F[bi*19*21+p*21:], 1, 1, 21, ga0[bi*13*19+i*19+p])
					if got := ga.F[bi*13*19+i*19+p]; got != want {
						t.Fatalf("%d workers: gA[%d,%d,%d] = %v, want %v", workers, bi, i, p, got, want)
					}
				}
			}
			for p := range 19 {
				for j := range 21 {
					want := chain(a.F[bi*13*19+p:], gi[j:], 19, 21, 13, gb0[bi*19*21+p*21+j])
					if got := gb.F[bi*19*21+p*21+j]; got != want {
						t.Fatalf("%d workers: gB[%d,%d,%d] = %v, want %v", workers, bi, p, j, got, want)
					}
				}
			}
		}
	}
}

func TestMatMulRejectsMismatch(t *testing.T) {
	k := buildKernel(t, nntNode("MatMul", 13, 2, 1))
	for _, s := range [][2][]int{{{2, 3}, {4, 2}}, {{2, 2, 3}, {3, 3, 2}}} {
		if _, err := k.Infer([]*Tensor{{DType: Float32, Shape: s[0]}, {DType: Float32, Shape: s[1]}}); err == nil {
			t.Errorf("%v × %v: no error", s[0], s[1])
		}
	}
}

// TestMatMulTileGEMMExact holds a shared-weight MatMul with a short sum (a Linear layer
// on a 3-D input), which runs on the tile kernel, to the FMA chain over k bit for bit on
// 1 to 3 workers, with 200 rows (a partial last chunk and row block) and 40 columns (a
// partial panel); and the bias-fused step to the chain started from the bias.
func TestMatMulTileGEMMExact(t *testing.T) {
	const B, T, K, N = 2, 100, 64, 40
	if !tileGEMMOK(B*T, N, K) {
		t.Skip("no tile kernel on this CPU (needs AVX-512F, or AVX2 and FMA); the BLAS path runs instead")
	}
	r := rand.New(rand.NewPCG(3, 5))
	a, b, bias := nntRand(r, []int{B, T, K}, -1, 1), nntRand(r, []int{K, N}, -1, 1), nntRand(r, []int{N}, -1, 1)
	chain := func(row, j int, init float32) float32 {
		s := init
		for i := range K {
			s = float32(math.FMA(float64(a.F[row*K+i]), float64(b.F[i*N+j]), float64(s)))
		}
		return s
	}
	for _, workers := range []int{1, 2, 3} {
		mm := buildKernel(t, nntNode("MatMul", 13, 2, 1)).(*matMulKernel)
		ctx := nntCtx(t, workers)
		out := nntRun(t, mm, ctx, []*Tensor{a, b})[0]
		fused := &matMulBiasKernel{mm: mm}
		fo := &Tensor{DType: Float32, Shape: []int{B, T, N}, F: make([]float32, B*T*N)}
		if err := fused.Forward(ctx, []*Tensor{a, b, bias}, []*Tensor{fo}); err != nil {
			t.Fatal(err)
		}
		for row := range B * T {
			for j := range N {
				if got, want := out.F[row*N+j], chain(row, j, 0); got != want {
					t.Fatalf("%d workers: Y[%d,%d] = %v, want %v", workers, row, j, got, want)
				}
				if got, want := fo.F[row*N+j], chain(row, j, bias.F[j]); got != want {
					t.Fatalf("%d workers, fused bias: Y[%d,%d] = %v, want %v", workers, row, j, got, want)
				}
			}
		}
	}
}

// TestGemmTileExact: a Gemm of a Linear layer (transB, a bias C) with a short sum runs on
// the tile kernel, B transposed on the way; each output is the FMA chain over k started
// from C, on 1 to 3 workers.
func TestGemmTileExact(t *testing.T) {
	const M, K, N = 200, 64, 40
	if !tileGEMMOK(M, N, K) {
		t.Skip("no tile kernel on this CPU (needs AVX-512F, or AVX2 and FMA); the BLAS path runs instead")
	}
	r := rand.New(rand.NewPCG(3, 6))
	a, w, c := nntRand(r, []int{M, K}, -1, 1), nntRand(r, []int{N, K}, -1, 1), nntRand(r, []int{N}, -1, 1)
	for _, workers := range []int{1, 2, 3} {
		k := buildKernel(t, nntNode("Gemm", 13, 3, 1, attrI("transB", 1)))
		out := nntRun(t, k, nntCtx(t, workers), []*Tensor{a, w, c})[0]
		for i := range M {
			for j := range N {
				s := c.F[j]
				for p := range K {
					s = float32(math.FMA(float64(a.F[i*K+p]), float64(w.F[j*K+p]), float64(s)))
				}
				if got := out.F[i*N+j]; got != s {
					t.Fatalf("%d workers: Y[%d,%d] = %v, want %v", workers, i, j, got, s)
				}
			}
		}
	}
}
