package engine

import (
	"errors"
	"fmt"
	"slices"
)

// A Loop whose trip count or condition is known only at run time (a torch.jit.script
// `while`, a count computed from tensor values), or that is too long to unroll, runs as
// one step: its body is planned once, with the iteration number, the condition and the
// loop-carried values as run-time values (formals) of fixed shapes, and the step runs the
// body's steps once per iteration. The body's values are values of the plan, so that the
// body reads the values of enclosing graphs directly; its buffers come from a pool of
// its own, counted in the plan's bytes.
//
// For the gradient, each iteration's loop-carried values are kept (nothing else: the
// bytes grow with the iterations run, which are unknown when planning, so they are
// checked against what the plan leaves of the memory limit as the loop runs). Backward
// walks the iterations in reverse, recomputes each one's body from its kept values, which
// also restores the state kernels keep between Forward and Backward, and runs the body's
// backward steps, carrying the loop-carried values' gradients to the iteration before.
// The body's gradients of the values it reads from enclosing graphs accumulate over the
// iterations and are added into the step's input gradients at the end.

// errRunTime reports that an unrolled Loop turns out to need running at run time.
var errRunTime = errors.New("the loop must run at run time")

type runLoopKernel struct {
	gn    *gnode
	nc    int   // loop-carried values
	trip  int64 // the plan-time trip count, which the scan outputs' length is; -1 without scan outputs
	start int   // plan values from here on are the body's

	run    []*gnode // the body's planned nodes, scheduled with the plan's steps
	guards []*bool
	// formals are the plan values the body receives (iteration, condition, carried),
	// outs those it returns (condition, carried, the scan outputs the node uses), free
	// those of enclosing graphs it reads: the step's inputs after the carried ones.
	formals, outs, free []int

	b            *budget
	steps        []step
	fIter, fCond *Tensor
	outVals      []*Tensor // the tensors of outs
	fCarry       []*Tensor
	next         []*Tensor // the carried outputs, staged: the body may permute them
	iters        int

	// Recording only.
	record    bool
	saved     [][]*Tensor // per iteration run: the carried values it started from
	outGrads  [][]*Tensor // per body output: its gradient buffer, nil when none flows
	zeroOuts  []*Tensor
	carryGrad []*Tensor // gradients of the carried formals (nil: none), per iteration
	freeGrad  []*Tensor // gradients of free, accumulated over the iterations
	gcarry    []*Tensor // the carried values' gradients passed between iterations
}

