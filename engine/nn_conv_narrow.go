package engine

import (
	"math"
	"slices"
)

// The narrow path: convolutions whose whole batch has fewer output pixels than the tile
// kernel's panel pair is wide (ResNet-18's last two stages at 32 px and batch 1: 2×2 and
// 1×1 planes of 256 and 512 channels). forwardGemmTile runs the output channels along
// the kernel's rows and the pixels along its 32 lanes, so with 4 pixels seven eighths of
// every fused multiply-add were empty lanes, and such a layer, which only needs to stream
// its weights once, ran at a sixth of the kernel's rate. The narrow path swaps the roles:
// the pixels become the rows (8 to a block) and the output channels the lanes (32 to a
// panel pair), with the weights packed once, transposed, in panels of 32 channels. Each
// output is the same fused multiply-add chain as on forwardGemmTile's batch-1 path (the
// bias first, then the products in the column matrix's order), so the two agree bit for
// bit.

// convNarrowMaxCols is the most output pixels (over the batch) the narrow path takes:
// below one panel pair of the lanes forwardGemmTile fills. Up to convNarrowWideCols, it
// also takes those whose last 16-pixel panel would be half empty or more, when the
// output channels fill more of their lanes than the pixels do (lanesFull).
const (
	convNarrowMaxCols  = 32
	convNarrowWideCols = 64
)

// narrowOK reports whether forwardGemmTile's products of d go through the narrow path.
// Fewer than 16 output channels per group would leave the lanes as empty as before.
//
// Planes of one pixel (ResNet-18's last stage at 32 px, its taps trimmed to the centre)
// take it at any batch: the pixel-major product is then the output's own layout, where
// forwardGemmTile would gather the column matrix and spread its product a value at a
// time (232 µs of a 512-channel layer at batch 32, against a 40 µs product).
//
// ResNet-18's 7 × 7 planes at 224 px and batch 1 come here on the AVX2 path (see
// forwardDirectOK): 49 pixels make panels of 16, 16, 16 and 1, and the last, a quarter
// of the work, ran through the four-row kernel with one lane in sixteen. As the narrow
// path's rows they fill 49 of 52, and 512 channels fill every lane: 1.94–2.06 ms a
// 512 → 512 layer against 2.62 (AVX2 path, Zen 5, alternating runs).
func (k *convKernel) narrowOK(d *convDims) bool {
	O := d.g.outSize()
	L := d.N * O
	if k.noNarrow || d.Mg < 16 || d.chunk() < d.N {
		return false
	}
	if L < convNarrowMaxCols || O == 1 {
		return true
	}
	r := L % 16
	return L <= convNarrowWideCols && r > 0 && r <= 8 && lanesFull(d.Mg, 32) > lanesFull(L, 16)
}

// lanesFull is the share of the lanes that n values fill in panels of w lanes.
func lanesFull(n, w int) float64 {
	return float64(n) / float64(w*((n+w-1)/w))
}

// packNarrow fills k.direct.wn with Wᵀ per group in panels of 32 output channels,
// k-major, zero-padded: wn[((grp·NP + p)·CgK + i)·32 + j] = W[grp·Mg + 32p + j][i]. Kept
// while the weights stay, as packWeights keeps its packing.
func (k *convKernel) packNarrow(ctx *Context, d *convDims, w []float32, wk weightKey) {
	c := &k.direct
	CgK := d.Cg * d.g.kSize()
	NP := (d.Mg + 31) / 32
	size := k.group * NP * CgK * 32
	if c.wnKey.current(wk) && len(c.wn) == size {
		return
	}
	c.wn = nnGrow(c.wn, size)
	c.packs++
	ctx.Parallel(k.group*NP, max(1, 16384/(CgK*32)), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			grp, p := j/NP, j%NP
			dst := c.wn[j*CgK*32 : (j+1)*CgK*32]
			src := w[(grp*d.Mg+32*p)*CgK:]
			if n := d.Mg - 32*p; n < 32 {
				for i := range CgK {
					row := dst[i*32 : (i+1)*32]
					for r := range n {
						row[r] = src[r*CgK+i]
					}
					clear(row[n:])
				}
				continue
			}
			transpose(dst, src[:32*CgK], 32, CgK)
		}
	})
	c.wnKey = wk
}

