package engine

import "math/bits"

// The taps path: convolutions of small planes over a batch of images, where many of each
// output pixel's kernel taps read padding. ResNet-18's last stages at 32 px have 4 × 4
// and 2 × 2 planes under 3 × 3 kernels: a corner pixel of a 2 × 2 plane reads the image
// through 4 of its 9 taps, and on the column matrix the other 5 rows are zeros that the
// tile kernel multiplies all the same, so 5/9 of those layers' fused multiply-adds (and
// 31 % of the 4 × 4 ones') added nothing. Output pixels are sorted into classes by the
// set of taps that read the image (a 2 × 2 plane has four classes of one pixel; a 4 × 4
// one nine: corners, edges and the inside), and each class is its own product: the
// weights of its taps only, packed once per class (C·taps rows of the sum), times the
// batch's input laid out one row per input value and one lane per image (X), whose rows
// the tile kernel reads through an offset table shared by the class's pixels, each pixel
// from its own start in X. The lanes are the images, 16 to a panel, so the path needs a
// batch: one image would fill one lane of 16.
//
// Each output is the sum of its products from 0 in the column matrix's order (input
// channel, then kernel row, then kernel column), the padding taps left out, then the bias
// and the activation: forwardGemmTile's own chains for the same chunk, less the products
// of zeros, so the two agree bit for bit (TestConvTaps).

// The path's limits: planes of at most convTapsMaxPlane output pixels, batches of at
// least convTapsMinBatch (a full panel of lanes), and layers where at most
// convTapsMaxValid of the (pixel, tap) pairs read the image. A 3 × 3 kernel reads 44 %
// of them on 2 × 2 planes and 69 % on 4 × 4 ones, whether of stride 1 or 2; ResNet-18's
// stride-2 layer from 8 × 8 to 4 × 4 reads 84 %, and took 0.71 ms on the path against
// 0.56 on the direct one (batch 32, AVX2 path, Zen 5).
//
// The classes' packed weights are kept while the weights are, and hold each tap's weights
// once per class that reads through it: 16/9 of the weight for 2 × 2 planes under a 3 × 3
// kernel, 49/9 for 4 × 4 ones. Layers whose classes would hold more than convTapsMaxPack
// times their weight (a 5 × 5 kernel on 4 × 4 planes: 196/25) keep the direct path rather
// than that much memory.
const (
	convTapsMaxPlane = 16
	convTapsMinBatch = 16
	convTapsMaxValid = 0.8
	convTapsMaxPack  = 6
)

// tapClass is the output pixels that read the image through the same taps.
type tapClass struct {
	mask uint64  // the taps (kernel row · kernel width + column) that read the image
	pix  []int   // the output pixels, row-major in the plane
	base []int   // per pixel, the row of X that tap (0, 0) would read
	rows []int64 // per row of the sum (channel, then tap), its row of X from base
	offs tileOffs
	k    int // rows of the sum: channels × taps
	a    int // offset of the class's packed weights in tapsPath.a
}

// tapsPath is the taps path's layout for one geometry and its packed weights.
type tapsPath struct {
	geom    padGeom
	ok      bool // the geometry takes the path (tapsOK)
	lead    int  // rows of X before channel 0's plane, so that every pixel's base is ≥ 0
	classes []tapClass
	ld      int // the lanes of X's rows the offset tables were scaled for
	a       []float32
	key     weightKey
	packs   int // how many times a was packed; tests read it
	taken   int // forward passes that took the path; tests read it
	x       []float32
	pan     [][]convPanel // each class's panels for the current chunk
}

