package engine

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/blas"
)

// convKernel is Conv. On CPUs with the AVX-512 tile kernel every convolution but the
// depthwise ones takes the direct path (nn_conv_direct.go), parallel over images. Without
// it Conv is im2col + Sgemm: the batch is cut into chunks of items, im2col and col2im of
// a chunk's items run in parallel over the workers, then one goroutine makes one product
// per chunk and group over the items' columns side by side (the BLAS parallelises it
// internally; calling the BLAS from several goroutines at once instead makes OpenBLAS's
// own threads fight over the cores); 1×1 stride-1 unpadded convolutions of one item skip
// im2col. Depthwise convolutions (one input channel per group) run as a direct loop,
// parallel over output planes forward and over batch items backward, with 3×3 "same"
// planes up to 16 wide in assembly.
type convKernel struct {
	n     *Node
	win   nnWindow
	group int

	// Scratch, sized on first use and grown only when shapes grow.
	col  []float32 // column matrices of a chunk
	gcol []float32 // column gradients of a chunk
	ybuf []float32 // output (gradient) planes of a chunk, items side by side
	// gemmPan is the tile kernel's panels over a chunk's columns (forwardGemmTile).
	gemmPan []convPanel
	tab     nnGatherTable // im2col index lists of the last 2-D geometry that uses them
	ngat    narrowGather  // the narrow path's column matrix as gathers (nn_conv_narrow.go)
	gws     [][]float32   // depthwise weight-gradient partial sums of workers 1..

	dwPlan dwPlan // the padded-plane depthwise layout (nn_depthwise.go)
	// dwLanes and dwLaneBuf are the lanes path's layout and per-worker scratch
	// (nn_depthwise_lanes.go).
	dwLanes   dwLanes
	dwLaneBuf []dwLaneBuf
	dwBuf     [][]float32 // each worker's padded plane
	dwTmp     [][]float32 // each worker's output plane before its SiLU is streamed
	dwFor     []nnGeom    // the geometry each dwBuf was laid out for
	// The same for the input gradient's convolution, and the flipped taps.
	dwPlanT dwPlan
	dwBufT  [][]float32
	dwForT  []nnGeom
	wflip   []float32

	direct convDirect  // the direct path's packed weights and worker scratch
	trim   trimmedConv // the weight without the taps that read only padding
	taps   tapsPath    // the taps path's classes and packed weights (nn_conv_taps.go)
	pool   *poolKernel // the fused MaxPool forwardDirect applies per block of images
	// gap, when set, receives the mean of every output plane (a fused GlobalAveragePool),
	// which the depthwise planes take while each plane is in the cache; gapDone reports
	// that they did.
	gap     []float32
	gapDone bool
	poolBuf []float32  // the plan's buffer of the unpooled output, for its blocks
	poolIn  [1]*Tensor // the fused MaxPool's arguments
	poolOut [1]*Tensor

	// A residual added after a convolution off the direct path: the arguments of
	// addResidual, which resFn binds once.
	resY, resR []float32
	resAct     *nnClamp
	resFn      func(lo, hi int)
	// Likewise the bias and activation of depthwise planes off the assembly path:
	// planeEpilogue's arguments are resY, resR (the bias), resAct, epiM and epiO.
	epiM, epiO   int
	epiFn        func(lo, hi int)
	noDirect     bool // tests: force im2col (+ the tile kernel, or Sgemm) even where the direct path runs
	noTile       bool // tests: im2col + Sgemm through the BLAS even where the tile kernel runs
	noNarrow     bool // tests: forwardGemmTile's own products even where the narrow path runs
	noDWPad      bool // tests: force the generic depthwise loop where the padded plane runs
	noDWLanes    bool // tests: one plane at a time where the lanes path runs (forwardDWLanes)
	forceDirect  bool // tests: the direct path for planes smaller than convDirectMinPlane too
	noWinograd   bool // tests: the direct path's products even where the Winograd path runs
	noWino4      bool // tests: Winograd in 2 × 2 tiles even where 4 × 4 ones run
	streamMin    int  // tests: convStreamMin when positive; negative: never non-temporal stores
	noPixelSplit bool // tests: batch 1's pointwise products split by output channels, never by pixels
	noRingPool   bool // tests: a fused pool after a chunked column matrix reads the whole output, not pooledChunks' ring
	// ystride, during a call from convBNKernel.run, is the distance between the
	// images' outputs in y (a Concat's row), instead of their size.
	ystride      int
	noRemainders bool // tests: every pixel of a pointwise layer in its image's own panels (see remainders)
	noKBlocks    bool // tests: a pointwise layer's products over all its rows at once, never in blocks of 16 (pointwiseBlocks)
	noPrefetch   bool // tests: no tilePrefetch hint (forwardDirect)
	noTaps       bool // tests: small planes' products over every tap, never the taps path's classes
	tapsChunk    int  // tests: the taps path's images per chunk, when positive
}

// nnColBudget is the number of float32 values a chunk's column matrix and output planes
// may hold together (2 MiB):
// large enough for a product the BLAS runs at full speed, small enough that the matrix
// im2col just wrote is still in cache when Sgemm reads it (1 to 8 MiB measured alike
// within the noise of a shared machine; 256 KiB was clearly slower).
const nnColBudget = 1 << 19

