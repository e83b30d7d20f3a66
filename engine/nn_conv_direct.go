package engine

import "sync/atomic"

// The direct path of Conv (every convolution but depthwise ones, on CPUs with the tile
// kernel): each worker takes whole images and multiplies the packed weights by the
// image's column matrix tile by tile (nn_conv_tile.go), writing the output planes in
// place with the bias, a residual and the activation applied in the same pass. Nothing
// goes through the BLAS, so the two cores split the batch between them instead of
// fighting over OpenBLAS's threads, and the output never passes through a chunk matrix
// that must then be copied into planes: on the fmnist CNNs' small layers (M = 16 to 64
// output channels, K = 9 to 288) OpenBLAS ran at 20 to 35 GFLOP/s and the copies and
// im2col passes took as long again; the tile kernel runs at about 120 GFLOP/s per core.
//
// The column matrix is made per image, in a worker's buffer that stays in cache, in one
// of four ways: not at all for 1×1 unit-stride convolutions (the image is its own column
// matrix); not at all for other unit-stride 2-D windows either, whose taps the kernel
// reads from a zero-padded copy of the image through an offset table (convPad); by a
// plan of masked loads and permutations for 2-D windows of column stride 2 (s2Plan);
// and by im2col otherwise.
//
// The backward pass works the same way, per image: the weight gradient gets gy·colᵀ, with
// colᵀ built from the image channel-last for 2-D windows (colT2D), each worker summing
// apart and the partial sums added in worker order, so that results depend only on the
// batch and the worker count; the input gradient of unit-stride 2-D windows is the
// flipped-kernel convolution of the padded output gradient (paddedT), and otherwise
// col2im(Wᵀ·gy).

// convWork is one worker's scratch.
type convWork struct {
	col      []float32 // column matrices of the images of one block, CgK × O each
	bcol     []float32 // backwardDirect's column matrix of one image, CgK × O: scratch
	colT     []float32 // one column matrix transposed, O × CgK: scratch
	xT       []float32 // one image channel-last, for colT2D: scratch
	xTpad    []float32 // xT zero-padded for cpPlan, the padding never written
	xTpadFor padGeom   // the layout xTpad was made for
	gyp      []float32 // output gradient rows packed for the tile kernel: scratch
	tile     []float32 // 8 × 32 landing area for tiles with fewer than 8 valid rows
	ybuf     []float32 // output planes of one block before a fused MaxPool
	itemsT   []float32 // a chunk's planes of one channel, item-minor (colsPixelMajor)
	// silu makes multiply apply SiLU to each panel pair's rows once the kernel has
	// stored them: an activation the kernel cannot hold in its registers.
	silu    bool
	s2col   []float32 // column matrices by s2Plan, zero where the plan does not write; no other use
	s2For   padGeom   // the geometry s2col was laid out for
	gpad    []float32 // padded output gradient of one image (input gradient path)
	gpadFor padGeom   // the layout gpad's zero padding was made for
	xpad    []float32 // padded images of one block (implicit im2col)
	padFor  padGeom   // the layout xpad's zero padding was made for
	pan     []convPanel
	wino    []float32 // the Winograd path's quarter planes, transformed input and products: scratch
	w4      wino4Tabs // the F(4×4) transforms' offset tables, kept while their strides hold
	land    []float32 // a panel pair's tiles before their SiLU is streamed to the output
	ring    []float32 // an image's latest output rows, every channel, before a fused MaxPool (pooledChunks)
	// remB and remC are remainders' column matrix (CgK × 32) and landing area (Mg × 32).
	remB, remC []float32
}

// convPanel is one panel of up to 16 columns: offsets of its first column in the source
// and in the destination, and the lanes that are valid.
type convPanel struct {
	b, c int
	m    uint64
}

// convDirect holds the direct path's packed weights.
type convDirect struct {
	wp    []float32 // W per group and 8-row block, k-major: CgK × 8
	wpKey weightKey // the weights wp holds, when kept between runs
	// wpb is wp in blocks of convKBlock rows of the sum (pointwiseBlocks): per group, per
	// block, per 8-row block, k-major: kn × 8. wpbKey is the weights it holds.
	wpb      []float32
	wpbKey   weightKey
	wpbKB    int // the rows of the sum a block of wpb holds
	kblocked int // forward passes that took pointwiseBlocks; tests read it
	// remaindered counts the forward passes that left planes' last pixels to remainders;
	// tests read it.
	remaindered int
	packs       int // how many times wp was packed; tests read it
	// streamed counts the forward passes that asked for non-temporal stores; tests read it
	streamed int
	// ringPooled counts the forward passes that pooled a fused MaxPool from pooledChunks'
	// rings; tests read it.
	ringPooled int
	// pixSplit counts the forward passes that split an image's pixels over the workers;
	// tests read it.
	pixSplit int
	noPhased bool // tests: stride-2 windows through their column matrix, never phase planes
	// phasedRuns counts the forward passes that read phase planes; tests read it.
	phasedRuns int
	// poolParts counts the forward passes that split a block's output channels over the
	// workers ahead of a fused pool; tests read it.
	poolParts int
	bp        []float32 // bias per group and 8-row block
	wtp       []float32 // Wᵀ per group and 8-row block of CgK, k-major: Mg × 8, during a call: scratch
	wn        []float32 // the narrow path's Wᵀ per group in panels of 32 channels (packNarrow)
	wnKey     weightKey // the weights wn holds
	an        []float32 // the narrow path's column matrix, 8 pixels to a row block
	wfp       []float32 // the input gradient's kernel per group (packFlipped), during a call: scratch
	wu        []float32 // the Winograd path's transformed weights (winoWeights)
	wuKey     weightKey // the weights wu holds
	work      []convWork
	// slotGW holds the weight-gradient partial sum of each slot of images (see
	// backwardDirect) during a call, carved from its scratch; slot 0 adds into the
	// gradient itself unless hwc.
	slotGW [][]float32
	// bwdScratch and winoScratch are backwardDirect's and forwardWinograd's scratch when
	// the context has no shared one.
	bwdScratch, winoScratch []float32
	pad                     convPad
	padT                    convPad // the input gradient's implicit im2col
	s2                      s2Plan
	cp                      cpPlan // colᵀ of the weight gradient
}

// convPad is the implicit im2col of unit-stride 2-D windows: each image is copied into a
// zero-padded buffer, and the tile kernel reads every tap's row of the column matrix
// straight from it through an offset table, output row by output row. That copies C·H·W
// values per image instead of writing C·K·H·W, on the fmnist CNN's 3×3 layers a ninth.
type convPad struct {
	geom padGeom
	w    int      // padded row length
	size int      // padded plane size (with phase: a channel's four phase planes)
	offs tileOffs // byte offset of tap (c, k1, k2) from an output row's start
	// phase marks the phase planes of a stride-2 window (nn_conv_phased.go), with the
	// smallest shift and the rows (1) and columns (2) of a plane per dimension.
	phase    bool
	lo, span [nnMaxSpatial]int
}

// padGeom identifies what a padded buffer was laid out for.
type padGeom struct {
	g nnGeom
	C int
}

// padded returns the implicit im2col of d, set up for its geometry, or nil when d does
// not take it: only unit strides, and output rows of at least 12 pixels, so that 16-lane
// panels along a row are mostly full; 8 with AVX-512, whose panels run along the padded
// rows (packedPanels): ResNet-18's 8×8 planes at 32 px fill 64 of 80 lanes that way,
// and took 22 % less time than their column matrix gathered through the table (on AVX2,
// 8 of 16 lanes a row, 50 % more).
func (c *convDirect) padded(d *convDims) *convPad {
	g := &d.g
	minRow := 12
	if convTileOK() {
		minRow = 8
	}
	if d.pointwise || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.s[1] != 1 || g.s[2] != 1 || g.out[2] < minRow {
		return nil
	}
	return c.pad.setup(g, d.Cg)
}

// paddedT returns the implicit im2col of the input gradient of d, or nil: for unit
// strides the input gradient is the convolution of the output gradient, padded by
// (k−1)·d − p on each side, with the kernel flipped and its channel axes swapped, and it
// takes the same path as the forward pass when that padding is not negative and the
// input rows are 12 pixels or more.
func (c *convDirect) paddedT(d *convDims) *convPad {
	g := &d.g
	if d.pointwise || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.s[1] != 1 || g.s[2] != 1 || g.in[2] < 12 {
		return nil
	}
	t := nnGeom{nd: 2, k: g.k, s: g.s, d: g.d, in: g.out, out: g.in}
	for j := 1; j < nnMaxSpatial; j++ {
		t.pb[j] = (g.k[j]-1)*g.d[j] - g.pb[j]
		t.pe[j] = (g.k[j]-1)*g.d[j] - g.pe[j]
		if t.pb[j] < 0 || t.pe[j] < 0 {
			return nil
		}
	}
	return c.padT.setup(&t, d.Mg)
}

