package engine

import (
	"gonum.org/v1/gonum/blas"
)

// nnOpDefs returns the rows of the convolutions, matrix products, pooling and
// normalisations (nn_*.go hold the kernels).
func nnOpDefs() []opDef {
	one, two := arity{n: 1}, arity{n: 2}
	return []opDef{
		{name: "Conv", build: buildConv, inputs: two, grad: true},
		{name: "ConvTranspose", build: buildConvTranspose, inputs: two, grad: true},
		// Gemm's C became optional in opset 11.
		{name: "Gemm", build: buildGemm, inputs: arity{n: 2, since: 11, old: 3}, grad: true},
		{name: "MatMul", build: buildMatMul, inputs: two, grad: true},
		{name: "MaxPool", build: buildMaxPool, inputs: one, grad: true},
		{name: "AveragePool", build: buildAveragePool, inputs: one, grad: true},
		{name: "GlobalAveragePool", build: buildGlobalAveragePool, inputs: one, grad: true},
		{name: "GlobalMaxPool", build: buildGlobalMaxPool, inputs: one, grad: true},
		{name: "BatchNormalization", build: buildBatchNorm, inputs: arity{n: 5}, grad: true},
		{name: "LayerNormalization", build: buildLayerNorm, inputs: two, grad: true},
		{name: "InstanceNormalization", build: buildInstanceNorm, inputs: arity{n: 3}, grad: true},
		{name: "LSTM", build: buildRNNOp(cellLSTM), inputs: arity{n: 3}, grad: true},
		{name: "GRU", build: buildRNNOp(cellGRU), inputs: arity{n: 3}, grad: true},
		{name: "RNN", build: buildRNNOp(cellRNN), inputs: arity{n: 3}, grad: true},
	}
}

// nnMaxSpatial is the largest number of spatial dimensions the convolution and pooling
// kernels handle. Internally every geometry is three-dimensional: 1-D and 2-D problems
// get leading dimensions of size one, which costs nothing and keeps one code path.
const nnMaxSpatial = 3

// nnGeom is the resolved geometry of a sliding-window op over one image: the image
// size, the window grid size and the window parameters, all padded at the front to
// three dimensions with trivial ones.
type nnGeom struct {
	nd  int // spatial dimensions of the op (1..3)
	in  [nnMaxSpatial]int
	out [nnMaxSpatial]int
	k   [nnMaxSpatial]int
	s   [nnMaxSpatial]int
	d   [nnMaxSpatial]int
	pb  [nnMaxSpatial]int // padding before
	pe  [nnMaxSpatial]int // padding after

	// validRange of every kernel offset, tabulated by initRanges when every kernel
	// dimension is at most nnRangeK, so that the im2col loops do no division.
	hasRanges bool
	rlo, rhi  [nnMaxSpatial][nnRangeK]int32
}

// nnRangeK is the largest kernel dimension whose valid ranges nnGeom tabulates.
const nnRangeK = 16

// initRanges tabulates validRange for every kernel offset; call it once the geometry is
// final.
func (g *nnGeom) initRanges() {
	g.hasRanges = false
	for j := 0; j < nnMaxSpatial; j++ {
		if g.k[j] > nnRangeK {
			return
		}
	}
	for j := 0; j < nnMaxSpatial; j++ {
		for kj := 0; kj < g.k[j]; kj++ {
			lo, hi := g.validRange(j, kj)
			g.rlo[j][kj], g.rhi[j][kj] = int32(lo), int32(hi)
		}
	}
	g.hasRanges = true
}

// rng is validRange, from the table when there is one.
func (g *nnGeom) rng(j, kj int) (lo, hi int) {
	if g.hasRanges {
		return int(g.rlo[j][kj]), int(g.rhi[j][kj])
	}
	return g.validRange(j, kj)
}

func (g *nnGeom) inSize() int  { return g.in[0] * g.in[1] * g.in[2] }
func (g *nnGeom) outSize() int { return g.out[0] * g.out[1] * g.out[2] }
func (g *nnGeom) kSize() int   { return g.k[0] * g.k[1] * g.k[2] }

// outShape returns the op's spatial output dimensions.
func (g *nnGeom) outShape() []int {
	return append([]int(nil), g.out[nnMaxSpatial-g.nd:]...)
}

// validRange returns the window-grid positions [lo, hi) along dimension j for which
// kernel offset kj lands inside the image.
func (g *nnGeom) validRange(j, kj int) (lo, hi int) {
	off := kj*g.d[j] - g.pb[j] // image index of grid position 0
	s := g.s[j]
	// smallest o with o*s+off >= 0
	if off >= 0 {
		lo = 0
	} else {
		lo = (-off + s - 1) / s
	}
	// smallest o with o*s+off >= in
	if g.in[j]-off <= 0 {
		hi = 0
	} else {
		hi = (g.in[j] - off + s - 1) / s
	}
	hi = min(hi, g.out[j])
	lo = min(lo, hi)
	return lo, hi
}