// chunk returns how many batch items share one im2col pass. The budget covers the
// chunk's output planes too, which the product writes and a copy then reads back.
func (d *convDims) chunk() int {
	per := max(1, (d.Cg*d.g.kSize()+d.Mg)*d.g.outSize())
	return max(1, min(d.N, nnColBudget/per))
}

func buildConv(n *Node) (Kernel, error) {
	win, err := nnParseWindow(n, false)
	if err != nil {
		return nil, err
	}
	group := n.Int("group", 1)
	if group < 1 {
		return nil, n.Errorf("group %d must be positive", group)
	}
	if in := n.NumInputs(); in < 2 || in > 3 {
		return nil, n.Errorf("want 2 or 3 inputs (X, W, optional B), have %d", in)
	}
	return &convKernel{n: n, win: win, group: int(group)}, nil
}

// convDims is the shape bookkeeping of one Conv call.
type convDims struct {
	g               nnGeom
	N, C, M, Cg, Mg int
	pointwise       bool // 1×1, stride 1, no padding: the image is its own column matrix
	depthwise       bool // one input channel per group: direct loop
}

func (k *convKernel) dims(x, w []int, b *Tensor) (convDims, error) {
	var d convDims
	n := k.n
	if len(x) < 3 {
		return d, n.Errorf("input X has rank %d, want at least 3 (N, C, spatial...)", len(x))
	}
	if len(w) != len(x) {
		return d, n.Errorf("weight W has shape %v, want rank %d like X %v", w, len(x), x)
	}
	d.N, d.C, d.M, d.Cg = x[0], x[1], w[0], w[1]
	if d.C < 1 || d.M < 1 {
		return d, n.Errorf("X %v and W %v: a convolution needs at least one input and one output channel", x, w)
	}
	if d.Cg*k.group != d.C {
		return d, n.Errorf("X has %d channels but W %v with group %d expects %d", d.C, w, k.group, d.Cg*k.group)
	}
	if d.M%k.group != 0 {
		return d, n.Errorf("W has %d output channels, not divisible by group %d", d.M, k.group)
	}
	d.Mg = d.M / k.group
	if b != nil && !nnShapeEq(b.Shape, []int{d.M}) {
		return d, n.Errorf("bias B has shape %v, want [%d]", b.Shape, d.M)
	}
	kern := w[2:]
	if k.win.kernel != nil {
		for i, v := range k.win.kernel {
			if i < len(kern) && int(v) != kern[i] {
				return d, n.Errorf("kernel_shape %v does not match W %v", k.win.kernel, w)
			}
		}
	}
	g, err := k.win.resolve(n, x[2:], kern)
	if err != nil {
		return d, err
	}
	d.g = g
	d.pointwise = g.isPointwise()
	d.depthwise = d.Cg == 1 && k.group > 1
	return d, nil
}

// isPointwise reports whether g is a 1×1 window at unit stride without padding.
func (g *nnGeom) isPointwise() bool {
	return g.kSize() == 1 && g.s == [nnMaxSpatial]int{1, 1, 1} &&
		g.pb == [nnMaxSpatial]int{} && g.pe == [nnMaxSpatial]int{}
}

func (k *convKernel) bias(in []*Tensor) *Tensor {
	return k.n.Optional(in, 2)
}