// setup lays p out for C channels of geometry g, unless it already is.
func (p *convPad) setup(g *nnGeom, C int) *convPad {
	if p.geom == (padGeom{g: *g, C: C}) && !p.phase {
		return p
	}
	p.geom = padGeom{g: *g, C: C}
	p.phase = false
	p.w = g.in[2] + g.pb[2] + g.pe[2]
	p.size = (g.in[1] + g.pb[1] + g.pe[1]) * p.w
	p.tapOffsets(g, C, func(ch, k1, k2 int) int { return ch*p.size + k1*g.d[1]*p.w + k2*g.d[2] })
	return p
}

// tapOffsets fills p.offs for C channels of g's taps: tap (ch, k1, k2) at the value at
// gives, in bytes.
func (p *convPad) tapOffsets(g *nnGeom, C int, at func(ch, k1, k2 int) int) {
	K := g.kSize()
	if cap(p.offs.off) < C*K {
		p.offs.off = make([]int64, C*K)
	}
	p.offs.off = p.offs.off[:C*K]
	p.offs.max = 0
	for ch := 0; ch < C; ch++ {
		for k1 := 0; k1 < g.k[1]; k1++ {
			for k2 := 0; k2 < g.k[2]; k2++ {
				o := int64(4 * at(ch, k1, k2))
				p.offs.off[(ch*g.k[1]+k1)*g.k[2]+k2] = o
				p.offs.max = max(p.offs.max, o)
			}
		}
	}
}

// packFlipped packs the Mg × Cg × K1 × K2 weight w as the rows of the input gradient's
// kernel, in packRows's layout: row c (in 8-row blocks), column (m, k1, k2) holds
// w[m, c, K1−1−k1, K2−1−k2].
func packFlipped(dst, w []float32, Mg, Cg, K1, K2 int) {
	K := K1 * K2
	KK := Mg * K
	RB := (Cg + 7) / 8
	dst = dst[:RB*KK*8]
	for rb := 0; rb < RB; rb++ {
		blk := dst[rb*KK*8 : (rb+1)*KK*8]
		for r := 0; r < 8; r++ {
			c := rb*8 + r
			for m := 0; m < Mg; m++ {
				for k := 0; k < K; k++ {
					v := float32(0)
					if c < Cg {
						v = w[(m*Cg+c)*K+K-1-k]
					}
					blk[(m*K+k)*8+r] = v
				}
			}
		}
	}
}

// fill copies the C-channel image x into the interior of the padded buffer dst, whose
// padding is zero already.
func (p *convPad) fill(dst, x []float32, C int) {
	if p.phase {
		p.fillPhased(dst, x, C)
		return
	}
	g := &p.geom.g
	H, W := g.in[1], g.in[2]
	for ch := 0; ch < C; ch++ {
		padRows(dst[ch*p.size+g.pb[1]*p.w+g.pb[2]:], x[ch*H*W:(ch+1)*H*W], H, W, p.w)
	}
}

// pixelSplitEven reports whether splitting a plane of O pixels by panel pairs of 32 over n
// workers leaves them at most 5 % less evenly loaded than splitting rb row blocks: the
// pixel split reads each input value once, the channel split once per worker, so it
// keeps a small imbalance (55 × 55: 95 pairs, 48 and 47), not a large one (14 × 14: 7
// pairs, 4 and 3, against 12 row blocks, 6 and 6).
func pixelSplitEven(O, rb, n int) bool {
	even := func(units int) float64 { return float64(units) / float64(n*((units+n-1)/n)) }
	return even((O+31)/32) >= even(rb)-0.05
}

func laneMask(n int) uint64 { return 1<<uint(min(n, 16)) - 1 }

// tileRun computes rows/8 row blocks (one block of fewer rows than 8, through w.tile,
// when rows < 8) into c at offsets c0 and c1 (row stride ldc).
func (w *convWork) tileRun(k int, a, b []float32, b0, b1, ldb int, offs *tileOffs, c []float32, c0, c1, ldc, rows int, bias []float32, m0, m1 uint64, flags int, act *tileAct) {
	if rows >= 8 {
		convTile(k, a, b[b0:], b[b1:], ldb, c[c0:], c[c1:], ldc, bias, m0, m1, flags, rows/8, offs, act)
		return
	}
	t := w.tile[:8*32]
	flags &^= tileStream // the landing area is read right back
	n0, n1 := tileLanes(tileStored(m0, flags)), tileLanes(tileStored(m1, flags))
	if flags&tileAdd != 0 {
		clear(t)
		for r := 0; r < rows; r++ {
			copy(t[r*32:r*32+16], c[c0+r*ldc:c0+r*ldc+n0])
			copy(t[r*32+16:r*32+32], c[c1+r*ldc:c1+r*ldc+n1])
		}
	}
	convTileRows(k, a, b[b0:], b[b1:], ldb, t, t[16:], 32, bias, m0, m1, flags, 1, rows, offs, act)
	for r := 0; r < rows; r++ {
		copy(c[c0+r*ldc:c0+r*ldc+n0], t[r*32:])
		copy(c[c1+r*ldc:c1+r*ldc+n1], t[r*32+16:])
	}
}

// tileLanes is the number of valid lanes of a mask made by laneMask.
func tileLanes(m uint64) int {
	n := 0
	for m != 0 {
		n++
		m >>= 1
	}
	return n
}

// panels appends the 16-column panels of a row of n columns that starts at b in the
// source and c in the destination.
func panels(dst []convPanel, b, c, n int) []convPanel {
	for p := 0; p < n; p += 16 {
		dst = append(dst, convPanel{b: b + p, c: c + p, m: laneMask(n - p)})
	}
	return dst
}

// multiply runs the tiles of C (rows row blocks of 8 over M rows) = A · B over the
// panel pairs of pan: A is packed per row block (k × 8 each), bias per row block, and
// the rows of B are ldb apart in src, or where offs puts them.
func (w *convWork) multiply(k, M int, a, bias []float32, src []float32, ldb int, offs *tileOffs, dst []float32, ldc int, pan []convPanel, flags int, act *tileAct) {
	RB := (M + 7) / 8
	if len(pan) > 2 && RB > 1 && RB*k*8 > convAStream {
		// Weights larger than the cache (ResNet-18's last stage: 9.4 MB for a 7×7 plane)
		// would stream from memory once per panel pair; a few row blocks at a time over
		// every panel pair read each block once, while it is in the cache.
		step := max(1, convAStream/4/(k*8))
		for rb := 0; rb < RB; rb += step {
			n := min(step, RB-rb)
			m := min(M-rb*8, n*8)
			var bs []float32
			if bias != nil {
				bs = bias[rb*8:]
			}
			w.multiply(k, m, a[rb*k*8:(rb+n)*k*8], bs, src, ldb, offs, dst[rb*8*ldc:], ldc, pan, flags, act)
		}
		return
	}
	// SiLU streamed: the tiles land in the worker's scratch, whence their SiLU goes to dst
	// with non-temporal stores, since SiLU needs the stored tile back.
	land := w.silu && flags&tileStream != 0 && convTileOK()
	tflags := flags
	if land {
		w.land = nnGrow(w.land, M*32)
		tflags &^= tileStream
	}
	for q := 0; q < len(pan); q += 2 {
		p0, p1 := pan[q], pan[q]
		p1.m = 0
		if q+1 < len(pan) {
			p1 = pan[q+1]
		}
		tdst, c0, c1, tldc := dst, p0.c, p1.c, ldc
		if land {
			tdst, c0, c1, tldc = w.land, 0, 16, 32
		}
		// The full row blocks in one call, then the partial one.
		for rb := 0; rb < RB; {
			n := 1
			if rows := M - rb*8; rows >= 8 {
				n = rows / 8
			}
			var bs []float32
			if bias != nil {
				bs = bias[rb*8 : (rb+n)*8]
			}
			off := rb * 8 * tldc
			w.tileRun(k, a[rb*k*8:(rb+n)*k*8], src, p0.b, p1.b, ldb, offs, tdst, c0+off, c1+off, tldc, min(M-rb*8, 8*n), bs, p0.m, p1.m, tflags, act)
			rb += n
		}
		if w.silu {
			for i, pn := range [2]convPanel{p0, p1} {
				if pn.m == 0 {
					continue
				}
				n := tileLanes(tileStored(pn.m, flags))
				if land {
					siluRowsTo(dst[pn.c:], ldc, w.land[16*i:], 32, M, n, true)
				} else {
					siluRows(dst[pn.c:], M, ldc, n)
				}
			}
		}
	}
}

