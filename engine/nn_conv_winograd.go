package engine

import (
	"fmt"
	"math"
	"sync/atomic"
)

// The Winograd path of Conv: 3×3 unit-stride 2-D convolutions with many channels,
// F(2×2, 3×3) of Lavin and Gray (2016). Each 2×2 block of output pixels (a tile) is
//
//	Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
//
// over the 4×4 input patch d under it, summed over input channels, with
//
//	Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]
//	G  = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]
//	Aᵀ = [1 1 1 0; 0 1 −1 −1].
//
// The sum over channels of the element-wise products is, for each of the 16 positions ξ
// of the 4×4 transformed tile, a product of matrices: Mξ = Uξ·Vξ, Uξ the M × C
// transformed weights and Vξ the C × tiles transformed input. Those 16 products run on the
// tile kernel, and take 16 multiply-adds a tile and channel pair where the direct path
// takes 36: on ResNet-18's 3×3 layers the products were three quarters of the run time.
// The transforms themselves use only additions, subtractions and halvings (exact for G's
// ½), so the result differs from the direct sum by float32 rounding only; the
// transforms have AVX-512 and AVX2 forms (nn_wino_amd64.s) that compute the Go
// definitions here bit for bit.
//
// The work goes in chunks of tile rows of one image, each worker transforming, multiplying
// and writing back its chunk while its 16 transformed matrices are in the cache.

// Below these the transforms' passes cost more than the products save (BenchmarkConvShape).
//
// On the AVX2 path the input channels may be as few as winoAVX2MinC: there the direct
// path's products run at half AVX-512's width while the transforms are a smaller share,
// and BenchmarkConvWinogradFew under GODEBUG=cpu.avx512f=off (Zen 5, 2026-12-03, two runs)
// has the Winograd path at 0.60–0.66× the direct path's time for 16 → 64 channels on
// 55 × 55 planes (SqueezeNet's first expand layers) at batch 1 and 4, 0.51–0.53× for 24 →
// 64 at 28 × 28, 0.87–0.92× for 16 → 32 at 14 × 14 and 0.94× for 16 → 16 at 28 × 28 (8
// input channels gained too, 0.81–0.86×, but no network measured here has such a layer).
// With AVX-512 16 → 64 gained 5–10 % and 24 → 64 17 %, measured on these two shapes
// only; winoMinC, on whose paths fmnist-cnn's AVX-512 training and its tests rest, is
// left as it was there.
const (
	winoMinC     = 32 // input channels
	winoMinM     = 16 // output channels
	winoMinPlane = 12 // output rows and columns
	winoAVX2MinC = 16
)

// Smaller planes, down to winoSmallPlane rows and columns, take the path too when both
// channel counts reach winoSmallCh and the batch holds winoMinCols tiles, which chunks of
// whole images then gather: ResNet-18's last stage at 224 px (7 × 7, 512 channels) ran
// 1.8–2.0× faster so at batch 4 to 32, and 7 × 7 or 6 × 6 planes of 128 or 256 channels
// 1.3–1.6×, timed interleaved in one process on an AVX-512 Emerald Rapids (2026-11-28).
// The same shapes lost with 64 channels (7 × 7 and 8 × 8: 0.93–0.97×), on 4 × 4 planes
// (0.75× at 128 channels: a transform call per image and channel covers 4 tiles), and at
// batch 1 or 2 (16 or 32 tiles, the workers then sharing 8 or 16 tiles by rows).
//
// Since the workers share the output channels where the tiles are too few to share
// (winoSplit), planes of 256 channels or more take the path from winoFewCols tiles (one
// 7 × 7 or 8 × 8 plane): per layer, two workers, against the direct path, alternating
// (BenchmarkConvWinogradFew, Zen 5, 2026-12-02), on the AVX2 path 512 channels at 7 × 7
// 0.74× the time at batch 1 and 0.54× at batch 2, at 10 × 10 0.64× (batch 1), 256 at 7 × 7
// 0.63× and 0.55×, at 8 × 8 0.53×; with AVX-512 0.91–0.98× (0.78× at 10 × 10). With 128
// channels it gained nothing at batch 1 (0.96× on the AVX2 path, 1.12× with AVX-512).
// An image's outputs can then be the Winograd path's in a batch and the direct path's
// alone: they differ by float32 rounding, as any two paths do, and each batch size's
// are reproducible.
//
// On the AVX2 path (no AVX-512 tile kernel) both channel counts are winoAVX2Ch: there
// the alternative at batch 1 is an im2col product (rows under convAVX2MinRow make no
// direct panel) and otherwise the direct path's half-empty 16-lane panels on 8-pixel rows.
// BenchmarkConvWinogradFew under GODEBUG=cpu.avx512f=off (Zen 5, 2026-12-03, two runs):
// 64 channels at 8 × 8 0.54–0.60× the time at batch 1, 0.78–0.82× at batch 2 and 3,
// 0.92× at 4 and 0.72× at 32 (ResNet-18's first stage at 32 px), at 7 × 7 0.69× at
// batch 1 and 0.87–0.97× at 8; 128 channels at 8 × 8 0.56× (batch 1) and 0.68–0.70×
// (batch 2); 32 channels level (0.97–1.03×). With AVX-512 the 64-channel shapes lose at
// batches 4 to 32 (1.05–1.30×) and are level at batch 1 (0.92 and 1.15× in two runs), and
// 128 channels at batch 1 gained 4–15 %, so its thresholds stay.
const (
	winoSmallPlane = 5
	winoSmallCh    = 128
	winoFewCols    = 16
	winoFewCh      = 256
	winoAVX2Ch     = 64
)

