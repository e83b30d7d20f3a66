package engine

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// Forward runs the graph on inputs, given in the order of Inputs, and returns its
// outputs in the order of Outputs. The outputs belong to the graph and stay valid until
// the next Forward.
//
// ctx may be nil, which means inference with the graph's Options. A Context's zero BLAS,
// Workers and Rand are filled from Options. With ctx.Training set, BatchNormalization
// uses batch statistics and updates its running statistics, and Dropout drops.
//
// When some parameter is trainable (SetTrainable) and ctx.NoGrad is not set, the run
// also keeps what Backward needs, in either mode: training mode gives the gradients of
// training, inference mode those of the model as deployed (BatchNormalization on running
// statistics). The inputs must then stay unchanged until Backward.
//
// The first run for an input signature (shapes, mode and the values of integer inputs,
// which usually hold shapes or indices) plans it: shape inference,
// constant folding and buffer assignment. Later runs with that signature allocate
// nothing.
//
// Inference runs that record nothing fold each BatchNormalization into the Conv before
// it, with a Relu or Clip that follows, when all their parameters are frozen (see
// fuse.go); the parameters are still read on every run, so in-place updates take effect,
// and the results differ from the unfused ones by float rounding only.
func (g *Graph) Forward(ctx *Context, inputs ...*Tensor) (outs []*Tensor, err error) {
	g.setContext(ctx)
	g.ready = false
	if g.foldsStale() {
		g.clearPlans()
	}
	p := g.last
	if p == nil || p.training != g.ctx.Training || p.record != g.record() || !p.matches(inputs) {
		if err := g.checkInputs(inputs, true); err != nil {
			return nil, err
		}
		if p, err = g.planFor(inputs); err != nil {
			return nil, err
		}
		g.last = p
	}
	for i, t := range inputs {
		if t.DType == Float32 {
			p.inVals[i].F = t.F
		}
	}
	var cur *step
	defer func() {
		if r := recover(); r != nil {
			if cur == nil {
				outs, err = nil, fmt.Errorf("engine: %s: internal error in forward pass: %v", g.name, r)
				return
			}
			outs, err = nil, fmt.Errorf("engine: %s: %s", g.name, cur.node.n.Errorf("internal error in forward pass: %v", r))
		}
	}()
	if err := forwardSteps(&g.ctx, p.steps, &cur); err != nil {
		return nil, g.nodeErr(cur.node, "forward", err)
	}
	g.ready = p.record
	return p.outs, nil
}

// record reports whether Forward keeps what Backward needs: whenever some parameter is
// trainable, unless the context says NoGrad.
func (g *Graph) record() bool {
	if g.ctx.NoGrad {
		return false
	}
	for _, p := range g.params {
		if p.Trainable {
			return true
		}
	}
	return false
}

// Backward propagates the loss gradients of the outputs (in the order of Outputs; nil for
// an output the loss does not depend on) back through the last Forward, and adds the
// gradients of the trainable parameters into their Grad. It needs a Forward made while
// some parameter was trainable, and runs once per Forward. The Context is as for Forward;
// only its BLAS and Workers matter.
func (g *Graph) Backward(ctx *Context, gradOutputs ...*Tensor) (err error) {
	if !g.ready {
		return fmt.Errorf("engine: %s: Backward needs a Forward with trainable parameters (SetTrainable) right before it, and runs once per Forward", g.name)
	}
	p := g.last
	if len(gradOutputs) != len(p.outs) {
		return fmt.Errorf("engine: %s: Backward got %d output gradients, the graph has %d outputs", g.name, len(gradOutputs), len(p.outs))
	}
	for i, t := range gradOutputs {
		if t == nil {
			continue
		}
		if t.DType != Float32 || !slices.Equal(t.Shape, p.outs[i].Shape) || len(t.F) != p.outs[i].Len() {
			return fmt.Errorf("engine: %s: gradient of output %q: got %s %v with %d values, want float32 %v", g.name, g.outputs[i].Name, t.DType, t.Shape, len(t.F), p.outs[i].Shape)
		}
	}
	g.setContext(ctx)
	g.ready = false
	for _, t := range p.zeroOuts {
		clear(t.F)
	}
	for i, t := range gradOutputs {
		if t == nil || p.outGrads[i] == nil {
			continue
		}
		dst := p.outGrads[i][0].F
		for j, v := range t.F {
			dst[j] += v
		}
	}
	var cur *step
	defer func() {
		if r := recover(); r != nil {
			if cur == nil {
				err = fmt.Errorf("engine: %s: internal error in backward pass: %v", g.name, r)
				return
			}
			err = fmt.Errorf("engine: %s: %s", g.name, cur.node.n.Errorf("internal error in backward pass: %v", r))
		}
	}()
	if err := backwardSteps(&g.ctx, p.steps, &cur); err != nil {
		return g.nodeErr(cur.node, "backward", err)
	}
	return nil
}