func (k *convKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	d, err := k.dims(in[0].Shape, in[1].Shape, k.bias(in))
	if err != nil {
		return nil, err
	}
	shape := append([]int{d.N, d.M}, d.g.outShape()...)
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

func (k *convKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, []bool{false}
}

// nnScratch makes sure bufs has nw buffers of at least size elements each.
func nnScratch(bufs [][]float32, nw, size int) [][]float32 {
	for len(bufs) < nw {
		bufs = append(bufs, nil)
	}
	for i := 0; i < nw; i++ {
		bufs[i] = nnGrow(bufs[i], size)
	}
	return bufs
}

func (k *convKernel) Forward(ctx *Context, in, out []*Tensor) error {
	return k.run(ctx, in[0], in[1], k.bias(in), out[0], nil, nil, nil, nil)
}

// planeEpilogue adds to output planes [lo, hi) of k.resY (k.epiO values each) the bias
// k.resR of their channel (when non-nil), then applies k.resAct (when non-nil).
func (k *convKernel) planeEpilogue(lo, hi int) {
	O, b, act := k.epiO, k.resR, k.resAct
	for p := lo; p < hi; p++ {
		yp := k.resY[p*O : (p+1)*O]
		switch {
		case b != nil && act != nil:
			act.apply(yp, yp, b[p%k.epiM])
		case b != nil:
			bv := b[p%k.epiM]
			for j := range yp {
				yp[j] += bv
			}
		default:
			act.applyNoBias(yp, yp)
		}
	}
}

// addResidual adds k.resR to k.resY over [lo, hi) and applies k.resAct there.
func (k *convKernel) addResidual(lo, hi int) {
	y, r := k.resY[lo:hi], k.resR[lo:hi]
	for i, v := range r {
		y[i] += v
	}
	if k.resAct != nil {
		k.resAct.applyNoBias(y, y)
	}
}

// nnClamp is the activation a fused convolution applies to its output in the pass that
// writes it: Clip to [lo, hi], Relu, HardSwish v·clamp(a·v + b, 0, 1) or SiLU, each computed
// exactly as its own kernel computes it.
type nnClamp struct {
	lo, hi float32
	relu   bool // Relu's exact semantics instead of lo and hi
	swish  bool // HardSwish with slope a and offset b instead of lo and hi
	silu   bool // SiLU, x·σ(x), as QuickGelu of alpha 1 computes it (siluVec)
	a, b   float32
}

// apply sets dst = act(src + bias) in one pass (dst may be src).
func (c *nnClamp) apply(dst, src []float32, bias float32) {
	dst = dst[:len(src)]
	if c.relu {
		// As the Relu kernel: clear every bit of a value whose sign bit is set,
		// branch-free.
		for i, v := range src {
			u := int32(math.Float32bits(v + bias))
			dst[i] = math.Float32frombits(uint32(u &^ (u >> 31)))
		}
		return
	}
	for i, v := range src {
		dst[i] = v + bias
	}
	c.applyNoBias(dst, dst)
}

// applyNoBias is apply without a bias: adding zero would turn −0 into +0.
func (c *nnClamp) applyNoBias(dst, src []float32) {
	dst = dst[:len(src)]
	switch {
	case c.relu:
		for i, v := range src {
			u := int32(math.Float32bits(v))
			dst[i] = math.Float32frombits(uint32(u &^ (u >> 31)))
		}
	case c.silu:
		siluVec(src, dst)
	case c.swish:
		// As the HardSwish kernel: the clamp to [0, 1] on bit patterns, so that NaN and
		// −∞ still give NaN through the product.
		const one = 0x3f800000 // bits of 1
		a, b := c.a, c.b
		for i, v := range src {
			t := int32(math.Float32bits(a*v + b))
			dst[i] = v * math.Float32frombits(uint32(min(max(t, 0), one)))
		}
	default:
		clipBits(src, dst, c.lo, c.hi)
	}
}

// run is Forward with the weight and the (possibly nil) bias given apart from the node's
// inputs, so that a fused plan step can substitute folded ones, and with an optional
// clamp of the output.
//
// With pool set, y is the output of that MaxPool applied to the convolution's output,
// which then exists only a few images at a time in the workers' buffers (2×2 windows on
// the direct path) or in full, the plan's buffer of the convolution's output shape (which
// the plan holds whichever path runs, so that its size does not depend on the CPU).
//
// With res set (and pool nil), res is added to the convolution's output before act.
func (k *convKernel) run(ctx *Context, x, w, b, y *Tensor, act *nnClamp, pool *poolKernel, full, res *Tensor) error {
	d, err := k.dims(x.Shape, w.Shape, b)
	if err != nil {
		return err
	}
	d, w = k.trimmed(d, w)
	return k.runDims(ctx, &d, x, w, b, y, act, pool, full, res)
}

// runDims is run with the shapes already checked into d.
func (k *convKernel) runDims(ctx *Context, d *convDims, x, w, b, y *Tensor, act *nnClamp, pool *poolKernel, full, res *Tensor) error {
	if res != nil {
		if pool != nil || len(res.F) != len(y.F) {
			return k.n.Errorf("internal error: residual of %d values for an output of %d", len(res.F), len(y.F))
		}
		if k.forwardDirectOK(d) && !k.tapsOK(d, w) {
			var bias []float32
			if b != nil {
				bias = b.F
			}
			k.forwardDirect(ctx, d, x.F, w.F, k.weightKey(w), bias, y.F, act, nil, res.F)
			return nil
		}
		if err := k.runDims(ctx, d, x, w, b, y, nil, nil, nil, nil); err != nil {
			return err
		}
		// The arguments go through the kernel to a function bound once, so that handing
		// it to ctx.Parallel does not allocate on every run.
		if k.resFn == nil {
			k.resFn = k.addResidual
		}
		k.resY, k.resR, k.resAct = y.F, res.F, act
		ctx.Parallel(len(y.F), 16384, k.resFn)
		k.resY, k.resR, k.resAct = nil, nil, nil
		return nil
	}
	if pool != nil {
		shape := append([]int{d.N, d.M}, d.g.outShape()...)
		pg, err := pool.geom(shape)
		if err != nil {
			return err
		}
		if !k.directOK(d) || !pool.poolable(&pg) {
			if full == nil || !slices.Equal(full.Shape, shape) || len(full.F) != numel(shape) {
				return k.n.Errorf("internal error: a fused MaxPool without a buffer of the convolution's output shape %v", shape)
			}
			if err := k.runDims(ctx, d, x, w, b, full, act, nil, nil, nil); err != nil {
				return err
			}
			k.poolIn[0], k.poolOut[0] = full, y
			err := pool.Forward(ctx, k.poolIn[:], k.poolOut[:])
			k.poolIn[0], k.poolOut[0] = nil, nil
			return err
		}
		var bias []float32
		if b != nil {
			bias = b.F
		}
		pool.prepare(&pg)
		k.pool = pool
		if full != nil {
			k.poolBuf = full.F
		}
		k.forwardDirect(ctx, d, x.F, w.F, k.weightKey(w), bias, y.F, act, &pg, nil)
		k.pool, k.poolBuf = nil, nil
		return nil
	}
	if d.depthwise {
		var bias []float32
		if b != nil {
			bias = b.F
		}
		if k.forwardDepthwise(ctx, d, x.F, w.F, bias, y.F, act) {
			return nil
		}
		if b != nil || act != nil {
			// Through a function bound once, as addResidual.
			if k.epiFn == nil {
				k.epiFn = k.planeEpilogue
			}
			k.resY, k.resAct, k.epiM, k.epiO = y.F, act, d.M, d.g.outSize()
			if b != nil {
				k.resR = b.F
			}
			ctx.Parallel(d.N*d.M, max(1, 16384/max(k.epiO, 1)), k.epiFn)
			k.resY, k.resR, k.resAct = nil, nil, nil
		}
		return nil
	}
	var bias []float32
	if b != nil {
		bias = b.F
	}
	if k.tapsOK(d, w) {
		k.forwardTaps(ctx, d, x.F, w.F, k.weightKey(w), bias, y.F, act)
		return nil
	}
	if k.forwardDirectOK(d) {
		k.forwardDirect(ctx, d, x.F, w.F, k.weightKey(w), bias, y.F, act, nil, nil)
		return nil
	}
	k.forwardGemm(ctx, d, x.F, w.F, k.weightKey(w), bias, y.F, act)
	return nil
}

// gatherCols writes the column matrices of items s..s+cnt-1, group grp, side by side
// into col (row stride cnt·O), in parallel over the items.
func (k *convKernel) gatherCols(ctx *Context, d *convDims, x, col []float32, s, cnt, grp int) {
	g := &d.g
	isz, O := g.inSize(), g.outSize()
	L := cnt * O
	var tab *nnGatherTable
	if !d.pointwise && nnUseTable(g) {
		tab = k.tab.table(g)
	}
	if tab != nil && O <= 16 {
		// Planes of a few pixels: the items innermost, the channels over the workers.
		xs := x[(s*d.C+grp*d.Cg)*isz:]
		ctx.Parallel(d.Cg, max(1, 16384/max(1, g.kSize()*L)), func(lo, hi int) {
			tab.im2colItems(lo, hi, xs, d.C*isz, cnt, col, L)
		})
		return
	}
	ctx.Parallel(cnt, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xg := x[((s+i)*d.C+grp*d.Cg)*isz : ((s+i)*d.C+(grp+1)*d.Cg)*isz]
			if tab != nil {
				tab.im2col(d.Cg, xg, col[i*O:], L)
				continue
			}
			if d.pointwise {
				for c := 0; c < d.Cg; c++ {
					copy(col[c*L+i*O:c*L+(i+1)*O], xg[c*O:(c+1)*O])
				}
				continue
			}
			nnIm2col(g, d.Cg, xg, col[i*O:], L)
		}
	})
}

