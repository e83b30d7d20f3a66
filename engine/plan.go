package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxPlans bounds the plan cache; a workload that keeps changing its input shapes
// re-plans instead of growing without limit.
const maxPlans = 16

// plan is the executable form of the graph for one input signature and mode: shapes of
// every value, constants folded, buffers assigned, and when the graph has trainable
// parameters the gradient buffers and the reverse schedule.
type plan struct {
	training bool      // Context.Training: BatchNormalization and Dropout behaviour
	record   bool      // keep what Backward needs; set when any parameter is trainable
	shapes   [][]int   // input shapes the plan was made for
	vals     []*Tensor // per value id
	// The plan's values: the graph's, then those of the copies of control-flow bodies
	// (expand.go); prod is the producer of each, nil for inputs, parameters and constants.
	values []value
	prod   []*gnode
	outIDs []int     // the graph outputs' values (an If's output is its branch's)
	inVals []*Tensor // vals of the graph inputs, whose data Forward sets per run
	steps  []step    // nodes that run, in order
	outs   []*Tensor // returned by Forward
	bytes  int64     // what the plan allocated: buffers, folded values, integer inputs
	// concatParts counts the Concat inputs written in place (concatInPlace); tests read it.
	concatParts int
	// expandDW counts the pointwise and depthwise step pairs fused (fuseExpandDW); tests
	// read it.
	expandDW int
	// project counts the projections joined to depthwise steps made in bands
	// (fuseProjection); tests read it.
	project int
	// scaleProject counts the channel-scaling Muls joined to the pointwise Conv after
	// them (fuseScaleProject); tests read it.
	scaleProject int

	// Recording plans only.
	outGrads [][]*Tensor // per graph output: its gradient buffer, nil when none flows
	zeroOuts []*Tensor   // output gradient buffers to clear before adding the caller's
}

type step struct {
	node    *gnode
	in, out []*Tensor
	// on, when not nil, is the flag of the If branch the step belongs to: the step runs
	// (forward and backward) only while it is true.
	on *bool
	// Backward pass.
	back      bool
	gin, gout []*Tensor
	zero      []*Tensor // gradient buffers this step is the first to add into
}

// noFold lists ops whose training-mode result is not a function of their inputs.
func noFold(op string, training bool) bool {
	return training && (op == "Dropout" || op == "BatchNormalization")
}

// bufPool hands out buffers for values whose lifetimes do not overlap. It only plans:
// each buffer is a slot, counted against the plan's budget when it is created, and alloc
// makes them all once the whole plan has fit, so that a plan over the limit allocates
// nothing.
type bufPool struct {
	b            *budget
	slots        []poolSlot
	freeF, freeI []int // indices of the slots free for reuse
	owner        map[*Tensor]int
	parts        []poolPart
}

// poolPart is a tensor that lives inside another's buffer, from element off: an input of a
// Concat written where the Concat's output keeps it (concatInPlace). With stride > 0 it
// is blocks of the output's rows, stride elements apart, and its F spans them all.
type poolPart struct {
	t, whole *Tensor
	off      int
	stride   int
}

type poolSlot struct {
	dt DType
	n  int // capacity in elements
}

// get assigns t a free slot of its type large enough for it, the smallest such, or a new
// one; gn is the node charged when a new slot exceeds the budget.
func (p *bufPool) get(gn *gnode, t *Tensor) error {
	n := t.Len()
	free := &p.freeF
	if t.DType == Int64 {
		free = &p.freeI
	}
	best := -1
	for j, s := range *free {
		if c := p.slots[s].n; c >= n && (best < 0 || c < p.slots[(*free)[best]].n) {
			best = j
		}
	}
	if p.owner == nil {
		p.owner = map[*Tensor]int{}
	}
	if best >= 0 {
		p.owner[t] = (*free)[best]
		*free = slices.Delete(*free, best, best+1)
		return nil
	}
	if err := p.b.add(gn, "", t.Shape, int64(n)*elemBytes(t.DType)); err != nil {
		return err
	}
	p.slots = append(p.slots, poolSlot{dt: t.DType, n: n})
	p.owner[t] = len(p.slots) - 1
	return nil
}