// forwardNarrow is forwardGemmTile for narrowOK's convolutions: per group, the batch's
// column matrix (CgK × L, L = N·O pixels) packed 8 pixels to a row block is A, the
// packed Wᵀ panels are B, and the L × Mg product lands in k.ybuf, pixel-major, starting
// from the bias (tileAdd), to be spread into the output planes with the activation.
func (k *convKernel) forwardNarrow(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp) {
	O := d.g.outSize()
	CgK := d.Cg * d.g.kSize()
	L := d.N * O
	RB := (L + 7) / 8
	NP := (d.Mg + 31) / 32
	k.packNarrow(ctx, d, w, wk)
	c := &k.direct
	c.an = nnGrow(c.an, RB*CgK*8)
	a := c.an[:RB*CgK*8]
	// Rows past L are never read back, but their sums must stay finite garbage-free:
	// 8·RB rows of Mg values, plus the width of a panel so that the last panel's
	// slices exist whatever its mask.
	k.ybuf = nnGrow(k.ybuf, 8*RB*d.Mg+32)
	t := k.ybuf[:8*RB*d.Mg+32]
	nw := nnWorkers(ctx, NP)
	for grp := 0; grp < k.group; grp++ {
		if d.pointwise && O == 1 {
			// The images' channels are the rows of A as they lie in x.
			packRows(a, x[grp*d.Cg:], L, CgK, d.C)
		} else if ng := k.narrowGather(d); ng != nil {
			isz := d.g.inSize()
			xs := x[grp*d.Cg*isz:]
			ctx.Parallel(d.Cg, max(1, 4096/len(ng.idx)), func(lo, hi int) {
				ng.gather(lo, hi, xs, isz, a, CgK)
			})
		} else {
			col, ld := k.cols(ctx, d, x, 0, d.N, grp)
			packCols(a, col, L, CgK, ld)
		}
		for r := 0; r < 8*RB; r++ {
			row := t[r*d.Mg : (r+1)*d.Mg]
			if bias != nil {
				copy(row, bias[grp*d.Mg:(grp+1)*d.Mg])
			} else {
				clear(row)
			}
		}
		wg := c.wn[grp*NP*CgK*32 : (grp+1)*NP*CgK*32]
		nnEach(ctx, nw, NP, func(_, lo, hi int) {
			for p := lo; p < hi; p++ {
				n := d.Mg - 32*p
				m0, m1 := laneMask(n), uint64(0)
				if n > 16 {
					m1 = laneMask(n - 16)
				}
				b := wg[p*CgK*32 : (p+1)*CgK*32]
				convTileRows(CgK, a, b, b[16:], 32, t[32*p:], t[32*p+16:], d.Mg, nil, m0, m1, tileAdd, RB, L, nil, nil)
			}
		})
		if O == 1 {
			// One pixel an image: each image's row of the product is its output.
			ctx.Parallel(d.N, max(1, 16384/d.Mg), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					yr := y[i*d.M+grp*d.Mg : i*d.M+(grp+1)*d.Mg]
					copy(yr, t[i*d.Mg:(i+1)*d.Mg])
					if act != nil {
						act.applyNoBias(yr, yr)
					}
				}
			})
			continue
		}
		// Spread the pixel-major product into the item-major planes.
		ctx.Parallel(d.N*d.Mg, max(1, 16384/max(O, 1)), func(lo, hi int) {
			for q := lo; q < hi; q++ {
				i, m := q/d.Mg, q%d.Mg
				yp := y[((i*d.M)+grp*d.Mg+m)*O : ((i*d.M)+grp*d.Mg+m+1)*O]
				for o := range yp {
					yp[o] = t[(i*O+o)*d.Mg+m]
				}
				if act != nil {
					act.applyNoBias(yp, yp)
				}
			}
		})
	}
}

// narrowGather makes the narrow path's A straight from the images, in the layout packCols
// gives the column matrix: row c·K + k (channel c, tap k) of the batch's L pixels in
// blocks of 8, a[(rb·CgK + c·K + k)·8 + r] for pixel 8rb + r, zero past the last pixel
// and where the window reads padding. For one channel and block that is a run of K·8
// values gathered from the channel's planes through one index list, the same for every
// channel: on ResNet-18's 2×2 planes at 32 px and batch 1, im2col then packCols had
// taken two thirds as long as the products.
type narrowGather struct {
	g         nnGeom
	cnt, step int
	idx       []int32 // per block of 8 pixels, K·8 offsets from a channel's first value; −1: zero
	bound     int     // 1 + the largest offset
}

// narrowGather returns the gather lists of d's batch (item i's channel c at
// x[i·C·isz + c·isz]), building them when the geometry or the batch changed, or nil when
// d's column matrix is not made through a gather table.
func (k *convKernel) narrowGather(d *convDims) *narrowGather {
	g := &d.g
	if d.pointwise || !nnUseTable(g) {
		return nil
	}
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	step := d.C * isz
	if int64(d.N-1)*int64(step)+int64(isz) > math.MaxInt32 {
		return nil
	}
	ng := &k.ngat
	if ng.idx != nil && ng.g == *g && ng.cnt == d.N && ng.step == step {
		return ng
	}
	tab := k.tab.table(g)
	L := d.N * O
	RB := (L + 7) / 8
	ng.g, ng.cnt, ng.step, ng.bound = *g, d.N, step, 1
	ng.idx = slices.Grow(ng.idx[:0], RB*K*8)[:RB*K*8]
	for rb := range RB {
		for kk := range K {
			for r := range 8 {
				q, off := 8*rb+r, int32(-1)
				if q < L {
					if j := tab.idx[kk*O+q%O]; j >= 0 {
						off = int32(q/O*step) + j
						ng.bound = max(ng.bound, int(off)+1)
					}
				}
				ng.idx[(rb*K+kk)*8+r] = off
			}
		}
	}
	return ng
}

// gather writes channels [c0, c1) of A (rows = CgK rows a block) from xs, whose
// channels are isz values apart.
func (ng *narrowGather) gather(c0, c1 int, xs []float32, isz int, a []float32, rows int) {
	K := ng.g.kSize()
	RB := len(ng.idx) / (K * 8)
	for c := c0; c < c1; c++ {
		xc := xs[c*isz:]
		for rb := range RB {
			at := (rb*rows + c*K) * 8
			gatherRow(a[at:at+K*8], xc, ng.idx[rb*K*8:(rb+1)*K*8], ng.bound)
		}
	}
}