// setup lays out the classes of d's geometry, when it is not the one already laid out,
// and reports whether the path takes it.
func (t *tapsPath) setup(d *convDims) bool {
	g := &d.g
	if t.geom == (padGeom{g: *g, C: d.Cg}) && t.classes != nil {
		return t.ok
	}
	// A new layout: the packed weights (the zero key) and offset tables (ld 0) are remade.
	*t = tapsPath{geom: padGeom{g: *g, C: d.Cg}, classes: t.classes[:0], a: t.a, x: t.x, pan: t.pan, packs: t.packs, taken: t.taken}
	H, W := g.in[1], g.in[2]
	OH, OW := g.out[1], g.out[2]
	KH, KW := g.k[1], g.k[2]
	if KH*KW > 64 {
		return false
	}
	t.lead = g.pb[1]*W + g.pb[2]
	valid := 0
	for oy := 0; oy < OH; oy++ {
		for ox := 0; ox < OW; ox++ {
			var mask uint64
			iy0, ix0 := oy*g.s[1]-g.pb[1], ox*g.s[2]-g.pb[2]
			for ky := 0; ky < KH; ky++ {
				iy := iy0 + ky*g.d[1]
				for kx := 0; kx < KW; kx++ {
					if ix := ix0 + kx*g.d[2]; iy >= 0 && iy < H && ix >= 0 && ix < W {
						mask |= 1 << uint(ky*KW+kx)
					}
				}
			}
			valid += bits.OnesCount64(mask)
			ci := -1
			for i := range t.classes {
				if t.classes[i].mask == mask {
					ci = i
				}
			}
			if ci < 0 {
				t.classes = append(t.classes, tapClass{mask: mask})
				ci = len(t.classes) - 1
			}
			c := &t.classes[ci]
			c.pix = append(c.pix, oy*OW+ox)
			c.base = append(c.base, t.lead+iy0*W+ix0)
		}
	}
	t.ok = float64(valid) <= convTapsMaxValid*float64(OH*OW*KH*KW)
	RB := (d.Mg + 7) / 8
	na := 0
	for i := range t.classes {
		c := &t.classes[i]
		taps := bits.OnesCount64(c.mask)
		c.k = d.Cg * taps
		c.a = na
		na += RB * 8 * c.k
		c.rows = c.rows[:0]
		for ch := 0; ch < d.Cg; ch++ {
			for m := c.mask; m != 0; m &= m - 1 {
				tap := bits.TrailingZeros64(m)
				ky, kx := tap/KW, tap%KW
				c.rows = append(c.rows, int64(ch*H*W+ky*g.d[1]*W+kx*g.d[2]))
			}
		}
		c.offs.off = make([]int64, len(c.rows))
	}
	if na > convTapsMaxPack*RB*8*d.Cg*KH*KW {
		t.ok = false
		return false
	}
	t.a = nnGrow(t.a, na)
	return t.ok
}

// tapsOK reports whether the taps path runs d with the weight w: frozen weights (packed
// once per class), one group of a 2-D window, no Concat row to write into.
func (k *convKernel) tapsOK(d *convDims, w *Tensor) bool {
	g := &d.g
	if !convDirectOK() || k.noTaps || k.ystride > 0 || k.group != 1 || d.depthwise || d.pointwise ||
		d.N < convTapsMinBatch || g.nd != 2 || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 ||
		g.outSize() > convTapsMaxPlane || k.weightKey(w).p == nil {
		return false
	}
	return k.taps.setup(d)
}

// scale sets the classes' offset tables for rows of ld lanes.
func (t *tapsPath) scale(ld int) {
	if t.ld == ld {
		return
	}
	t.ld = ld
	for i := range t.classes {
		c := &t.classes[i]
		c.offs.max = 0
		for j, r := range c.rows {
			c.offs.off[j] = r * int64(ld) * 4
			c.offs.max = max(c.offs.max, c.offs.off[j])
		}
	}
}

