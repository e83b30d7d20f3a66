package engine

import (
	"errors"
	"fmt"
	"slices"
)

// maxUnroll bounds the iterations of one unrolled Loop, so that a loop whose condition
// stays true forever (or a huge trip count over an empty body) fails instead of hanging
// the planner; the memory limit bounds every other loop.
const maxUnroll = 1 << 16

// unrollBytes is charged to the plan's memory budget for every node copied out of a
// control-flow body: the step, node and tensor headers that the copy costs, so that
// unrolling a Loop is bounded by Options.MaxBytes even when its buffers are reused.
const unrollBytes = 512

// scope maps the value ids of a body (as Build compiled it) to the plan's ids of one copy
// of it; ids a body does not define resolve in the enclosing copy, and at the top level
// through the plan's remap.
type scope struct {
	parent *scope
	m      map[int]int
}

// expander makes the flat node list of a plan: it infers shapes and folds constants
// node by node, and expands control flow as the conditions and trip counts become known.
type expander struct {
	g        *Graph
	p        *plan
	b        *budget
	konst    []bool
	training bool
	// foldFrozen lets nodes fold through frozen float parameters (inference plans that
	// record nothing; see plain). pure marks the values folded from parameters and
	// constants alone, chained those of them that read a frozen float parameter on the
	// way, and folded lists the nodes of the pure ones, for makePlan to keep (chained, in
	// the graph's folds) the outputs that steps read and to drop the rest.
	foldFrozen bool
	left       []int // per graph value: the graph's nodes that read it and are not yet planned
	pure       map[int]bool
	chained    map[int]bool
	folded     []*gnode
	ctx        *Context
	remap      []int // top-level value id → plan value id (If outputs become their branch's)
	run        []*gnode
	guards     []*bool // per run entry: the flag that must be true for it to run, or nil
	cur        *gnode  // the node being planned, for error messages
}

func (x *expander) resolve(env *scope, id int) int {
	if id < 0 {
		return id
	}
	for s := env; s != nil; s = s.parent {
		if v, ok := s.m[id]; ok {
			return v
		}
	}
	return x.remap[id]
}

// newValue adds a plan value that copies body value tmpl.
func (x *expander) newValue(tmpl int, prod *gnode) int {
	name := ""
	if tmpl >= 0 {
		name = x.p.values[tmpl].name
	}
	x.p.values = append(x.p.values, value{name: name, kind: kindNode, index: -1})
	x.p.vals = append(x.p.vals, nil)
	x.p.prod = append(x.p.prod, prod)
	x.konst = append(x.konst, false)
	return len(x.p.values) - 1
}

// constValue adds a plan-time constant.
func (x *expander) constValue(t *Tensor) int {
	id := x.newValue(-1, nil)
	x.p.vals[id], x.konst[id] = t, true
	return id
}

// define gives body value tmpl its id in the copy env: the template's own at the top
// level, a fresh one in a body.
func (x *expander) define(env *scope, tmpl int, prod *gnode) int {
	if env == nil {
		return tmpl
	}
	id := x.newValue(tmpl, prod)
	env.m[tmpl] = id
	return id
}

// alias makes body value tmpl stand for plan value id in env (an If's output is its
// taken branch's, a Loop's final value its last iteration's).
func (x *expander) alias(env *scope, tmpl, id int) {
	if env == nil {
		x.remap[tmpl] = id
		return
	}
	env.m[tmpl] = id
}

// node plans one node of the graph or of a copy of a body (env), whose steps run only
// when on is nil or true.
func (x *expander) node(gn *gnode, env *scope, on *bool) error {
	inst := gn
	remapped := env != nil || slices.ContainsFunc(gn.in, func(id int) bool { return id >= 0 && x.remap[id] != id })
	if remapped {
		inst = &gnode{n: gn.n, op: gn.op, k: gn.k, in: make([]int, len(gn.in)), out: slices.Clone(gn.out)}
		for j, id := range gn.in {
			inst.in[j] = x.resolve(env, id)
		}
	}
	x.cur = inst
	switch k := gn.k.(type) {
	case *ifKernel:
		return x.ifNode(inst, gn, k, env, on)
	case *loopKernel:
		return x.loopNode(inst, gn, k, env, on)
	case *scanKernel:
		return x.scanNode(inst, gn, k, env, on)
	}
	if env != nil {
		if err := x.b.add(inst, "", nil, unrollBytes); err != nil {
			return err
		}
		for j, id := range gn.out {
			inst.out[j] = x.define(env, id, inst)
		}
	}
	return x.plain(inst, on)
}