// pointwiseBlocks computes what multiply computes for a pointwise layer, C (M rows) =
// A · B (k rows of B, ldb apart), over the panel pairs of pan, but rg row blocks of C and
// kb rows of the sum at a time: every panel pair for C's first rg·8 rows and B's first kb
// rows, then for B's next kb rows adding to the same rows of C, and so on, before C's
// next rows. The tile kernel reads B and writes C as rows of whole planes, and a 1×1
// layer reading 128 such rows 128 bytes at a time ran 2.6× slower than 16 at a time, as
// did one writing 64 (SqueezeNet's squeezes and expansions at 55 × 55, the tile kernel
// alone on an Emerald Rapids, 32 images: the prefetchers follow few streams); C's rows
// of one group stay in L2 between the blocks of the sum. Each output's sum is the same
// chain of fused multiply-adds from the bias, in order of k: a partial sum is stored as
// the float32 the kernel holds and read back by tileAdd without a bias; the activation
// and SiLU come with the last block. a is packed in blocks of kb rows of the sum
// (packBlocks; wp's layout when kb = k). flags must not ask for non-temporal stores:
// partial sums stored that way would be read back from memory, and a streamed output's
// lines are not read in first anyway, which is part of what the blocks save
// (MobileNetV2's streamed 24 → 144 expansion at 56 × 56 took 1.2–2.2× as long in rows
// of 16). a holds aRB row blocks per block of the sum, of which C's rows start at row
// block rb0 (a worker's share of the rows).
func (w *convWork) pointwiseBlocks(k, kb, M, rg int, a []float32, aRB, rb0 int, bias []float32, src []float32, ldb int, dst []float32, ldc int, pan []convPanel, flags int, act *tileAct) {
	RB := (M + 7) / 8
	silu := w.silu
	defer func() { w.silu = silu }()
	for rb := 0; rb < RB; rb += rg {
		n := min(rg, RB-rb)
		for k0 := 0; k0 < k; k0 += kb {
			kn := min(kb, k-k0)
			last := k0+kn == k
			kf, ka := flags, act
			w.silu = silu && last
			if !last {
				ka = nil
			}
			var b []float32
			if k0 > 0 {
				kf |= tileAdd
			} else if bias != nil {
				b = bias[rb*8 : (rb+n)*8]
			}
			base := aRB*k0*8 + rb0*kn*8
			w.multiply(kn, min(M-rb*8, rg*8), a[base+rb*kn*8:base+(rb+n)*kn*8], b, src[k0*ldb:], ldb, nil, dst[rb*8*ldc:], ldc, pan, kf, ka)
		}
	}
}

// convKBlock is the rows of the sum, and (two row blocks) of C, that pointwiseBlocks
// takes at a time, and sums of at most twice as many rows are not split; convKBlockPlane
// is the smallest plane it is used for: smaller ones (14 × 14 and below) are a few cache
// lines a row, which multiply's order reads whole.
const (
	convKBlock      = 16
	convKBlockPlane = 512
	// convKBlockB is the size, in float32 values, of an image's input above which
	// pointwiseBlocks takes four row blocks at a time, not two: 512 KiB, half the L2 of
	// the smallest core measured (Zen 5).
	convKBlockB = 1 << 17
	// convKBlockWide is the rows of the sum a block holds on planes smaller than
	// convKBlockPlane, for sums longer than twice as many: a panel pair's 128 rows of B
	// (16–24 KiB with their misaligned lines) stay in a 48 KiB L1 while all the layer's
	// row blocks read them. Measured on one core of an Emerald Rapids (interleaved, 8
	// images): 1.12–1.15× on 512 → 1000 at 13 × 13 and 320 → 1280 at 7 × 7, 1.06–1.10× at
	// 960 → 160 at 7 × 7 and 512 → 512 and 576 → 96 at 14 × 14; blocks of 256 rows
	// (32–48 KiB) and of 64 gained less or nothing.
	convKBlockWide = 128
)

// packBlocks packs W for pointwiseBlocks into c.wpb in blocks of kb rows of the sum: per
// group, rows [k0, k0+kn) of every 8-row block one after another, blocks in order.
func (k *convKernel) packBlocks(ctx *Context, d *convDims, w []float32, wk weightKey, kb int) {
	c := &k.direct
	CgK := d.Cg * d.g.kSize()
	RB := (d.Mg + 7) / 8
	if c.wpbKey.current(wk) && c.wpbKB == kb && len(c.wpb) == k.group*RB*CgK*8 {
		return
	}
	c.wpb = nnGrow(c.wpb, k.group*RB*CgK*8)
	packKBlocks(ctx, c.wpb, w, k.group, d.Mg, CgK, kb)
	c.wpbKey, c.wpbKB = wk, kb
}

// convPrefetchRows is the most output channels (per group) of a pointwise layer whose
// tiles fetch their next panels and output rows themselves (tilePrefetch; see
// forwardDirect): 256 covers the expansions of MobileNetV2 and EfficientNet. Raised
// from 64 on 2026-11-29 after measuring those layers with cold caches, as they run in a
// network, where with warm caches (a layer timed alone, over and over) the hint had
// looked level.
const convPrefetchRows = 256

// convStreamMin is the output size, in float32 values, from which the direct path stores
// its output non-temporally (tileStream): 32 MB, the last-level cache of a Zen 4/5 CCD,
// which an output this large leaves before the next layer reads it. Measured on MobileNetV2
// at batch 32 (Emerald Rapids, interleaved runs): 7–20 % faster with AVX-512 and with
// AVX2; its 96-channel 112×112 expansion (154 MB) alone 2–3× (AVX-512) and 1.6–2× (AVX2).
const convStreamMin = 1 << 23

// convColChunk is the size, in float32 values, above which an image's column matrix is
// made and multiplied in chunks of output pixels (see forwardDirect): 256 KiB.
const convColChunk = 1 << 16

// convAStream is the size, in float32 values, of the packed weights (A) above which
// multiply goes over a few row blocks at a time (a quarter of it) across all panel
// pairs rather than over all row blocks per panel pair: 1 MiB, a core's L2 cache on the
// CPUs measured.
const convAStream = 1 << 18

// packRows packs rows [0, M) of the row-major M × K matrix a (row stride lda) into 8-row
// blocks, k-major, zero-padded: dst[(rb·K + k)·8 + r] = a[(8rb + r)·lda + k].
func packRows(dst, a []float32, M, K, lda int) {
	RB := (M + 7) / 8
	dst = dst[:RB*K*8]
	for rb := 0; rb < RB; rb++ {
		blk := dst[rb*K*8 : (rb+1)*K*8]
		if lda == K && M-rb*8 >= 8 {
			// A full block of contiguous rows is an 8 × K transpose.
			transpose(blk, a[rb*8*K:(rb+1)*8*K], 8, K)
			continue
		}
		for r := 0; r < 8; r++ {
			m := rb*8 + r
			if m >= M {
				for k := 0; k < K; k++ {
					blk[k*8+r] = 0
				}
				continue
			}
			row := a[m*lda : m*lda+K]
			for k, v := range row {
				blk[k*8+r] = v
			}
		}
	}
}

// packCols packs the K × M matrix a (row stride lda) transposed, as packRows packs its
// transpose: dst[(rb·K + k)·8 + r] = a[k·lda + 8rb + r].
func packCols(dst, a []float32, M, K, lda int) {
	RB := (M + 7) / 8
	dst = dst[:RB*K*8]
	for rb := 0; rb < RB; rb++ {
		blk := dst[rb*K*8 : (rb+1)*K*8]
		n := min(8, M-rb*8)
		for k := 0; k < K; k++ {
			row := a[k*lda+rb*8 : k*lda+rb*8+n]
			b := blk[k*8 : k*8+8]
			copy(b, row)
			clear(b[n:])
		}
	}
}

// directOK reports whether the direct path runs d. Output planes of fewer than 16
// pixels (ResNet-18's last stages at 32 px: 2×2 and 1×1) leave most of the tile's 16
// lanes empty, since the direct path makes each image's columns apart, and repack the
// weights for every block of two images; im2col + Sgemm puts the chunk's images side by
// side instead, and ran ResNet-18 at 32 px and batch 32 four to five times faster (A/B in
// one session).
func (k *convKernel) directOK(d *convDims) bool {
	return convDirectOK() && !k.noDirect && !d.depthwise && d.g.outSize() > 0 && d.N > 0 && d.Mg > 0 &&
		(k.forceDirect || d.g.outSize() >= convDirectMinPlane)
}

