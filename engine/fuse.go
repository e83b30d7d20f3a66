package engine

import (
	"fmt"
	"math"
	"slices"
)

// Inference plans fold a BatchNormalization into the Conv that feeds it, as deployment
// runtimes do: y = a·(W∗x + b − mean) + B with a = scale/√(var+eps) is the convolution
// with weight W'[m,…] = W[m,…]·a[m] and bias b'[m] = (b[m] − mean[m])·a[m] + B[m]. One
// pass over the activation is saved, and the Conv's output buffer is never allocated.
// A Relu, Clip or HardSwish that alone reads the BatchNormalization's output is applied
// in the same step too, to each output plane right after it is written, while it is in
// cache; and so is a MaxPool that alone reads the result, so that the full-resolution
// activation is never written out (on the fmnist CNN, the 12.8 MB of its first layer at
// batch 256, written and read back by the pool, cost more than the layer's arithmetic).
// A residual Add that alone reads the BatchNormalization's output (no activation
// between them), whose other operand has the same shape and is computed before the Conv
// runs, joins the step as well, with the activation that follows the Add: the kernel
// starts its sums from the other operand, so the Add's pass and the activation's are
// saved (three of each in fmnist-resnet).
//
// Outputs differ from the unfused computation by float rounding only (within 1e-5
// relative on the test models). The fold is only made where it changes nothing else the
// caller observes or relies on: the plan is an
// inference plan that records nothing for Backward, the Conv's output feeds only the
// BatchNormalization and is not a graph output, the BatchNormalization uses running
// statistics, and the Conv's weight and bias and the four BatchNormalization tensors are
// parameters that are not trainable. Parameters are still read on every run: optimizers
// and quantizers write Param.Value in place, and nothing tells the graph when, so the
// fused step recomputes W' and b' at the start of each run. That costs one multiply per
// weight, which is small next to the convolution's multiply per weight and output pixel.
// Clip's bounds, parameters as well, are likewise read on every run.
//
// A fused MaxPool leaves the step a second output, the convolution's full output: its
// buffer is the plan's, counted in the plan's bytes, though the direct path pools a few
// images at a time without it.

// convBNKernel runs a Conv with weight and bias folded from a following
// BatchNormalization, and optionally clamps the result as a following Relu or Clip.
// Its inputs are the Conv's X, W and B (nil when absent), the BatchNormalization's
// scale, B, mean and var, then when act is set the activation's inputs (the first
// always nil; a Clip's optional min and max); its output is that of the last fused node.
// quickGelu is the op name of com.microsoft QuickGelu in the unary table.
const quickGelu = MSDomain + ".QuickGelu"

type convBNKernel struct {
	conv *convKernel
	eps  float32
	act  *unaryKernel // Relu, Clip or HardSwish, or nil
	cl   nnClamp      // act's bounds in this run
	pool *poolKernel  // a following MaxPool, or nil
	gap  bool         // a GlobalAveragePool of the output is the step's last output
	res  bool         // input 7 is a residual added before act
	noBN bool         // no BatchNormalization: the Conv's own weight and bias, inputs 3-6 unused
	// ystride, set by the plan (concatInPlace), places each image's output a Concat row
	// apart in the output's buffer: out[0].F spans from the first image's planes to the
	// last's, with other inputs' planes in between.
	ystride int
	yscr    []float32 // run's output when the direct path cannot write it in place
	// w and b hold the folded weight and bias; they belong to the plan, so that plans of
	// other input shapes keep their own.
	w, b *Tensor
}

func (k *convBNKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	out, err := k.conv.Infer(in[:3])
	if err != nil {
		return nil, err
	}
	if k.res && (in[7] == nil || in[7].DType != Float32 || !nnShapeEq(in[7].Shape, out[0].Shape)) {
		return nil, k.conv.n.Errorf("the residual added to the output does not have the output's shape %v", out[0].Shape)
	}
	if k.pool == nil {
		if k.gap {
			out = append(out, &Tensor{DType: Float32, Shape: gapShape(out[0].Shape)})
		}
		return out, nil
	}
	pooled, err := k.pool.Infer(out)
	if err != nil {
		return nil, err
	}
	return append(pooled, out[0]), nil
}

