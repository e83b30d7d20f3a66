package engine

import (
	"fmt"
	"runtime"
	"slices"
)

// Inference plans also join a pointwise convolution to the depthwise convolution that
// alone reads its output: the expansion and depthwise layers of the inverted residual
// blocks of MobileNetV2, MobileNetV3 and EfficientNet. The expansion's output is the
// largest activation of such a network (MobileNetV2's first: 96 channels of 112 × 112,
// 154 MB at batch 32), which unfused is written to memory by one step and read back by
// the next. Fused, each worker makes a few channels of one image (run) into a
// scratch that stays in its L2 cache and makes their depthwise planes from there at
// once, so that those values never leave the cache. Every value is computed by the same
// kernels, with the same sums in the same order, as the unfused steps compute it: the
// bits are the same.

// expandDWKernel runs a fused pointwise step e and the depthwise step d that reads its
// output. Its inputs are e's, then d's with d's first (e's output) absent; its outputs
// are d's.
type expandDWKernel struct {
	e, d *convBNKernel
	ne   int // how many of the inputs are e's
	// scr holds each worker's expanded planes of one group of channels.
	scr [][]float32
	// ebuf is one image of e's output, for a run that cannot fuse after all (a Clip bound
	// that is NaN this run): the steps then run one after the other (apart).
	ebuf []float32
	// bands holds the padded-plane layouts of expandDWBand's bands, with each worker's
	// buffer for each; bandAbove and bandRows are the graph's (tests: planes above how
	// many pixels run in bands, −1 for none, and how many output rows a band; 0 for the
	// defaults).
	bands               []expandBand
	bandAbove, bandRows int
	banded              int // runs made in bands (tests)
}

// expandBand is one band geometry of expandDWBand: its padded-plane layout and each
// worker's buffer for it, whose zero border stays from band to band.
type expandBand struct {
	p    dwPlan
	bufs [][]float32
	fors []nnGeom
}

// expandDWPlane is the size, in float32 values, of the expanded planes a worker holds at
// once (1 MiB): a few channels of 56 × 56 and every channel of smaller planes. Measured on
// MobileNetV2's and EfficientNet's pairs alone, 32 images, interleaved with the steps
// apart (Emerald Rapids, 2 workers): 256 KiB lost at 112 × 112 and 56 × 56 (eight channels
// a group) and 4 MiB gained less at 28 × 28.
var expandDWPlane = 1 << 18

// expandDWMinPlane and expandDWMaxPlane bound the expanded planes the fusion takes in
// groups of channels, in pixels. On the same measurements, fused against apart: 28 × 28
// planes 0.62–0.75 of the time, 56 × 56 0.75–0.98, but 14 × 14 1.03–1.06 at unit stride
// (their expansion pairs the panels of two images apart, which one image's 13 panels
// cannot) and 112 × 112 0.96–1.19 (16 input channels and 16 of 96 expanded ones at a time
// fill the L2, and with SiLU lost 9–15 %). Larger planes fuse in bands of rows instead
// (expandDWBand: MobileNetV2's 16 → 96 at 112 × 112 0.72–0.85 of the time apart).
const (
	expandDWMinPlane = 256
	expandDWMaxPlane = 4096
)

func (k *expandDWKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	e, err := k.e.Infer(in[:k.ne])
	if err != nil {
		return nil, err
	}
	din := slices.Clone(in[k.ne:])
	din[0] = e[0]
	return k.d.Infer(din)
}

// expandDWRoute is how a fused depthwise step makes its planes: the 3×3 same-size
// kernel straight from the expanded plane, or a padded copy of it (dwPlan).
type expandDWRoute int

const (
	expandDWNone expandDWRoute = iota
	expandDW3x3
	expandDWPad
	// expandDWBand makes planes larger than expandDWMaxPlane in bands of output rows,
	// every expanded channel at once (runBands), through the padded plane.
	expandDWBand
)