// alias gives out the slot of in, whose last reader makes out as a view of it (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity), and reports whether it could: in must be the
// pool's. The slot then returns to the pool when out's last reader has run.
func (p *bufPool) alias(out, in *Tensor) bool {
	s, ok := p.owner[in]
	if !ok || out.DType != in.DType || out.Len() != in.Len() {
		return false
	}
	p.owner[out] = s
	return true
}

// put returns t's slot to the pool once its last reader has run.
func (p *bufPool) put(t *Tensor) {
	s, ok := p.owner[t]
	if !ok {
		return
	}
	if t.DType == Int64 {
		p.freeI = append(p.freeI, s)
	} else {
		p.freeF = append(p.freeF, s)
	}
}

// alloc allocates every slot and points each tensor at its slot's buffer.
func (p *bufPool) alloc() {
	f := make([][]float32, len(p.slots))
	i := make([][]int64, len(p.slots))
	for j, s := range p.slots {
		if s.dt == Int64 {
			i[j] = make([]int64, s.n)
		} else {
			f[j] = make([]float32, s.n)
		}
	}
	for t, s := range p.owner {
		if t.DType == Int64 {
			t.I = i[s][:t.Len()]
		} else {
			t.F = f[s][:t.Len()]
		}
	}
	for _, pt := range p.parts {
		n := pt.off + pt.span()
		pt.t.F = pt.whole.F[pt.off:n:n]
	}
}

// span is how many elements of the whole buffer the part's F covers: its own, or from
// its first block's start to its last block's end.
func (pt *poolPart) span() int {
	n := pt.t.Len()
	if pt.stride == 0 || n == 0 {
		return n
	}
	outer := pt.t.Shape[0]
	return (outer-1)*pt.stride + n/outer
}