// nnWindow holds the window attributes shared by Conv, ConvTranspose and the pools, as
// given on the node; nnWindow.resolve turns them into a geometry once the input shape
// is known.
type nnWindow struct {
	kernel    []int64 // nil: taken from the weights (Conv, ConvTranspose)
	strides   []int64
	dilations []int64
	pads      []int64
	autoPad   string
	ceil      bool
}

func nnParseWindow(n *Node, needKernel bool) (nnWindow, error) {
	w := nnWindow{
		kernel:    n.Ints("kernel_shape", nil),
		strides:   n.Ints("strides", nil),
		dilations: n.Ints("dilations", nil),
		pads:      n.Ints("pads", nil),
		autoPad:   n.String("auto_pad", "NOTSET"),
		ceil:      n.Int("ceil_mode", 0) != 0,
	}
	if needKernel && w.kernel == nil {
		return w, n.Errorf("attribute kernel_shape is required")
	}
	switch w.autoPad {
	case "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID":
	default:
		return w, n.Errorf("unsupported auto_pad %q (want NOTSET, SAME_UPPER, SAME_LOWER or VALID)", w.autoPad)
	}
	if w.kernel != nil && (len(w.kernel) < 1 || len(w.kernel) > nnMaxSpatial) {
		return w, n.Errorf("kernel_shape %v: only 1 to %d spatial dimensions are supported", w.kernel, nnMaxSpatial)
	}
	for _, v := range w.kernel {
		if v < 1 {
			return w, n.Errorf("kernel_shape %v has a non-positive entry", w.kernel)
		}
	}
	for _, v := range w.strides {
		if v < 1 {
			return w, n.Errorf("strides %v has a non-positive entry", w.strides)
		}
	}
	for _, v := range w.dilations {
		if v < 1 {
			return w, n.Errorf("dilations %v has a non-positive entry", w.dilations)
		}
	}
	for _, v := range w.pads {
		if v < 0 {
			return w, n.Errorf("pads %v has a negative entry", w.pads)
		}
	}
	return w, nil
}

// params checks the list attributes against nd spatial dimensions and fills g's
// kernel, strides, dilations and explicit pads.
func (w *nnWindow) params(n *Node, g *nnGeom, kernel []int) error {
	nd := len(kernel)
	if nd < 1 || nd > nnMaxSpatial {
		return n.Errorf("%d spatial dimensions: only 1 to %d are supported", nd, nnMaxSpatial)
	}
	if w.kernel != nil && len(w.kernel) != nd {
		return n.Errorf("kernel_shape %v does not match %d spatial dimensions", w.kernel, nd)
	}
	if w.strides != nil && len(w.strides) != nd {
		return n.Errorf("strides %v does not match %d spatial dimensions", w.strides, nd)
	}
	if w.dilations != nil && len(w.dilations) != nd {
		return n.Errorf("dilations %v does not match %d spatial dimensions", w.dilations, nd)
	}
	if w.pads != nil && len(w.pads) != 2*nd {
		return n.Errorf("pads %v does not match %d spatial dimensions", w.pads, nd)
	}
	for _, v := range kernel {
		if v < 1 {
			return n.Errorf("kernel %v has an axis of size %d: every axis needs at least 1", kernel, v)
		}
	}
	g.nd = nd
	off := nnMaxSpatial - nd
	for j := 0; j < nnMaxSpatial; j++ {
		g.in[j], g.out[j], g.k[j], g.s[j], g.d[j], g.pb[j], g.pe[j] = 1, 1, 1, 1, 1, 0, 0
	}
	for i := 0; i < nd; i++ {
		j := off + i
		g.k[j] = kernel[i]
		if w.strides != nil {
			g.s[j] = int(w.strides[i])
		}
		if w.dilations != nil {
			g.d[j] = int(w.dilations[i])
		}
		if w.pads != nil && w.autoPad == "NOTSET" {
			g.pb[j] = int(w.pads[i])
			g.pe[j] = int(w.pads[nd+i])
		}
	}
	return nil
}

