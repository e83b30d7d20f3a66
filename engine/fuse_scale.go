package engine

import (
	"fmt"
	"slices"
)

// Inference plans also join to a pointwise Conv the Mul that alone makes its input by
// scaling each channel of an image by one value of its own: the squeeze-excitation's
// output scaling the depthwise planes before the projection, in EfficientNet-B0,
// MobileNetV3 and the OCR classifier. The Mul apart is a pass over the depthwise
// output that writes as much again, and the projection then reads that back: at batch
// 32 EfficientNet-B0's Muls took 32 ms of its 406 (8 %). Joined, each worker scales a
// few hundred pixels of every channel of an image into a scratch that stays in its
// cache and makes the projection's output for them from there. The scaled values are
// the Mul's (one product each, rounded once) and the sums the projection's own, so the
// bits are those of the steps apart.

// scaleProjectKernel runs Mul(x, s) — x of shape N × C × H × W, s of N × C × 1 × 1 or
// 1 × C × 1 × 1, in either order — and the pointwise step q that alone reads its output.
// Its inputs are the Mul's two, then q's with q's first absent; its outputs are q's.
type scaleProjectKernel struct {
	mul *binaryKernel
	q   *convBNKernel
	sAt int // which of the Mul's inputs is s
	// scr holds each worker's scaled pixels; mbuf is one image of the Mul's output for
	// the fallback.
	scr  [][]float32
	mbuf []float32
	// chunk, when not 0, is the pixels an item (tests).
	chunk int
}

// scaleChunk is the size, in float32 values, of a worker's scaled pixels (512 KiB): every
// channel of 7 × 7 and 14 × 14 planes, and a few hundred pixels of larger ones.
const scaleChunk = 1 << 17

func (k *scaleProjectKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	m, err := k.mul.Infer(in[:2])
	if err != nil {
		return nil, err
	}
	qin := slices.Clone(in[2:])
	qin[0] = m[0]
	return k.q.Infer(qin)
}

// scaleShapes reports whether x and s are a Mul's inputs that scale each channel of each
// image of x (N × C × H × W) by one value of s (N × C × 1 × 1, or 1 × C × 1 × 1).
func scaleShapes(x, s []int) bool {
	return len(x) == 4 && len(s) == 4 && (s[0] == x[0] || s[0] == 1) && s[1] == x[1] && s[2] == 1 && s[3] == 1 &&
		x[2]*x[3] > 1
}

func (k *scaleProjectKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x, s := in[1-k.sAt], in[k.sAt]
	qin := slices.Clone(in[2:])
	qin[0] = &Tensor{DType: Float32, Shape: x.Shape}
	qs, err := k.q.stage(qin, x.Shape)
	if err != nil {
		return err
	}
	if !scaleShapes(x.Shape, s.Shape) || !pointwiseFusable(k.q, &qs.d, qs.a) || len(out[0].F) != qs.d.N*qs.d.M*qs.d.g.outSize() {
		return k.apart(ctx, in, qin, out)
	}
	k.run(ctx, &qs, x.F, s.F, s.Shape[0] == 1, k.q.residual(qin), out[0].F)
	return nil
}

// pointwiseFusable reports whether the pointwise step q can run as tiles over pixels a
// fused step hands it from its scratch: one group, the direct path, an activation the
// tile kernel applies (or SiLU), no pool, mean or Concat placement fused into it (a
// residual may be).
func pointwiseFusable(q *convBNKernel, dq *convDims, aq *nnClamp) bool {
	if q.pool != nil || q.gap || q.ystride != 0 || !dq.pointwise || q.conv.group != 1 || !q.conv.directOK(dq) {
		return false
	}
	_, ok := dw3x3Flags(aq)
	return ok || aq != nil && aq.silu
}

// apart runs the Mul and q one after the other, an image at a time, so that the Mul's
// output it holds is one image's, which the plan did not count.
func (k *scaleProjectKernel) apart(ctx *Context, in, qin, out []*Tensor) error {
	x, s := in[1-k.sAt], in[k.sAt]
	N := x.Shape[0]
	if N == 0 {
		return nil
	}
	view := func(t *Tensor, i, n int) *Tensor {
		m := len(t.F) / n
		return &Tensor{DType: t.DType, Shape: append([]int{1}, t.Shape[1:]...), F: t.F[i*m : (i+1)*m]}
	}
	one := append([]int{1}, x.Shape[1:]...)
	k.mbuf = nnGrow(k.mbuf, numel(one))
	m := &Tensor{DType: Float32, Shape: one, F: k.mbuf[:numel(one)]}
	mi := make([]*Tensor, 2)
	qi := slices.Clone(qin)
	oi := make([]*Tensor, len(out))
	for i := range N {
		mi[1-k.sAt] = view(x, i, N)
		mi[k.sAt] = s
		if s.Shape[0] == N {
			mi[k.sAt] = view(s, i, N)
		}
		if err := k.mul.Forward(ctx, mi, []*Tensor{m}); err != nil {
			return err
		}
		qi[0] = m
		if k.q.res {
			qi[7] = view(qin[7], i, N)
		}
		for j, o := range out {
			oi[j] = view(o, i, N)
		}
		if err := k.q.Forward(ctx, qi, oi); err != nil {
			return err
		}
	}
	return nil
}