// run is conv.run, with y's images a row of ystride apart when the plan placed them so.
func (k *convBNKernel) run(ctx *Context, x, w, b, y *Tensor, act *nnClamp, pool *poolKernel, full, res *Tensor) error {
	if k.ystride == 0 {
		return k.conv.run(ctx, x, w, b, y, act, pool, full, res)
	}
	if pool != nil || res != nil || len(y.Shape) == 0 {
		return k.conv.n.Errorf("internal error: an output placed in a Concat with a fused pool or residual")
	}
	d, err := k.conv.dims(x.Shape, w.Shape, b)
	if err != nil {
		return err
	}
	d, tw := k.conv.trimmed(d, w)
	blk := d.M * d.g.outSize()
	if len(y.F) != (d.N-1)*k.ystride+blk {
		return k.conv.n.Errorf("internal error: an output placed in a Concat spans %d values, not %d", len(y.F), (d.N-1)*k.ystride+blk)
	}
	if k.conv.stridedOK(&d) {
		k.conv.ystride = k.ystride
		defer func() { k.conv.ystride = 0 }()
		return k.conv.runDims(ctx, &d, x, tw, b, y, act, nil, nil, nil)
	}
	// Another path (no direct kernel on this CPU): the same computation into
	// a buffer of its own, then each image's planes to their place, so that the bits are
	// those of an unplaced output.
	k.yscr = nnGrow(k.yscr, d.N*blk)
	t := &Tensor{DType: Float32, Shape: y.Shape, F: k.yscr[:d.N*blk]}
	if err := k.conv.runDims(ctx, &d, x, tw, b, t, act, nil, nil, nil); err != nil {
		return err
	}
	for i := range d.N {
		copy(y.F[i*k.ystride:i*k.ystride+blk], t.F[i*blk:(i+1)*blk])
	}
	return nil
}

// placeable reports whether run writes an output placed a Concat row apart through the
// direct path's tiles, given the step's input x, Conv weight w and bias b (nil when
// absent) as planned: run's fallback copies the output from a buffer of its own, which
// saves nothing and holds memory the plan does not count.
func (k *convBNKernel) placeable(x, w, b *Tensor) bool {
	if !k.noBN {
		b = nil // the folded bias has the output's channels, as b must
	}
	d, err := k.conv.dims(x.Shape, w.Shape, b)
	if err != nil {
		return false
	}
	// As trimmed trims (a frozen parameter's taps), by geometry alone.
	if k.noBN && paramKey(w).p != nil && !d.depthwise {
		if t, _, _, ok := trimTaps(&d); ok {
			d = t
		}
	}
	return k.conv.stridedOK(&d)
}

// gapShape is the shape of a GlobalAveragePool of a value of shape s.
func gapShape(s []int) []int {
	g := slices.Clone(s)
	for i := 2; i < len(g); i++ {
		g[i] = 1
	}
	return g
}

func (k *convBNKernel) Forward(ctx *Context, in, out []*Tensor) error {
	if !k.gap {
		return k.forward(ctx, in, out)
	}
	// The fused GlobalAveragePool: the depthwise planes take each plane's mean as they
	// make it, any other path after the convolution.
	g := out[len(out)-1]
	k.conv.gap, k.conv.gapDone = g.F, false
	err := k.forward(ctx, in, out)
	done := k.conv.gapDone
	k.conv.gap, k.conv.gapDone = nil, false
	if err != nil || done {
		return err
	}
	y := out[0]
	planes := len(g.F)
	if planes == 0 {
		return nil
	}
	isz := y.Len() / planes
	ctx.Parallel(planes, poolGrain(isz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			g.F[p] = planeMean(y.F[p*isz : (p+1)*isz])
		}
	})
	return nil
}

func (k *convBNKernel) forward(ctx *Context, in, out []*Tensor) error {
	w, b, err := k.weights(in)
	if err != nil {
		return err
	}
	return k.run(ctx, in[0], w, b, out[0], k.clamp(in), k.pool, k.full(out), k.residual(in))
}