// forwardDirectOK reports whether a forward pass of d without a fused pool takes the
// direct path: directOK, but on the AVX2 path not for one image through a layer whose
// padded or strided rows are narrower than convAVX2MinRow and which the Winograd path
// does not take. The
// AVX2 tile kernel has no packed lanes (tilePack): each output row is a panel of its own,
// so ResNet-18's 7 × 7 layers at 224 px filled 7 of a panel's 16 lanes, and its last
// stage's 512 → 512 layer ran at 160 images/s alone at batch 1; its column matrix through
// forwardGemmTile puts the plane's 49 pixels side by side (4 panels, 77 % full) and ran
// at 217–239 (Zen 3, 2026-11-29). Pointwise layers read whole planes and are not
// affected. Batches keep the direct path: there forwardGemmTile gathers a chunk of images
// into k.ybuf and spreads it out again, and ResNet-18 at 32 px and batch 32 (its 4 × 4
// layers) fell from 1 105–1 159 to 670–986 images/s.
func (k *convKernel) forwardDirectOK(d *convDims) bool {
	if !k.directOK(d) {
		return false
	}
	narrow := !k.forceDirect && !convTileOK() && !d.pointwise && d.N == 1 && d.g.out[len(d.g.out)-1] < convAVX2MinRow
	return !narrow || k.winogradOK(d, nil)
}

// convAVX2MinRow is the narrowest output row the AVX2 path makes a panel of (see
// forwardDirectOK): 12 of 16 lanes.
const convAVX2MinRow = 12

// stridedOK reports whether runDims writes d's output through the direct path (its
// tiles or its Winograd products), which can place each image's planes a Concat row
// apart (ystride): not depthwise planes or the im2col fallback.
func (k *convKernel) stridedOK(d *convDims) bool {
	return k.forwardDirectOK(d) && !d.depthwise
}

// convDirectMinPlane is the smallest output plane the direct path takes (see directOK).
const convDirectMinPlane = 16

// workers sizes the per-worker scratch.
func (c *convDirect) workers(nw int) []convWork {
	for len(c.work) < nw {
		c.work = append(c.work, convWork{})
	}
	for i := range c.work[:nw] {
		c.work[i].tile = nnGrow(c.work[i].tile, 8*32)
		c.work[i].silu = false // each caller sets what it needs
	}
	return c.work[:nw]
}