// resolve computes the geometry of a forward sliding window (Conv, pools) over an
// image with the given spatial dimensions.
func (w *nnWindow) resolve(n *Node, img, kernel []int) (nnGeom, error) {
	var g nnGeom
	if len(img) != len(kernel) {
		return g, n.Errorf("input has %d spatial dimensions, the kernel %d", len(img), len(kernel))
	}
	if err := w.params(n, &g, kernel); err != nil {
		return g, err
	}
	off := nnMaxSpatial - g.nd
	for i, v := range img {
		if v < 1 {
			return g, n.Errorf("input spatial size %v has an empty axis", img)
		}
		j := off + i
		g.in[j] = v
		ek := (g.k[j]-1)*g.d[j] + 1
		switch w.autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			o := (v + g.s[j] - 1) / g.s[j]
			total := max(0, (o-1)*g.s[j]+ek-v)
			small := total / 2
			if w.autoPad == "SAME_UPPER" {
				g.pb[j], g.pe[j] = small, total-small
			} else {
				g.pb[j], g.pe[j] = total-small, small
			}
			g.out[j] = o
		default:
			span := v + g.pb[j] + g.pe[j] - ek
			if span < 0 {
				return g, n.Errorf("input spatial size %v is smaller than the dilated kernel %v with pads", img, kernel)
			}
			o := span/g.s[j] + 1
			if w.ceil && span%g.s[j] != 0 {
				o++
				// The last window must start inside the image or its leading padding
				// (the rule PyTorch and onnxruntime apply), else it would see padding only.
				if (o-1)*g.s[j] >= v+g.pb[j] {
					o--
				}
			}
			g.out[j] = o
		}
		if g.out[j] < 1 {
			return g, n.Errorf("spatial output size %d < 1 for input %v", g.out[j], img)
		}
	}
	g.initRanges()
	return g, nil
}

// nnShapeEq reports whether two shapes are equal.
func nnShapeEq(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// nnGrow returns buf resized to n elements, reallocating only when it is too small.
func nnGrow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// nnSgemm computes c = alpha*op(a)*op(b) + beta*c for row-major dense matrices, where
// op(a) is m×k and op(b) is k×n, deriving the leading dimensions from the shapes.
func nnSgemm(bl blas.Float32, ta, tb bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) {
	if m == 0 || n == 0 {
		return
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	lda, ldb := max(k, 1), max(n, 1)
	if ta {
		tA, lda = blas.Trans, max(m, 1)
	}
	if tb {
		tB, ldb = blas.Trans, max(k, 1)
	}
	if m == 1 && k > 0 {
		nnSgemv(bl, tb, n, k, alpha, a, 1, b, ldb, beta, c)
		return
	}
	bl.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, max(n, 1))
}

// nnSgemv is the product of one row, c (n values) = alpha·x·op(b) + beta·c with x the k
// values incX apart: a Linear layer at batch 1. OpenBLAS's sgemm (0.3.21, Debian's)
// packs op(b) and fills its micro-tile's rows as if x were a block of rows, and took 4 to
// 6 times as long as its sgemv (1 × 1024 · 1024 × 1000: 500 against 150 µs), which reads
// each weight once.
func nnSgemv(bl blas.Float32, tb bool, n, k int, alpha float32, x []float32, incX int, b []float32, ldb int, beta float32, c []float32) {
	if tb {
		// op(b) = bᵀ, b n × k: c = b·x.
		bl.Sgemv(blas.NoTrans, n, k, alpha, b, ldb, x, incX, beta, c, 1)
		return
	}
	// b k × n: c = bᵀ·x.
	bl.Sgemv(blas.Trans, k, n, alpha, b, ldb, x, incX, beta, c, 1)
}

// nnSgemmLD is nnSgemm with explicit leading dimensions, for operands that are blocks of
// larger row-major matrices.
func nnSgemmLD(bl blas.Float32, ta, tb bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if m == 1 && k > 0 {
		incX := 1
		if ta {
			// op(a) = aᵀ, a k × 1 with rows lda apart.
			incX = lda
		}
		nnSgemv(bl, tb, n, k, alpha, a, incX, b, ldb, beta, c)
		return
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	if ta {
		tA = blas.Trans
	}
	if tb {
		tB = blas.Trans
	}
	bl.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// nnWorkers returns how many per-worker slots to split n independent items over.
func nnWorkers(ctx *Context, n int) int {
	return max(1, min(ctx.Workers, n))
}

// nnEach runs fn(w, lo, hi) for worker w = 0..nw-1 on its contiguous share of [0, n).
// Unlike Context.Parallel it hands out the worker index, so that kernels can give each
// worker its own scratch buffers; the split is fixed by n and nw, which keeps results
// deterministic.
func nnEach(ctx *Context, nw, n int, fn func(w, lo, hi int)) {
	ctx.Parallel(nw, 1, func(wlo, whi int) {
		for w := wlo; w < whi; w++ {
			lo, hi := w*n/nw, (w+1)*n/nw
			if lo < hi {
				fn(w, lo, hi)
			}
		}
	})
}

// nnGrad returns the data of gradient buffer i, or nil when no gradient is wanted.
func nnGrad(gin []*Tensor, i int) []float32 {
	if i < len(gin) && gin[i] != nil {
		return gin[i].F
	}
	return nil
}
