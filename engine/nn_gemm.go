package engine

// gemmKernel is Gemm: Y = alpha·op(A)·op(B) + beta·C with C unidirectionally broadcast.
type gemmKernel struct {
	n              *Node
	alpha, beta    float32
	transA, transB bool
	tile           matMulKernel // scratch of the tile kernel's path (tileGEMM)
	bt             []float32    // B transposed for it
}

func buildGemm(n *Node) (Kernel, error) {
	if n.Opset < 7 && n.Has("broadcast") && n.Int("broadcast", 0) == 0 {
		return nil, n.Errorf("broadcast=0 (opset %d) is not supported", n.Opset)
	}
	if in := n.NumInputs(); in < 2 || in > 3 {
		return nil, n.Errorf("want 2 or 3 inputs (A, B, optional C), have %d", in)
	}
	return &gemmKernel{
		n:      n,
		alpha:  n.Float("alpha", 1),
		beta:   n.Float("beta", 1),
		transA: n.Int("transA", 0) != 0,
		transB: n.Int("transB", 0) != 0,
	}, nil
}

func (k *gemmKernel) c(in []*Tensor) *Tensor {
	return k.n.Optional(in, 2)
}

// dims returns M, N, K and C's shape padded to two dimensions.
func (k *gemmKernel) dims(in []*Tensor) (m, n, kk, cm, cn int, err error) {
	a, b := in[0].Shape, in[1].Shape
	if len(a) != 2 || len(b) != 2 {
		return 0, 0, 0, 0, 0, k.n.Errorf("A %v and B %v must be matrices", a, b)
	}
	m, kk = a[0], a[1]
	if k.transA {
		m, kk = kk, m
	}
	kb, nn := b[0], b[1]
	if k.transB {
		kb, nn = nn, kb
	}
	if kb != kk {
		return 0, 0, 0, 0, 0, k.n.Errorf("inner dimensions differ: A %v (transA=%v), B %v (transB=%v)", a, k.transA, b, k.transB)
	}
	cm, cn = 1, 1
	if c := k.c(in); c != nil {
		s := c.Shape
		switch len(s) {
		case 0:
		case 1:
			cn = s[0]
		case 2:
			cm, cn = s[0], s[1]
		default:
			return 0, 0, 0, 0, 0, k.n.Errorf("C %v has rank above 2", s)
		}
		if (cm != 1 && cm != m) || (cn != 1 && cn != nn) {
			return 0, 0, 0, 0, 0, k.n.Errorf("C %v does not broadcast to [%d %d]", s, m, nn)
		}
	}
	return m, nn, kk, cm, cn, nil
}

func (k *gemmKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	m, n, _, _, _, err := k.dims(in)
	if err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: []int{m, n}}}, nil
}

func (k *gemmKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, []bool{false}
}

func (k *gemmKernel) Forward(ctx *Context, in, out []*Tensor) error {
	m, n, kk, cm, cn, err := k.dims(in)
	if err != nil {
		return err
	}
	y := out[0].F
	beta := float32(0)
	if c := k.c(in); c != nil && k.beta != 0 {
		beta = 1
		for i := 0; i < m; i++ {
			row := y[i*n : (i+1)*n]
			crow := c.F[(i%cm)*cn : (i%cm+1)*cn]
			if cn == 1 {
				v := k.beta * crow[0]
				for j := range row {
					row[j] = v
				}
			} else {
				for j := range row {
					row[j] = k.beta * crow[j]
				}
			}
		}
	}
	if kk == 0 || k.alpha == 0 {
		if beta == 0 {
			clear(y)
		}
		return nil
	}
	if !k.transA && k.alpha == 1 && tileGEMMOK(m, n, kk) {
		b := in[1].F
		if k.transB {
			// A Linear layer's weight is [out, in]: its transpose, small next to the
			// product (the sum is short), is made on every run, as weights may change.
			k.bt = nnGrow(k.bt, kk*n)
			transpose(k.bt, b, n, kk)
			b = k.bt
		}
		flags := 0
		if beta != 0 {
			flags = tileAdd
		}
		k.tile.tileGEMM(ctx, m, n, kk, in[0].F, b, y, flags)
		return nil
	}
	nnSgemm(ctx.BLAS, k.transA, k.transB, m, n, kk, k.alpha, in[0].F, in[1].F, beta, y)
	return nil
}