// makePlan infers shapes, folds constants, assigns buffers and, when record is set,
// schedules the backward pass, for the given inputs' shapes. Every tensor and the plan's
// total are checked against the memory limit before they are allocated. With dry set it
// stops short of allocating the buffers: the plan only serves its byte count.
func (g *Graph) makePlan(inputs []*Tensor, training, record, dry bool) (p *plan, err error) {
	p = &plan{training: training, record: record, vals: make([]*Tensor, len(g.values)),
		values: slices.Clone(g.values), prod: make([]*gnode, len(g.values))}
	for i := range g.nodes {
		for _, id := range g.nodes[i].out {
			p.prod[id] = &g.nodes[i]
		}
	}
	b := &budget{model: g.name, limit: g.maxBytes()}
	konst := make([]bool, len(g.values))
	for id, v := range g.values {
		if v.kind == kindConst {
			// Initializers of bodies are no parameters: nothing trains them.
			p.vals[id], konst[id] = g.consts[v.index], true
		}
		if v.kind == kindParam {
			pv := g.params[v.index].Value
			p.vals[id] = pv
			// Integer parameters are shapes, indices and axes: nothing trains them, so
			// what depends on them alone is folded. Float parameters may change between
			// runs (optimizers, quantizers), so nothing is folded through them.
			konst[id] = pv.DType == Int64
		}
	}
	for i, id := range g.inIDs {
		t := &Tensor{DType: inputs[i].DType, Shape: slices.Clone(inputs[i].Shape)}
		size, err := b.tensor(nil, g.inputs[i].Name, t.DType, t.Shape)
		if err != nil {
			return nil, err
		}
		if t.DType == Int64 {
			if err := b.add(nil, g.inputs[i].Name, t.Shape, size); err != nil {
				return nil, err
			}
			// Integer inputs (shapes, indices, axes) are part of the signature, so that
			// shapes computed from them are known when planning.
			t.I, konst[id] = slices.Clone(inputs[i].I), true
		}
		p.vals[id] = t
		p.inVals = append(p.inVals, t)
		p.shapes = append(p.shapes, t.Shape)
	}

	// Shape inference, constant folding and the expansion of control flow.
	x := &expander{g: g, p: p, b: b, konst: konst, training: training, foldFrozen: !training && !record, pure: map[int]bool{}, chained: map[int]bool{},
		ctx: &Context{BLAS: g.opts.BLAS, Workers: g.opts.Workers, Rand: g.rand}}
	x.left = make([]int, len(g.values))
	for i := range g.nodes {
		for _, id := range g.nodes[i].in {
			if id >= 0 {
				x.left[id]++
			}
		}
	}
	x.remap = make([]int, len(g.values))
	for id := range x.remap {
		x.remap[id] = id
	}
	defer func() {
		if r := recover(); r != nil {
			if x.cur == nil {
				p, err = nil, fmt.Errorf("engine: %s: internal error while planning: %v", g.name, r)
				return
			}
			p, err = nil, fmt.Errorf("engine: %s: %s", g.name, x.cur.n.Errorf("internal error while planning: %v", r))
		}
	}()
	for i := range g.nodes {
		if err := x.node(&g.nodes[i], nil, nil); err != nil {
			return nil, err
		}
	}
	x.cur = nil
	for _, id := range g.outIDs {
		p.outIDs = append(p.outIDs, x.remap[id])
	}
	sc := &scheduler{g: g, p: p, b: b, konst: x.konst, training: training}
	p.steps = sc.prune(x.run, x.guards, p.outIDs)
	if !training && !record && !g.noFuse {
		g.fuseConvBN(p, dry)
		if !dry {
			g.fuseMatMulBias(p)
			g.fuseExpandDW(p)
			g.fuseProjection(p)
			g.fuseScaleProject(p)
		}
		// Fused steps may hold buffers of their own, values that no node computes.
		sc.konst = append(sc.konst, make([]bool, len(p.values)-len(sc.konst))...)
	}
	var need []bool
	if record {
		trainable := func(id int) bool {
			v := p.values[id]
			return v.kind == kindParam && g.params[v.index].Trainable
		}
		if need, err = sc.gradValues(p.steps, p.outIDs, trainable); err != nil {
			return nil, err
		}
	}
	pool := sc.newPool(b)
	if err := sc.forwardBuffers(p.steps, p.outIDs, nil, need, pool); err != nil {
		return nil, err
	}
	for _, id := range p.outIDs {
		p.outs = append(p.outs, p.vals[id])
	}
	if record {
		paramGrad := func(id int) *Tensor {
			if v := p.values[id]; v.kind == kindParam {
				return g.params[v.index].Grad
			}
			return nil
		}
		if !g.noRelease {
			sc.release = sc.backwardRelease(p.steps, p.outIDs)
		}
		p.outGrads, p.zeroOuts, err = sc.backwardBuffers(p.steps, p.outIDs, need, pool, paramGrad)
		sc.release = nil
		if err != nil {
			return nil, err
		}
	}
	p.bytes = b.total
	if !dry {
		g.keepChains(p, x.folded, x.chained)
		g.makeRoom(p.bytes)
		for _, pool := range sc.pools {
			pool.alloc()
		}
	}
	return p, nil
}

// keepChains keeps in the graph's folds the outputs of the chain nodes (folds through
// frozen parameters, expander.plain) that a step reads or the graph outputs, for other
// plans to share, and drops the plan's hold on the outputs of every node folded from
// parameters and constants (folded) that nothing reads: the links before the last, such
// as the packed format's codes widened to int64 and its lookups and reshapes, four
// float copies of each weight that no step reads once the last link is made.
func (g *Graph) keepChains(p *plan, folded []*gnode, chained map[int]bool) {
	if len(folded) == 0 {
		return
	}
	read := map[*Tensor]bool{}
	for _, st := range p.steps {
		for _, t := range st.in {
			read[t] = true
		}
	}
	for _, t := range p.outs {
		read[t] = true
	}
	top := make(map[*gnode]bool, len(g.nodes))
	for i := range g.nodes {
		top[&g.nodes[i]] = true
	}
	for _, gn := range folded {
		outs := make([]*Tensor, len(gn.out))
		kept := false
		for j, id := range gn.out {
			outs[j] = p.vals[id]
			kept = kept || read[outs[j]]
		}
		switch {
		case kept && chained[gn.out[0]] && top[gn]:
			// Only the graph's own nodes: a body's copies are new in every plan.
			g.folds[gn] = outs
		case !kept:
			// Only the graph's own values, and none a body or the caller reads: the
			// bodies of Loops run at run time read the plan's values when they run.
			for j, id := range gn.out {
				if id < len(g.values) && !g.kept[id] {
					p.vals[id] = &Tensor{DType: outs[j].DType, Shape: outs[j].Shape}
				}
			}
		}
	}
}