// weights returns the weight and bias the step convolves with: the Conv's own, or
// folded with the BatchNormalization's statistics of this run.
func (k *convBNKernel) weights(in []*Tensor) (w, b *Tensor, err error) {
	w, b = in[1], in[2]
	if k.noBN {
		return w, b, nil
	}
	scale, shift, mean, vr := in[3].F, in[4].F, in[5].F, in[6].F
	M := len(scale)
	if w.Len() != len(k.w.F) || len(k.b.F) != M || len(shift) != M || len(mean) != M || len(vr) != M || (b != nil && len(b.F) != M) {
		// Parameters are updated in place, so their sizes cannot change after planning
		// unless the caller replaced a Value; refuse rather than read out of range.
		return nil, nil, k.conv.n.Errorf("a parameter of the Conv or of its BatchNormalization changed size since the plan was made")
	}
	per := w.Len() / max(M, 1)
	for m := 0; m < M; m++ {
		a := float64(scale[m]) / math.Sqrt(float64(vr[m])+float64(k.eps))
		wm, fm := w.F[m*per:(m+1)*per], k.w.F[m*per:(m+1)*per]
		for j, v := range wm {
			fm[j] = float32(float64(v) * a)
		}
		var bm float64
		if b != nil {
			bm = float64(b.F[m])
		}
		k.b.F[m] = float32((bm-float64(mean[m]))*a + float64(shift[m]))
	}
	return k.w, k.b, nil
}

// full returns the buffer of the convolution's whole output that a fused MaxPool leaves
// the step as its second output, or nil.
func (k *convBNKernel) full(out []*Tensor) *Tensor {
	if k.pool != nil {
		return out[1]
	}
	return nil
}

// clamp returns the fused activation with this run's bounds, or nil.
func (k *convBNKernel) clamp(in []*Tensor) *nnClamp {
	if k.act == nil {
		return nil
	}
	k.cl = nnClamp{relu: k.act.op.name == "Relu", swish: k.act.op.name == "HardSwish", silu: k.act.op.name == quickGelu, a: k.act.alpha, b: k.act.beta}
	if k.act.op.clip {
		k.cl.lo, k.cl.hi = k.act.bounds(in[7:])
	}
	return &k.cl
}

// residual returns the fused residual, or nil.
func (k *convBNKernel) residual(in []*Tensor) *Tensor {
	if k.res {
		return in[7]
	}
	return nil
}

// fuseConvBN replaces each foldable Conv → BatchNormalization pair of an inference plan's
// steps with one convBNKernel step, placed where the Conv ran: the
// BatchNormalization's other inputs are parameters, available at any point.
//
// A dry run (PlanBytes) leaves Conv steps without a BatchNormalization unfused, counting
// them as before they fused: binarize sizes its teacher's memory limit from this count,
// and fusing them here dropped whole activations from it that the teacher's runs still
// held (the corpus's CTC models' first Conv: 6 MiB at batch 48).
func (g *Graph) fuseConvBN(p *plan, dry bool) {
	uses := readers(p)
	frozen := func(id int) bool {
		if id < 0 || p.values[id].kind != kindParam {
			return false
		}
		par := g.params[p.values[id].index]
		return par.Value.DType == Float32 && !par.Trainable
	}
	drop := make([]bool, len(p.steps))
	for s := range p.steps {
		cs := p.steps[s].node
		conv, ok := cs.k.(*convKernel)
		if !ok || len(cs.out) != 1 || uses[cs.out[0]] != 1 || len(cs.in) < 2 {
			continue
		}
		c := cs.out[0]
		t := nextReader(p.steps, s, c)
		if t < 0 {
			continue
		}
		bs := p.steps[t].node
		bn, ok := bs.k.(*batchNormKernel)
		if !ok {
			if dry {
				continue
			}
			// No BatchNormalization (exporters fold it into the weights): the Conv
			// with its own weight and bias, and what follows it fused as below.
			in := []int{cs.in[0], cs.in[1], -1, -1, -1, -1, -1}
			if len(cs.in) > 2 {
				in[2] = cs.in[2]
			}
			k := &convBNKernel{conv: conv, noBN: true}
			gn := &gnode{n: cs.n, op: cs.op, k: k, in: in, out: []int{c}}
			if g.fuseAfter(p, gn, k, s, s, uses, drop) {
				p.steps[s] = step{node: gn, on: p.steps[s].on}
			}
			continue
		}
		if bn.trainingMode || bn.outputs != 1 || len(bs.out) != 1 || len(bs.in) != 5 || bs.in[0] != c || p.steps[t].on != p.steps[s].on {
			continue
		}
		if !frozen(cs.in[1]) || (len(cs.in) > 2 && cs.in[2] >= 0 && !frozen(cs.in[2])) {
			continue
		}
		if !slices.ContainsFunc(bs.in[1:], func(id int) bool { return !frozen(id) }) {
			in := []int{cs.in[0], cs.in[1], -1, bs.in[1], bs.in[2], bs.in[3], bs.in[4]}
			if len(cs.in) > 2 {
				in[2] = cs.in[2]
			}
			w := p.vals[cs.in[1]]
			M := p.vals[c].Shape[1]
			k := &convBNKernel{
				conv: conv,
				eps:  bn.eps,
				w:    NewFloat(slices.Clone(w.Shape), make([]float32, w.Len())),
				b:    NewFloat([]int{M}, make([]float32, M)),
			}
			gn := &gnode{n: cs.n, op: fmt.Sprintf("%s+%s", cs.op, bs.op), k: k, in: in, out: []int{bs.out[0]}}
			drop[t] = true
			g.fuseAfter(p, gn, k, t, s, uses, drop)
			p.steps[s] = step{node: gn, on: p.steps[s].on}
		}
	}
	p.steps = kept(p.steps, drop)
}