// winoChunk is the size, in float32 values, of a chunk's transformed input or product
// matrices (16 × channels × tiles): 512 KiB, within a core's L2 with both. A chunk has
// at least winoMinCols tiles all the same: fewer would read the transformed weights
// (16 × M × C) from memory for too few products.
const (
	winoChunk   = 1 << 17
	winoMinCols = 64
)

// winoPad puts a cache line between the transformed input's (and the products') 16
// matrices. Their sizes, channels × tiles, are mostly multiples of 4 KiB, so the 16
// values the transforms store (or load) for a tile would otherwise share one set of the
// L1 cache, which holds 8 to 12 of them.
const winoPad = 16

// winogradOK reports whether the Winograd path runs d: only with the assembly transforms
// and tile kernel (AVX-512, or AVX2 and FMA), and not with a fused pool (which the direct
// path makes per block).
func (k *convKernel) winogradOK(d *convDims, pg *nnGeom) bool {
	g := &d.g
	if !winoFast() || k.noWinograd || pg != nil || k.group != 1 || d.depthwise || d.pointwise ||
		g.nd != 2 || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 ||
		g.k[1] != 3 || g.k[2] != 3 || g.s[1] != 1 || g.s[2] != 1 || g.d[1] != 1 || g.d[2] != 1 ||
		d.Mg < winoMinM {
		return false
	}
	// The AVX2 path's thresholds, where the direct path's products run at half width.
	minC, smallCh, fewCh := winoMinC, winoSmallCh, winoFewCh
	if !convTileOK() {
		minC, smallCh, fewCh = winoAVX2MinC, winoAVX2Ch, winoAVX2Ch
	}
	if d.Cg < minC {
		return false
	}
	oh, ow := g.out[1], g.out[2]
	if oh >= winoMinPlane && ow >= winoMinPlane {
		return true
	}
	if oh < winoSmallPlane || ow < winoSmallPlane {
		return false
	}
	tiles, ch := d.N*((oh+1)/2)*((ow+1)/2), min(d.Cg, d.Mg)
	return tiles >= winoMinCols && ch >= smallCh || tiles >= winoFewCols && ch >= fewCh
}

// winoFilter sets u[ξ] for ξ = 4i + j to (G g Gᵀ)[i][j] of the 3×3 filter g (row-major),
// each product by ½ of a sum rounded on its own.
func winoFilter(u *[16]float32, g []float32) {
	var t [4][3]float32 // G·g
	for c := 0; c < 3; c++ {
		g0, g1, g2 := g[c], g[3+c], g[6+c]
		t[0][c] = g0
		t[1][c] = 0.5 * ((g0 + g1) + g2)
		t[2][c] = 0.5 * ((g0 - g1) + g2)
		t[3][c] = g2
	}
	for i := 0; i < 4; i++ {
		r0, r1, r2 := t[i][0], t[i][1], t[i][2]
		u[4*i] = r0
		u[4*i+1] = 0.5 * ((r0 + r1) + r2)
		u[4*i+2] = 0.5 * ((r0 - r1) + r2)
		u[4*i+3] = r2
	}
}