// forwardDirect is Forward on the direct path: y = W ∗ x + bias, then the activation;
// with pg set, y is instead the 2×2 max pool of that (pg is the pool's geometry), made
// per block of images from the worker's buffer while it is in cache.
//
// With res non-nil (and pg nil), each block's output starts as its part of res, which the
// kernel adds the bias and the products to before the activation.
func (k *convKernel) forwardDirect(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp, pg *nnGeom, res []float32) {
	if k.winogradOK(d, pg) {
		k.forwardWinograd(ctx, d, x, w, wk, bias, y, act, res)
		return
	}
	g := &d.g
	O, isz := g.outSize(), g.inSize()
	CgK := d.Cg * g.kSize()
	RB := (d.Mg + 7) / 8
	// ys is the distance between images' outputs: their size, or the row of a Concat
	// that this convolution writes into (ystride; never with a pool or a residual).
	ys := d.M * O
	if k.ystride > 0 {
		ys = k.ystride
	}
	c := &k.direct
	k.packWeights(ctx, d, w, wk)
	bp := k.packBias(d, bias)
	// The activation runs in the kernel, but for a Clip with a NaN bound.
	ta, inKernel := dw3x3Flags(act)
	// SiLU goes on each tile's rows after the kernel (convWork.silu): as good as in the
	// kernel for the splits below, and not to be applied again after the block.
	silu := act != nil && act.silu
	inKernel = inKernel || silu
	var tact *tileAct
	if act != nil && inKernel {
		tact = &ta
	}
	var tab *nnGatherTable
	pad := c.padded(d)
	if pad == nil && d.N >= 2*ctx.Workers {
		// Whole images to each worker (see phased). Stems with a fused pool too
		// (ResNet's, SqueezeNet's, ShuffleNet's), which then pool each block's planes
		// instead of chunks of their column matrix as those are made: at batch 32,
		// alternating in one session, ResNet-18 at 224 px 87 → 92 images/s with AVX-512
		// (AVX2 path level), SqueezeNet 1.3–4 % and ShuffleNetV2 0–10 % faster.
		pad = c.phased(d)
		if pad != nil {
			c.phasedRuns++
		}
	}
	var s2 *s2Plan
	if !d.pointwise && pad == nil && im2colS2Fast(g) {
		s2 = c.s2.plan(g, d.Cg)
	}
	rows := !d.pointwise && pad == nil && s2 == nil && nnUseS2Rows(g)
	if !d.pointwise && pad == nil && s2 == nil && !rows && nnUseTable(g) {
		tab = k.tab.table(g) // built here, read-only in the workers
	}
	npan := (O + 15) / 16
	packed := false
	if pad != nil {
		npan = g.out[1] * ((g.out[2] + 15) / 16)
		if n := pad.packedPanels(); n < npan && convTileOK() {
			npan, packed = n, true
		}
	}
	// A pointwise layer whose planes end in a few pixels past whole panels (7 × 7: 49 =
	// 3·16 + 1) leaves those pixels to the batch's shared panels (remainders), whole
	// panels to the images' own, when its last panel would leave a tenth or more of an
	// image's lanes empty: 14 × 14 planes (196 = 12·16 + 4, 6 % empty) measured level.
	rem := 0
	if r := O % 16; d.pointwise && pg == nil && (act == nil || inKernel) && !k.noRemainders && O > 16 &&
		r <= convRemMax && d.N*r >= 16 && 10*(16-r) >= 16*((O+15)/16) {
		if n := O / 16; (d.N+n%2)/(1+n%2) >= ctx.Workers {
			npan, rem = n, r
		}
	}
	G := min(1+npan%2, d.N) // two images when one has an odd number of panels
	if pg != nil && k.group == 1 && (tab != nil || rows) && CgK*O > convColChunk && !k.noRingPool {
		// One image at a time, so that its column matrix is made in chunks of rows and
		// the fused pool takes each chunk's rows as they are made (ringPool below).
		G = 1
	}
	blocks := (d.N + G - 1) / G
	// A column matrix larger than the cache (ResNet-18's 7×7 stem at 224 px: 147 rows of
	// 12 544 pixels, 7.4 MB an image) was written to memory by im2col and read back by
	// the products; chunk > 0 makes it chunk pixels at a time, each multiplied while it is
	// in the cache.
	chunk := 0
	if (tab != nil || rows) && G == 1 && CgK*O > convColChunk {
		// Whole output rows, and enough of them to fill many panels.
		if n := convColChunk / (CgK * g.out[2]) * g.out[2]; n >= 128 {
			chunk = n
		}
	}
	// With fewer blocks of images than workers (batch 1), each block's output channels
	// are split into parts that workers take apart, each building the block's column
	// matrix for itself: every output is still summed by the same tiles in the same
	// order. Only for one group, no fused pool and the activation in the kernel.
	parts := 1
	// With fewer blocks than workers and a column matrix in chunks (a stem at batch 1),
	// the workers take the chunks of output rows instead: each makes its chunks' columns
	// only, where splitting the channels had both make all of them, and a fused pool,
	// which needs every row of a plane, then runs after the products over the plan's
	// buffer of the whole output.
	rowSplit := chunk > 0 && blocks < ctx.Workers && res == nil && (act == nil || inKernel) &&
		(pg == nil || len(k.poolBuf) >= d.N*d.M*O)
	// A fused pool after a column matrix in chunks (the stems of SqueezeNet, ResNet and
	// GoogLeNet: 3.2 MB of output an image, more than a core's L2) pools each chunk's
	// rows as they are made, from a ring of rows that stays in the cache (pooledChunks),
	// instead of writing the image's whole output to memory and reading it back.
	ringPool := chunk > 0 && pg != nil && !rowSplit && k.group == 1 && res == nil && (act == nil || inKernel) && !k.noRingPool
	// A pointwise layer whose weights are smaller than an image's input (SqueezeNet's
	// 16-channel squeezes and expansions at 55 × 55, MobileNetV2's early 1×1 layers) is
	// split by pixels instead: each worker reads its share of the input once for every
	// row block, where split by channels each read all of it. A pixel's sums are the same
	// whichever tiles hold it. Not where the pixels' panel pairs split less evenly than the
	// row blocks (pixelSplitEven): on 14 × 14 planes, 7 pairs made one worker's share 4
	// pairs of 3.5, where 12 row blocks split 6 and 6.
	pix := 0
	if d.pointwise && chunk == 0 && blocks < ctx.Workers && pg == nil && (act == nil || inKernel) &&
		d.Mg <= O && !k.noPixelSplit {
		n := (ctx.Workers + blocks - 1) / blocks
		if k.group != 1 || pixelSplitEven(O, RB, n) { // groups have no channel split
			if pix = (O + n - 1) / n; pix%32 != 0 {
				pix += 32 - pix%32
			}
		}
	}
	nchunks := 1
	switch {
	case rowSplit:
		nchunks = (O + chunk - 1) / chunk
	case pix > 0:
		nchunks = (O + pix - 1) / pix
		c.pixSplit++
	case blocks < ctx.Workers && k.group == 1 && (pg == nil || !ringPool) && (act == nil || inKernel):
		// A fused pool takes each part's planes as they are made: ResNet-18's stem at
		// 32 px, batch 1, had run on one worker.
		parts = min(RB, (ctx.Workers+blocks-1)/blocks)
		if pg != nil && parts > 1 {
			c.poolParts++
		}
	}
	// An output larger than the caches goes to memory whatever the kernel does; storing
	// it non-temporally saves reading each line in before writing it. Not when this call
	// reads the output back: a pool, a residual, an activation after the kernel; SiLU
	// (multiply's landing area) only with AVX-512, whose siluRowsTo streams.
	stream, streamMin := 0, convStreamMin
	if k.streamMin != 0 {
		streamMin = k.streamMin
	}
	if pg == nil && res == nil && (act == nil || inKernel && (!silu || convTileOK())) && streamMin > 0 && d.N*d.M*O >= streamMin {
		stream = tileStream
		c.streamed++
	}
	if ringPool {
		c.ringPooled++
	}
	// A pointwise layer on planes of many pixels, whole images to a worker, with more
	// input and output channels than the prefetchers follow (see pointwiseBlocks).
	kblocks := d.pointwise && chunk == 0 && pix == 0 && parts == 1 && pg == nil && stream == 0 && !k.noKBlocks &&
		O >= convKBlockPlane && CgK+d.Mg > 2*convKBlock
	// A pointwise layer on smaller planes with a long sum (SqueezeNet's 512 → 1000
	// classifier at 13 × 13, MobileNetV2's 7 × 7 and 14 × 14 layers of 320 to 960 input
	// channels) takes the sum in blocks of convKBlockWide rows over all its rows: a panel
	// pair's rows of B then stay in L1 while every row block reads them. At batch 1 too,
	// where each worker takes a part of the rows (parts) over the whole plane:
	// EfficientNet-B0's 1152 → 320 and 672 → 192 projections at 7 × 7 went from 0.85–0.92
	// and 0.51–0.57 ms to 0.72–0.79 and 0.44–0.49 in the network (Zen 3, two runs each);
	// SqueezeNet's classifier stayed at 2.2–2.4 ms.
	wide := d.pointwise && chunk == 0 && pix == 0 && pg == nil && stream == 0 && !k.noKBlocks &&
		!kblocks && CgK > 2*convKBlockWide
	kb, rg, wpb := CgK, 2, c.wp
	switch {
	case kblocks:
		if CgK*O > convKBlockB {
			// B is read again for every group of rows, from memory once an image's input
			// no longer stays in L2: fewer, larger groups (MobileNetV2's 144 → 24 at
			// 56 × 56, 1.8 MB an image).
			rg = 4
		}
		if CgK > 2*convKBlock {
			kb = convKBlock
			k.packBlocks(ctx, d, w, wk, kb)
			wpb = c.wpb
		}
		c.kblocked++
	case wide:
		kblocks, kb, rg = true, convKBlockWide, RB
		k.packBlocks(ctx, d, w, wk, kb)
		wpb = c.wpb
		c.kblocked++
	}
	// A pointwise layer of few output channels on large planes (the 32 → 16 and 16 → 16
	// projections of MobileNetV2 and EfficientNet at 112 × 112, SqueezeNet's squeezes)
	// spends too little time on a panel pair for the prefetchers to bring the next one,
	// whose input rows lie a plane apart, and its output rows: the kernel fetches both
	// itself, the output's for writing (tilePrefetch). Measured on such layers alone, 32
	// images on an Emerald Rapids, interleaved: 0.67–0.94 of the time with AVX-512 and
	// 0.63–0.94 on the AVX2 path up to 64 output channels; 144 → 32 at 28 × 28 level, and
	// at 128 to 192 channels 0.89–1.04. An image's expansion at batch 1, whose output
	// rows are not in any cache when it runs inside a network, gains the most from the
	// fetch for writing (16 → 96 at 112 × 112: 0.79 with AVX-512 and on the AVX2 path,
	// 24 → 144 at 56 × 56 0.87–0.94, 240 channels level), hence convPrefetchRows. Not with
	// non-temporal stores, whose lines the prefetch for writing brings into the cache
	// after all (24 → 144 at 56 × 56: 2.4×).
	pref := 0
	if d.pointwise && O >= convKBlockPlane && d.Mg <= convPrefetchRows && stream == 0 && !k.noPrefetch {
		pref = tilePrefetch
	}
	// Workers that make disjoint rows or channels of the same images (rowSplit, parts)
	// write them into the plan's buffer of the whole output, for the pool to read.
	shared := pg != nil && (rowSplit || parts > 1) && len(k.poolBuf) >= d.N*d.M*O
	nw := nnWorkers(ctx, blocks*parts*nchunks)
	work := c.workers(nw)
	for i := range work {
		work[i].silu = silu
		switch {
		case pad != nil:
			// Padding stays zero from image to image; only the interior is copied.
			if n := G * d.Cg * pad.size; len(work[i].xpad) < n || work[i].padFor != pad.geom {
				work[i].xpad = make([]float32, n)
				work[i].padFor = pad.geom
			}
		case s2 != nil:
			// The plan writes only the entries that read the image; the rest stays
			// zero from image to image.
			if n := G * CgK * O; len(work[i].s2col) != n || work[i].s2For != (padGeom{g: s2.g, C: s2.C}) {
				work[i].s2col = make([]float32, n)
				work[i].s2For = padGeom{g: s2.g, C: s2.C}
			}
		case chunk > 0:
			work[i].col = nnGrow(work[i].col, CgK*chunk)
		case !d.pointwise:
			work[i].col = nnGrow(work[i].col, G*CgK*O)
		}
		if pg != nil && !ringPool && !shared && len(k.poolBuf) < nw*G*d.M*O {
			work[i].ybuf = nnGrow(work[i].ybuf, G*d.M*O)
		}
	}
	// Workers take blocks as they finish the last one rather than a fixed share: when
	// another job holds up one core, the other takes over its images. Every image's
	// output is computed the same way whichever worker makes it, so the result does
	// not depend on the split.
	var next atomic.Int64
	nnEach(ctx, nw, nw, func(wk, _, _ int) {
		wr := &work[wk]
		if stream != 0 {
			defer storeFence()
		}
		for {
			item := int(next.Add(1) - 1)
			if item >= blocks*parts*nchunks {
				break
			}
			ci := item % nchunks
			item /= nchunks
			blk, part := item/parts, item%parts
			// Rows [r0, r1) of every image are this item's.
			r0, r1 := part*RB/parts*8, min((part+1)*RB/parts*8, d.Mg)
			i0, i1 := blk*G, min((blk+1)*G, d.N)
			// dst holds the block's output planes: y itself, or the worker's buffer
			// that the pool reads.
			dst, base := y, 0
			if pg != nil && !ringPool {
				if shared {
					dst = k.poolBuf[:d.N*d.M*O]
				} else if len(k.poolBuf) >= nw*G*d.M*O {
					// The plan's buffer of the whole output, a block's worth per worker:
					// no scratch of the kernel's own as large as an image's output.
					dst, base = k.poolBuf[wk*G*d.M*O:wk*G*d.M*O+(i1-i0)*d.M*O], i0
				} else {
					dst, base = wr.ybuf[:(i1-i0)*d.M*O], i0
				}
			}
			flags := stream
			if res != nil {
				if pix > 0 {
					// This chunk's pixels of every channel.
					p0, p1 := ci*pix, min(O, (ci+1)*pix)
					for i := i0; i < i1; i++ {
						for m := range d.M {
							o := (i-base)*d.M*O + m*O
							copy(dst[o+p0:o+p1], res[(i*d.M+m)*O+p0:(i*d.M+m)*O+p1])
						}
					}
				} else if parts == 1 {
					copy(dst[(i0-base)*d.M*O:(i1-base)*d.M*O], res[i0*d.M*O:i1*d.M*O])
				} else {
					for i := i0; i < i1; i++ {
						copy(dst[((i-base)*d.M+r0)*O:((i-base)*d.M+r1)*O], res[(i*d.M+r0)*O:(i*d.M+r1)*O])
					}
				}
				flags = tileAdd
			}
			if ringPool {
				k.pooledChunks(wr, d, pg, x[i0*d.C*isz:(i0+1)*d.C*isz], chunk, rows, tab, c.wp, bp, y[i0*d.M*pg.outSize():(i0+1)*d.M*pg.outSize()], tact)
				continue
			}
			if chunk > 0 {
				xo := i0 * d.C * isz
				for grp := 0; grp < k.group; grp++ {
					var bs []float32
					if bp != nil {
						bs = bp[grp*RB*8+r0 : (grp+1)*RB*8]
					}
					yo := (i0-base)*ys + grp*d.Mg*O
					first, last := 0, O
					if rowSplit {
						first, last = ci*chunk, min(O, (ci+1)*chunk)
					}
					for p0 := first; p0 < last; p0 += chunk {
						n := min(chunk, O-p0)
						xg := x[xo+grp*d.Cg*isz : xo+(grp+1)*d.Cg*isz]
						if rows {
							nnIm2colS2Rows(g, d.Cg, xg, wr.col, n, p0/g.out[2], (p0+n)/g.out[2])
						} else {
							tab.im2colRange(d.Cg, xg, wr.col, n, p0, p0+n)
						}
						wr.pan = panels(wr.pan[:0], 0, yo+p0, n)
						wr.multiply(CgK, r1-r0, c.wp[(grp*RB+r0/8)*CgK*8:(grp+1)*RB*CgK*8], bs, wr.col, n, nil, dst[r0*O:], O, wr.pan, flags, tact)
					}
				}
			}
			for grp := 0; chunk == 0 && grp < k.group; grp++ {
				src, ldb := x, O
				var offs *tileOffs
				wr.pan = wr.pan[:0]
				for i := i0; i < i1; i++ {
					xo := (i*d.C + grp*d.Cg) * isz
					yo := (i-base)*ys + grp*d.Mg*O
					if d.pointwise {
						first, n := 0, O-rem
						if pix > 0 {
							first = ci * pix
							n = min(pix, O-first)
						}
						wr.pan = panels(wr.pan, xo+first, yo+first, n)
						continue
					}
					if pad != nil {
						po := (i - i0) * d.Cg * pad.size
						pad.fill(wr.xpad[po:po+d.Cg*pad.size], x[xo:xo+d.Cg*isz], d.Cg)
						if packed {
							wr.pan = pad.panelsPacked(wr.pan, po, yo)
							src, offs = wr.xpad, &pad.offs
							continue
						}
						for o1 := 0; o1 < g.out[1]; o1++ {
							wr.pan = panels(wr.pan, po+o1*pad.w, yo+o1*g.out[2], g.out[2])
						}
						src, offs = wr.xpad, &pad.offs
						continue
					}
					if s2 != nil {
						im2colS2(s2, x[xo:xo+d.Cg*isz], wr.s2col[(i-i0)*CgK*O:(i-i0+1)*CgK*O])
						wr.pan = panels(wr.pan, (i-i0)*CgK*O, yo, O)
						continue
					}
					col := wr.col[(i-i0)*CgK*O : (i-i0+1)*CgK*O]
					switch {
					case rows:
						nnIm2colS2Rows(g, d.Cg, x[xo:xo+d.Cg*isz], col, O, 0, g.out[1])
					case tab != nil:
						tab.im2col(d.Cg, x[xo:xo+d.Cg*isz], col, O)
					default:
						nnIm2col(g, d.Cg, x[xo:xo+d.Cg*isz], col, O)
					}
					wr.pan = panels(wr.pan, (i-i0)*CgK*O, yo, O)
				}
				switch {
				case s2 != nil:
					src = wr.s2col
				case !d.pointwise && pad == nil:
					src = wr.col
				}
				var bs []float32
				if bp != nil {
					bs = bp[grp*RB*8+r0 : (grp+1)*RB*8]
				}
				mflags := flags
				mflags |= pref
				if packed {
					mflags |= tilePack
				}
				if kblocks {
					wr.pointwiseBlocks(CgK, kb, r1-r0, rg, wpb[grp*RB*CgK*8:(grp+1)*RB*CgK*8], RB, r0/8, bs, src, O, dst[r0*O:], O, wr.pan, mflags, tact)
					continue
				}
				wr.multiply(CgK, r1-r0, c.wp[(grp*RB+r0/8)*CgK*8:(grp+1)*RB*CgK*8], bs, src, ldb, offs, dst[r0*O:], O, wr.pan, mflags, tact)
			}
			if rowSplit {
				continue
			}
			if act != nil && !inKernel {
				for i := i0; i < i1; i++ {
					yi := dst[(i-base)*ys : (i-base)*ys+d.M*O]
					act.applyNoBias(yi, yi)
				}
			}
			yb := dst[(i0-base)*d.M*O : (i1-base)*d.M*O]
			if pg != nil {
				// This item's planes: its rows [r0, r1) of every image in the block.
				PO := pg.outSize()
				for p := 0; p < (i1-i0)*d.M; p++ {
					if m := p % d.M; m >= r0 && m < r1 {
						k.pool.maxPlane(pg, yb[p*O:(p+1)*O], y[(i0*d.M+p)*PO:(i0*d.M+p+1)*PO])
					}
				}
			}
		}
	})
	if rem > 0 {
		k.remainders(ctx, d, rem, x, bp, y, ys, res, silu, tact)
	}
	if rowSplit && pg != nil {
		PO := pg.outSize()
		ctx.Parallel(d.N*d.M, max(1, 16384/O), func(lo, hi int) {
			for p := lo; p < hi; p++ {
				k.pool.maxPlane(pg, k.poolBuf[p*O:(p+1)*O], y[p*PO:(p+1)*PO])
			}
		})
	}
}