// runLoop plans a Loop that runs at run time.
func (x *expander) runLoop(inst, tmpl *gnode, k *loopKernel, env *scope, on *bool) error {
	p := x.p
	nc := max(len(inst.in)-2, 0)
	nscan := max(len(tmpl.out)-nc, 0)
	trip := int64(-1)
	if nscan > 0 {
		M := inst.in[0]
		if M < 0 || !x.konst[M] {
			return x.errorf(inst, "the trip count is computed at run time and the loop has scan outputs, whose length would then depend on the data; qtool plans every shape before running")
		}
		trip = max(p.vals[M].I[0], 0)
	}
	rk := &runLoopKernel{nc: nc, trip: trip, start: len(p.values), b: x.b}
	formal := func(tmplID int, dt DType, shape []int) int {
		id := x.newValue(tmplID, nil)
		p.vals[id] = &Tensor{DType: dt, Shape: slices.Clone(shape)}
		rk.formals = append(rk.formals, id)
		return id
	}
	formal(k.body.in[0], Int64, []int{})
	formal(k.body.in[1], Int64, []int{})
	for j := range nc {
		v := p.vals[inst.in[2+j]]
		formal(k.body.in[2+j], v.DType, v.Shape)
	}
	first := len(x.run)
	outs, err := x.body(k.body, env, rk.formals, nil)
	if err != nil {
		return err
	}
	x.cur = inst
	rk.run, rk.guards = slices.Clone(x.run[first:]), slices.Clone(x.guards[first:])
	x.run, x.guards = x.run[:first], x.guards[:first]
	if c := p.vals[outs[0]]; c.Len() != 1 {
		return x.errorf(inst, "the body's condition has shape %v, want a single value", c.Shape)
	}
	for j := range nc {
		f, o := p.vals[rk.formals[2+j]], p.vals[outs[1+j]]
		if f.DType != o.DType || !slices.Equal(f.Shape, o.Shape) {
			return x.errorf(inst, "loop-carried value %d enters the body as %s %v and leaves it as %s %v; a Loop that runs at run time needs the same shape in every iteration", j, f.DType, f.Shape, o.DType, o.Shape)
		}
	}
	rk.outs = outs[:1+nc+nscan]
	seen := map[int]bool{}
	addFree := func(id int) {
		if id >= 0 && id < rk.start && !x.konst[id] && !seen[id] {
			seen[id] = true
			rk.free = append(rk.free, id)
		}
	}
	for _, gn := range rk.run {
		for _, id := range gn.in {
			addFree(id)
		}
	}
	for _, id := range rk.outs {
		addFree(id)
	}

	head := []int{-1, -1} // the trip count and the condition, when given
	copy(head, inst.in)
	gn := &gnode{n: inst.n, op: inst.op, k: rk, in: slices.Concat(head, inst.in[min(2, len(inst.in)):], rk.free)}
	rk.gn = gn
	for j, o := range tmpl.out {
		var t *Tensor
		if j < nc {
			t = &Tensor{DType: p.vals[outs[1+j]].DType, Shape: slices.Clone(p.vals[outs[1+j]].Shape)}
		} else {
			s := p.vals[outs[1+j]]
			t = &Tensor{DType: s.DType, Shape: append([]int{int(trip)}, s.Shape...)}
		}
		if _, err := x.b.tensor(gn, "", t.DType, t.Shape); err != nil {
			return err
		}
		var id int
		if o < 0 {
			id = x.newValue(-1, gn)
		} else {
			id = x.define(env, o, gn)
		}
		if env == nil && o >= 0 {
			p.prod[o] = gn
		}
		p.vals[id] = t
		gn.out = append(gn.out, id)
	}
	x.run, x.guards = append(x.run, gn), append(x.guards, on)
	return nil
}

func (k *runLoopKernel) Infer([]*Tensor) ([]*Tensor, error) {
	return nil, errors.New("internal error: a run-time Loop is planned by the expander")
}

// Retains: Backward recomputes the body, which reads the values of enclosing graphs.
func (k *runLoopKernel) Retains() (in, out []bool) {
	in = make([]bool, 2+k.nc+len(k.free))
	for j := 2 + k.nc; j < len(in); j++ {
		in[j] = true
	}
	return in, make([]bool, len(k.gn.out))
}