// forwardSteps runs steps in order; cur is left at the step that is running, for the
// caller's error messages.
func forwardSteps(ctx *Context, steps []step, cur **step) error {
	for s := range steps {
		*cur = &steps[s]
		if st := *cur; st.on == nil || *st.on { // else a branch of an If that this run does not take
			var t0 time.Time
			if ctx.NodeTime != nil {
				t0 = time.Now()
			}
			if err := st.node.k.Forward(ctx, st.in, st.out); err != nil {
				return err
			}
			if ctx.NodeTime != nil {
				ctx.NodeTime(st.node.n.Proto.GetName(), st.node.op, time.Since(t0))
			}
		}
	}
	return nil
}

// backwardSteps runs the backward pass of steps in reverse order; cur is as for
// forwardSteps.
func backwardSteps(ctx *Context, steps []step, cur **step) error {
	for s := len(steps) - 1; s >= 0; s-- {
		st := &steps[s]
		*cur = st
		if !st.back {
			continue
		}
		for _, t := range st.zero {
			ctx.clearGrad(t.F)
		}
		if st.on != nil && !*st.on {
			continue // an untaken branch adds nothing, but the buffers it starts are cleared
		}
		if err := st.node.k.(Differentiable).Backward(ctx, st.in, st.out, st.gout, st.gin); err != nil {
			return err
		}
	}
	return nil
}

// A step's gradient buffers are cleared before the first kernel adds into them. Cleared
// on the caller's thread alone, they were 4 % of fmnist-resnet's training step at batch
// 256 (CPU profile) while the other workers spun; large ones are split over the workers.
// Its function is made once per graph, so that clearing allocates nothing.
type gradZeroer struct {
	f  []float32
	fn func(lo, hi int)
}

// gradZeroGrain is the least chunk of a split clear, 256 KiB: smaller clears cost less
// than handing them to a worker.
const gradZeroGrain = 1 << 16

// clearGrad sets f to zeros, over the workers when it holds two chunks or more.
func (ctx *Context) clearGrad(f []float32) {
	z := ctx.zero
	if z == nil || ctx.Workers < 2 || len(f) < 2*gradZeroGrain {
		clear(f)
		return
	}
	if z.fn == nil {
		z.fn = func(lo, hi int) { clear(z.f[lo:hi]) }
	}
	z.f = f
	ctx.Parallel(len(f), gradZeroGrain, z.fn)
	z.f = nil
}

// setContext copies the caller's context and fills what it leaves unset from Options.
func (g *Graph) setContext(ctx *Context) {
	if ctx == nil {
		g.ctx = Context{}
	} else {
		g.ctx = *ctx
	}
	if g.ctx.BLAS == nil {
		g.ctx.BLAS = g.opts.BLAS
	}
	if g.ctx.Workers < 1 {
		g.ctx.Workers = g.opts.Workers
	}
	if g.ctx.Rand == nil {
		g.ctx.Rand = g.rand
	}
	if w := g.ctx.Workers - 1; w > 0 && (g.pool == nil || len(g.pool.workers) != w) {
		if g.pool != nil {
			g.pool.close()
		}
		g.pool = newWorkerPool(w)
		runtime.AddCleanup(g, (*workerPool).close, g.pool)
	}
	g.ctx.pool = g.pool
	if !g.noArena {
		g.ctx.arena = &g.arena
	}
	g.ctx.zero = &g.zero
}

// matches reports whether the inputs have the plan's shapes and types.
func (p *plan) matches(inputs []*Tensor) bool {
	if len(inputs) != len(p.inVals) {
		return false
	}
	for i, t := range inputs {
		v := p.inVals[i]
		if t == nil || t.DType != v.DType || !slices.Equal(t.Shape, v.Shape) {
			return false
		}
		if t.DType == Int64 {
			if !slices.Equal(t.I, v.I) {
				return false
			}
		} else if len(t.F) != v.Len() {
			return false
		}
	}
	return true
}