// convRemMax is the most pixels past an image's whole panels that remainders takes: with
// more, the image's last panel is mostly full anyway.
const convRemMax = 8

// remainders computes the last rem pixels of every plane of a pointwise layer, which
// forwardDirect's blocks leave out, in panels shared by the batch: the tile kernel's 16
// lanes a panel held one pixel of each 7 × 7 plane (MobileNetV2's, MobileNetV3's and
// EfficientNet's last stages), a fourth of its work on empty lanes, where 32 images' last
// pixels fill one panel pair. Each item gathers up to 32 such pixels of one group into a
// column matrix of its own (CgK rows of 32), multiplies it into a landing area (Mg rows of
// 32) and scatters the sums to their planes. Each sum is the same chain of fused
// multiply-adds from the bias (or from the residual, then the bias) as in the image's own
// panels, so the bits do not depend on where a pixel was summed. It runs after the
// blocks, which copy the residual into whole planes.
func (k *convKernel) remainders(ctx *Context, d *convDims, rem int, x, bp, y []float32, ys int, res []float32, silu bool, tact *tileAct) {
	c := &k.direct
	O := d.g.outSize()
	CgK := d.Cg * d.g.kSize()
	RB := (d.Mg + 7) / 8
	lanes := d.N * rem
	per := (lanes + 31) / 32
	items := k.group * per
	nw := nnWorkers(ctx, items)
	work := c.workers(nw)
	c.remaindered++
	var next atomic.Int64
	nnEach(ctx, nw, nw, func(wk, _, _ int) {
		wr := &work[wk]
		wr.silu = silu
		wr.remB = nnGrow(wr.remB, CgK*32)
		wr.remC = nnGrow(wr.remC, RB*8*32)
		for {
			item := int(next.Add(1) - 1)
			if item >= items {
				break
			}
			grp, q0 := item/per, item%per*32
			n := min(32, lanes-q0)
			b, cl := wr.remB[:CgK*32], wr.remC[:RB*8*32]
			for j := range n {
				i, p := (q0+j)/rem, O-rem+(q0+j)%rem
				xs := x[(i*d.C+grp*d.Cg)*O+p:]
				for kk := range CgK {
					b[kk*32+j] = xs[kk*O]
				}
			}
			flags := 0
			if res != nil {
				flags = tileAdd
				for j := range n {
					i, p := (q0+j)/rem, O-rem+(q0+j)%rem
					rs := res[(i*d.M+grp*d.Mg)*O+p:]
					for m := range d.Mg {
						cl[m*32+j] = rs[m*O]
					}
				}
			}
			wr.pan = append(wr.pan[:0], convPanel{b: 0, c: 0, m: laneMask(n)}, convPanel{b: 16, c: 16, m: laneMask(max(n-16, 0))})
			if n <= 16 {
				wr.pan = wr.pan[:1]
			}
			var bs []float32
			if bp != nil {
				bs = bp[grp*RB*8 : (grp+1)*RB*8]
			}
			wr.multiply(CgK, d.Mg, c.wp[grp*RB*CgK*8:(grp+1)*RB*CgK*8], bs, b, 32, nil, cl, 32, wr.pan, flags, tact)
			for j := range n {
				i, p := (q0+j)/rem, O-rem+(q0+j)%rem
				yo := y[i*ys+grp*d.Mg*O+p:]
				for m := range d.Mg {
					yo[m*O] = cl[m*32+j]
				}
			}
		}
	})
}