// body plans a copy of b whose formal inputs are the plan values formals, and returns the
// plan values of its outputs.
func (x *expander) body(b *body, env *scope, formals []int, on *bool) ([]int, error) {
	s := &scope{parent: env, m: map[int]int{}}
	for i, f := range b.in {
		s.m[f] = formals[i]
	}
	for i := range b.nodes {
		if err := x.node(&b.nodes[i], s, on); err != nil {
			return nil, err
		}
	}
	outs := make([]int, len(b.out))
	for j, o := range b.out {
		outs[j] = x.resolve(s, o)
	}
	return outs, nil
}

// ifNode plans an If: only the taken branch when the condition is a plan-time constant,
// both branches behind a guard otherwise.
func (x *expander) ifNode(inst, tmpl *gnode, k *ifKernel, env *scope, on *bool) error {
	c := inst.in[0]
	if x.p.vals[c].Len() != 1 {
		return x.errorf(inst, "the condition has shape %v, want a single value", x.p.vals[c].Shape)
	}
	if x.konst[c] {
		br := k.els
		if truthy(x.p.vals[c]) {
			br = k.then
		}
		outs, err := x.body(br, env, nil, on)
		if err != nil {
			return err
		}
		for j, o := range tmpl.out {
			x.alias(env, o, outs[j])
		}
		return nil
	}
	// The condition is known only at run time (it depends on the data or on a float
	// parameter): both branches are planned, and each step of a branch runs only when
	// the guard's flag for it is set. Their outputs must agree in shape, because the
	// plan's buffers and the consumers' shapes are fixed for the input signature.
	guard := &guardKernel{parent: on}
	gi := &gnode{n: inst.n, op: inst.op, k: guard, in: []int{c}}
	gi.out = []int{x.newValue(-1, gi)}
	if err := x.plain(gi, nil); err != nil {
		return err
	}
	thenOuts, err := x.body(k.then, env, nil, &guard.flags[0])
	if err != nil {
		return err
	}
	elseOuts, err := x.body(k.els, env, nil, &guard.flags[1])
	if err != nil {
		return err
	}
	x.cur = inst
	for j, o := range tmpl.out {
		t, e := x.p.vals[thenOuts[j]], x.p.vals[elseOuts[j]]
		if t.DType != e.DType || !slices.Equal(t.Shape, e.Shape) {
			return x.errorf(inst, "the condition is known only at run time, and output %d is %s %v in then_branch but %s %v in else_branch; qtool needs both branches to give the same shapes", j, t.DType, t.Shape, e.DType, e.Shape)
		}
		sel := &gnode{n: inst.n, op: inst.op, k: selectKernel{}, in: []int{gi.out[0], thenOuts[j], elseOuts[j]}}
		sel.out = []int{x.define(env, o, sel)}
		if env == nil {
			x.p.prod[o] = sel
		}
		if err := x.plain(sel, on); err != nil {
			return err
		}
	}
	return nil
}

// loopNode unrolls a Loop whose trip count and condition are plan-time constants, and
// plans the others, and those too long to unroll, to run at run time (loop_runtime.go).
func (x *expander) loopNode(inst, tmpl *gnode, k *loopKernel, env *scope, on *bool) error {
	M, cond := -1, -1
	if len(inst.in) > 0 {
		M = inst.in[0]
	}
	if len(inst.in) > 1 {
		cond = inst.in[1]
	}
	if M >= 0 && (x.p.vals[M].DType != Int64 || x.p.vals[M].Len() != 1) {
		return x.errorf(inst, "the trip count is %s %v, want one integer", x.p.vals[M].DType, x.p.vals[M].Shape)
	}
	if cond >= 0 && x.p.vals[cond].Len() != 1 {
		return x.errorf(inst, "the condition has shape %v, want a single value", x.p.vals[cond].Shape)
	}
	if (M < 0 || x.konst[M]) && (cond < 0 || x.konst[cond]) && !x.g.noUnroll {
		m := x.mark()
		err := x.unroll(inst, tmpl, k, env, on, M, cond)
		var me *MemoryError
		if err == nil || !(errors.Is(err, errRunTime) || errors.As(err, &me)) {
			return err
		}
		x.rollback(m)
	}
	return x.runLoop(inst, tmpl, k, env, on)
}