// expandDWFusable reports how the pair runs fused, given both steps' dimensions, or
// expandDWNone: e must take the direct path as one group of a pointwise product whose
// activation the tile kernel applies, and d must make one plane per input plane through
// one of the assembly kernels, as forwardDepthwise would, with nothing else fused into
// either but d's GlobalAveragePool.
// Planes above bandAbove pixels (0: expandDWMaxPlane) take expandDWBand, or none;
// bandAbove < 0 (tests) leaves those above expandDWMaxPlane apart.
func expandDWFusable(e, d *convBNKernel, de, dd *convDims, ae, ad *nnClamp, bandAbove int) expandDWRoute {
	if e.pool != nil || e.res || e.gap || e.ystride != 0 || d.pool != nil || d.res || d.ystride != 0 {
		return expandDWNone
	}
	above := bandAbove
	if above <= 0 {
		above = expandDWMaxPlane
	}
	big := de.g.outSize() > above
	if !de.pointwise || e.conv.group != 1 || !e.conv.directOK(de) || de.g.outSize() < expandDWMinPlane {
		return expandDWNone
	}
	if _, ok := dw3x3Flags(ae); !ok && (ae == nil || !ae.silu) {
		return expandDWNone
	}
	if !dd.depthwise || dd.Mg != 1 || dd.Cg != 1 || dd.C != de.M || dd.N != de.N {
		return expandDWNone
	}
	g := &dd.g
	if _, ok := dw3x3Flags(ad); ok && g.is3x3Same() && dw3x3Fast(g.out[2]) {
		if big {
			return expandDWNone
		}
		return expandDW3x3
	}
	if !d.conv.noDWPad && dwPadOK(g) && dwPlaneFast() {
		// The bands leave a plane's means to a pass over the image's planes after them,
		// by which time they have left the L2: EfficientNet-B0's 16 → 96 at 112 × 112
		// with SiLU and a squeeze-excitation's means took 0.96–1.06 of the steps' time
		// apart (32 images, interleaved, Emerald Rapids), so such pairs stay apart.
		if big && (bandAbove < 0 || d.gap) {
			return expandDWNone
		}
		if big {
			return expandDWBand
		}
		return expandDWPad
	}
	return expandDWNone
}

// fuseExpandDW replaces each pointwise step whose output only a depthwise step reads, the
// pair fusable as planned, with one expandDWKernel step where the depthwise step ran.
func (g *Graph) fuseExpandDW(p *plan) {
	if g.noExpandDW {
		return
	}
	uses := readers(p)
	// With fewer images than workers (batch 1) the expanded planes stay in the cache
	// anyway, and the expansion apart splits an image's pixels between the workers where
	// the fused items split its channels, each reading the whole input: fused took
	// 1.05–1.12 times as long on the pairs measured above at batch 1.
	workers := g.ctx.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	drop := make([]bool, len(p.steps))
	for s := range p.steps {
		es := p.steps[s].node
		e, ok := es.k.(*convBNKernel)
		if !ok || len(es.out) != 1 || uses[es.out[0]] != 1 {
			continue
		}
		id := es.out[0]
		t := nextReader(p.steps, s, id)
		if t < 0 {
			continue
		}
		ds := p.steps[t].node
		d, ok := ds.k.(*convBNKernel)
		if !ok || ds.in[0] != id || p.steps[t].on != p.steps[s].on {
			continue
		}
		de, ok := e.plannedDims(p, es)
		if !ok || de.N < workers {
			continue
		}
		dd, ok := d.plannedDims(p, ds)
		if !ok {
			continue
		}
		// The activations' bounds are known at run time only; a bound that makes them
		// unfusable then (NaN) falls back to the unfused steps.
		var ae, ad *nnClamp
		if e.act != nil {
			ae = &nnClamp{relu: true, silu: e.act.op.name == quickGelu}
		}
		if d.act != nil {
			ad = &nnClamp{relu: true, silu: d.act.op.name == quickGelu}
		}
		if expandDWFusable(e, d, &de, &dd, ae, ad, g.expandBandAbove) == expandDWNone {
			continue
		}
		in := slices.Concat(es.in, ds.in)
		in[len(es.in)] = -1
		k := &expandDWKernel{e: e, d: d, ne: len(es.in), bandAbove: g.expandBandAbove, bandRows: g.expandBandRows}
		p.steps[t] = step{node: &gnode{n: ds.n, op: fmt.Sprintf("%s+%s", es.op, ds.op), k: k, in: in, out: ds.out}, on: p.steps[t].on}
		drop[s] = true
		p.expandDW++
	}
	p.steps = kept(p.steps, drop)
}