// winoWeightsLen is the length of winoWeights' result for tiles of n × n outputs.
func winoWeightsLen(d *convDims, n int) int { return (n + 2) * (n + 2) * ((d.Mg + 7) / 8) * 8 * d.Cg }

// winoWeights returns the transformed weights, per ξ the M × C matrix Uξ packed for the
// tile kernel (packRows): kept while the weights are (as packWeights keeps its own) when
// they are a frozen parameter, else made into dst (winoWeightsLen values, all written),
// the call's scratch: trained weights change at every step.
func (k *convKernel) winoWeights(ctx *Context, d *convDims, w []float32, wk weightKey, dst []float32, tile int) []float32 {
	c := &k.direct
	M, C := d.Mg, d.Cg
	RB := (M + 7) / 8
	n := RB * C * 8
	xis := (tile + 2) * (tile + 2)
	var wu []float32
	if wk.p != nil {
		// The length tells the two tile sizes' transforms apart.
		if c.wuKey.current(wk) && len(c.wu) == xis*n {
			return c.wu
		}
		c.wu = nnGrow(c.wu, xis*n)
		c.wuKey = wk
		wu = c.wu
	} else {
		wu = dst[:xis*n]
	}
	ctx.Parallel(RB, 1, func(lo, hi int) {
		var u [36]float32
		for rb := lo; rb < hi; rb++ {
			for r := 0; r < 8; r++ {
				m := rb*8 + r
				for ch := 0; ch < C; ch++ {
					u = [36]float32{}
					if m < M {
						g := w[(m*C+ch)*9 : (m*C+ch+1)*9]
						if tile == 4 {
							winoFilter4(&u, g)
						} else {
							winoFilter((*[16]float32)(u[:16]), g)
						}
					}
					for xi := 0; xi < xis; xi++ {
						wu[xi*n+(rb*C+ch)*8+r] = u[xi]
					}
				}
			}
		}
	})
	return wu
}

// winoQuarters fills the four quarter planes of one channel's zero-padded image for tile
// rows [t0, t0+rows): plane (a, b) at q[(2a+b)·qp:], row y', column x holding the padded
// pixel (2(t0+y')+a, 2x+b), for y' ≤ rows and x < S. The padded image has pt rows and pl
// columns of zeros before x's h × w pixels, and zeros after as far as the tiles reach.
func winoQuarters(q []float32, qp, S, t0, rows int, x []float32, h, w, pt, pl int) {
	for a := 0; a < 2; a++ {
		// Rows y of the quarter reading image row r = 2(t0+y) + a − pt: those with
		// 0 ≤ r < h are [ylo, yhi), the rest padding.
		ylo := min(rows+1, max(0, (pt-a-2*t0+1)/2))
		yhi := max(ylo, min(rows+1, (h-1+pt-a-2*t0)/2+1))
		if h-1+pt-a-2*t0 < 0 {
			yhi = ylo
		}
		for b := 0; b < 2; b++ {
			plane := q[(2*a+b)*qp : (2*a+b)*qp+(rows+1)*S]
			clear(plane[:ylo*S])
			clear(plane[yhi*S:])
			// Columns x with 0 ≤ 2x + b − pl < w.
			lo := max(0, (pl-b+1)/2)
			hi := min(S, (w-1+pl-b)/2+1)
			if w-1+pl-b < 0 || lo >= hi {
				clear(plane[ylo*S : yhi*S])
				continue
			}
			for y := ylo; y < yhi; y++ {
				row := plane[y*S : (y+1)*S]
				for i := range row[:lo] {
					row[i] = 0
				}
				for i := hi; i < S; i++ {
					row[i] = 0
				}
			}
			if yhi > ylo {
				r := 2*(t0+ylo) + a - pt
				s2Rows(plane[ylo*S+lo:], S, x[r*w+2*lo+b-pl:], 2*w, hi-lo, yhi-ylo)
			}
		}
	}
}