func (k *gemmKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil {
		return nil
	}
	m, n, kk, cm, cn, err := k.dims(in)
	if err != nil {
		return err
	}
	a, b := in[0].F, in[1].F
	// An empty product (a zero dimension) has no terms: A's and B's gradients get nothing.
	prod := m > 0 && n > 0 && kk > 0
	if gin[0] != nil && prod {
		// d op(A) = alpha·gY·op(B)ᵀ; with transA, dA is its transpose alpha·op(B)·gYᵀ.
		if !k.transA {
			nnSgemm(ctx.BLAS, false, !k.transB, m, kk, n, k.alpha, gy.F, b, 1, gin[0].F)
		} else {
			nnSgemm(ctx.BLAS, k.transB, true, kk, m, n, k.alpha, b, gy.F, 1, gin[0].F)
		}
	}
	if len(gin) > 1 && gin[1] != nil && prod {
		// d op(B) = alpha·op(A)ᵀ·gY; with transB, dB is alpha·gYᵀ·op(A).
		if !k.transB {
			nnSgemm(ctx.BLAS, !k.transA, false, kk, n, m, k.alpha, a, gy.F, 1, gin[1].F)
		} else {
			nnSgemm(ctx.BLAS, true, k.transA, n, kk, m, k.alpha, gy.F, a, 1, gin[1].F)
		}
	}
	if len(gin) > 2 && gin[2] != nil && k.c(in) != nil {
		gc := gin[2].F
		for i := 0; i < m; i++ {
			row := gy.F[i*n : (i+1)*n]
			gcrow := gc[(i%cm)*cn : (i%cm+1)*cn]
			if cn == 1 {
				var s float32
				for _, v := range row {
					s += v
				}
				gcrow[0] += k.beta * s
			} else {
				for j, v := range row {
					gcrow[j] += k.beta * v
				}
			}
		}
	}
	return nil
}

// matMulKernel is MatMul with numpy semantics: batch dimensions broadcast, a 1-D A is
// a row vector and a 1-D B a column vector whose unit dimension is dropped from Y.
type matMulKernel struct {
	n *Node
	// The bookkeeping of the last input shapes and the offsets of every output batch
	// item's A and B matrices, kept so that steady-state calls allocate nothing.
	lastA, lastB []int
	last         matMulDims
	aOff, bOff   []int
	work         []matMulWork // scratch of the small-matrix path, per worker
}

// cached returns the dimensions for input shapes a and b, recomputing them (and the
// batch offsets) only when the shapes change.
func (k *matMulKernel) cached(a, b []int) (*matMulDims, error) {
	if k.lastA != nil && nnShapeEq(a, k.lastA) && nnShapeEq(b, k.lastB) {
		return &k.last, nil
	}
	d, err := k.dims(a, b)
	if err != nil {
		return nil, err
	}
	k.last = d
	k.offsets(&k.last)
	k.lastA, k.lastB = append(k.lastA[:0], a...), append(k.lastB[:0], b...)
	return &k.last, nil
}

func buildMatMul(n *Node) (Kernel, error) {
	if in := n.NumInputs(); in != 2 {
		return nil, n.Errorf("want 2 inputs, have %d", in)
	}
	return &matMulKernel{n: n}, nil
}

// matMulDims is the bookkeeping of one MatMul call.
type matMulDims struct {
	m, n, k   int
	batch     int   // number of output matrices
	out       []int // output shape
	aBatch    int   // number of A matrices
	bBatch    int   // number of B matrices
	aBatchDim []int
	bBatchDim []int
	yBatchDim []int
}

func (k *matMulKernel) dims(a, b []int) (matMulDims, error) {
	var d matMulDims
	if len(a) == 0 || len(b) == 0 {
		return d, k.n.Errorf("inputs %v and %v must have rank at least 1", a, b)
	}
	var ka, kb int
	if len(a) == 1 {
		d.m, ka = 1, a[0]
	} else {
		d.m, ka = a[len(a)-2], a[len(a)-1]
		d.aBatchDim = append([]int(nil), a[:len(a)-2]...)
	}
	if len(b) == 1 {
		kb, d.n = b[0], 1
	} else {
		kb, d.n = b[len(b)-2], b[len(b)-1]
		d.bBatchDim = append([]int(nil), b[:len(b)-2]...)
	}
	if ka != kb {
		return d, k.n.Errorf("inner dimensions differ: A %v, B %v", a, b)
	}
	d.k = ka
	r := max(len(d.aBatchDim), len(d.bBatchDim))
	d.yBatchDim = make([]int, r)
	for i := 0; i < r; i++ {
		da, db := 1, 1
		if j := i - (r - len(d.aBatchDim)); j >= 0 {
			da = d.aBatchDim[j]
		}
		if j := i - (r - len(d.bBatchDim)); j >= 0 {
			db = d.bBatchDim[j]
		}
		switch {
		case da == db, db == 1:
			d.yBatchDim[i] = da
		case da == 1:
			d.yBatchDim[i] = db
		default:
			return d, k.n.Errorf("batch dimensions of A %v and B %v do not broadcast", a, b)
		}
	}
	d.batch, d.aBatch, d.bBatch = numel(d.yBatchDim), numel(d.aBatchDim), numel(d.bBatchDim)
	d.out = append([]int(nil), d.yBatchDim...)
	if len(a) > 1 {
		d.out = append(d.out, d.m)
	}
	if len(b) > 1 {
		d.out = append(d.out, d.n)
	}
	return d, nil
}

