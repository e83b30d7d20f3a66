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
// output, and, on planes made in bands of rows (expandDWBand), the pointwise step q
// (a projection) that alone reads d's output too; e may then be nil (a depthwise step
// that reads a network's activation). Its inputs are e's, d's and q's, each one's first
// absent where the step before makes it; its outputs are those of the last step.
type expandDWKernel struct {
	e, d, q    *convBNKernel
	ne, nd, nq int // how many of the inputs are e's, d's and q's
	// route is the route the plan found for d, run's or runBands's, and planned d's
	// dimensions then.
	route   expandDWRoute
	planned convDims
	// dbuf is one image of d's output, for the fallback when q follows.
	dbuf []float32
	// pscr holds each worker's depthwise band of every channel, which q reads.
	pscr [][]float32
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

// split returns the inputs of e, d and q, the latter two cloned so that their first may
// be set.
func (k *expandDWKernel) split(in []*Tensor) (ein, din, qin []*Tensor) {
	return in[:k.ne], slices.Clone(in[k.ne : k.ne+k.nd]), slices.Clone(in[k.ne+k.nd:])
}

func (k *expandDWKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	ein, din, qin := k.split(in)
	if k.e != nil {
		e, err := k.e.Infer(ein)
		if err != nil {
			return nil, err
		}
		din[0] = e[0]
	}
	d, err := k.d.Infer(din)
	if err != nil || k.q == nil {
		return d, err
	}
	qin[0] = d[0]
	return k.q.Infer(qin)
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
	workers := g.workers()
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
		ae, ad := e.planClamp(), d.planClamp()
		route := expandDWFusable(e, d, &de, &dd, ae, ad, g.expandBandAbove)
		if route == expandDWNone {
			continue
		}
		in := slices.Concat(es.in, ds.in)
		in[len(es.in)] = -1
		k := &expandDWKernel{e: e, d: d, ne: len(es.in), nd: len(ds.in), route: route, planned: dd, bandAbove: g.expandBandAbove, bandRows: g.expandBandRows}
		p.steps[t] = step{node: &gnode{n: ds.n, op: fmt.Sprintf("%s+%s", es.op, ds.op), k: k, in: in, out: ds.out}, on: p.steps[t].on}
		drop[s] = true
		p.expandDW++
	}
	p.steps = kept(p.steps, drop)
}

// planClamp stands for k's activation when planning: its bounds are known at run time
// only, and a bound that makes it unfusable then (NaN) falls back to the steps apart.
func (k *convBNKernel) planClamp() *nnClamp {
	if k.act == nil {
		return nil
	}
	return &nnClamp{relu: true, silu: k.act.op.name == quickGelu}
}

// dwBandable reports expandDWBand when the depthwise step d, reading a network's
// activation rather than a fused expansion's, runs in bands with a projection after it:
// as expandDWFusable asks of a fused pair's d, on input planes above bandAbove pixels
// (0: expandDWMaxPlane; < 0: never) that forwardDepthwise makes through the padded plane.
func dwBandable(d *convBNKernel, dd *convDims, ad *nnClamp, bandAbove int) expandDWRoute {
	if bandAbove < 0 || d.pool != nil || d.res || d.gap || d.ystride != 0 || !dd.depthwise || dd.Mg != 1 || dd.Cg != 1 {
		return expandDWNone
	}
	if bandAbove == 0 {
		bandAbove = expandDWMaxPlane
	}
	g := &dd.g
	if g.inSize() <= bandAbove || d.conv.noDWPad || !dwPadOK(g) || !dwPlaneFast() {
		return expandDWNone
	}
	// Where forwardDepthwise would take another kernel, the bands would not give its bits.
	_, ok := dw3x3Flags(ad)
	if !ok && (ad == nil || !ad.silu) || ok && g.is3x3Same() && dw3x3Fast(g.out[2]) {
		return expandDWNone
	}
	if d.conv.dwLanesOK(dd, ad) {
		return expandDWNone
	}
	return expandDWBand
}

// projectFusable reports whether the pointwise step q, reading the depthwise output of
// dimensions dd, can make its output from bands of it: pointwiseFusable, and no residual.
func projectFusable(q *convBNKernel, dd, dq *convDims, aq *nnClamp) bool {
	return !q.res && dq.C == dd.M && dq.N == dd.N && dq.g.out == dd.g.out && pointwiseFusable(q, dq, aq)
}