// winoInGo is the definition of the input transform of one channel over rows rows of tw
// tiles: with q as winoQuarters leaves it (plane size qp, row length S > tw), it sets
// v[ξ·ldv + y·tw + x] to (Bᵀ d B)[i][j], ξ = 4i + j, d the 4×4 patch of tile (y, x).
func winoInGo(q []float32, qp, S, tw, rows int, v []float32, ldv int) {
	q00, q01, q10, q11 := q[:qp], q[qp:2*qp], q[2*qp:3*qp], q[3*qp:4*qp]
	for y := 0; y < rows; y++ {
		for x := 0; x < tw; x++ {
			p, s := y*S+x, (y+1)*S+x
			d := [4][4]float32{
				{q00[p], q01[p], q00[p+1], q01[p+1]},
				{q10[p], q11[p], q10[p+1], q11[p+1]},
				{q00[s], q01[s], q00[s+1], q01[s+1]},
				{q10[s], q11[s], q10[s+1], q11[s+1]},
			}
			var z [4][4]float32 // Bᵀ d
			for c := 0; c < 4; c++ {
				z[0][c] = d[0][c] - d[2][c]
				z[1][c] = d[1][c] + d[2][c]
				z[2][c] = d[2][c] - d[1][c]
				z[3][c] = d[1][c] - d[3][c]
			}
			o := y*tw + x
			for i := 0; i < 4; i++ {
				v[(4*i)*ldv+o] = z[i][0] - z[i][2]
				v[(4*i+1)*ldv+o] = z[i][1] + z[i][2]
				v[(4*i+2)*ldv+o] = z[i][2] - z[i][1]
				v[(4*i+3)*ldv+o] = z[i][1] - z[i][3]
			}
		}
	}
}

// Flags of the output transform.
const (
	winoBias = 1 // add the bias
	winoRes  = 2 // then add res, laid out as y
	winoRelu = 4 // then Relu, as the Relu kernel computes it
)

// winoOutGo is the definition of the output transform of one output channel: from its
// products m[ξ·ldm + y·tw + x] over rows rows of tw tiles, it writes output pixel
// (2y + a, 2x + b) = (Aᵀ m A)[a][b] (+ bias, + res, Relu, as flags say) to y at row
// stride ow, for the rows below ohr and the columns below ow.
func winoOutGo(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int) {
	for ty := 0; ty < rows; ty++ {
		for tx := 0; tx < tw; tx++ {
			o := ty*tw + tx
			var w [2][4]float32 // Aᵀ m
			for j := 0; j < 4; j++ {
				m0, m1, m2, m3 := m[j*ldm+o], m[(4+j)*ldm+o], m[(8+j)*ldm+o], m[(12+j)*ldm+o]
				w[0][j] = (m0 + m1) + m2
				w[1][j] = (m1 - m2) - m3
			}
			for a := 0; a < 2; a++ {
				oy := 2*ty + a
				if oy >= ohr {
					continue
				}
				r := w[a]
				out := [2]float32{(r[0] + r[1]) + r[2], (r[1] - r[2]) - r[3]}
				for b := 0; b < 2; b++ {
					ox := 2*tx + b
					if ox >= ow {
						continue
					}
					y[oy*ow+ox] = winoEpilogue(out[b], bias, res, oy*ow+ox, flags)
				}
			}
		}
	}
}

// winoCheck panics (the executor turns that into an error naming the node) when a
// transform would reach outside its slices: the assembly works on raw pointers.
func winoCheck(q []float32, qp, S, tw, rows int, v []float32, ldv int) {
	if tw < 1 || rows < 1 || S <= tw || qp < (rows+1)*S || len(q) < 4*qp || ldv < rows*tw || len(v) < 15*ldv+rows*tw {
		panic(fmt.Sprintf("winograd transform out of range: %d rows of %d tiles, S %d, planes %d of %d, ld %d of %d", rows, tw, S, qp, len(q), ldv, len(v)))
	}
}

// winoTiles is the geometry of a Winograd convolution's tiles: n × n outputs each (2 for
// F(2×2, 3×3), 4 for F(4×4, 3×3)), xis = (n+2)² transformed matrices, th × tw tiles a
// plane, and s, the row length of the planes the input transform reads (tw + 1).
type winoTiles struct {
	n, xis, th, tw, s int
}

func newWinoTiles(d *convDims, n int) winoTiles {
	th, tw := (d.g.out[1]+n-1)/n, (d.g.out[2]+n-1)/n
	return winoTiles{n: n, xis: (n + 2) * (n + 2), th: th, tw: tw, s: tw + 1}
}