// planFor returns the cached plan for the inputs' signature, making it on first use.
func (g *Graph) planFor(inputs []*Tensor) (*plan, error) {
	b := g.keyBuf[:0]
	if g.ctx.Training {
		b = append(b, 'T')
	}
	if g.record() {
		b = append(b, 'R')
	}
	for _, t := range inputs {
		b = append(b, byte('0'+t.DType), '[')
		for _, d := range t.Shape {
			b = strconv.AppendInt(b, int64(d), 10)
			b = append(b, ',')
		}
		b = append(b, ']')
		for _, v := range t.I {
			b = strconv.AppendInt(b, v, 10)
			b = append(b, ',')
		}
	}
	g.keyBuf = b
	if p, ok := g.plans[string(b)]; ok {
		return p, nil
	}
	p, err := g.makePlan(inputs, g.ctx.Training, g.record(), false)
	if err != nil {
		return nil, err
	}
	if len(g.plans) >= maxPlans {
		clear(g.plans)
		g.cached = 0
	}
	g.plans[string(b)] = p
	g.cached += p.bytes
	return p, nil
}

// PlanBytes returns the bytes that the plan of a Forward with ctx and inputs allocates,
// as Options.MaxBytes counts them, without allocating its buffers; a plan over the limit
// gives its *MemoryError. The inputs need only their shapes and types (float data may be
// nil); integer inputs need their values, which shapes may depend on. Like Forward, the
// plan records for Backward when some parameter is trainable and ctx.NoGrad is not set.
func (g *Graph) PlanBytes(ctx *Context, inputs ...*Tensor) (int64, error) {
	if err := g.checkInputs(inputs, false); err != nil {
		return 0, err
	}
	saved, ready := g.ctx, g.ready
	defer func() { g.ctx, g.ready = saved, ready }()
	g.setContext(ctx)
	p, err := g.makePlan(inputs, g.ctx.Training, g.record(), true)
	if err != nil {
		return 0, err
	}
	return p.bytes, nil
}

// checkInputs validates the inputs against the model's declared inputs; without data,
// float inputs may carry only their shape.
func (g *Graph) checkInputs(inputs []*Tensor, data bool) error {
	if len(inputs) != len(g.inputs) {
		return fmt.Errorf("engine: %s: got %d inputs, the model takes %d (%s)", g.name, len(inputs), len(g.inputs), g.inputNames())
	}
	for i, t := range inputs {
		info := g.inputs[i]
		if t == nil {
			return fmt.Errorf("engine: %s: input %q is nil", g.name, info.Name)
		}
		if t.DType != info.DType {
			return fmt.Errorf("engine: %s: input %q holds %s values, the model declares %s", g.name, info.Name, t.DType, info.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("engine: %s: input %q has a negative dimension in shape %v", g.name, info.Name, t.Shape)
			}
		}
		n := len(t.F)
		if t.DType == Int64 {
			n = len(t.I)
		}
		if _, ok := shapeElems(t.Shape); !ok {
			return &MemoryError{Model: g.name, Input: info.Name, Shape: t.Shape, Bytes: -1, Limit: g.maxBytes()}
		}
		if (data || t.DType == Int64) && n != t.Len() {
			return fmt.Errorf("engine: %s: input %q has %d values, its shape %v needs %d", g.name, info.Name, n, t.Shape, t.Len())
		}
		if info.Shape == nil {
			continue
		}
		if len(t.Shape) != len(info.Shape) {
			return fmt.Errorf("engine: %s: input %q has shape %v (rank %d), the model declares %s (rank %d)", g.name, info.Name, t.Shape, len(t.Shape), dimString(info.Shape), len(info.Shape))
		}
		for j, d := range info.Shape {
			if d >= 0 && t.Shape[j] != d {
				return fmt.Errorf("engine: %s: input %q has shape %v, the model declares %s: dimension %d is %d, want %d", g.name, info.Name, t.Shape, dimString(info.Shape), j, t.Shape[j], d)
			}
		}
	}
	return nil
}

func (g *Graph) inputNames() string {
	var b []byte
	for i, in := range g.inputs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, in.Name)
	}
	return string(b)
}

// dimString formats a declared shape with "?" for free dimensions.
func dimString(shape []int) string {
	b := []byte{'['}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ' ')
		}
		if d < 0 {
			b = append(b, '?')
		} else {
			b = strconv.AppendInt(b, int64(d), 10)
		}
	}
	return string(append(b, ']'))
}