// scheduler turns planned nodes into steps with buffers: the plan's own, and those of the
// bodies of Loops run at run time (loop_runtime.go), which share the plan's values.
type scheduler struct {
	g        *Graph
	p        *plan
	b        *budget
	konst    []bool
	training bool
	pools    []*bufPool // allocated together once the whole plan has fit
	// release lists, per step, the forward values whose buffers return to the pool once
	// that step's backward has run (backwardRelease); nil keeps them to the end.
	release [][]int
}

// backwardRelease lists, per step, the values that steps keep for their backward pass
// (retains) and that the backward pass reads for the last time at that step: backward
// runs the steps in reverse, so at the first step that keeps each. Their buffers can then
// hold gradients of the steps before. Without it every kept activation lived to the end of
// the backward pass beside the gradients: MobileNetV3-small's training plan at batch 32
// held 724 MB where PyTorch, which frees saved tensors as backward goes, peaked at 695.
// Graph outputs stay: the caller reads them after Backward.
func (sc *scheduler) backwardRelease(steps []step, outIDs []int) [][]int {
	p := sc.p
	out := make([]bool, len(p.values))
	for _, id := range outIDs {
		if id >= 0 {
			out[id] = true
		}
	}
	first := make([]int, len(p.values))
	for i := range first {
		first[i] = -1
	}
	keep := func(id, s int) {
		if id >= 0 && !out[id] && p.values[id].kind == kindNode && !sc.konst[id] && first[id] < 0 {
			first[id] = s
		}
	}
	for s := range steps {
		st := &steps[s]
		if !st.back {
			continue
		}
		ri, ro := retains(st.node.k, len(st.node.in), len(st.node.out))
		for j, id := range st.node.in {
			if ri[j] {
				keep(id, s)
			}
		}
		for j, id := range st.node.out {
			if ro[j] {
				keep(id, s)
			}
		}
	}
	rel := make([][]int, len(steps))
	for id, s := range first {
		if s >= 0 {
			rel[s] = append(rel[s], id)
		}
	}
	return rel
}

func (sc *scheduler) newPool(b *budget) *bufPool {
	pool := &bufPool{b: b}
	sc.pools = append(sc.pools, pool)
	return pool
}

// prune keeps the nodes of run that some value of outIDs depends on, as steps.
func (sc *scheduler) prune(run []*gnode, guards []*bool, outIDs []int) []step {
	needed := make([]bool, len(sc.p.values))
	for _, id := range outIDs {
		if id >= 0 {
			needed[id] = true
		}
	}
	live := make([]bool, len(run))
	for s := len(run) - 1; s >= 0; s-- {
		gn := run[s]
		for _, id := range gn.out {
			if needed[id] && !sc.konst[id] {
				live[s] = true
			}
		}
		if live[s] {
			for _, id := range gn.in {
				if id >= 0 {
					needed[id] = true
				}
			}
		}
	}
	var steps []step
	for s, gn := range run {
		if live[s] {
			steps = append(steps, step{node: gn, on: guards[s]})
		}
	}
	return steps
}