// planesLen is the scratch the input planes of rows tile rows take.
func (t *winoTiles) planesLen(rows int) int {
	if t.n == 4 {
		return wino4PlanesLen(rows, t.s)
	}
	return 4 * (rows + 1) * t.s
}

// in transforms channel xc (an h × w plane) over tile rows [t0, t0+rows) into v (ldv
// between the matrices), through the planes in q.
func (t *winoTiles) in(q []float32, t0, rows int, xc []float32, g *nnGeom, v []float32, ldv int, tabs *wino4Tabs) {
	H, W := g.in[1], g.in[2]
	if t.n == 4 {
		pp := wino4PlaneSize(rows, t.s)
		wino4Planes(q, pp, t.s, t0, rows, xc, H, W, g.pb[1], g.pb[2], q[8*pp:])
		winoIn4(q, pp, t.s, t.tw, rows, v, ldv, tabs)
		return
	}
	pp := (rows + 1) * t.s
	winoQuarters(q, pp, t.s, t0, rows, xc, H, W, g.pb[1], g.pb[2])
	winoIn(q, pp, t.s, t.tw, rows, v, ldv)
}

// forwardWinograd is Forward on the Winograd path (winogradOK): y = act(W ∗ x + bias
// (+ res)), in tiles of 4 × 4 outputs where wino4OK says so, else 2 × 2.
func (k *convKernel) forwardWinograd(ctx *Context, d *convDims, x, w []float32, wk weightKey, bias, y []float32, act *nnClamp, res []float32) {
	C, M := d.Cg, d.Mg
	nt := 2
	if k.wino4OK(d, wk) {
		nt = 4
	}
	t := newWinoTiles(d, nt)
	TH, TW, xis := t.th, t.tw, t.xis
	RB := (M + 7) / 8
	// The distance between images' outputs: their size, or a Concat's row (ystride).
	ys := M * d.g.out[1] * d.g.out[2]
	if k.ystride > 0 {
		ys = k.ystride
	}
	// A chunk is tile rows [t0, t1) of images [i0, i1): rows of one image when an image
	// has enough tiles for the products to use each transformed weight many times,
	// whole images otherwise. Either way each tile's output is made the same way, so that
	// it does not depend on the batch or on how it is shared out.
	cols := max(winoMinCols, winoChunk/(xis*max(C, M)))
	G, nch := 1, 1
	if TH*TW >= cols {
		rmax := max(1, cols/TW)
		nch = (TH + rmax - 1) / rmax
		if d.N < ctx.Workers {
			// Enough chunks for the workers to share one image.
			nch = min(TH, (nch+ctx.Workers-1)/ctx.Workers*ctx.Workers)
		}
	} else if d.N >= ctx.Workers {
		G = max(1, min(cols/(TH*TW), (d.N+ctx.Workers-1)/ctx.Workers))
	} else {
		// Fewer images than workers: the workers share each image's rows.
		nch = min(TH, (ctx.Workers+d.N-1)/d.N)
	}
	R := (TH + nch - 1) / nch
	Tmax := G * R * TW
	items := (d.N + G - 1) / G * nch
	nw := nnWorkers(ctx, items)
	// A batch of few tiles (small planes at batch 1: winogradOK) is one chunk whose
	// workers share the output channels, not the tiles: split by rows, two workers on
	// ResNet-18's 7 × 7 planes had 8 tiles each, half of every panel empty, and the layer
	// ran no faster on two workers than on one; and each worker read all the transformed
	// weights (4 MiB at 256 channels) for its few tiles, where it now reads its share:
	// ResNet-18's 14 × 14 layers at batch 1 (49 tiles) 1.10 -> 1.04 ms in the network.
	// Each output is the same sums either way (TestConvWinogradWorkersAgree).
	split := d.N*TH*TW < 64*ctx.Workers
	if split {
		R, Tmax = TH, d.N*TH*TW
		nw = nnWorkers(ctx, RB)
	}
	qsize, vsize, msize := t.planesLen(R), xis*(C*winoCols(Tmax)+winoPad), xis*(M*winoCols(Tmax)+winoPad)
	work := k.direct.workers(nw)
	// Every value of the planes, the transformed input and the products is written
	// before it is read: graph's shared scratch.
	per := qsize + vsize + msize
	if split {
		// One transformed input and one product for all; planes per worker.
		per = qsize
	}
	// Trained weights are transformed anew at every step: into the scratch too.
	un := 0
	if wk.p == nil {
		un = winoWeightsLen(d, nt)
	}
	whole := 0
	if split {
		whole = vsize + msize
	}
	scr, shared := ctx.scratch(&k.direct.winoScratch, un+whole+nw*per)
	defer ctx.releaseScratch(shared)
	u := k.winoWeights(ctx, d, w, wk, scr[:un:un], nt)
	scr = scr[un:]
	var sv, sm []float32
	if split {
		sv, sm = scr[:vsize:vsize], scr[vsize:whole:whole]
		scr = scr[whole:]
	}
	for i := range work {
		work[i].wino = scr[i*per : (i+1)*per : (i+1)*per]
	}
	defer func() {
		for i := range work {
			work[i].wino = nil
		}
	}()
	flags := 0
	if bias != nil {
		flags |= winoBias
	}
	if res != nil {
		flags |= winoRes
	}
	if act != nil && act.relu {
		flags |= winoRelu
	}
	if split {
		winoSplit(ctx, d, &t, x, u, bias, y, act, res, ys, flags, work, sv, sm)
		return
	}
	CHW := d.g.in[1] * d.g.in[2]
	var next atomic.Int64
	nnEach(ctx, nw, nw, func(wk, _, _ int) {
		wr := &work[wk]
		q, v, mb := wr.wino[:qsize], wr.wino[qsize:qsize+vsize], wr.wino[qsize+vsize:qsize+vsize+msize]
		for {
			item := int(next.Add(1) - 1)
			if item >= items {
				break
			}
			ci := item % nch
			i0 := item / nch * G
			i1 := min(i0+G, d.N)
			t0, t1 := ci*TH/nch, (ci+1)*TH/nch
			rows := t1 - t0
			per := rows * TW // tiles of one image
			T := (i1 - i0) * per
			Tp := winoCols(T)
			ldv, ldm := C*Tp+winoPad, M*Tp+winoPad
			for i := i0; i < i1; i++ {
				for ch := 0; ch < C; ch++ {
					t.in(q, t0, rows, x[(i*d.C+ch)*CHW:(i*d.C+ch+1)*CHW], &d.g, v[ch*Tp+(i-i0)*per:], ldv, &wr.w4)
				}
			}
			winoClearCols(v, ldv, xis, C, T, Tp)
			wr.pan = panels(wr.pan[:0], 0, 0, Tp)
			for xi := 0; xi < xis; xi++ {
				wr.multiply(C, M, u[xi*RB*C*8:(xi+1)*RB*C*8], nil, v[xi*ldv:xi*ldv+C*Tp], Tp, nil, mb[xi*ldm:xi*ldm+M*Tp], Tp, wr.pan, 0, nil)
			}
			winoOuts(d, &t, mb, ldm, Tp, i0, i1, 0, M, t0, rows, ys, flags, bias, y, res, act, &wr.w4)
		}
	})
}