// pack packs each class's weights for the tile kernel, per 8-row block k-major: row r of
// block q, row i of the class's sum (channel ch, tap t) holds W[8q + r][ch][t].
func (t *tapsPath) pack(ctx *Context, d *convDims, w []float32, wk weightKey) {
	if t.key.current(wk) {
		return
	}
	t.packs++
	KK := d.g.kSize()
	RB := (d.Mg + 7) / 8
	for i := range t.classes {
		c := &t.classes[i]
		a := t.a[c.a : c.a+RB*8*c.k]
		ctx.Parallel(RB, 1, func(lo, hi int) {
			for q := lo; q < hi; q++ {
				blk := a[q*8*c.k : (q+1)*8*c.k]
				for r := 0; r < 8; r++ {
					m := q*8 + r
					if m >= d.Mg {
						for j := 0; j < c.k; j++ {
							blk[8*j+r] = 0
						}
						continue
					}
					j := 0
					for ch := 0; ch < d.Cg; ch++ {
						src := w[(m*d.Cg+ch)*KK:]
						for msk := c.mask; msk != 0; msk &= msk - 1 {
							blk[8*j+r] = src[bits.TrailingZeros64(msk)]
							j++
						}
					}
				}
			}
		})
	}
	t.key = wk
}

// forwardTaps is Forward on the taps path (tapsOK): y = act(W ∗ x + bias).
func (k *convKernel) forwardTaps(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp) {
	t := &k.taps
	t.taken++
	t.pack(ctx, d, w, wk)
	g := &d.g
	O, isz := g.outSize(), g.inSize()
	CHW := d.Cg * isz
	RB := (d.Mg + 7) / 8
	// A chunk's X and its products stay within the column budget, as forwardGemm's do.
	nb := min(d.N, max(convTapsMinBatch, nnColBudget/(CHW+d.Mg*O)))
	if k.tapsChunk > 0 {
		nb = min(d.N, k.tapsChunk)
	}
	if len(t.pan) < len(t.classes) {
		t.pan = make([][]convPanel, len(t.classes))
	}
	nw := nnWorkers(ctx, RB)
	work := k.direct.workers(nw)
	for i := range work {
		work[i].silu = false
	}
	for s := 0; s < d.N; s += nb {
		cnt := min(nb, d.N-s)
		L := cnt * O
		t.scale(cnt)
		t.x = nnGrow(t.x, (t.lead+CHW)*cnt)
		X := t.x[t.lead*cnt : (t.lead+CHW)*cnt]
		// X's row j holds input value j of every image of the chunk.
		ctx.Parallel(CHW, max(1, 16384/cnt), func(lo, hi int) {
			for i := 0; i < cnt; i++ {
				for j, v := range x[(s+i)*CHW+lo : (s+i)*CHW+hi] {
					X[(lo+j)*cnt+i] = v
				}
			}
		})
		for ci := range t.classes {
			c := &t.classes[ci]
			pan := t.pan[ci][:0]
			for j, p := range c.pix {
				for l := 0; l < cnt; l += 16 {
					pan = append(pan, convPanel{b: c.base[j]*cnt + l, c: p*cnt + l, m: laneMask(cnt - l)})
				}
			}
			t.pan[ci] = pan
		}
		k.ybuf = nnGrow(k.ybuf, d.Mg*L)
		buf := k.ybuf[:d.Mg*L]
		nnEach(ctx, nw, RB, func(wi, lo, hi int) {
			r0, r1 := lo*8, min(hi*8, d.Mg)
			for ci := range t.classes {
				c := &t.classes[ci]
				if c.k == 0 {
					// Pixels that read only padding: their sums are empty.
					for r := r0; r < r1; r++ {
						for _, p := range c.pix {
							clear(buf[r*L+p*cnt : r*L+(p+1)*cnt])
						}
					}
					continue
				}
				a := t.a[c.a+lo*8*c.k : c.a+hi*8*c.k]
				work[wi].multiply(c.k, r1-r0, a, nil, t.x, cnt, &c.offs, buf[r0*L:], L, t.pan[ci], 0, nil)
			}
		})
		k.planesPixelMajor(ctx, d, y, buf, bias, s, cnt, 0, act)
	}
}