// pooledChunks makes one image's convolution (one group, no residual, the activation
// in the kernel) chunk output rows at a time into the worker's ring of rows and the
// fused max pool pg of it into y, each pooled row as soon as the rows its window reads
// are made. The ring holds every channel's latest rows: a chunk's, after the last
// (k−1)·d rows of the chunk before, which windows that straddle two chunks read. Each
// output is summed by the same tiles as in forwardDirect's other chunked paths (panels
// start at the same pixels of each chunk), and max is exact, so the result does not
// change; the image's whole output is never written.
func (k *convKernel) pooledChunks(wr *convWork, d *convDims, pg *nnGeom, x []float32, chunk int, rows bool, tab *nnGatherTable, wp, bias, y []float32, act *tileAct) {
	g := &d.g
	H, W := g.out[1], g.out[2]
	cr := chunk / W
	// The ring takes q chunks, at least ringPoolRows rows, before they are pooled: a
	// pool call per chunk and channel cost more than the pooling itself where a chunk
	// is a few rows (ResNet's 7×7 stem: 3).
	q := max(1, (ringPoolRows+cr-1)/cr)
	carry := min((pg.k[1]-1)*pg.d[1], H)
	ps := (carry + q*cr) * W // a ring plane
	wr.ring = nnGrow(wr.ring, d.M*ps)
	ring := wr.ring[:d.M*ps]
	CgK := d.Cg * g.kSize()
	PO, ow := pg.outSize(), pg.out[2]
	done := 0 // pooled output rows
	fill := 0 // the first row of the rows in the ring after its carry
	for ra := 0; ra < H; ra += cr {
		rb := min(H, ra+cr)
		n := (rb - ra) * W
		if rows {
			nnIm2colS2Rows(g, d.Cg, x, wr.col, n, ra, rb)
		} else {
			tab.im2colRange(d.Cg, x, wr.col, n, ra*W, rb*W)
		}
		wr.pan = panels(wr.pan[:0], 0, (carry+ra-fill)*W, n)
		wr.multiply(CgK, d.M, wp, bias, wr.col, n, nil, ring, ps, wr.pan, 0, act)
		if rb < H && rb-fill < q*cr {
			continue
		}
		ob := done
		for ob < pg.out[1] && (rb == H || maxPoolEnd(pg, &k.pool.tab, ob) <= rb) {
			ob++
		}
		if ob > done {
			for m := 0; m < d.M; m++ {
				k.pool.maxPlaneRows(pg, ring[m*ps:(m+1)*ps], y[m*PO+done*ow:m*PO+ob*ow], done, ob, fill-carry)
			}
			done = ob
		}
		if carry > 0 && rb < H {
			// The ring's last carry rows, to the top of each plane.
			for m := 0; m < d.M; m++ {
				pl := ring[m*ps : (m+1)*ps]
				copy(pl[:carry*W], pl[(rb-fill)*W:(rb-fill+carry)*W])
			}
		}
		fill = rb
	}
}

// ringPoolRows is the fewest rows pooledChunks' ring gathers before pooling them.
const ringPoolRows = 16

// packWeights fills k.direct.wp with W packed per group and 8-row block for the tile
// kernel. The packed weights are kept while the parameter they come from is frozen and
// unchanged (see Param.Changed): at batch 1 on ResNet-18's 11 M weights packing took
// longer than the products.
func (k *convKernel) packWeights(ctx *Context, d *convDims, w []float32, wk weightKey) {
	c := &k.direct
	CgK := d.Cg * d.g.kSize()
	RB := (d.Mg + 7) / 8
	if c.wpKey.current(wk) && len(c.wp) == k.group*RB*CgK*8 {
		return
	}
	c.wp = nnGrow(c.wp, k.group*RB*CgK*8)
	c.packs++
	packKBlocks(ctx, c.wp, w, k.group, d.Mg, CgK, CgK)
	c.wpKey = wk
}

// packKBlocks packs W (group × Mg rows of CgK values) into dst per group, per block of kb
// rows of the sum, per 8-row block, k-major (kn × 8, kn the block's rows): with kb = CgK
// wp's layout, with convKBlock pointwiseBlocks'.
func packKBlocks(ctx *Context, dst, w []float32, group, Mg, CgK, kb int) {
	RB := (Mg + 7) / 8
	KB := (CgK + kb - 1) / kb
	ctx.Parallel(group*KB*RB, max(1, 16384/(kb*8)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			grp, kq, rb := j/(KB*RB), j/RB%KB, j%RB
			k0 := kq * kb
			kn := min(kb, CgK-k0)
			packRows(dst[grp*RB*CgK*8+RB*k0*8+rb*kn*8:], w[(grp*Mg+rb*8)*CgK+k0:], min(8, Mg-rb*8), kn, CgK)
		}
	})
}

// packBias returns the bias per group padded to whole 8-row blocks (nil without one).
func (k *convKernel) packBias(d *convDims, bias []float32) []float32 {
	if bias == nil {
		return nil
	}
	c := &k.direct
	RB := (d.Mg + 7) / 8
	c.bp = nnGrow(c.bp, k.group*RB*8)
	bp := c.bp[:k.group*RB*8]
	clear(bp)
	for grp := 0; grp < k.group; grp++ {
		copy(bp[grp*RB*8:], bias[grp*d.Mg:(grp+1)*d.Mg])
	}
	return bp
}

// backwardDirect adds the input gradient (gx, when non-nil) and the weight gradient (gw,
// when non-nil) of the direct path.
func (k *convKernel) backwardDirect(ctx *Context, d *convDims, x, w, gy, gx, gw []float32) {
	g := &d.g
	O, isz := g.outSize(), g.inSize()
	CgK := d.Cg * g.kSize()
	RBk := (CgK + 7) / 8
	RBm := (d.Mg + 7) / 8
	c := &k.direct
	var padT *convPad
	if gx != nil {
		padT = c.paddedT(d)
	}
	RBc := (d.Cg + 7) / 8
	MgK := d.Mg * g.kSize() // the input gradient's sum runs over (m, k1, k2)
	var wpN int
	switch {
	case padT != nil:
		wpN = k.group * RBc * MgK * 8
	case gx != nil:
		wpN = k.group * RBk * d.Mg * 8
	}
	var tab *nnGatherTable
	if !d.pointwise && nnUseTable(g) {
		tab = k.tab.table(g)
	}
	// 2-D windows build colᵀ from the image channel-last, its columns in (k1, k2, c)
	// order, which the final sum puts back in W's (c, k1, k2) order: contiguous copies
	// of channel vectors instead of a transpose of the whole column matrix.
	hwc := !d.pointwise && g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1
	var cp *cpPlan
	if hwc && gw != nil && colTPlanFast() {
		cp = c.cp.plan(g, d.Cg)
	}
	// The weight gradient is a sum over the images. For its bits not to depend on the worker
	// count, the images are cut into a number of slots fixed by the batch alone, each
	// summed in image order into its own buffer, and the slots are added in slot order;
	// workers take whole slots. Without a weight gradient every image is independent and
	// each worker takes one slot.
	nw := nnWorkers(ctx, d.N)
	slots := nw
	if gw != nil {
		slots = min(d.N, convGradSlots)
		nw = nnWorkers(ctx, slots)
	}
	// The slots' partial sums and each worker's column matrices are written in full
	// before they are read, so they come from the graph's shared scratch: kept by every
	// layer, they were most of a large network's training memory after its activations.
	var colN, colTN, gypN, xTN, slotN int
	if !d.pointwise {
		colN = CgK * O
	}
	if gw != nil {
		colTN, gypN = O*CgK, RBm*O*8
		if hwc {
			xTN = isz * d.Cg
		}
		slotN = len(w)
	}
	per := colN + colTN + gypN + xTN
	nslot := 0
	if gw != nil {
		nslot = slots - 1
		if hwc {
			nslot = slots
		}
	}
	scr, shared := ctx.scratch(&c.bwdScratch, wpN+nw*per+nslot*slotN)
	defer ctx.releaseScratch(shared)
	// The weights packed for the input gradient, every value written (padding rows 0).
	switch {
	case padT != nil:
		c.wfp, scr = scr[:wpN:wpN], scr[wpN:]
		for grp := 0; grp < k.group; grp++ {
			packFlipped(c.wfp[grp*RBc*MgK*8:], w[grp*d.Mg*CgK:], d.Mg, d.Cg, g.k[1], g.k[2])
		}
	case gx != nil:
		c.wtp, scr = scr[:wpN:wpN], scr[wpN:]
		for grp := 0; grp < k.group; grp++ {
			packCols(c.wtp[grp*RBk*d.Mg*8:], w[grp*d.Mg*CgK:], CgK, d.Mg, CgK)
		}
	}
	c.slotGW = c.slotGW[:0]
	if gw != nil {
		for s := range slots {
			var part []float32
			if s > 0 || hwc {
				part, scr = scr[:slotN:slotN], scr[slotN:]
			}
			c.slotGW = append(c.slotGW, part)
		}
	}
	work := c.workers(nw)
	carve := func(n int) []float32 {
		var b []float32
		b, scr = scr[:n:n], scr[n:]
		return b
	}
	for i := range work {
		wr := &work[i]
		wr.bcol, wr.colT, wr.gyp, wr.xT = carve(colN), carve(colTN), carve(gypN), carve(xTN)
		if padT != nil {
			if n := d.Mg * padT.size; len(wr.gpad) < n || wr.gpadFor != padT.geom {
				wr.gpad = make([]float32, n)
				wr.gpadFor = padT.geom
			}
		}
		if cp != nil && (len(wr.xTpad) != cp.srcLen || wr.xTpadFor != (padGeom{g: cp.g, C: cp.C})) {
			wr.xTpad = make([]float32, cp.srcLen)
			wr.xTpadFor = padGeom{g: cp.g, C: cp.C}
		}
	}
	// No reference to the scratch outlives the call: the arena may be remade larger
	// for another kernel, and a stale slice would keep the old one alive.
	defer func() {
		for i := range work {
			work[i].bcol, work[i].colT, work[i].gyp, work[i].xT = nil, nil, nil, nil
		}
		clear(c.slotGW)
		c.slotGW = c.slotGW[:0]
		c.wfp, c.wtp = nil, nil
	}()
	nnEach(ctx, nw, slots, func(wk, slo, shi int) {
		wr := &work[wk]
		for s := slo; s < shi; s++ {
			c.backwardSlot(k, d, wr, s, slots, x, gy, gx, gw, tab, cp, padT, hwc)
		}
	})
	if gw == nil {
		return
	}
	if !hwc {
		for s := 1; s < slots; s++ {
			for j, v := range c.slotGW[s][:len(w)] {
				gw[j] += v
			}
		}
		return
	}
	// Every slot summed in (k1, k2, c) column order; add them in slot order.
	K := g.kSize()
	for s := 0; s < slots; s++ {
		part := c.slotGW[s][:len(w)]
		for row := 0; row < d.M; row++ {
			src, dst := part[row*CgK:(row+1)*CgK], gw[row*CgK:(row+1)*CgK]
			for c := 0; c < d.Cg; c++ {
				dc := dst[c*K : (c+1)*K]
				for k, j := 0, c; k < K; k, j = k+1, j+d.Cg {
					dc[k] += src[j]
				}
			}
		}
	}
}