// winoSplit is forwardWinograd for a batch of few tiles: the whole batch one chunk (tile
// rows [0, TH) of every image), its channels' input transforms shared out over the
// workers, then its output channels' row blocks, each worker making the products and the
// output transforms of its own. Each output is the same chain of operations as in a
// chunk of its own, so the split changes no bit.
func winoSplit(ctx *Context, d *convDims, t *winoTiles, x, u, bias, y []float32, act *nnClamp, res []float32, ys, flags int, work []convWork, v, mb []float32) {
	C, M := d.Cg, d.Mg
	RB := (M + 7) / 8
	per := t.th * t.tw
	T := d.N * per
	Tp := winoCols(T)
	ldv, ldm := C*Tp+winoPad, M*Tp+winoPad
	CHW := d.g.in[1] * d.g.in[2]
	nw := len(work)
	nnEach(ctx, nw, C, func(wk, lo, hi int) {
		q, tabs := work[wk].wino, &work[wk].w4
		for ch := lo; ch < hi; ch++ {
			for i := 0; i < d.N; i++ {
				t.in(q, 0, t.th, x[(i*d.C+ch)*CHW:(i*d.C+ch+1)*CHW], &d.g, v[ch*Tp+i*per:], ldv, tabs)
			}
		}
	})
	winoClearCols(v, ldv, t.xis, C, T, Tp)
	nnEach(ctx, nw, RB, func(wk, lo, hi int) {
		wr := &work[wk]
		m0, m1 := lo*8, min(hi*8, M)
		wr.pan = panels(wr.pan[:0], 0, 0, Tp)
		for xi := 0; xi < t.xis; xi++ {
			ua := u[xi*RB*C*8 : (xi+1)*RB*C*8]
			wr.multiply(C, m1-m0, ua[lo*C*8:hi*C*8], nil, v[xi*ldv:xi*ldv+C*Tp], Tp, nil, mb[xi*ldm+m0*Tp:xi*ldm+M*Tp], Tp, wr.pan, 0, nil)
		}
		winoOuts(d, t, mb, ldm, Tp, 0, d.N, m0, m1, 0, t.th, ys, flags, bias, y, res, act, &wr.w4)
	})
}