// cols returns the column matrix of items s..s+cnt-1, group grp, and its row stride: the
// image itself for a pointwise convolution of one item, else k.col filled by gatherCols.
func (k *convKernel) cols(ctx *Context, d *convDims, x []float32, s, cnt, grp int) ([]float32, int) {
	isz, O := d.g.inSize(), d.g.outSize()
	if d.pointwise && cnt == 1 {
		return x[(s*d.C+grp*d.Cg)*isz : (s*d.C+(grp+1)*d.Cg)*isz], O
	}
	col := k.col[:d.Cg*d.g.kSize()*cnt*O]
	k.gatherCols(ctx, d, x, col, s, cnt, grp)
	return col, cnt * O
}

// planes copies the Mg output planes of group grp of items s..s+cnt-1 between the
// item-major tensor t (N×M×O) and the chunk matrix buf (Mg rows of cnt·O values, items
// side by side), in parallel over the planes: toBuf gathers t into buf; otherwise buf
// plus bias (when non-nil), clamped by act (when non-nil), is written over t.
func (k *convKernel) planes(ctx *Context, d *convDims, t, buf, bias []float32, s, cnt, grp int, toBuf bool, act *nnClamp) {
	O := d.g.outSize()
	L := cnt * O
	ctx.Parallel(cnt*d.Mg, max(1, 16384/max(O, 1)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			i, m := p/d.Mg, p%d.Mg
			tp := t[((s+i)*d.M+grp*d.Mg+m)*O : ((s+i)*d.M+grp*d.Mg+m+1)*O]
			bp := buf[m*L+i*O : m*L+(i+1)*O]
			switch {
			case toBuf:
				copy(bp, tp)
			case bias != nil && act != nil:
				act.apply(tp, bp, bias[grp*d.Mg+m])
			case bias != nil:
				bv := bias[grp*d.Mg+m]
				tp = tp[:len(bp)]
				for j, v := range bp {
					tp[j] = v + bv
				}
			case act != nil:
				act.applyNoBias(tp, bp)
			default:
				copy(tp, bp)
			}
		}
	})
}