// unroll plans one copy of the body per iteration; it returns errRunTime when the body
// computes the condition at run time or the loop runs more than maxUnroll iterations.
func (x *expander) unroll(inst, tmpl *gnode, k *loopKernel, env *scope, on *bool, M, cond int) error {
	m := int64(-1) // no trip count: the condition alone ends the loop
	if M >= 0 {
		m = x.p.vals[M].I[0]
	}
	if cond < 0 {
		cond = x.constValue(NewInt([]int{}, []int64{1}))
	}
	var carried []int
	if len(inst.in) > 2 {
		carried = slices.Clone(inst.in[2:])
	}
	nc := len(carried)
	scans := make([][]int, len(k.body.out)-1-nc)
	for i := int64(0); truthy(x.p.vals[cond]) && (m < 0 || i < m); i++ {
		if i >= maxUnroll {
			return errRunTime
		}
		iter := x.constValue(NewInt([]int{}, []int64{i}))
		outs, err := x.body(k.body, env, append([]int{iter, cond}, carried...), on)
		if err != nil {
			return err
		}
		x.cur = inst
		if cond = outs[0]; x.p.vals[cond].Len() != 1 {
			return x.errorf(inst, "the body's condition has shape %v, want a single value", x.p.vals[cond].Shape)
		}
		if !x.konst[cond] {
			return errRunTime
		}
		carried = outs[1 : 1+nc]
		for s := range scans {
			scans[s] = append(scans[s], outs[1+nc+s])
		}
	}
	for j, o := range tmpl.out {
		if j < nc {
			x.alias(env, o, carried[j])
			continue
		}
		s := j - nc
		if len(scans[s]) == 0 {
			return x.errorf(inst, "runs no iteration but has scan outputs, whose shape qtool cannot know")
		}
		if err := x.stack(inst, o, scans[s], 0, env, on); err != nil {
			return err
		}
	}
	return nil
}

// stack plans the node's output tmpl as the values vals stacked along axis.
func (x *expander) stack(inst *gnode, tmpl int, vals []int, axis int, env *scope, on *bool) error {
	st := &gnode{n: inst.n, op: inst.op, k: stackKernel{n: len(vals), axis: axis}, in: vals}
	st.out = []int{x.define(env, tmpl, st)}
	if env == nil {
		x.p.prod[tmpl] = st
	}
	return x.plain(st, on)
}

// scanNode unrolls a Scan: its length is the scan inputs' along their axes, known when
// planning.
func (x *expander) scanNode(inst, tmpl *gnode, k *scanKernel, env *scope, on *bool) error {
	p := x.p
	nState := len(inst.in) - k.nScan
	length := -1
	axes := make([]int, k.nScan)
	for j, id := range inst.in[nState:] {
		shape := p.vals[id].Shape
		a := int(k.inAxes[j])
		if a < 0 {
			a += len(shape)
		}
		if a < 0 || a >= len(shape) {
			return x.errorf(inst, "scan input %d has shape %v, which has no axis %d", j, shape, k.inAxes[j])
		}
		if length >= 0 && shape[a] != length {
			return x.errorf(inst, "scan input %d has %d slices along its axis, scan input 0 has %d", j, shape[a], length)
		}
		axes[j], length = a, shape[a]
	}
	if length == 0 {
		return x.errorf(inst, "its scan inputs are empty, so its scan outputs' shape cannot be known")
	}
	if length > maxUnroll {
		return x.errorf(inst, "runs %d iterations; qtool unrolls Scan and refuses more than %d", length, maxUnroll)
	}
	states := slices.Clone(inst.in[:nState])
	scans := make([][]int, len(k.outAxes))
	for t := range length {
		formals := slices.Clone(states)
		for j, id := range inst.in[nState:] {
			idx := t
			if k.inDirs[j] == 1 {
				idx = length - 1 - t
			}
			tk := &gnode{n: inst.n, op: inst.op, k: takeKernel{axis: axes[j], index: idx}, in: []int{id}}
			if err := x.b.add(tk, "", nil, unrollBytes); err != nil {
				return err
			}
			tk.out = []int{x.newValue(-1, tk)}
			if err := x.plain(tk, on); err != nil {
				return err
			}
			formals = append(formals, tk.out[0])
		}
		outs, err := x.body(k.body, env, formals, on)
		if err != nil {
			return err
		}
		x.cur = inst
		states = outs[:nState]
		for s := range scans {
			scans[s] = append(scans[s], outs[nState+s])
		}
	}
	for j, o := range tmpl.out {
		if j < nState {
			x.alias(env, o, states[j])
			continue
		}
		s := j - nState
		vals := scans[s]
		if k.outDirs[s] == 1 {
			vals = slices.Clone(vals)
			slices.Reverse(vals)
		}
		a := int(k.outAxes[s])
		if a < 0 {
			a += len(p.vals[vals[0]].Shape) + 1
		}
		if a < 0 || a > len(p.vals[vals[0]].Shape) {
			return x.errorf(inst, "scan output %d has rank %d, which has no axis %d", s, len(p.vals[vals[0]].Shape)+1, k.outAxes[s])
		}
		if o < 0 {
			continue
		}
		if err := x.stack(inst, o, vals, a, env, on); err != nil {
			return err
		}
	}
	return nil
}