// plannedDims returns the convolution dimensions of step st as planned, with the
// weight's taps trimmed as run trims them.
func (k *convBNKernel) plannedDims(p *plan, st *gnode) (convDims, bool) {
	if len(st.in) < 3 || st.in[0] < 0 || st.in[1] < 0 {
		return convDims{}, false
	}
	x, w := p.vals[st.in[0]], p.vals[st.in[1]]
	var b *Tensor
	if st.in[2] >= 0 && k.noBN {
		b = p.vals[st.in[2]]
	}
	if x == nil || w == nil || x.DType != Float32 || w.DType != Float32 {
		return convDims{}, false
	}
	d, err := k.conv.dims(x.Shape, w.Shape, b)
	if err != nil {
		return convDims{}, false
	}
	if k.noBN && paramKey(w).p != nil && !d.depthwise {
		if t, _, _, ok := trimTaps(&d); ok {
			d = t
		}
	}
	return d, true
}

func (k *expandDWKernel) Forward(ctx *Context, in, out []*Tensor) error {
	ein, din := in[:k.ne], slices.Clone(in[k.ne:])
	we, be, err := k.e.weights(ein)
	if err != nil {
		return err
	}
	ae := k.e.clamp(ein)
	x := ein[0]
	de, err := k.e.conv.dims(x.Shape, we.Shape, be)
	if err != nil {
		return err
	}
	de, we = k.e.conv.trimmed(de, we)
	eshape := append([]int{de.N, de.M}, de.g.outShape()...)
	// d's folded weights and clamp are made by its own Forward in the fallback.
	din[0] = &Tensor{DType: Float32, Shape: eshape}
	wd, bd, err := k.d.weights(din)
	if err != nil {
		return err
	}
	ad := k.d.clamp(din)
	dd, err := k.d.conv.dims(eshape, wd.Shape, bd)
	if err != nil {
		return err
	}
	dd, wd = k.d.conv.trimmed(dd, wd)
	route := expandDWFusable(k.e, k.d, &de, &dd, ae, ad, k.bandAbove)
	if route == expandDWNone || len(out[0].F) != dd.N*dd.M*dd.g.outSize() {
		return k.apart(ctx, ein, din, out, eshape)
	}
	var gap []float32
	if k.d.gap {
		gap = out[len(out)-1].F
	}
	if route == expandDWBand {
		k.runBands(ctx, &de, &dd, x.F, we, be, wd, bd, ae, ad, out[0].F)
		return nil
	}
	k.run(ctx, &de, &dd, x.F, we, be, wd, bd, ae, ad, out[0].F, gap, route)
	return nil
}

// apart runs the two steps one after the other, an image at a time, so that the
// expanded output it holds is one image's, not the batch's, which the plan did not count.
func (k *expandDWKernel) apart(ctx *Context, ein, din, out []*Tensor, eshape []int) error {
	N := eshape[0]
	if N == 0 {
		return nil
	}
	view := func(t *Tensor, i int) *Tensor {
		n := len(t.F) / N
		return &Tensor{DType: t.DType, Shape: append([]int{1}, t.Shape[1:]...), F: t.F[i*n : (i+1)*n]}
	}
	one := append([]int{1}, eshape[1:]...)
	k.ebuf = nnGrow(k.ebuf, numel(one))
	e := &Tensor{DType: Float32, Shape: one, F: k.ebuf[:numel(one)]}
	ei, di := slices.Clone(ein), slices.Clone(din)
	oi := make([]*Tensor, len(out))
	for i := range N {
		ei[0] = view(ein[0], i)
		if err := k.e.forward(ctx, ei, []*Tensor{e}); err != nil {
			return err
		}
		di[0] = e
		for j, o := range out {
			oi[j] = view(o, i)
		}
		if err := k.d.Forward(ctx, di, oi); err != nil {
			return err
		}
	}
	return nil
}