// forwardGemm makes one product per chunk and group, W_g (Mg×Cg·K) times the chunk's
// column matrix (Cg·K × cnt·O): one large product runs the BLAS far faster than cnt small
// ones. Its result has the items side by side, so a copy that also adds the bias moves
// it into the item-major output. A chunk of one item (batch 1, or items too large to
// share a chunk) writes the output in place instead.
func (k *convKernel) forwardGemm(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp) {
	g := &d.g
	O := g.outSize()
	CgK := d.Cg * g.kSize()
	nb := d.chunk()
	direct := nb == 1
	if !d.pointwise || !direct {
		k.col = nnGrow(k.col, CgK*nb*O)
	}
	// Only weights that stay (a frozen parameter): trained ones would be packed anew on
	// every step into a copy as large as themselves, which held ResNet-18's training
	// step at 32 px 16 % above its memory through Sgemm.
	if convDirectOK() && !k.noTile && wk.p != nil {
		k.forwardGemmTile(ctx, d, x, w, wk, bias, y, act)
		return
	}
	beta := float32(0)
	if direct && bias != nil {
		// Start from the bias and let Sgemm add the product: no separate bias pass.
		beta = 1
		ctx.Parallel(d.N*d.M, max(1, 16384/max(O, 1)), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				bv := bias[p%d.M]
				yp := y[p*O : (p+1)*O]
				for j := range yp {
					yp[j] = bv
				}
			}
		})
	}
	if !direct {
		k.ybuf = nnGrow(k.ybuf, d.Mg*nb*O)
	}
	for s := 0; s < d.N; s += nb {
		cnt := min(nb, d.N-s)
		for grp := 0; grp < k.group; grp++ {
			wg := w[grp*d.Mg*CgK : (grp+1)*d.Mg*CgK]
			col, ld := k.cols(ctx, d, x, s, cnt, grp)
			if direct {
				yo := (s*d.M + grp*d.Mg) * O
				if O == 1 {
					// One output pixel of one image (ResNet's last stage on small
					// inputs at batch 1): a matrix-vector product reads the weights
					// once, where Sgemm would first copy them into its panels.
					ctx.BLAS.Sgemv(blas.NoTrans, d.Mg, CgK, 1, wg, CgK, col, ld, beta, y[yo:yo+d.Mg], 1)
					continue
				}
				nnSgemmLD(ctx.BLAS, false, false, d.Mg, O, CgK, 1, wg, CgK, col, ld, beta, y[yo:yo+d.Mg*O], O)
				continue
			}
			yb := k.ybuf[:d.Mg*cnt*O]
			nnSgemmLD(ctx.BLAS, false, false, d.Mg, cnt*O, CgK, 1, wg, CgK, col, ld, 0, yb, cnt*O)
			k.planes(ctx, d, y, yb, bias, s, cnt, grp, false, act)
		}
	}
	if direct && act != nil {
		ctx.Parallel(len(y), 16384, func(lo, hi int) { act.applyNoBias(y[lo:hi], y[lo:hi]) })
	}
}

// forwardGemmTile is forwardGemm with the products on the tile kernel where it runs, for
// frozen weights: the column matrix of a chunk of images as B, the weights packed once
// and kept between runs (packWeights) as A. Through the BLAS, Sgemm copied the weights into its own panels
// on every call, which at batch 1 (ResNet-18 at 32 px: 2×2 and 1×1 planes) tripled the
// traffic of layers that only stream their weights; the row blocks go over the workers.
func (k *convKernel) forwardGemmTile(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp) {
	O := d.g.outSize()
	CgK := d.Cg * d.g.kSize()
	RB := (d.Mg + 7) / 8
	nb := d.chunk()
	direct := nb == 1
	if k.narrowOK(d) {
		k.forwardNarrow(ctx, d, x, w, wk, bias, y, act)
		return
	}
	// One image's long sum over a small plane (ResNet-18's last stage at 224 px: 4 608
	// rows of the sum, 49 pixels) read its whole column matrix (903 KB, more than a Zen
	// 3's L2) again for every row block; in blocks of convKBlockWide rows of the sum
	// (pointwiseBlocks, the same chains of fused multiply-adds), each block's panel pairs
	// stay in L1 while all of a worker's row blocks read them.
	kblocks := direct && !k.noKBlocks && CgK > 2*convKBlockWide
	if kblocks {
		k.packBlocks(ctx, d, w, wk, convKBlockWide)
		k.direct.kblocked++
	} else {
		k.packWeights(ctx, d, w, wk)
	}
	bp := k.packBias(d, bias)
	if !direct {
		k.ybuf = nnGrow(k.ybuf, d.Mg*nb*O)
	}
	nw := nnWorkers(ctx, RB)
	work := k.direct.workers(nw)
	for s := 0; s < d.N; s += nb {
		cnt := min(nb, d.N-s)
		L := cnt * O
		k.gemmPan = panels(k.gemmPan[:0], 0, 0, L)
		// Chunks of small planes gathered through the table take the pixels outermost.
		pm := !direct && !d.pointwise && O <= 16 && nnUseTable(&d.g)
		for grp := 0; grp < k.group; grp++ {
			var col []float32
			var ld int
			if pm {
				col, ld = k.colsPixelMajor(ctx, d, x, s, cnt, grp), L
			} else {
				col, ld = k.cols(ctx, d, x, s, cnt, grp)
			}
			// One image writes its planes in place, bias added by the kernel; a chunk of
			// images goes through k.ybuf, which planes spreads out adding bias and act.
			dst, ldc := y[(s*d.M+grp*d.Mg)*O:], O
			var bg []float32
			if direct {
				if bp != nil {
					bg = bp[grp*RB*8 : (grp+1)*RB*8]
				}
			} else {
				dst, ldc = k.ybuf[:d.Mg*L], L
			}
			nnEach(ctx, nw, RB, func(wi, lo, hi int) {
				r0, r1 := lo*8, min(hi*8, d.Mg)
				var bs []float32
				if bg != nil {
					bs = bg[lo*8 : hi*8]
				}
				if kblocks {
					wpb := k.direct.wpb[grp*RB*CgK*8 : (grp+1)*RB*CgK*8]
					work[wi].pointwiseBlocks(CgK, convKBlockWide, r1-r0, hi-lo, wpb, RB, lo, bs, col, ld, dst[r0*ldc:], ldc, k.gemmPan, 0, nil)
					return
				}
				wg := k.direct.wp[grp*RB*CgK*8 : (grp+1)*RB*CgK*8]
				work[wi].multiply(CgK, r1-r0, wg[lo*CgK*8:hi*CgK*8], bs, col, ld, nil, dst[r0*ldc:], ldc, k.gemmPan, 0, nil)
			})
			switch {
			case pm:
				k.planesPixelMajor(ctx, d, y, k.ybuf[:d.Mg*L], bias, s, cnt, grp, act)
			case !direct:
				k.planes(ctx, d, y, k.ybuf[:d.Mg*L], bias, s, cnt, grp, false, act)
			}
		}
	}
	if direct && act != nil {
		ctx.Parallel(len(y), 16384, func(lo, hi int) { act.applyNoBias(y[lo:hi], y[lo:hi]) })
	}
}