// schedule makes the body's steps and buffers once the plan knows which values carry
// gradients (outerNeed, nil when the plan does not record) and whether st runs backward.
func (k *runLoopKernel) schedule(sc *scheduler, st *step, outerNeed []bool) error {
	p := sc.p
	k.record = outerNeed != nil && st.back
	if k.record && sc.training {
		for _, gn := range k.run {
			if noFold(gn.op, true) {
				return fmt.Errorf("engine: %s: %s", sc.g.name, k.gn.n.Errorf("runs at run time and its body holds %s node %q in training mode: the gradient recomputes the body, which would draw other masks or update the statistics twice; train it in inference mode", gn.op, gn.n.Name()))
			}
		}
	}
	k.steps = sc.prune(k.run, k.guards, k.outs)
	isFormal := func(id int) bool { return slices.Contains(k.formals, id) }
	var need []bool
	if k.record {
		var err error
		source := func(id int) bool { return isFormal(id) || (id < k.start && outerNeed[id]) }
		if need, err = sc.gradValues(k.steps, k.outs, source); err != nil {
			return err
		}
	}
	pool := sc.newPool(sc.b)
	k.fIter, k.fCond = p.vals[k.formals[0]], p.vals[k.formals[1]]
	k.fCarry = make([]*Tensor, k.nc)
	k.next = make([]*Tensor, k.nc)
	for j := range k.nc {
		k.fCarry[j] = p.vals[k.formals[2+j]]
		k.next[j] = &Tensor{DType: k.fCarry[j].DType, Shape: k.fCarry[j].Shape}
	}
	for _, t := range slices.Concat([]*Tensor{k.fIter, k.fCond}, k.fCarry, k.next) {
		if err := pool.get(k.gn, t); err != nil {
			return err
		}
	}
	if err := sc.forwardBuffers(k.steps, k.outs, k.formals, need, pool); err != nil {
		return err
	}
	k.outVals = make([]*Tensor, len(k.outs))
	for j, id := range k.outs {
		k.outVals[j] = p.vals[id]
	}
	if !k.record {
		return nil
	}
	// The gradients of the formals and of the values read from enclosing graphs outlive
	// one iteration's backward pass, so they get buffers of their own.
	sinks := sc.newPool(sc.b)
	own := map[int]*Tensor{}
	fixed := func(id int) *Tensor {
		if !isFormal(id) && id >= k.start {
			return nil
		}
		t := &Tensor{DType: Float32, Shape: p.vals[id].Shape}
		if sinks.get(k.gn, t) != nil {
			return nil // over the limit: the pool's get reports it below
		}
		own[id] = t
		return t
	}
	var err error
	if k.outGrads, k.zeroOuts, err = sc.backwardBuffers(k.steps, k.outs, need, pool, fixed); err != nil {
		return err
	}
	if b := sc.b; b.total > b.limit {
		return b.err(k.gn, "", nil, b.total, true)
	}
	k.carryGrad = make([]*Tensor, k.nc)
	k.gcarry = make([]*Tensor, k.nc)
	for j := range k.nc {
		k.carryGrad[j] = own[k.formals[2+j]]
		if k.fCarry[j].DType == Float32 {
			k.gcarry[j] = &Tensor{DType: Float32, Shape: k.fCarry[j].Shape}
			if err := sinks.get(k.gn, k.gcarry[j]); err != nil {
				return err
			}
		}
	}
	k.freeGrad = make([]*Tensor, len(k.free))
	for f, id := range k.free {
		k.freeGrad[f] = own[id]
	}
	return nil
}

// Forward runs the iterations.
func (k *runLoopKernel) Forward(ctx *Context, in, out []*Tensor) error {
	m := int64(-1) // no trip count: the condition alone ends the loop
	if in[0] != nil {
		m = max(in[0].I[0], 0)
	}
	cond := in[1] == nil || truthy(in[1])
	for j, t := range k.fCarry {
		copyData(t, in[2+j])
	}
	k.iters = 0
	var cur *step
	for i := int64(0); cond && (m < 0 || i < m); i++ {
		k.fIter.I[0], k.fCond.I[0] = i, 1
		if k.record {
			if err := k.save(int(i)); err != nil {
				return err
			}
		}
		if err := forwardSteps(ctx, k.steps, &cur); err != nil {
			return k.stepErr("forward", i, cur, err)
		}
		cond = truthy(k.val(0))
		for s := k.nc; s < len(out); s++ {
			if i >= k.trip {
				return k.gn.n.Errorf("runs more than the %d iterations its scan outputs were planned for", k.trip)
			}
			copyAt(out[s], k.val(1+s), int(i))
		}
		for j, t := range k.next {
			copyData(t, k.val(1+j))
		}
		for j, t := range k.fCarry {
			copyData(t, k.next[j])
		}
		k.iters++
	}
	if len(out) > k.nc && int64(k.iters) != k.trip {
		return k.gn.n.Errorf("stopped after %d of %d iterations, so its scan outputs are shorter than planned; qtool plans every shape before running, and cannot run a Loop whose scan outputs' length depends on the data", k.iters, k.trip)
	}
	for j := range k.nc {
		copyData(out[j], k.fCarry[j])
	}
	return nil
}

