package engine

// Batched products of small matrices (attention's Q·Kᵀ and weights·V: 16 × 16 × 16 per
// head and image in a small transformer) cost more in the call into the BLAS than in
// arithmetic, one call per item, one item after another. Where the convolution tile
// kernel runs, each item is instead one or two tile calls, and the items are shared out
// over the workers. An item's result is Σ_i a_i·b_i as FMAs in the order of i, the tile
// kernel's contract, so it depends on neither the thread count nor the batch size.

// matMulSmall is the largest m·n·k that takes the tile path. Above it one BLAS call per
// item is no longer dominated by its overhead and the BLAS's own blocking wins.
const matMulSmall = 64 * 64 * 64

// matMulGrain is the fewest multiply-adds worth a worker of their own: waking a
// sleeping worker costs tens of microseconds, the time of about this many products on
// the tile kernel (attention at batch 32, 128 items of 16 × 16 × 16, ran 1.7 times
// slower on two workers than on one).
const matMulGrain = 1 << 20

// matMulWork is one worker's scratch for the tile path.
type matMulWork struct {
	a  []float32 // the item's left operand packed into 8-row blocks
	bt []float32 // an item's B transposed (the gradient of A)
	cw convWork
	// The panels of the current call's two output widths.
	panY, panK []convPanel
	_          [64]byte // keeps workers' slice headers off each other's cache lines
}

// small reports whether d's items take the tile path.
func (d *matMulDims) small() bool {
	return convDirectOK() && d.batch > 1 && d.m*d.n*d.k <= matMulSmall
}

// smallWorkers is how many workers share d's items.
func (d *matMulDims) smallWorkers(ctx *Context) int {
	return max(1, min(nnWorkers(ctx, d.batch), d.batch*d.m*d.n*d.k/matMulGrain))
}

// workers returns nw scratch slots with room for d's items.
func (k *matMulKernel) workers(nw int, d *matMulDims) []matMulWork {
	for len(k.work) < nw {
		k.work = append(k.work, matMulWork{})
	}
	rows := max(d.m, d.k) // packed operands: m × k forward, m × n and k × m backward
	inner := max(d.k, d.n, d.m)
	for i := range k.work[:nw] {
		w := &k.work[i]
		w.a = nnGrow(w.a, (rows+7)/8*8*inner)
		w.bt = nnGrow(w.bt, d.k*d.n)
		w.cw.tile = nnGrow(w.cw.tile, 8*32)
		w.panY = panels(w.panY[:0], 0, 0, d.n)
		w.panK = panels(w.panK[:0], 0, 0, d.k)
	}
	return k.work[:nw]
}

// product sets (or with tileAdd adds to) the M × N matrix c (row stride N) the product
// of the packed M × K matrix a with the K × N matrix b (row stride N); pan holds the
// panels of N columns.
func (w *matMulWork) product(K, M, N int, a, b, c []float32, pan []convPanel, flags int) {
	w.cw.multiply(K, M, a, nil, b, N, nil, c, N, pan, flags, nil)
}

// forwardSmall is Forward on the tile path.
func (k *matMulKernel) forwardSmall(ctx *Context, d *matMulDims, a, b, y []float32) {
	m, n, K := d.m, d.n, d.k
	nw := d.smallWorkers(ctx)
	work := k.workers(nw, d)
	nnEach(ctx, nw, d.batch, func(wi, lo, hi int) {
		w := &work[wi]
		for bi := lo; bi < hi; bi++ {
			packRows(w.a, a[k.aOff[bi]:], m, K, K)
			w.product(K, m, n, w.a, b[k.bOff[bi]:k.bOff[bi]+K*n], y[bi*m*n:(bi+1)*m*n], w.panY, 0)
		}
	})
}

// backwardSmall is Backward on the tile path: gA_i += g_i·B_iᵀ and gB_i += A_iᵀ·g_i.
// Items that share a gradient matrix (a broadcast A or B) add into it in batch order on
// one worker, as the BLAS path does.
func (k *matMulKernel) backwardSmall(ctx *Context, d *matMulDims, a, b, gy, ga, gb []float32) {
	m, n, K := d.m, d.n, d.k
	nw := 1
	if d.aBatch == d.batch && d.bBatch == d.batch {
		nw = d.smallWorkers(ctx)
	}
	work := k.workers(nw, d)
	nnEach(ctx, nw, d.batch, func(wi, lo, hi int) {
		w := &work[wi]
		for bi := lo; bi < hi; bi++ {
			g := gy[bi*m*n : (bi+1)*m*n]
			ao, bo := k.aOff[bi], k.bOff[bi]
			if ga != nil {
				transpose(w.bt, b[bo:bo+K*n], K, n)
				packRows(w.a, g, m, n, n)
				w.product(n, m, K, w.a, w.bt, ga[ao:ao+m*K], w.panK, tileAdd)
			}
			if gb != nil {
				packCols(w.a, a[ao:], K, m, K)
				w.product(m, K, n, w.a, g, gb[bo:bo+K*n], w.panY, tileAdd)
			}
		}
	})
}

// One product of a shared B (a Linear layer's weight) with a short sum, as a transformer's
// projections are ([512 × 64] · [64 × 192] at batch 32), ran at 75 GFLOP/s through
// OpenBLAS, split in two by rows; the tile kernel takes it at the convolutions' rate,
// A's rows packed per chunk of 64, the chunks over the workers.

// tileGEMMMaxK is the longest sum tileGEMM takes: beyond it the BLAS's cache blocking
// wins.
const tileGEMMMaxK = 512

// tileGEMMRows is the rows of A a worker packs and multiplies at a time.
const tileGEMMRows = 64

// tileGEMMOK reports whether the tile kernel runs a product of these sizes.
func tileGEMMOK(M, N, K int) bool {
	return convDirectOK() && K > 0 && K <= tileGEMMMaxK && N >= 16 && M >= 8 && M*N*K >= 1<<18
}

// tileGEMM sets y (M × N, row stride N) to a (M × K) · b (K × N), or with tileAdd adds
// the product to what y holds; every output is the FMA chain over k in order, whatever
// the worker count.
func (k *matMulKernel) tileGEMM(ctx *Context, M, N, K int, a, b, y []float32, flags int) {
	chunks := (M + tileGEMMRows - 1) / tileGEMMRows
	nw := max(1, min(nnWorkers(ctx, chunks), M*N*K/matMulGrain))
	d := matMulDims{m: tileGEMMRows, n: N, k: K}
	work := k.workers(nw, &d)
	nnEach(ctx, nw, chunks, func(wi, lo, hi int) {
		w := &work[wi]
		for c := lo; c < hi; c++ {
			r0, r1 := c*tileGEMMRows, min((c+1)*tileGEMMRows, M)
			packRows(w.a, a[r0*K:], r1-r0, K, K)
			w.product(K, r1-r0, N, w.a, b[:K*N], y[r0*N:r1*N], w.panY, flags)
		}
	})
}