// colsPixelMajor is gatherCols for chunks of planes of at most 16 pixels gathered
// through the table, with the columns pixel-major: column p·cnt + i is pixel p of item
// s+i. Each channel's planes are first transposed to item-minor rows (one per input
// pixel), so that every row of the column matrix is a copy of one of them: gathering
// one value of every item in turn (im2colItems), from planes a power of two apart
// (ResNet-18's 2×2 planes of 256 channels: 4 KiB), took a third of the layer.
func (k *convKernel) colsPixelMajor(ctx *Context, d *convDims, x []float32, s, cnt, grp int) []float32 {
	g := &d.g
	tab := k.tab.table(g)
	K, O, isz := g.kSize(), g.outSize(), g.inSize()
	L := cnt * O
	col := k.col[:d.Cg*K*L]
	nw := nnWorkers(ctx, d.Cg)
	work := k.direct.workers(nw)
	nnEach(ctx, nw, d.Cg, func(wi, lo, hi int) {
		t := nnGrow(work[wi].itemsT, isz*cnt)
		work[wi].itemsT = t
		for c := lo; c < hi; c++ {
			for i := range cnt {
				src := x[((s+i)*d.C+grp*d.Cg+c)*isz : ((s+i)*d.C+grp*d.Cg+c+1)*isz]
				for j, v := range src {
					t[j*cnt+i] = v
				}
			}
			for kk := 0; kk < K; kk++ {
				row := col[(c*K+kk)*L : (c*K+kk+1)*L]
				for p, j := range tab.idx[kk*O : (kk+1)*O] {
					if j < 0 {
						clear(row[p*cnt : (p+1)*cnt])
					} else {
						copy(row[p*cnt:(p+1)*cnt], t[int(j)*cnt:(int(j)+1)*cnt])
					}
				}
			}
		}
	})
	return col
}

// planesPixelMajor is planes (buf to t) for buf's columns pixel-major (colsPixelMajor).
func (k *convKernel) planesPixelMajor(ctx *Context, d *convDims, t, buf, bias []float32, s, cnt, grp int, act *nnClamp) {
	O := d.g.outSize()
	L := cnt * O
	ctx.Parallel(cnt, max(1, 16384/max(1, d.Mg*O)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for m := 0; m < d.Mg; m++ {
				tp := t[((s+i)*d.M+grp*d.Mg+m)*O : ((s+i)*d.M+grp*d.Mg+m+1)*O]
				bp := buf[m*L+i:]
				if bias != nil {
					bv := bias[grp*d.Mg+m]
					for p := range tp {
						tp[p] = bp[p*cnt] + bv
					}
				} else {
					for p := range tp {
						tp[p] = bp[p*cnt]
					}
				}
				if act != nil {
					act.applyNoBias(tp, tp)
				}
			}
		}
	})
}