// val is the tensor of the body's output j in the iteration just run.
func (k *runLoopKernel) val(j int) *Tensor { return k.outVals[j] }

// save keeps the carried values that iteration i starts from, growing the store on the
// first run that goes this far.
func (k *runLoopKernel) save(i int) error {
	if i == len(k.saved) {
		var bytes int64
		for _, t := range k.fCarry {
			bytes += int64(t.Len()) * elemBytes(t.DType)
		}
		if left := k.b.limit - k.b.total; int64(i+1)*bytes > left {
			return k.b.err(k.gn, "", k.fCarry[0].Shape, k.b.total+int64(i+1)*bytes, true)
		}
		kept := make([]*Tensor, len(k.fCarry))
		for j, t := range k.fCarry {
			kept[j] = &Tensor{DType: t.DType, Shape: t.Shape, F: make([]float32, len(t.F)), I: make([]int64, len(t.I))}
		}
		k.saved = append(k.saved, kept)
	}
	for j, t := range k.fCarry {
		copyData(k.saved[i][j], t)
	}
	return nil
}

func (k *runLoopKernel) stepErr(what string, i int64, cur *step, err error) error {
	return k.gn.n.Errorf("iteration %d: %s: %v", i, cur.node.n.Errorf("%s", what), err)
}

// Backward runs the iterations' backward passes in reverse order.
func (k *runLoopKernel) Backward(ctx *Context, in, _, gout, gin []*Tensor) error {
	for j, g := range k.gcarry {
		if g == nil {
			continue
		}
		clear(g.F)
		if gout[j] != nil {
			copy(g.F, gout[j].F)
		}
	}
	for _, t := range k.freeGrad {
		if t != nil {
			clear(t.F)
		}
	}
	var cur *step
	for i := k.iters - 1; i >= 0; i-- {
		k.fIter.I[0], k.fCond.I[0] = int64(i), 1
		for j, t := range k.fCarry {
			copyData(t, k.saved[i][j])
		}
		if err := forwardSteps(ctx, k.steps, &cur); err != nil {
			return k.stepErr("forward", int64(i), cur, err)
		}
		for _, t := range slices.Concat(k.carryGrad, k.zeroOuts) {
			if t != nil {
				clear(t.F)
			}
		}
		for j, g := range k.outGrads {
			if g == nil || j == 0 {
				continue
			}
			var src []float32
			if j <= k.nc {
				if k.gcarry[j-1] == nil {
					continue
				}
				src = k.gcarry[j-1].F
			} else if s := gout[j-1]; s != nil {
				n := g[0].Len()
				src = s.F[i*n : (i+1)*n]
			}
			for e, v := range src {
				g[0].F[e] += v
			}
		}
		if err := backwardSteps(ctx, k.steps, &cur); err != nil {
			return k.stepErr("backward", int64(i), cur, err)
		}
		for j, g := range k.gcarry {
			if g == nil {
				continue
			}
			if k.carryGrad[j] == nil {
				clear(g.F)
			} else {
				copy(g.F, k.carryGrad[j].F)
			}
		}
	}
	for j, g := range k.gcarry {
		if g != nil && gin[2+j] != nil {
			addTo(gin[2+j].F, g.F)
		}
	}
	for f, g := range k.freeGrad {
		if g != nil && gin[2+k.nc+f] != nil {
			addTo(gin[2+k.nc+f].F, g.F)
		}
	}
	return nil
}

// copyAt copies src into the i-th slice along dst's first axis.
func copyAt(dst, src *Tensor, i int) {
	n := src.Len()
	if src.DType == Int64 {
		copy(dst.I[i*n:(i+1)*n], src.I)
	} else {
		copy(dst.F[i*n:(i+1)*n], src.F)
	}
}