// offsets fills k.aOff and k.bOff with the element offset of each output batch item's
// A and B matrices.
func (k *matMulKernel) offsets(d *matMulDims) {
	if cap(k.aOff) < d.batch {
		k.aOff, k.bOff = make([]int, d.batch), make([]int, d.batch)
	}
	k.aOff, k.bOff = k.aOff[:d.batch], k.bOff[:d.batch]
	r := len(d.yBatchDim)
	for bi := 0; bi < d.batch; bi++ {
		rem := bi
		ai, bj := 0, 0
		aStride, bStride := 1, 1
		for i := r - 1; i >= 0; i-- {
			idx := rem % d.yBatchDim[i]
			rem /= d.yBatchDim[i]
			if j := i - (r - len(d.aBatchDim)); j >= 0 {
				if d.aBatchDim[j] != 1 {
					ai += idx * aStride
				}
				aStride *= d.aBatchDim[j]
			}
			if j := i - (r - len(d.bBatchDim)); j >= 0 {
				if d.bBatchDim[j] != 1 {
					bj += idx * bStride
				}
				bStride *= d.bBatchDim[j]
			}
		}
		k.aOff[bi] = ai * d.m * d.k
		k.bOff[bi] = bj * d.k * d.n
	}
}

func (k *matMulKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	d, err := k.dims(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: d.out}}, nil
}

func (k *matMulKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true}, []bool{false}
}

// sharedB reports whether every output item uses the single B matrix and A's items are
// laid out like Y's, so that the whole product is one Sgemm with M = batch·m.
func (d *matMulDims) sharedB() bool { return d.bBatch == 1 && d.aBatch == d.batch }

func (k *matMulKernel) Forward(ctx *Context, in, out []*Tensor) error {
	d, err := k.cached(in[0].Shape, in[1].Shape)
	if err != nil {
		return err
	}
	a, b, y := in[0].F, in[1].F, out[0].F
	if d.k == 0 {
		clear(y)
		return nil
	}
	if d.sharedB() {
		if M := d.batch * d.m; tileGEMMOK(M, d.n, d.k) {
			k.tileGEMM(ctx, M, d.n, d.k, a, b, y, 0)
			return nil
		}
		nnSgemm(ctx.BLAS, false, false, d.batch*d.m, d.n, d.k, 1, a, b, 0, y)
		return nil
	}
	if d.small() {
		k.forwardSmall(ctx, d, a, b, y)
		return nil
	}
	mn := d.m * d.n
	for bi := 0; bi < d.batch; bi++ {
		nnSgemm(ctx.BLAS, false, false, d.m, d.n, d.k, 1, a[k.aOff[bi]:k.aOff[bi]+d.m*d.k],
			b[k.bOff[bi]:k.bOff[bi]+d.k*d.n], 0, y[bi*mn:(bi+1)*mn])
	}
	return nil
}

func (k *matMulKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil {
		return nil
	}
	d, err := k.cached(in[0].Shape, in[1].Shape)
	if err != nil {
		return err
	}
	if d.m*d.n*d.k == 0 {
		return nil // an empty product: every gradient term is a sum of none
	}
	a, b := in[0].F, in[1].F
	ga, gb := gin[0], gin[1]
	if d.sharedB() {
		M := d.batch * d.m
		if ga != nil {
			nnSgemm(ctx.BLAS, false, true, M, d.k, d.n, 1, gy.F, b, 1, ga.F)
		}
		if gb != nil {
			nnSgemm(ctx.BLAS, true, false, d.k, d.n, M, 1, a, gy.F, 1, gb.F)
		}
		return nil
	}
	if d.small() {
		k.backwardSmall(ctx, d, a, b, gy.F, nnGrad(gin, 0), nnGrad(gin, 1))
		return nil
	}
	mn, mk, kn := d.m*d.n, d.m*d.k, d.k*d.n
	// Broadcast batch items add into the same gradient matrix, in batch order.
	for bi := 0; bi < d.batch; bi++ {
		g := gy.F[bi*mn : (bi+1)*mn]
		if ga != nil {
			nnSgemm(ctx.BLAS, false, true, d.m, d.k, d.n, 1, g, b[k.bOff[bi]:k.bOff[bi]+kn], 1, ga.F[k.aOff[bi]:k.aOff[bi]+mk])
		}
		if gb != nil {
			nnSgemm(ctx.BLAS, true, false, d.k, d.n, d.m, 1, a[k.aOff[bi]:k.aOff[bi]+mk], g, 1, gb.F[k.bOff[bi]:k.bOff[bi]+kn])
		}
	}
	return nil
}