// planMark is how far planning had gone, for rollback.
type planMark struct {
	values, run int
	bytes       int64
}

func (x *expander) mark() planMark {
	return planMark{values: len(x.p.values), run: len(x.run), bytes: x.b.total}
}

// rollback forgets what was planned since m: the values and steps of a Loop whose
// unrolling gave way to running it at run time.
func (x *expander) rollback(m planMark) {
	p := x.p
	p.values, p.vals, p.prod, x.konst = p.values[:m.values], p.vals[:m.values], p.prod[:m.values], x.konst[:m.values]
	x.run, x.guards = x.run[:m.run], x.guards[:m.run]
	x.b.total = m.bytes
}

func (x *expander) errorf(gn *gnode, format string, args ...any) error {
	return fmt.Errorf("engine: %s: %s", x.g.name, gn.n.Errorf(format, args...))
}

// release counts folded node gn's reads off its inputs, and drops the plan's hold on
// each value folded from parameters and constants that no node is left to read: the
// links of a weight's unpacking chain go as soon as the next is made, so that planning a
// packed model holds one or two float copies of a weight at a time, not five of every
// weight. Only folded readers count down: a value a step reads keeps its reader.
func (x *expander) release(gn *gnode) {
	for _, id := range gn.in {
		if id < 0 || id >= len(x.left) {
			continue
		}
		if x.left[id]--; x.left[id] == 0 && x.pure[id] && !x.g.kept[id] {
			t := x.p.vals[id]
			x.p.vals[id] = &Tensor{DType: t.DType, Shape: t.Shape}
		}
	}
}

// frozenParam returns the parameter that value id is when it is a float parameter that
// nothing trains and the plan may fold through (foldFrozen), and nil otherwise.
func (x *expander) frozenParam(id int) *Param {
	if !x.foldFrozen || x.p.values[id].kind != kindParam {
		return nil
	}
	par := x.g.params[x.p.values[id].index]
	if par.Trainable || par.Value.DType != Float32 || x.p.vals[id] != par.Value {
		return nil
	}
	return par
}