// fuseProjection joins to a step that makes depthwise planes in bands of rows — a fused
// pair whose route is expandDWBand, or a depthwise step alone on planes as large — the
// pointwise step that alone reads its output: MobileNetV2's projections after its two
// blocks at 112 × 112, whose inputs (51 and 38 MB at batch 32) the steps apart write to
// memory and read back. The fused step runs where the pointwise one ran.
func (g *Graph) fuseProjection(p *plan) {
	if g.noExpandDW || g.noProject {
		return
	}
	uses := readers(p)
	workers := g.workers()
	drop := make([]bool, len(p.steps))
	for t := range p.steps {
		ts := p.steps[t].node
		if len(ts.out) != 1 || uses[ts.out[0]] != 1 {
			continue
		}
		var dd convDims
		k, fused := ts.k.(*expandDWKernel)
		switch {
		case fused:
			if k.route != expandDWBand || k.q != nil {
				continue
			}
			dd = k.planned
		default:
			d, ok := ts.k.(*convBNKernel)
			if !ok {
				continue
			}
			if dd, ok = d.plannedDims(p, ts); !ok || dd.N < workers || dwBandable(d, &dd, d.planClamp(), g.expandBandAbove) != expandDWBand {
				continue
			}
			k = &expandDWKernel{d: d, nd: len(ts.in), route: expandDWBand, planned: dd, bandAbove: g.expandBandAbove, bandRows: g.expandBandRows}
		}
		id := ts.out[0]
		u := nextReader(p.steps, t, id)
		if u < 0 {
			continue
		}
		qs := p.steps[u].node
		if qs.in[0] != id || p.steps[u].on != p.steps[t].on || len(qs.out) != 1 {
			continue
		}
		q, qin, ok := asConvBN(qs)
		if !ok {
			continue
		}
		dq, ok := q.plannedDims(p, &gnode{in: qin})
		if !ok || !projectFusable(q, &dd, &dq, q.planClamp()) {
			continue
		}
		k.q, k.nq = q, len(qin)
		in := slices.Concat(ts.in, qin)
		in[len(ts.in)] = -1
		p.steps[u] = step{node: &gnode{n: qs.n, op: fmt.Sprintf("%s+%s", ts.op, qs.op), k: k, in: in, out: qs.out}, on: p.steps[u].on}
		drop[t] = true
		p.project++
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

// stage is one fused step's dimensions, weights and activation for this run.
type stage struct {
	d    convDims
	w, b *Tensor
	a    *nnClamp
}

// stage returns c's stage for inputs in, whose first has shape x (its data need not be
// there).
func (c *convBNKernel) stage(in []*Tensor, x []int) (stage, error) {
	w, b, err := c.weights(in)
	if err != nil {
		return stage{}, err
	}
	d, err := c.conv.dims(x, w.Shape, b)
	if err != nil {
		return stage{}, err
	}
	d, w = c.conv.trimmed(d, w)
	return stage{d: d, w: w, b: b, a: c.clamp(in)}, nil
}

func (st *stage) outShape() []int { return append([]int{st.d.N, st.d.M}, st.d.g.outShape()...) }

func (k *expandDWKernel) Forward(ctx *Context, in, out []*Tensor) error {
	ein, din, qin := k.split(in)
	x := din[0]
	var es, ds, qs stage
	var err error
	if k.e != nil {
		x = ein[0]
		if es, err = k.e.stage(ein, x.Shape); err != nil {
			return err
		}
		// Later steps' folded weights and clamps are made by their own Forward in the
		// fallback.
		din[0] = &Tensor{DType: Float32, Shape: es.outShape()}
	}
	if ds, err = k.d.stage(din, din[0].Shape); err != nil {
		return err
	}
	last := &ds
	if k.q != nil {
		qin[0] = &Tensor{DType: Float32, Shape: ds.outShape()}
		if qs, err = k.q.stage(qin, qin[0].Shape); err != nil {
			return err
		}
		last = &qs
	}
	route := expandDWNone
	if k.e != nil {
		route = expandDWFusable(k.e, k.d, &es.d, &ds.d, es.a, ds.a, k.bandAbove)
	} else {
		route = dwBandable(k.d, &ds.d, ds.a, k.bandAbove)
	}
	if k.q != nil && (route != expandDWBand || !projectFusable(k.q, &ds.d, &qs.d, qs.a)) {
		route = expandDWNone
	}
	if route == expandDWNone || len(out[0].F) != last.d.N*last.d.M*last.d.g.outSize() {
		return k.apart(ctx, ein, din, qin, out, x.Shape[0])
	}
	if route == expandDWBand {
		k.runBands(ctx, &es, &ds, &qs, x.F, out[0].F)
		return nil
	}
	var gap []float32
	if k.d.gap {
		gap = out[len(out)-1].F
	}
	k.run(ctx, &es.d, &ds.d, x.F, es.w, es.b, ds.w, ds.b, es.a, ds.a, out[0].F, gap, route)
	return nil
}

// apart runs the steps one after the other, an image at a time, so that the outputs it
// holds between them are one image's, not the batch's, which the plan did not count. din
// and qin's first inputs are set here.
func (k *expandDWKernel) apart(ctx *Context, ein, din, qin, out []*Tensor, N int) error {
	if N == 0 {
		return nil
	}
	view := func(t *Tensor, i int) *Tensor {
		n := len(t.F) / N
		return &Tensor{DType: t.DType, Shape: append([]int{1}, t.Shape[1:]...), F: t.F[i*n : (i+1)*n]}
	}
	// one returns a tensor of one image of a step's output, of shape s (a batch's), in buf.
	one := func(buf *[]float32, s []int) *Tensor {
		sh := append([]int{1}, s[1:]...)
		*buf = nnGrow(*buf, numel(sh))
		return &Tensor{DType: Float32, Shape: sh, F: (*buf)[:numel(sh)]}
	}
	var e, d *Tensor
	if k.e != nil {
		e = one(&k.ebuf, din[0].Shape)
	}
	if k.q != nil {
		d = one(&k.dbuf, qin[0].Shape)
	}
	x := din[0]
	ei, di, qi := slices.Clone(ein), slices.Clone(din), slices.Clone(qin)
	oi := make([]*Tensor, len(out))
	for i := range N {
		for j, o := range out {
			oi[j] = view(o, i)
		}
		if k.e != nil {
			ei[0] = view(ein[0], i)
			if err := k.e.forward(ctx, ei, []*Tensor{e}); err != nil {
				return err
			}
			di[0] = e
		} else {
			di[0] = view(x, i)
		}
		if k.q == nil {
			if err := k.d.Forward(ctx, di, oi); err != nil {
				return err
			}
			continue
		}
		if err := k.d.Forward(ctx, di, []*Tensor{d}); err != nil {
			return err
		}
		qi[0] = d
		if err := k.q.Forward(ctx, qi, oi); err != nil {
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
	bp, tact, silu := packPointwise(ctx, k.e, de, we, be, ae)
	var db []float32
	if bd != nil {
		db = bd.F
	}
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
// Without e (es unused) the band's input rows are read from x itself. With q, the band
// of every channel goes to a second scratch, from which q makes its output's band, so
// that the depthwise output does not go to memory either. Each output is the same sum of
// the same values as the steps make apart on whole planes, so the bits are theirs. An
// item is an image's band.
func (k *expandDWKernel) runBands(ctx *Context, es, ds, qs *stage, x, y []float32) {
	g := &ds.d.g
	H, W := g.in[1], g.in[2]
	Ho, Wo, Od, K := g.out[1], g.out[2], g.outSize(), g.kSize()
	Me := ds.d.M
	kh, sh, pb := g.k[1], g.s[1], g.pb[1]
	var db []float32
	if ds.b != nil {
		db = ds.b.F
	}
	var (
		bp   []float32
		tact *tileAct
		silu bool
		isz  int
		wp   []float32
	)
	if k.e != nil {
		bp, tact, silu = packPointwise(ctx, k.e, &es.d, es.w, es.b, es.a)
		isz, wp = es.d.g.inSize(), k.e.conv.direct.wp
	}
	var (
		qbp   []float32
		qtact *tileAct
		qsilu bool
		qwp   []float32
		Oq    int
	)
	if k.q != nil {
		qbp, qtact, qsilu = packPointwise(ctx, k.q, &qs.d, qs.w, qs.b, qs.a)
		qwp, Oq = k.q.conv.direct.wp, qs.d.g.outSize()
	}
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
	items := ds.d.N * nb
	nw := nnWorkers(ctx, items)
	var work []convWork
	if k.e != nil {
		work = k.e.conv.direct.workers(nw)
	} else {
		work = k.q.conv.direct.workers(nw)
	}
	for len(k.scr) < nw {
		k.scr = append(k.scr, nil)
	}
	for len(k.pscr) < nw {
		k.pscr = append(k.pscr, nil)
	}
	for i := range lay {
		dwBuffers(&lay[i].bufs, &lay[i].fors, nw, &lay[i].p)
	}
	stream := k.q == nil && k.streams(&ds.d, ds.a, nw)
	// q's output as forwardDirect stores it: non-temporally when larger than the caches.
	qflags := 0
	if k.q != nil && qs.d.N*qs.d.M*Oq >= convStreamMin && !qsilu {
		k.q.conv.direct.streamed++
		qflags = tileStream
	}
	CgK := 0
	if k.e != nil {
		CgK = es.d.Cg
	}
	nnEach(ctx, nw, items, func(wk, lo, hi int) {
		n := 0
		if k.e != nil {
			n = Me * maxP
		}
		wr, s, tmp := k.worker(work, wk, silu, n, stream, ds.a, Od)
		if stream || qflags != 0 {
			defer storeFence()
		}
		var ps []float32
		if k.q != nil {
			k.pscr[wk] = nnGrow(k.pscr[wk], Me*bo*Wo)
			ps = k.pscr[wk]
		}
		for it := lo; it < hi; it++ {
			i, b := it/nb, bs[it%nb]
			P := (b.r1 - b.r0) * W
			if k.e != nil {
				wr.silu = silu
				wr.pan = panels(wr.pan[:0], i*es.d.C*isz+b.r0*W, 0, P)
				wr.multiply(CgK, Me, wp, bp, x, isz, nil, s, P, wr.pan, 0, tact)
			}
			p, buf := &lay[b.lay].p, lay[b.lay].bufs[wk]
			Pb := (b.e - b.a) * Wo
			for m := range Me {
				pl := i*Me + m
				var bm []float32
				if db != nil {
					bm = db[m : m+1]
				}
				if k.e != nil {
					p.fill(buf, s[m*P:(m+1)*P])
				} else {
					p.fill(buf, x[pl*H*W+b.r0*W:pl*H*W+b.r1*W])
				}
				if k.q != nil {
					dwPlane(p, buf, ps[m*Pb:(m+1)*Pb], ds.w.F[m*K:(m+1)*K], bm, ds.a, false, nil)
				} else {
					dwPlane(p, buf, y[pl*Od+b.a*Wo:pl*Od+b.e*Wo], ds.w.F[m*K:(m+1)*K], bm, ds.a, stream, tmp)
				}
			}
			if k.q != nil {
				wr.silu = qsilu
				wr.pan = panels(wr.pan[:0], 0, i*qs.d.M*Oq+b.a*Wo, Pb)
				wr.multiply(Me, qs.d.M, qwp, qbp, ps, Pb, nil, y, Oq, wr.pan, qflags, qtact)
			}
		}
	})
}

// packPointwise packs c's weights and bias for the tile kernel (c a pointwise step of
// dimensions d) and returns the bias with c's activation as the tile kernel applies it,
// and whether that is SiLU.
func packPointwise(ctx *Context, c *convBNKernel, d *convDims, w, b *Tensor, a *nnClamp) (bp []float32, tact *tileAct, silu bool) {
	cc := c.conv
	cc.packWeights(ctx, d, w.F, cc.weightKey(w))
	var cb []float32
	if b != nil {
		cb = b.F
	}
	bp = cc.packBias(d, cb)
	if a != nil {
		ta, _ := dw3x3Flags(a)
		tact = &ta
	}
	return bp, tact, a != nil && a.silu
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

// workers is the number of workers the graph's runs use.
func (g *Graph) workers() int {
	if g.ctx.Workers < 1 {
		return runtime.GOMAXPROCS(0)
	}
	return g.ctx.Workers
}