// run makes q's output y from x scaled by s (s1: one scale per channel for every image):
// items of an image's chunk of pixels, each scaled into the worker's scratch for every
// channel and multiplied there as forwardDirect's tiles multiply; with res, each output
// starts as its residual, as forwardDirect's do. With fewer items than twice the
// workers (two images of small planes on two workers), an item is also a part of the
// output channels, so that the workers share them evenly.
func (k *scaleProjectKernel) run(ctx *Context, qs *stage, x, s []float32, s1 bool, res *Tensor, y []float32) {
	d := &qs.d
	C, M, O := d.C, d.M, d.g.outSize()
	qc := k.q.conv
	bp, tact, silu := packPointwise(ctx, k.q, d, qs.w, qs.b, qs.a)
	P := k.chunk
	if P <= 0 {
		P = max(16, scaleChunk/max(C, 1)/16*16)
	}
	if P >= O {
		P = O
	}
	chunks := (O + P - 1) / P
	RB := (M + 7) / 8
	parts := 1
	if d.N*chunks < 2*ctx.Workers {
		parts = min(RB, ctx.Workers)
	}
	items := d.N * chunks * parts
	nw := nnWorkers(ctx, items)
	work := qc.direct.workers(nw)
	for len(k.scr) < nw {
		k.scr = append(k.scr, nil)
	}
	// As forwardDirect: an output larger than the caches is stored non-temporally, unless
	// it starts as the residual.
	flags := 0
	if res != nil {
		flags = tileAdd
	} else if d.N*M*O >= convStreamMin && (!silu || convTileOK()) {
		qc.direct.streamed++
		flags = tileStream
	}
	nnEach(ctx, nw, items, func(wk, lo, hi int) {
		if flags == tileStream {
			defer storeFence()
		}
		wr := &work[wk]
		wr.silu = silu
		k.scr[wk] = nnGrow(k.scr[wk], C*P)
		scr := k.scr[wk]
		for it := lo; it < hi; it++ {
			i, c, part := it/(chunks*parts), it/parts%chunks, it%parts
			p0 := c * P
			n := min(P, O-p0)
			for ch := range C {
				a := s[ch]
				if !s1 {
					a = s[i*C+ch]
				}
				scaleVec(scr[ch*n:(ch+1)*n], x[(i*C+ch)*O+p0:(i*C+ch)*O+p0+n], a)
			}
			rb0, rb1 := part*RB/parts, (part+1)*RB/parts
			m0, m1 := rb0*8, min(M, rb1*8)
			dst := y[(i*M+m0)*O:]
			if res != nil {
				r := res.F[(i*M+m0)*O:]
				for m := range m1 - m0 {
					copy(dst[m*O+p0:m*O+p0+n], r[m*O+p0:m*O+p0+n])
				}
			}
			var bs []float32
			if bp != nil {
				bs = bp[m0:]
			}
			wr.pan = panels(wr.pan[:0], 0, p0, n)
			wr.multiply(C, m1-m0, qc.direct.wp[rb0*C*8:rb1*C*8], bs, scr, n, nil, dst, O, wr.pan, flags, tact)
		}
	})
}

// fuseScaleProject replaces each Mul that scales the channels of its input (scaleShapes)
// and whose output only a pointwise Conv step reads, fusable as planned, with one
// scaleProjectKernel step where the Conv ran.
func (g *Graph) fuseScaleProject(p *plan) {
	if g.noScaleProject {
		return
	}
	uses := readers(p)
	workers := g.workers()
	drop := make([]bool, len(p.steps))
	for t := range p.steps {
		ms := p.steps[t].node
		mul, ok := ms.k.(*binaryKernel)
		if !ok || mul.op.id != opMul || len(ms.in) != 2 || len(ms.out) != 1 || uses[ms.out[0]] != 1 || ms.in[0] < 0 || ms.in[1] < 0 {
			continue
		}
		a, b := p.vals[ms.in[0]], p.vals[ms.in[1]]
		if a == nil || b == nil || a.DType != Float32 || b.DType != Float32 {
			continue
		}
		sAt := 1
		if !scaleShapes(a.Shape, b.Shape) {
			if sAt = 0; !scaleShapes(b.Shape, a.Shape) {
				continue
			}
		}
		id := ms.out[0]
		u := nextReader(p.steps, t, id)
		if u < 0 {
			continue
		}
		qs := p.steps[u].node
		if qs.in[0] != id || p.steps[u].on != p.steps[t].on {
			continue
		}
		q, qin, ok := asConvBN(qs)
		if !ok {
			continue
		}
		// With fewer images than workers (batch 1) the Mul's output stays in the cache
		// anyway: joined, EfficientNet-B0 and MobileNetV3-small took 1.03–1.06 of the
		// time at batch 1 (interleaved, Emerald Rapids, 2 workers).
		dq, ok := q.plannedDims(p, &gnode{in: qin})
		if !ok || dq.N < workers || !pointwiseFusable(q, &dq, q.planClamp()) {
			continue
		}
		in := slices.Concat(ms.in, qin)
		in[2] = -1
		k := &scaleProjectKernel{mul: mul, q: q, sAt: sAt, chunk: g.scaleChunk}
		p.steps[u] = step{node: &gnode{n: qs.n, op: fmt.Sprintf("%s+%s", ms.op, qs.op), k: k, in: in, out: qs.out}, on: p.steps[u].on}
		drop[t] = true
		p.scaleProject++
	}
	p.steps = kept(p.steps, drop)
}

// asConvBN returns the Conv step st as a convBNKernel with its inputs laid out as one's:
// itself, or a Conv alone (the exporter folded its BatchNormalization, and no activation
// follows) wrapped as one without a BatchNormalization.
func asConvBN(st *gnode) (*convBNKernel, []int, bool) {
	if q, ok := st.k.(*convBNKernel); ok {
		return q, st.in, true
	}
	c, ok := st.k.(*convKernel)
	if !ok || len(st.out) != 1 {
		return nil, nil, false
	}
	in := []int{st.in[0], st.in[1], -1, -1, -1, -1, -1}
	if len(st.in) > 2 {
		in[2] = st.in[2]
	}
	return &convBNKernel{conv: c, noBN: true}, in, true
}