// run makes the fused steps' output y (and gap, the planes' means, when not nil) from
// the image x: items of G expanded channels of one image, each expanded into the
// worker's scratch (multiply, as forwardDirect's tiles) and its depthwise planes made
// from there (as forwardDepthwise makes them).
func (k *expandDWKernel) run(ctx *Context, de, dd *convDims, x []float32, we, be, wd, bd *Tensor, ae, ad *nnClamp, y, gap []float32, route expandDWRoute) {
	ec, dc := k.e.conv, k.d.conv
	O, Od, K := de.g.outSize(), dd.g.outSize(), dd.g.kSize()
	isz, Me := de.g.inSize(), de.M
	c := &ec.direct
	bp, db, tact, silu := k.prepare(ctx, de, we, be, bd, ae)
	// G channels of one image an item, in whole row blocks: as many as expandDWPlane
	// holds, and one row block when the batch has fewer images than workers, so that the
	// items split evenly between them.
	G := max(8, min(expandDWPlane/O/8*8, (Me+7)/8*8))
	if de.N < ctx.Workers {
		G = 8
	}
	groups := (Me + G - 1) / G
	items := de.N * groups
	nw := nnWorkers(ctx, items)
	work := c.workers(nw)
	for len(k.scr) < nw {
		k.scr = append(k.scr, nil)
	}
	var p *dwPlan
	stream := false
	if route == expandDWPad {
		p = dc.dwPlan.setup(&dd.g)
		dwBuffers(&dc.dwBuf, &dc.dwFor, nw, p)
		// As forwardDWPad: a large output is stored non-temporally, unless its means are
		// taken from it right after.
		stream = gap == nil && k.streams(dd, ad, nw)
	}
	CgK := de.Cg
	nnEach(ctx, nw, items, func(wk, lo, hi int) {
		wr, s, tmp := k.worker(work, wk, silu, G*O, stream, ad, Od)
		if stream {
			defer storeFence()
		}
		for it := lo; it < hi; it++ {
			i, m0 := it/groups, it%groups*G
			n := min(G, Me-m0)
			var bs []float32
			if bp != nil {
				bs = bp[m0:]
			}
			wr.pan = panels(wr.pan[:0], i*de.C*isz, 0, O)
			wr.multiply(CgK, n, c.wp[m0/8*CgK*8:(m0+n+7)/8*CgK*8], bs, x, isz, nil, s, O, wr.pan, 0, tact)
			for j := range n {
				m := m0 + j
				pl := i*Me + m
				ym := y[pl*Od : (pl+1)*Od]
				var bm []float32
				if db != nil {
					bm = db[m : m+1]
				}
				if route == expandDWPad {
					buf := dc.dwBuf[wk]
					p.fill(buf, s[j*O:(j+1)*O])
					dwPlane(p, buf, ym, wd.F[m*K:(m+1)*K], bm, ad, stream, tmp)
					if gap != nil {
						gap[pl] = planeMean(ym)
					}
				}
			}
			if route == expandDW3x3 {
				// The group's planes in one call, as forwardDepthwise makes an image's.
				pl := i*Me + m0
				var bm []float32
				if db != nil {
					bm = db[m0 : m0+n]
				}
				ym := y[pl*Od : (pl+n)*Od]
				dw3x3Planes(s[:n*O], ym, dd.g.out[1], dd.g.out[2], n, wd.F[m0*9:(m0+n)*9], bm, ad, false)
				for j := range n {
					if gap != nil {
						gap[pl+j] = planeMean(ym[j*Od : (j+1)*Od])
					}
				}
			}
		}
	})
}