// forwardBuffers assigns the steps' output buffers from pool. A value's buffer returns to
// the pool after its last reader, except for outIDs, the values of pinned and, when need
// is set (a recording plan), what the backward pass reads. Values that no step produces
// (inputs, parameters, constants, values of enclosing steps) are not the pool's.
func (sc *scheduler) forwardBuffers(steps []step, outIDs, pinnedIDs []int, need []bool, pool *bufPool) error {
	p, konst := sc.p, sc.konst
	pinned := make([]bool, len(p.values))
	for _, id := range slices.Concat(outIDs, pinnedIDs) {
		if id >= 0 {
			pinned[id] = true
		}
	}
	lastUse := make([]int, len(p.values))
	for i := range lastUse {
		lastUse[i] = -1
	}
	for s := range steps {
		st := &steps[s]
		for _, id := range st.node.in {
			if id >= 0 {
				lastUse[id] = s
			}
		}
		if need != nil {
			sc.g.markBackward(st, need)
			if st.back {
				ri, ro := retains(st.node.k, len(st.node.in), len(st.node.out))
				for j, id := range st.node.in {
					if id >= 0 && ri[j] {
						pinned[id] = true
					}
				}
				for j, id := range st.node.out {
					if ro[j] {
						pinned[id] = true
					}
				}
			}
		}
		if k, ok := st.node.k.(*runLoopKernel); ok {
			if err := k.schedule(sc, st, need); err != nil {
				return err
			}
		}
	}
	owned := func(id int) bool { return id >= 0 && p.values[id].kind == kindNode && !konst[id] }
	var inPlace map[int]concatPart
	if need == nil && !sc.g.noConcatInPlace {
		inPlace = sc.concatInPlace(steps, lastUse, pinned, owned)
		p.concatParts += len(inPlace)
	}
	made := map[int]bool{} // Concat outputs whose buffers their inputs' producers took
	for s := range steps {
		st := &steps[s]
		// A view whose input dies with it takes the input's buffer: its Forward then
		// copies nothing (ShuffleNetV2's channel shuffles copied 13 ms of reshapes a
		// batch of 32).
		if _, view := st.node.k.(*viewKernel); view && st.on == nil && len(st.node.in) > 0 && len(st.node.out) == 1 {
			if in := st.node.in[0]; owned(in) && lastUse[in] == s && !pinned[in] && !slices.Contains(st.node.in[1:], in) &&
				pool.alias(p.vals[st.node.out[0]], p.vals[in]) {
				if id := st.node.out[0]; lastUse[id] < 0 && !pinned[id] {
					pool.put(p.vals[id])
				}
				continue
			}
		}
		for _, id := range st.node.out {
			if pt, ok := inPlace[id]; ok {
				if !made[pt.out] {
					if err := pool.get(pt.node, p.vals[pt.out]); err != nil {
						return err
					}
					made[pt.out] = true
				}
				pool.parts = append(pool.parts, poolPart{t: p.vals[id], whole: p.vals[pt.out], off: pt.off, stride: pt.stride})
				if pt.stride > 0 {
					pt.conv.ystride = pt.stride
				}
				continue
			}
			if made[id] {
				continue
			}
			if err := pool.get(st.node, p.vals[id]); err != nil {
				return err
			}
		}
		for j, id := range st.node.in {
			if owned(id) && lastUse[id] == s && !pinned[id] && !slices.Contains(st.node.in[:j], id) {
				pool.put(p.vals[id])
			}
		}
		for _, id := range st.node.out {
			if lastUse[id] < 0 && !pinned[id] {
				pool.put(p.vals[id])
			}
		}
	}
	for s := range steps {
		st := &steps[s]
		st.in = make([]*Tensor, len(st.node.in))
		for j, id := range st.node.in {
			if id >= 0 {
				st.in[j] = p.vals[id]
			}
		}
		st.out = make([]*Tensor, len(st.node.out))
		for j, id := range st.node.out {
			st.out[j] = p.vals[id]
		}
	}
	return nil
}

// concatPart places value ids inside the buffer of the Concat output out (produced by
// node), from element off; with stride > 0, as blocks stride elements apart, which conv
// (the value's producer) writes so.
type concatPart struct {
	out, off, stride int
	node             *gnode
	conv             *convBNKernel
}