// plain infers the shapes of a node that is no control flow, folds it when its inputs
// are known, and otherwise adds it to the plan's steps.
func (x *expander) plain(gn *gnode, on *bool) error {
	g, p, b := x.g, x.p, x.b
	x.cur = gn
	in := make([]*Tensor, 0, len(gn.in))
	all := !noFold(gn.op, x.training)
	known := all
	// A node that reads a frozen float parameter folds when it also reads a constant
	// (anchor) and nothing else: the unpacking chains of the packed and qdq exports
	// (Gather of a lookup table by codes, Mul by the scales; DequantizeLinear of int8
	// codes) then run once, not on every run. Alone, a parameter is not folded (a
	// Transpose of a weight would only double it), and the graph drops the plans when
	// a folded parameter changes (foldsStale).
	var frozen []*Param
	anchor, chained, pure := false, false, true
	for _, id := range gn.in {
		if id < 0 {
			in = append(in, nil)
			continue
		}
		in = append(in, p.vals[id])
		known = known && p.vals[id].Known()
		switch par := x.frozenParam(id); {
		case x.konst[id]:
			anchor = true
		case par != nil:
			frozen = append(frozen, par)
		default:
			all = false
		}
		chained = chained || x.chained[id]
		pure = pure && (p.values[id].kind == kindParam || p.values[id].kind == kindConst || x.pure[id])
	}
	if len(frozen) > 0 && !anchor {
		all = false
	}
	// A chain: this node folds from frozen parameters, constants and other links only,
	// so its outputs are the same in every plan until a parameter changes.
	pure = all && pure
	chained = pure && (chained || len(frozen) > 0)
	out, err := gn.k.Infer(slices.Clone(in))
	if err != nil {
		return g.nodeErr(gn, "shape inference", err)
	}
	if len(out) > len(gn.out) {
		return g.nodeErr(gn, "shape inference", fmt.Errorf("kernel returned %d outputs, the node has %d", len(out), len(gn.out)))
	}
	for j := len(out); j < len(gn.out); j++ {
		if p.values[gn.out[j]].name != "" {
			return g.nodeErr(gn, "shape inference", fmt.Errorf("kernel returned %d outputs, the node uses output %d", len(out), j))
		}
	}
	gn.out = gn.out[:len(out)]
	sizes := make([]int64, len(out))
	for j, t := range out {
		if t == nil || (t.DType != Float32 && t.DType != Int64) {
			return g.nodeErr(gn, "shape inference", fmt.Errorf("kernel returned an invalid output %d", j))
		}
		if slices.ContainsFunc(t.Shape, func(d int) bool { return d < 0 }) {
			return g.nodeErr(gn, "shape inference", fmt.Errorf("output %d has a negative dimension in shape %v; check the shape values the model computes", j, t.Shape))
		}
		// Checked here, before the folding below or the buffers allocate anything.
		if sizes[j], err = b.tensor(gn, "", t.DType, t.Shape); err != nil {
			return err
		}
	}
	if chained {
		g.noteFold(frozen)
		if f, ok := g.folds[gn]; ok && len(f) == len(gn.out) {
			// Another plan folded this link and a step read it: share its outputs.
			for j, id := range gn.out {
				if err := b.add(gn, "", out[j].Shape, sizes[j]); err != nil {
					return err
				}
				p.vals[id], x.konst[id], x.chained[id], x.pure[id] = f[j], true, true, true
			}
			x.release(gn)
			return nil
		}
	}
	if known {
		// Every input's value is known: run the node now. When every input is a
		// constant its outputs are constants and the node never runs again. When
		// some input is a float parameter, which may change between runs, the node
		// stays in the plan, and the values only serve the shape inference of its
		// consumers (exporters compute shapes through float constants too).
		outs := make([]*Tensor, len(out))
		for j, t := range out {
			if err := b.add(gn, "", t.Shape, sizes[j]); err != nil {
				return err
			}
			outs[j] = &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape)}
			if t.DType == Int64 {
				outs[j].I = make([]int64, t.Len())
			} else {
				outs[j].F = make([]float32, t.Len())
			}
		}
		if err := gn.k.Forward(x.ctx, slices.Clone(in), outs); err != nil {
			return g.nodeErr(gn, "constant folding", err)
		}
		for j, id := range gn.out {
			p.vals[id], x.konst[id] = outs[j], all
			x.chained[id], x.pure[id] = chained, pure
		}
		if pure {
			x.folded = append(x.folded, gn)
		}
		if all {
			x.release(gn)
		}
		if !all {
			x.run, x.guards = append(x.run, gn), append(x.guards, on)
		}
		return nil
	}
	for j, id := range gn.out {
		t := out[j]
		// Shape-derived integer values are constants whatever the inputs hold.
		if t.DType == Int64 && t.Known() && len(t.I) == t.Len() {
			if err := b.add(gn, "", t.Shape, sizes[j]); err != nil {
				return err
			}
			p.vals[id], x.konst[id] = &Tensor{DType: Int64, Shape: slices.Clone(t.Shape), I: slices.Clone(t.I)}, true
			continue
		}
		p.vals[id] = &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape)}
	}
	x.run, x.guards = append(x.run, gn), append(x.guards, on)
	return nil
}