// readers counts, for each value of p, the steps that read it, and one more for each
// graph output: a value a fusion may keep in a kernel's registers or cache has a count of 1.
func readers(p *plan) []int {
	uses := make([]int, len(p.values))
	for _, st := range p.steps {
		for _, id := range st.node.in {
			if id >= 0 {
				uses[id]++
			}
		}
	}
	for _, id := range p.outIDs {
		uses[id]++ // a graph output must keep its own buffer
	}
	return uses
}

// nextReader returns the index of the first step after step s that reads value id, or −1.
func nextReader(steps []step, s, id int) int {
	t := slices.IndexFunc(steps[s+1:], func(st step) bool { return slices.Contains(st.node.in, id) })
	if t < 0 {
		return -1
	}
	return t + s + 1
}

// kept returns steps without those that drop marks, in place.
func kept(steps []step, drop []bool) []step {
	k := steps[:0]
	for s, st := range steps {
		if !drop[s] {
			k = append(k, st)
		}
	}
	return k
}

// fuseAfter joins to the fused step gn (kernel k, standing at step s, its output made at
// step t) an activation, or a residual Add with the activation after it, and then a
// MaxPool, each when it alone reads the value before it; it reports whether it joined any.
func (g *Graph) fuseAfter(p *plan, gn *gnode, k *convBNKernel, t, s int, uses []int, drop []bool) bool {
	n := len(gn.op)
	if a := g.fusableAct(p, gn.out[0], uses, t); a >= 0 {
		as := p.steps[a].node
		k.act = as.k.(*unaryKernel)
		gn.op += "+" + as.op
		gn.in = append(append(gn.in, -1), as.in[1:]...)
		gn.out = []int{as.out[0]}
		drop[a] = true
	} else if r, other := g.fusableAdd(p, gn.out[0], uses, t, s); r >= 0 {
		// The residual takes the place of the activation's own input.
		rs := p.steps[r].node
		k.res = true
		gn.op += "+" + rs.op
		gn.in = append(gn.in, other)
		gn.out = []int{rs.out[0]}
		drop[r] = true
		if a := g.fusableAct(p, rs.out[0], uses, r); a >= 0 {
			as := p.steps[a].node
			k.act = as.k.(*unaryKernel)
			gn.op += "+" + as.op
			gn.in = append(gn.in, as.in[1:]...)
			gn.out = []int{as.out[0]}
			drop[a] = true
		}
	}
	if m := g.fusablePool(p, gn.out[0], uses, t); m >= 0 && !k.res {
		ms := p.steps[m].node
		k.pool = ms.k.(*poolKernel)
		gn.op += "+" + ms.op
		// The convolution's full output gets a buffer of the plan, used when the
		// direct path cannot pool (which depends on the CPU): counted always, so
		// that the plan's bytes do not.
		full := len(p.values)
		p.values = append(p.values, value{kind: kindNode, index: -1})
		p.vals = append(p.vals, &Tensor{DType: Float32, Shape: slices.Clone(p.vals[gn.out[0]].Shape)})
		p.prod = append(p.prod, gn)
		gn.out = []int{ms.out[0], full}
		drop[m] = true
	}
	if q := g.fusableGAP(p, gn, t); q >= 0 && k.pool == nil {
		qs := p.steps[q].node
		k.gap = true
		gn.op += "+" + qs.op
		gn.out = append(gn.out, qs.out[0])
		drop[q] = true
	}
	return len(gn.op) > n
}