// winoOuts writes output channels [m0, m1) of images [i0, i1), tile rows [t0, t0+rows),
// from the products in mb (Tp values a row, the image's tiles after the previous
// images', ldm between the matrices), with the bias, residual and activation.
func winoOuts(d *convDims, t *winoTiles, mb []float32, ldm, Tp, i0, i1, m0, m1, t0, rows, ys, flags int, bias, y, res []float32, act *nnClamp, tabs *wino4Tabs) {
	M, OH, OW := d.Mg, d.g.out[1], d.g.out[2]
	per := rows * t.tw
	ohr := min(t.n*rows, OH-t.n*t0)
	for i := i0; i < i1; i++ {
		for m := m0; m < m1; m++ {
			off := (i*M+m)*OH*OW + t.n*t0*OW
			var bv float32
			if bias != nil {
				bv = bias[m]
			}
			var rs []float32
			if res != nil {
				rs = res[off : off+ohr*OW]
			}
			yoff := i*ys + m*OH*OW + t.n*t0*OW
			yo := y[yoff : yoff+ohr*OW]
			if t.n == 4 {
				winoOut4(mb[m*Tp+(i-i0)*per:], ldm, t.tw, rows, yo, OW, ohr, bv, rs, flags, tabs)
			} else {
				winoOut(mb[m*Tp+(i-i0)*per:], ldm, t.tw, rows, yo, OW, ohr, bv, rs, flags)
			}
			if act != nil && !act.relu {
				act.applyNoBias(yo, yo)
			}
		}
	}
}

// winoCols is the row length of the transformed input and of the products for T tiles:
// whole panels of 16, so that every panel is full and takes the tile kernel's widest
// form (on the AVX2 path the six-row kernel, where a partial panel took the four-row
// one with masked loads: a third of ResNet-18's 14 × 14 layers at batch 1). The lanes
// past T are summed like the others and never read back: lanes do not mix.
func winoCols(T int) int { return (T + 15) &^ 15 }

// winoClearCols zeroes columns [T, Tp) of the C rows of the xis transformed-input
// matrices (ldv apart), which winoIn does not write: scratch may hold any bits, and
// subnormal ones would slow the lanes they feed on some CPUs.
func winoClearCols(v []float32, ldv, xis, C, T, Tp int) {
	if Tp == T {
		return
	}
	for xi := 0; xi < xis; xi++ {
		for ch := 0; ch < C; ch++ {
			clear(v[xi*ldv+ch*Tp+T : xi*ldv+(ch+1)*Tp])
		}
	}
}

// winoEpilogue is an output transform's last steps on output v at index i: + bias,
// + res[i], Relu, as flags say, in that order.
func winoEpilogue(v, bias float32, res []float32, i, flags int) float32 {
	if flags&winoBias != 0 {
		v += bias
	}
	if flags&winoRes != 0 {
		v += res[i]
	}
	if flags&winoRelu != 0 {
		v = reluBits(v)
	}
	return v
}

// reluBits is Relu as the Relu kernel computes it: every value whose sign bit is set
// becomes +0.
func reluBits(v float32) float32 {
	u := int32(math.Float32bits(v))
	return math.Float32frombits(uint32(u &^ (u >> 31)))
}