// concatInPlace finds the inputs of Concat steps that their producers can write straight
// into the Concat's output, so that the Concat copies nothing (SqueezeNet's fire modules
// at batch 1 copied their 55 × 55 expansions, 5 % of the run): a float input whose last
// reader is the Concat (earlier readers read it where it is), that the Concat reads once,
// not pinned, made by an ordinary step (not a view of another
// buffer, a loop or another Concat; not in an If branch), where the output has one block
// before the axis (batch 1 along channels), so that every input is one contiguous run of
// it. With more blocks before the axis (a batch of images along channels), an input is
// placed only when a fused convolution makes it (no pool, residual or fused mean: the
// step's one output) and the Concat is its only reader: the convolution writes each
// image's planes a Concat row apart (convBNKernel.ystride), which no other kernel would
// know to read (SqueezeNet's fire modules at batch 32 copied 50 MB a module at 55 × 55).
// Not in recording plans, whose backward pass keeps and releases buffers on its own
// terms.
func (sc *scheduler) concatInPlace(steps []step, lastUse []int, pinned []bool, owned func(int) bool) map[int]concatPart {
	p := sc.p
	prodStep := make(map[int]int)
	readers := make(map[int]int)
	for s := range steps {
		for _, id := range steps[s].node.out {
			prodStep[id] = s
		}
		for j, id := range steps[s].node.in {
			if id >= 0 && !slices.Contains(steps[s].node.in[:j], id) {
				readers[id]++
			}
		}
	}
	var parts map[int]concatPart
	for s := range steps {
		st := &steps[s]
		if _, ok := st.node.k.(*concatKernel); !ok || st.on != nil || len(st.node.out) != 1 {
			continue
		}
		out := p.vals[st.node.out[0]]
		a, ok := normAxis(st.node.k.(*concatKernel).axis, len(out.Shape))
		if !ok || out.DType != Float32 || !owned(st.node.out[0]) {
			continue
		}
		outer := numel(out.Shape[:a])
		if outer != 1 && (a != 1 || sc.g.noStridedConcat) {
			continue
		}
		_, inner := splitBlocks(out.Shape, a)
		row := out.Shape[a] * inner
		off := 0
		for j, id := range st.node.in {
			t := p.vals[id]
			ps, made := prodStep[id]
			if made && owned(id) && lastUse[id] == s && !pinned[id] && !slices.Contains(st.node.in[:j], id) &&
				!slices.Contains(st.node.in[j+1:], id) && steps[ps].on == nil && t.DType == Float32 {
				switch k := steps[ps].node.k.(type) {
				case *viewKernel, *runLoopKernel, *concatKernel:
					// A view of another buffer, a loop's own values, a Concat whose output
					// may itself be placed: left to copy.
				default:
					pt := concatPart{out: st.node.out[0], off: off, node: st.node}
					if outer != 1 {
						ck, conv := k.(*convBNKernel)
						if !conv || ck.pool != nil || ck.gap || ck.res || len(steps[ps].node.out) != 1 || readers[id] != 1 ||
							!ck.placeable(sc.val(steps[ps].node.in, 0), sc.val(steps[ps].node.in, 1), sc.val(steps[ps].node.in, 2)) {
							break
						}
						pt.stride, pt.conv = row, ck
					}
					if parts == nil {
						parts = map[int]concatPart{}
					}
					parts[id] = pt
				}
			}
			off += t.Shape[a] * inner // its share of a row, all of it at batch 1
		}
	}
	return parts
}

// val is the planned value of in[j], or nil when the input is absent.
func (sc *scheduler) val(in []int, j int) *Tensor {
	if j >= len(in) || in[j] < 0 {
		return nil
	}
	return sc.p.vals[in[j]]
}

// retains returns which inputs and outputs a kernel's Backward reads.
func retains(k Kernel, nin, nout int) (in, out []bool) {
	if r, ok := k.(Retainer); ok {
		in, out = r.Retains()
	}
	// Kernels that do not say, or say for fewer slots than the node has, keep the rest.
	for len(in) < nin {
		in = append(in, true)
	}
	for len(out) < nout {
		out = append(out, true)
	}
	return in, out
}

// gradValues marks the values that carry gradients among those steps compute: float
// values that depend on a source (a trainable parameter, or what a Loop body receives)
// through differentiable nodes and that some value of outIDs depends on the same way. It
// rejects graphs where a gradient would have to cross a node without a backward pass.
func (sc *scheduler) gradValues(steps []step, outIDs []int, source func(id int) bool) ([]bool, error) {
	p, konst := sc.p, sc.konst
	isFloat := func(id int) bool { return id >= 0 && p.vals[id].DType == Float32 && !konst[id] }
	fromParam := make([]bool, len(p.values))
	for id := range p.values {
		fromParam[id] = p.vals[id] != nil && isFloat(id) && source(id)
	}
	for s := range steps {
		gn := steps[s].node
		if slices.ContainsFunc(gn.in, func(id int) bool { return isFloat(id) && fromParam[id] }) {
			for _, id := range gn.out {
				fromParam[id] = isFloat(id)
			}
		}
	}
	toOut := make([]bool, len(p.values))
	for _, id := range outIDs {
		toOut[id] = isFloat(id)
	}
	for s := len(steps) - 1; s >= 0; s-- {
		gn := steps[s].node
		if !slices.ContainsFunc(gn.out, func(id int) bool { return toOut[id] && fromParam[id] }) {
			continue
		}
		if _, ok := gn.k.(Differentiable); !ok {
			for _, id := range gn.in {
				if isFloat(id) && fromParam[id] {
					return nil, fmt.Errorf("engine: %s: %s", sc.g.name, gn.n.Errorf("has no backward pass, but a trainable parameter's gradient must flow through it"))
				}
			}
			continue
		}
		for _, id := range gn.in {
			if isFloat(id) {
				toOut[id] = true
			}
		}
	}
	need := make([]bool, len(p.values))
	for id := range need {
		need[id] = fromParam[id] && toOut[id]
	}
	return need, nil
}