// forwardDepthwise computes y = W ∗ x and reports whether it also added the bias and
// applied act, as the assembly 3×3 planes do; otherwise the caller does.
func (k *convKernel) forwardDepthwise(ctx *Context, d *convDims, x, w, bias, y []float32, act *nnClamp) bool {
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	same3 := g.is3x3Same()
	if same3 && dw3x3Fast(g.out[2]) {
		if _, ok := dw3x3Flags(act); ok && d.Mg == 1 {
			// One input plane per output plane: whole images in one call each.
			ctx.Parallel(d.N, max(1, 4096/max(d.M*O*K, 1)), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					dw3x3Planes(x[i*d.C*isz:(i+1)*d.C*isz], y[i*d.M*O:(i+1)*d.M*O], g.out[1], g.out[2], d.M, w, bias, act, false)
				}
			})
			return true
		}
		if _, ok := dw3x3Flags(act); ok {
			ctx.Parallel(d.N*d.M, max(1, 4096/max(O*K, 1)), func(lo, hi int) {
				for p := lo; p < hi; p++ {
					i, m := p/d.M, p%d.M
					c := m / d.Mg
					var bm []float32
					if bias != nil {
						bm = bias[m : m+1]
					}
					dw3x3Plane(x[(i*d.C+c)*isz:(i*d.C+c+1)*isz], y[p*O:(p+1)*O], g.out[1], g.out[2], w[m*9:m*9+9], bm, act, false)
				}
			})
			return true
		}
	}
	if k.dwLanesOK(d, act) {
		k.forwardDWLanes(ctx, d, x, w, bias, y, act)
		return true
	}
	if !k.noDWPad && dwPadOK(g) && dwPlaneFast() {
		k.forwardDWPad(ctx, d, x, w, bias, y, act)
		return true
	}
	// Output planes are independent: split over (item, channel) so that batch 1 also
	// uses every worker.
	ctx.Parallel(d.N*d.M, max(1, 4096/max(O*K, 1)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			i, m := p/d.M, p%d.M
			c := m / d.Mg
			xc := x[(i*d.C+c)*isz : (i*d.C+c+1)*isz]
			ym := y[p*O : (p+1)*O]
			if same3 {
				nnDW3x3(xc, w[m*9:m*9+9], ym, g.out[1], g.out[2], false)
				continue
			}
			clear(ym)
			r := m * K
			for k0 := 0; k0 < g.k[0]; k0++ {
				for k1 := 0; k1 < g.k[1]; k1++ {
					for k2 := 0; k2 < g.k[2]; k2++ {
						nnDepthwiseRow(g, w[r], xc, ym, k0, k1, k2)
						r++
					}
				}
			}
		}
	})
	return false
}

func (k *convKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil {
		return nil
	}
	b := k.bias(in)
	d, err := k.dims(in[0].Shape, in[1].Shape, b)
	if err != nil {
		return err
	}
	gx, gw := nnGrad(gin, 0), nnGrad(gin, 1)
	var gb []float32
	if b != nil {
		gb = nnGrad(gin, 2)
	}
	if gb != nil {
		O := d.g.outSize()
		ctx.Parallel(d.M, 1, func(lo, hi int) {
			for m := lo; m < hi; m++ {
				// float64: a float32 running sum over N·O terms loses the gradient of
				// a bias before a training-mode BatchNorm, which should cancel to zero.
				var s float64
				for i := 0; i < d.N; i++ {
					s += nnSum64(gy.F[(i*d.M+m)*O : (i*d.M+m+1)*O])
				}
				gb[m] += float32(s)
			}
		})
	}
	if gx == nil && gw == nil {
		return nil
	}
	if d.depthwise {
		k.backwardDepthwise(ctx, &d, in[0].F, in[1].F, gy.F, gx, gw)
		return nil
	}
	if k.directOK(&d) {
		k.backwardDirect(ctx, &d, in[0].F, in[1].F, gy.F, gx, gw)
		return nil
	}
	g := &d.g
	isz, O := g.inSize(), g.outSize()
	CgK := d.Cg * g.kSize()
	w, x := in[1].F, in[0].F
	// As forward: one product per chunk and group over the items side by side, with the
	// output gradient gathered into that layout first.
	nb := d.chunk()
	if gw != nil && (!d.pointwise || nb > 1) {
		k.col = nnGrow(k.col, CgK*nb*O)
	}
	if gx != nil && (!d.pointwise || nb > 1) {
		k.gcol = nnGrow(k.gcol, CgK*nb*O)
	}
	if nb > 1 {
		k.ybuf = nnGrow(k.ybuf, d.Mg*nb*O)
	}
	for s := 0; s < d.N; s += nb {
		cnt := min(nb, d.N-s)
		L := cnt * O
		for grp := 0; grp < k.group; grp++ {
			wg := w[grp*d.Mg*CgK : (grp+1)*d.Mg*CgK]
			var gyc []float32
			if cnt == 1 {
				gyo := (s*d.M + grp*d.Mg) * O
				gyc = gy.F[gyo : gyo+d.Mg*O]
			} else {
				gyc = k.ybuf[:d.Mg*L]
				k.planes(ctx, &d, gy.F, gyc, nil, s, cnt, grp, true, nil)
			}
			if gw != nil {
				col, ld := k.cols(ctx, &d, x, s, cnt, grp)
				nnSgemmLD(ctx.BLAS, false, true, d.Mg, CgK, L, 1, gyc, L, col, ld,
					1, gw[grp*d.Mg*CgK:(grp+1)*d.Mg*CgK], CgK)
			}
			if gx == nil {
				continue
			}
			if d.pointwise && cnt == 1 {
				nnSgemm(ctx.BLAS, true, false, d.Cg, O, d.Mg, 1, wg, gyc, 1,
					gx[(s*d.C+grp*d.Cg)*isz:(s*d.C+(grp+1)*d.Cg)*isz])
				continue
			}
			gcol := k.gcol[:CgK*L]
			nnSgemmLD(ctx.BLAS, true, false, CgK, L, d.Mg, 1, wg, CgK, gyc, L, 0, gcol, L)
			k.scatterCols(ctx, &d, gcol, gx, s, cnt, grp)
		}
	}
	return nil
}