// runBands makes what run makes, for expanded planes too large for a group of channels
// to stay in the cache (MobileNetV2's and EfficientNet-B0's 16 → 96 at 112 × 112, whose
// 154 MB at batch 32 the steps apart write and read back): in bands of the depthwise
// output's rows, for each of which every expanded channel of the input rows the band
// reads (the rows between bands made twice) lands in the worker's scratch, whence each
// channel's band of output rows is made through a padded plane laid out for the band.
// Each output is the same sum of the same values as forwardDWPad makes on the whole
// plane, so the bits are those of the steps apart. An item is an image's band.
func (k *expandDWKernel) runBands(ctx *Context, de, dd *convDims, x []float32, we, be, wd, bd *Tensor, ae, ad *nnClamp, y []float32) {
	ec := k.e.conv
	g := &dd.g
	H, W := g.in[1], g.in[2]
	Ho, Wo, Od, K := g.out[1], g.out[2], g.outSize(), g.kSize()
	isz, Me := de.g.inSize(), de.M
	kh, sh, pb := g.k[1], g.s[1], g.pb[1]
	c := &ec.direct
	bp, db, tact, silu := k.prepare(ctx, de, we, be, bd, ae)
	// As many output rows a band as expandDWPlane holds the input rows of, in bands of
	// nearly equal height.
	bo := k.bandRows
	if bo <= 0 {
		bo = max(1, (expandDWPlane/max(Me*W, 1)-kh)/sh+1)
	}
	nb := (Ho + bo - 1) / bo
	bo = (Ho + nb - 1) / nb
	nb = (Ho + bo - 1) / bo
	// Each band's input rows [r0, r1) and layout: its own rows of padding above and
	// below, so that its first output row reads the band's first padded row.
	type band struct{ a, e, r0, r1, lay int }
	bs := make([]band, nb)
	lay := k.bands[:0]
	for j := range bs {
		a, e := j*bo, min(Ho, (j+1)*bo)
		r0, r1 := max(0, a*sh-pb), min(H, (e-1)*sh-pb+kh)
		sub := *g
		sub.in[1], sub.out[1] = r1-r0, e-a
		sub.pb[1] = r0 - (a*sh - pb)
		sub.pe[1] = (e-a-1)*sh + kh - sub.in[1] - sub.pb[1]
		sub.hasRanges = false
		at := -1
		for i := range lay {
			if lay[i].p.g == sub {
				at = i
			}
		}
		if at < 0 {
			lay = append(lay, expandBand{})
			at = len(lay) - 1
			lay[at].p.setup(&sub)
		}
		bs[j] = band{a, e, r0, r1, at}
	}
	k.bands = lay
	k.banded++
	maxP := 0
	for _, b := range bs {
		maxP = max(maxP, (b.r1-b.r0)*W)
	}
	items := de.N * nb
	nw := nnWorkers(ctx, items)
	work := c.workers(nw)
	for len(k.scr) < nw {
		k.scr = append(k.scr, nil)
	}
	for i := range lay {
		dwBuffers(&lay[i].bufs, &lay[i].fors, nw, &lay[i].p)
	}
	stream := k.streams(dd, ad, nw)
	CgK := de.Cg
	nnEach(ctx, nw, items, func(wk, lo, hi int) {
		wr, s, tmp := k.worker(work, wk, silu, Me*maxP, stream, ad, Od)
		if stream {
			defer storeFence()
		}
		for it := lo; it < hi; it++ {
			i, b := it/nb, bs[it%nb]
			P := (b.r1 - b.r0) * W
			wr.pan = panels(wr.pan[:0], i*de.C*isz+b.r0*W, 0, P)
			wr.multiply(CgK, Me, c.wp, bp, x, isz, nil, s, P, wr.pan, 0, tact)
			p, buf := &lay[b.lay].p, lay[b.lay].bufs[wk]
			for m := range Me {
				pl := i*Me + m
				var bm []float32
				if db != nil {
					bm = db[m : m+1]
				}
				p.fill(buf, s[m*P:(m+1)*P])
				dwPlane(p, buf, y[pl*Od+b.a*Wo:pl*Od+b.e*Wo], wd.F[m*K:(m+1)*K], bm, ad, stream, tmp)
			}
		}
	})
}

// prepare packs e's weights and bias for the tile kernel and returns them with d's bias,
// e's activation as the tile kernel applies it, and whether that is SiLU.
func (k *expandDWKernel) prepare(ctx *Context, de *convDims, we, be, bd *Tensor, ae *nnClamp) (bp, db []float32, tact *tileAct, silu bool) {
	ec := k.e.conv
	ec.packWeights(ctx, de, we.F, ec.weightKey(we))
	var eb []float32
	if be != nil {
		eb = be.F
	}
	if bd != nil {
		db = bd.F
	}
	bp = ec.packBias(de, eb)
	if ae != nil {
		ta, _ := dw3x3Flags(ae)
		tact = &ta
	}
	return bp, db, tact, ae != nil && ae.silu
}

// streams reports whether the depthwise planes are stored non-temporally, as
// forwardDWPad stores an output larger than the caches, and makes room for nw workers'
// SiLU scratch (worker) if so.
func (k *expandDWKernel) streams(dd *convDims, ad *nnClamp, nw int) bool {
	dc := k.d.conv
	if dd.N*dd.M*dd.g.outSize() < convStreamMin || ad != nil && ad.silu && !convTileOK() {
		return false
	}
	dc.direct.streamed++
	for len(dc.dwTmp) < nw {
		dc.dwTmp = append(dc.dwTmp, nil)
	}
	return true
}

// worker readies worker wk: its tiles' SiLU, its scratch of n expanded values, and, when
// the planes stream and ad is SiLU, the scratch plane of O values the SiLU goes through
// (dwPlane's tmp).
func (k *expandDWKernel) worker(work []convWork, wk int, silu bool, n int, stream bool, ad *nnClamp, O int) (wr *convWork, scr, tmp []float32) {
	wr = &work[wk]
	wr.silu = silu
	k.scr[wk] = nnGrow(k.scr[wk], n)
	if stream && ad != nil && ad.silu {
		dc := k.d.conv
		dc.dwTmp[wk] = nnGrow(dc.dwTmp[wk], O)
		tmp = dc.dwTmp[wk]
	}
	return wr, k.scr[wk], tmp
}