// markBackward decides whether a step runs in the backward pass.
func (g *Graph) markBackward(st *step, need []bool) {
	if _, ok := st.node.k.(Differentiable); !ok {
		return
	}
	anyIn := slices.ContainsFunc(st.node.in, func(id int) bool { return id >= 0 && need[id] })
	anyOut := slices.ContainsFunc(st.node.out, func(id int) bool { return need[id] })
	st.back = anyIn && anyOut
}

// backwardBuffers assigns gradient buffers in reverse order, reusing forward buffers that
// are dead once the forward pass is over. fixed gives the gradient buffer of a value that
// no step produces when it has one of its own (a parameter's Grad), else nil. It returns
// the gradient buffer of each value of outIDs (nil when none flows) and those of them to
// clear before the caller's gradients are added.
func (sc *scheduler) backwardBuffers(steps []step, outIDs []int, need []bool, pool *bufPool, fixed func(id int) *Tensor) (outGrads [][]*Tensor, zeroOuts []*Tensor, err error) {
	p := sc.p
	grads := make([]*Tensor, len(p.values))
	alloc := func(gn *gnode, id int) (*Tensor, bool, error) {
		if grads[id] != nil {
			return grads[id], false, nil
		}
		if t := fixed(id); t != nil {
			grads[id] = t
			return t, false, nil
		}
		t := &Tensor{DType: Float32, Shape: p.vals[id].Shape}
		if err := pool.get(gn, t); err != nil {
			return nil, false, err
		}
		grads[id] = t
		return t, true, nil
	}
	outGrads = make([][]*Tensor, len(outIDs))
	for i, id := range outIDs {
		if id < 0 || !need[id] {
			continue
		}
		t, fresh, err := alloc(p.prod[id], id)
		if err != nil {
			return nil, nil, err
		}
		if fresh {
			zeroOuts = append(zeroOuts, t)
		}
		outGrads[i] = []*Tensor{t}
	}
	for s := len(steps) - 1; s >= 0; s-- {
		st := &steps[s]
		if !st.back {
			continue
		}
		st.gout = make([]*Tensor, len(st.node.out))
		for j, id := range st.node.out {
			if need[id] {
				st.gout[j] = grads[id]
			}
		}
		st.gin = make([]*Tensor, len(st.node.in))
		for j, id := range st.node.in {
			if id < 0 || !need[id] {
				continue
			}
			t, fresh, err := alloc(st.node, id)
			if err != nil {
				return nil, nil, err
			}
			if fresh {
				st.zero = append(st.zero, t)
			}
			st.gin[j] = t
		}
		// The outputs' gradients are complete and consumed once this step is done.
		for j, id := range st.node.out {
			if t := st.gout[j]; t != nil && p.values[id].kind == kindNode && !slices.Contains(st.gout[:j], t) {
				pool.put(t)
			}
		}
		if sc.release != nil {
			for _, id := range sc.release[s] {
				pool.put(p.vals[id])
			}
		}
	}
	return outGrads, zeroOuts, nil
}

// nodeErr wraps a kernel error so that it names the model and, unless the kernel already
// did, the node.
func (g *Graph) nodeErr(gn *gnode, what string, err error) error {
	var me *MemoryError
	if errors.As(err, &me) {
		return err // it names the model and the node already
	}
	if strings.HasPrefix(err.Error(), "node ") {
		return fmt.Errorf("engine: %s: %w", g.name, err)
	}
	return fmt.Errorf("engine: %s: %s: %w", g.name, gn.n.Errorf("%s", what), err)
}