// scatterCols is the adjoint of gatherCols: it adds the column gradients of items
// s..s+cnt-1, group grp, into their image gradients, in parallel over the items.
func (k *convKernel) scatterCols(ctx *Context, d *convDims, gcol, gx []float32, s, cnt, grp int) {
	g := &d.g
	isz, L := g.inSize(), cnt*g.outSize()
	var tab *nnGatherTable
	if !d.pointwise && nnUseTable(g) {
		tab = k.tab.table(g)
	}
	ctx.Parallel(cnt, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gxg := gx[((s+i)*d.C+grp*d.Cg)*isz : ((s+i)*d.C+(grp+1)*d.Cg)*isz]
			if tab != nil {
				tab.col2im(d.Cg, gcol[i*g.outSize():], gxg, L)
				continue
			}
			if d.pointwise {
				O := g.outSize()
				for c := 0; c < d.Cg; c++ {
					dst := gxg[c*O : (c+1)*O]
					for j, v := range gcol[c*L+i*O : c*L+(i+1)*O] {
						dst[j] += v
					}
				}
				continue
			}
			nnCol2im(g, d.Cg, gcol[i*g.outSize():], gxg, L)
		}
	})
}

// backwardDepthwise is the direct loop's adjoint, parallel over batch items; worker 0
// accumulates the weight gradient in place, the others into their own buffers, summed in
// worker order afterwards so that results are deterministic.
func (k *convKernel) backwardDepthwise(ctx *Context, d *convDims, x, w, gy, gx, gw []float32) {
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	same3 := g.is3x3Same()
	fast := same3 && dw3x3Fast(g.out[2])
	nw := nnWorkers(ctx, d.N)
	if gw != nil {
		// As in backwardDirect: the weight gradient is summed in slots fixed by the batch
		// alone (nnEach hands the slots out to the workers), added in slot order, so that
		// its bits do not depend on the worker count.
		nw = min(d.N, convGradSlots)
		k.gws = nnScratch(k.gws, nw, len(w))
	}
	pad := !k.noDWPad && !(same3 && fast) && dwPadOK(g) && dwPlaneFast()
	var p, pT *dwPlan
	if pad {
		p = k.dwPlan.setup(g)
		dwBuffers(&k.dwBuf, &k.dwFor, nw, p)
		if t, ok := dwTransposed(g); ok && gx != nil {
			// The input gradient of unit strides is the convolution of the padded output
			// gradient with the flipped taps.
			pT = k.dwPlanT.setup(&t)
			dwBuffers(&k.dwBufT, &k.dwForT, nw, pT)
			k.wflip = nnGrow(k.wflip, len(w))
			for m := 0; m < d.M; m++ {
				for t := 0; t < K; t++ {
					k.wflip[m*K+t] = w[m*K+K-1-t]
				}
			}
		}
	}
	nnEach(ctx, nw, d.N, func(wk, lo, hi int) {
		gwk := gw
		if wk > 0 && gw != nil {
			gwk = k.gws[wk][:len(w)]
			clear(gwk)
		}
		for i := lo; i < hi; i++ {
			if pad {
				k.backwardDWPad(d, p, pT, wk, i, x, w, gy, gx, gwk)
				continue
			}
			for m := 0; m < d.M; m++ {
				c := m / d.Mg
				var gxc, xc []float32
				if gx != nil {
					gxc = gx[(i*d.C+c)*isz : (i*d.C+c+1)*isz]
				}
				if gwk != nil {
					xc = x[(i*d.C+c)*isz : (i*d.C+c+1)*isz]
				}
				gym := gy[(i*d.M+m)*O : (i*d.M+m+1)*O]
				if same3 && fast {
					wm := w[m*9 : m*9+9]
					if gxc != nil {
						flip := [9]float32{wm[8], wm[7], wm[6], wm[5], wm[4], wm[3], wm[2], wm[1], wm[0]}
						dw3x3Plane(gym, gxc, g.out[1], g.out[2], flip[:], nil, nil, true)
					}
					if gwk != nil {
						dw3x3GradW(xc, gym, g.out[1], g.out[2], gwk[m*9:m*9+9])
					}
					continue
				}
				if same3 {
					var gwm []float32
					if gwk != nil {
						gwm = gwk[m*9 : m*9+9]
					}
					nnDW3x3Back(xc, w[m*9:m*9+9], gym, gxc, gwm, g.out[1], g.out[2])
					continue
				}
				r := m * K
				for k0 := 0; k0 < g.k[0]; k0++ {
					for k1 := 0; k1 < g.k[1]; k1++ {
						for k2 := 0; k2 < g.k[2]; k2++ {
							s := nnDepthwiseBackRow(g, w[r], xc, gym, gxc, k0, k1, k2)
							if gwk != nil {
								gwk[r] += s
							}
							r++
						}
					}
				}
			}
		}
	})
	if gw != nil {
		for wk := 1; wk < nw; wk++ {
			for j, v := range k.gws[wk][:len(w)] {
				gw[j] += v
			}
		}
	}
}