// fusableGAP returns the index of a step after t that takes the GlobalAveragePool of gn's
// output, when gn is a depthwise convolution, or -1. The output may have other readers
// (a squeeze-excitation block scales it by what the pool's branch makes of its means):
// the pool moves into the convolution's step, whose depthwise planes take each plane's
// mean while the plane is in the cache instead of reading the whole activation again
// (EfficientNet-B0's pools: 27 ms a batch of 32).
func (g *Graph) fusableGAP(p *plan, gn *gnode, t int) int {
	conv := gn.k.(*convBNKernel).conv
	w, x := p.vals[gn.in[1]], p.vals[gn.in[0]]
	if conv.group < 2 || len(w.Shape) < 3 || w.Shape[1] != 1 || len(x.Shape) < 3 || x.Shape[1] != conv.group {
		return -1
	}
	id := gn.out[0]
	for q := t + 1; q < len(p.steps); q++ {
		qs := p.steps[q].node
		if !slices.Contains(qs.in, id) {
			continue
		}
		if k, ok := qs.k.(*globalPoolKernel); ok && !k.max && qs.in[0] == id && len(qs.out) == 1 && p.steps[q].on == p.steps[t].on {
			return q
		}
	}
	return -1
}

// fusablePool returns the index of the step after t that max-pools value id without
// indices and is its only reader, or -1.
func (g *Graph) fusablePool(p *plan, id int, uses []int, t int) int {
	if uses[id] != 1 {
		return -1
	}
	m := slices.IndexFunc(p.steps[t+1:], func(st step) bool { return slices.Contains(st.node.in, id) })
	if m < 0 {
		return -1
	}
	m += t + 1
	ms := p.steps[m].node
	k, ok := ms.k.(*poolKernel)
	if !ok || !k.max || k.wantIndices || len(ms.in) != 1 || ms.in[0] != id || len(ms.out) != 1 || p.steps[m].on != p.steps[t].on {
		return -1
	}
	return m
}

// fusableAdd returns the index of the step after t that adds value id, its only reader,
// to another value of the same shape computed before step s (or given: an input or a
// parameter), and that other value's id; or -1.
func (g *Graph) fusableAdd(p *plan, id int, uses []int, t, s int) (int, int) {
	if uses[id] != 1 {
		return -1, -1
	}
	r := slices.IndexFunc(p.steps[t+1:], func(st step) bool { return slices.Contains(st.node.in, id) })
	if r < 0 {
		return -1, -1
	}
	r += t + 1
	rs := p.steps[r].node
	k, ok := rs.k.(*binaryKernel)
	if !ok || k.op.id != opAdd || len(rs.in) != 2 || len(rs.out) != 1 || p.steps[r].on != p.steps[t].on {
		return -1, -1
	}
	other := rs.in[0]
	if other == id {
		other = rs.in[1]
	}
	if other == id || other < 0 || p.vals[other] == nil || p.vals[other].DType != Float32 ||
		!nnShapeEq(p.vals[other].Shape, p.vals[id].Shape) {
		return -1, -1
	}
	if p.values[other].kind == kindNode && !slices.ContainsFunc(p.steps[:s], func(st step) bool { return slices.Contains(st.node.out, other) }) {
		return -1, -1
	}
	return r, other
}

// fusableAct returns the index of the step after t that applies Relu, Clip, HardSwish or
// SiLU (QuickGelu of alpha 1, which the engine makes of Sigmoid·x) to value id and is its
// only reader, or -1.
//
// SiLU is no activation of the tile kernel's registers (its exponential needs more of
// them than the tile leaves): the direct path applies it to each tile's rows right after
// the kernel stored them (convWork.silu), while they are in the cache. EfficientNet-B0's
// separate SiLU passes over 50–150 MB activations were 28 % of its run at batch 32.
func (g *Graph) fusableAct(p *plan, id int, uses []int, t int) int {
	if uses[id] != 1 {
		return -1
	}
	a := slices.IndexFunc(p.steps[t+1:], func(st step) bool { return slices.Contains(st.node.in, id) })
	if a < 0 {
		return -1
	}
	a += t + 1
	as := p.steps[a].node
	k, ok := as.k.(*unaryKernel)
	if !ok || (k.op.name != "Relu" && k.op.name != "Clip" && k.op.name != "HardSwish" && !(k.op.name == quickGelu && k.alpha == 1)) ||
		as.in[0] != id || len(as.out) != 1 || p.steps[a].on != p.steps[t].on {
		return -1
	}
	for _, b := range as.in[1:] {
		// Clip's bounds must be available when the Conv runs, before the BN's position.
		if b >= 0 && p.values[b].kind != kindParam {
			return -1
		}
	}
	return a
}