// convGradSlots is the most slots of images the weight gradient is summed in (see
// backwardDirect): enough for the cores qtool is run on, few enough that the slots'
// partial sums stay small next to the activations.
const convGradSlots = 4

// backwardSlot runs backwardDirect's per-image work for the images of slot s of slots,
// with worker scratch wr, adding the slot's weight gradient into its own buffer (or into
// gw for slot 0 when not hwc).
func (c *convDirect) backwardSlot(k *convKernel, d *convDims, wr *convWork, s, slots int, x, gy, gx, gw []float32, tab *nnGatherTable, cp *cpPlan, padT *convPad, hwc bool) {
	g := &d.g
	O, isz := g.outSize(), g.inSize()
	CgK := d.Cg * g.kSize()
	RBk := (CgK + 7) / 8
	RBc := (d.Cg + 7) / 8
	MgK := d.Mg * g.kSize()
	lo, hi := s*d.N/slots, (s+1)*d.N/slots
	gwk := gw
	if (s > 0 || hwc) && gw != nil {
		gwk = c.slotGW[s][:len(gw)]
		clear(gwk)
	}
	for i := lo; i < hi; i++ {
		for grp := 0; grp < k.group; grp++ {
			xo := (i*d.C + grp*d.Cg) * isz
			gyi := gy[(i*d.M+grp*d.Mg)*O : (i*d.M+(grp+1)*d.Mg)*O]
			if gwk != nil {
				// dW_g += gy_i · col_iᵀ: the packed rows of gy times colᵀ.
				colT := wr.colT[:O*CgK]
				switch {
				case cp != nil:
					xT := wr.xT[:isz*d.Cg]
					transpose(xT, x[xo:xo+d.Cg*isz], d.Cg, isz)
					cp.fill(wr.xTpad, xT)
					colTPlan(cp, wr.xTpad, colT)
				case hwc:
					xT := wr.xT[:isz*d.Cg]
					transpose(xT, x[xo:xo+d.Cg*isz], d.Cg, isz)
					colT2D(g, d.Cg, xT, colT)
				case d.pointwise:
					transpose(colT, x[xo:xo+d.Cg*isz], CgK, O)
				default:
					col := wr.bcol[:CgK*O]
					if tab != nil {
						tab.im2col(d.Cg, x[xo:xo+d.Cg*isz], col, O)
					} else {
						nnIm2col(g, d.Cg, x[xo:xo+d.Cg*isz], col, O)
					}
					transpose(colT, col, CgK, O)
				}
				packRows(wr.gyp, gyi, d.Mg, O, O)
				wr.pan = panels(wr.pan[:0], 0, 0, CgK)
				wr.multiply(O, d.Mg, wr.gyp, nil, colT, CgK, nil, gwk[grp*d.Mg*CgK:(grp+1)*d.Mg*CgK], CgK, wr.pan, tileAdd, nil)
			}
			if gx == nil {
				continue
			}
			if padT != nil {
				// gx_g += W'_g ⋆ pad(gy_i), output row by output row.
				padT.fill(wr.gpad, gyi, d.Mg)
				wr.pan = wr.pan[:0]
				for h := 0; h < g.in[1]; h++ {
					wr.pan = panels(wr.pan, h*padT.w, xo+h*g.in[2], g.in[2])
				}
				wr.multiply(MgK, d.Cg, c.wfp[grp*RBc*MgK*8:(grp+1)*RBc*MgK*8], nil, wr.gpad, 0, &padT.offs, gx, isz, wr.pan, tileAdd, nil)
				continue
			}
			wt := c.wtp[grp*RBk*d.Mg*8 : (grp+1)*RBk*d.Mg*8]
			wr.pan = panels(wr.pan[:0], 0, 0, O)
			if d.pointwise {
				wr.multiply(d.Mg, CgK, wt, nil, gyi, O, nil, gx[xo:xo+d.Cg*isz], O, wr.pan, tileAdd, nil)
				continue
			}
			dcol := wr.bcol[:CgK*O]
			wr.multiply(d.Mg, CgK, wt, nil, gyi, O, nil, dcol, O, wr.pan, 0, nil)
			if tab != nil {
				tab.col2im(d.Cg, dcol, gx[xo:xo+d.Cg*isz], O)
			} else {
				nnCol2im(g, d.Cg, dcol, gx[xo:xo+d.Cg*isz], O)
			}
		}
	}
}

// colT2D writes the transposed column matrix of a 2-D window geometry with its columns
// in (k1, k2, c) order: colT[o·CK + (k1·K2 + k2)·C + c] is the image value under kernel
// offset (k1, k2) of output position o in channel c, 0 in padding, read from xT, the
// image channel-last (H·W × C). Undilated rows of taps are one copy of K2·C values.
func colT2D(g *nnGeom, C int, xT, colT []float32) {
	K1, K2 := g.k[1], g.k[2]
	H, W := g.in[1], g.in[2]
	CK := C * K1 * K2
	o := 0
	for o1 := 0; o1 < g.out[1]; o1++ {
		for o2 := 0; o2 < g.out[2]; o2++ {
			row := colT[o*CK : (o+1)*CK]
			o++
			i2 := o2*g.s[2] - g.pb[2] // column of tap k2 = 0
			for k1 := 0; k1 < K1; k1++ {
				seg := row[k1*K2*C : (k1+1)*K2*C]
				i1 := o1*g.s[1] + k1*g.d[1] - g.pb[1]
				if i1 < 0 || i1 >= H {
					clear(seg)
					continue
				}
				src := xT[i1*W*C : (i1+1)*W*C]
				if C == 1 {
					// Single values: plain stores beat copy calls.
					for k2 := range seg {
						j := i2 + k2*g.d[2]
						v := float32(0)
						if j >= 0 && j < W {
							v = src[j]
						}
						seg[k2] = v
					}
					continue
				}
				if g.d[2] == 1 {
					lo, hi := max(0, -i2), min(K2, W-i2)
					if lo >= hi {
						clear(seg)
						continue
					}
					clear(seg[:lo*C])
					copy(seg[lo*C:hi*C], src[(i2+lo)*C:])
					clear(seg[hi*C:])
					continue
				}
				for k2 := 0; k2 < K2; k2++ {
					j := i2 + k2*g.d[2]
					if j < 0 || j >= W {
						clear(seg[k2*C : (k2+1)*C])
						continue
					}
					copy(seg[k2*C:(k2+1)*C], src[j*C:(j+1)*C])
				}
			}
		}
	}
}

// transposeGo writes the transpose of the R × C matrix a into t (C × R), in 8 × 8 blocks
// that keep both sides in cache lines.
func transposeGo(t, a []float32, R, C int) {
	const bs = 8
	for r0 := 0; r0 < R; r0 += bs {
		r1 := min(r0+bs, R)
		for c0 := 0; c0 < C; c0 += bs {
			c1 := min(c0+bs, C)
			for r := r0; r < r1; r++ {
				row := a[r*C+c0 : r*C+c1]
				for j, v := range row {
					t[(c0+j)*R+r] = v
				}
			}
		}
	}
}
