package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Control flow: If and Loop.
//
// Their bodies are compiled by Build like the main graph (kernels made once, every value
// an id of g.values) and expanded into the plan when it is made (expand.go): an If whose
// condition is a plan-time constant contributes only its taken branch, and a Loop whose
// trip count and condition are plan-time constants is unrolled, one copy of the body per
// iteration (other Loops run at run time: loop_runtime.go). Values read from enclosing graphs resolve to the enclosing copies, and each
// copy gets fresh value ids, so the plan is a flat graph: shape inference, constant
// folding, buffer reuse, backward scheduling and speed are those of the same graph
// written without control flow. An If whose condition is known only at run time keeps
// both branches, guarded by a step that reads the condition (guardKernel); see expand.go.

func controlOpDefs() []opDef {
	return []opDef{
		{name: "If", build: buildControlStub, inputs: arity{n: 1}, grad: true},
		{name: "Loop", build: buildControlStub, inputs: arity{n: 0, variadic: false}, grad: true},
		{name: "Scan", build: buildControlStub, inputs: arity{n: 1, variadic: true}, grad: true},
	}
}

// isControl reports whether op is built by buildControl, which needs the enclosing
// graph's names, rather than by its registry row's Builder.
func isControl(op string) bool { return op == "If" || op == "Loop" || op == "Scan" }

// buildControlStub is the registry's Builder for control-flow ops: Build compiles their
// bodies itself, since a Builder sees one node and not the values its bodies read.
func buildControlStub(n *Node) (Kernel, error) {
	return nil, n.Errorf("control flow is compiled by Build, with the graph around it")
}

// body is a compiled subgraph: its formal inputs, nodes and outputs as value ids.
type body struct {
	attr  string
	in    []int
	nodes []gnode
	out   []int // may be formal inputs, constants or values of enclosing graphs
}

type ifKernel struct {
	n         *Node
	then, els *body
}

type loopKernel struct {
	n    *Node
	body *body
}

// scanKernel is a Scan: its body runs once per slice of the scan inputs along their scan
// axes (reversed for direction 1), with the states carried from one iteration to the
// next; the per-iteration scan outputs are stacked along their axes.
type scanKernel struct {
	n       *Node
	body    *body
	nScan   int // scan inputs, the last inputs of the node
	inAxes  []int64
	inDirs  []int64
	outAxes []int64
	outDirs []int64
}

// Control-flow kernels are never steps: the planner expands them.
var errExpanded = errors.New("internal error: control flow must be expanded when planning")

func (k *ifKernel) Infer([]*Tensor) ([]*Tensor, error)             { return nil, errExpanded }
func (k *ifKernel) Forward(*Context, []*Tensor, []*Tensor) error   { return errExpanded }
func (k *loopKernel) Infer([]*Tensor) ([]*Tensor, error)           { return nil, errExpanded }
func (k *scanKernel) Infer([]*Tensor) ([]*Tensor, error)           { return nil, errExpanded }
func (k *scanKernel) Forward(*Context, []*Tensor, []*Tensor) error { return errExpanded }
func (k *loopKernel) Forward(*Context, []*Tensor, []*Tensor) error {
	return errExpanded
}

// buildControl compiles the bodies of an If or a Loop node.
func (g *Graph) buildControl(bc *buildCtx, n *Node, sc *nameScope, path string) (Kernel, error) {
	np := n.Proto
	graph := func(name string) (*onnxpb.GraphProto, error) {
		for _, a := range np.GetAttribute() {
			if a.GetName() == name && a.GetG() != nil {
				return a.GetG(), nil
			}
		}
		return nil, n.Errorf("attribute %s (a graph) is required", name)
	}
	compile := func(name string) (*body, error) {
		sg, err := graph(name)
		if err != nil {
			*bc.bad = append(*bc.bad, path+err.Error())
			return nil, nil
		}
		return g.compileBody(bc, sg, sc, fmt.Sprintf("%snode %q (%s), %s: ", path, n.Name(), np.GetOpType(), name), name)
	}
	switch np.GetOpType() {
	case "If":
		if len(np.GetInput()) != 1 {
			*bc.bad = append(*bc.bad, path+n.Errorf("If takes one input, the condition; it has %d", len(np.GetInput())).Error())
		}
		th, err := compile("then_branch")
		if err != nil {
			return nil, err
		}
		el, err := compile("else_branch")
		if err != nil || th == nil || el == nil {
			return nil, err
		}
		for _, b := range []*body{th, el} {
			if len(b.in) != 0 || len(b.out) != len(np.GetOutput()) {
				*bc.bad = append(*bc.bad, path+n.Errorf("%s has %d inputs and %d outputs, the node needs 0 and %d", b.attr, len(b.in), len(b.out), len(np.GetOutput())).Error())
				return nil, nil
			}
		}
		return &ifKernel{n: n, then: th, els: el}, nil
	case "Scan":
		return g.buildScan(bc, n, path, compile)
	default: // Loop
		b, err := compile("body")
		if err != nil || b == nil {
			return nil, err
		}
		carried := max(len(np.GetInput())-2, 0)
		for i := 2; i < len(np.GetInput()); i++ {
			if np.GetInput()[i] == "" {
				*bc.bad = append(*bc.bad, path+n.Errorf("input %d, a loop-carried value, is required", i).Error())
				return nil, nil
			}
		}
		if len(b.in) != 2+carried || len(b.out) < 1+carried || len(np.GetOutput()) > len(b.out)-1 {
			*bc.bad = append(*bc.bad, path+n.Errorf("body has %d inputs and %d outputs, which does not fit the node's %d loop-carried values and %d outputs", len(b.in), len(b.out), carried, len(np.GetOutput())).Error())
			return nil, nil
		}
		return &loopKernel{n: n, body: b}, nil
	}
}

// buildScan checks a Scan node's attributes against its body.
func (g *Graph) buildScan(bc *buildCtx, n *Node, path string, compile func(string) (*body, error)) (Kernel, error) {
	bad := func(format string, args ...any) (Kernel, error) {
		*bc.bad = append(*bc.bad, path+n.Errorf(format, args...).Error())
		return nil, nil
	}
	if n.Opset < 9 {
		return bad("Scan of opset 8 (a batch axis and sequence_lens) is not supported; export at opset 9 or later")
	}
	b, err := compile("body")
	if err != nil || b == nil {
		return nil, err
	}
	np := n.Proto
	m := int(n.Int("num_scan_inputs", -1))
	states := len(np.GetInput()) - m
	if m < 1 || states < 0 {
		return bad("num_scan_inputs is %d, want 1 to the node's %d inputs", m, len(np.GetInput()))
	}
	if slices.Contains(np.GetInput(), "") {
		return bad("every input is required")
	}
	nOut := len(b.out) - states
	if len(b.in) != states+m || nOut < 0 || len(np.GetOutput()) != len(b.out) {
		return bad("body has %d inputs and %d outputs, which does not fit the node's %d states, %d scan inputs and %d outputs", len(b.in), len(b.out), states, m, len(np.GetOutput()))
	}
	k := &scanKernel{n: n, body: b, nScan: m,
		inAxes: n.Ints("scan_input_axes", make([]int64, m)), inDirs: n.Ints("scan_input_directions", make([]int64, m)),
		outAxes: n.Ints("scan_output_axes", make([]int64, nOut)), outDirs: n.Ints("scan_output_directions", make([]int64, nOut))}
	if len(k.inAxes) != m || len(k.inDirs) != m || len(k.outAxes) != nOut || len(k.outDirs) != nOut {
		return bad("scan_input_axes, scan_input_directions, scan_output_axes and scan_output_directions need one value per scan input or output (%d and %d)", m, nOut)
	}
	for _, d := range slices.Concat(k.inDirs, k.outDirs) {
		if d != 0 && d != 1 {
			return bad("a scan direction is %d, want 0 (forward) or 1 (reverse)", d)
		}
	}
	return k, nil
}

// compileBody builds a subgraph in a scope of its own below sc.
func (g *Graph) compileBody(bc *buildCtx, sg *onnxpb.GraphProto, sc *nameScope, path, attr string) (*body, error) {
	if len(sg.GetSparseInitializer()) > 0 {
		*bc.bad = append(*bc.bad, path+"sparse initializers are not supported; store them densely")
		return nil, nil
	}
	inner := &nameScope{parent: sc, ids: map[string]int{}}
	b := &body{attr: attr}
	for _, tp := range sg.GetInitializer() {
		t, err := onnxio.DecodeTensor(tp, "")
		if err != nil {
			*bc.bad = append(*bc.bad, fmt.Sprintf("%sinitializer %q: %v", path, tp.GetName(), err))
			continue
		}
		g.consts = append(g.consts, fromONNX(t))
		inner.ids[tp.GetName()] = g.addValue(value{name: tp.GetName(), kind: kindConst, index: len(g.consts) - 1})
		bc.types[tp.GetName()] = t.Type
	}
	for _, vi := range sg.GetInput() {
		if _, isInit := inner.ids[vi.GetName()]; isInit {
			continue
		}
		if _, err := valueInfo(vi); err != nil {
			*bc.bad = append(*bc.bad, fmt.Sprintf("%sinput %q: %v", path, vi.GetName(), err))
		}
		id := g.addValue(value{name: vi.GetName(), kind: kindNode, index: -1})
		inner.ids[vi.GetName()] = id
		b.in = append(b.in, id)
		if dt := onnxpb.TensorProto_DataType(vi.GetType().GetTensorType().GetElemType()); dt != onnxpb.TensorProto_UNDEFINED {
			bc.types[vi.GetName()] = dt
		}
	}
	nodes, err := g.buildNodes(bc, sg.GetNode(), inner, path)
	if err != nil {
		return nil, err
	}
	b.nodes = nodes
	for _, vo := range sg.GetOutput() {
		if _, err := valueInfo(vo); err != nil {
			*bc.bad = append(*bc.bad, fmt.Sprintf("%soutput %q: %v", path, vo.GetName(), err))
		}
		id, ok := inner.lookup(vo.GetName())
		if !ok {
			return nil, fmt.Errorf("%soutput %q is not produced by any node, input or initializer", path, vo.GetName())
		}
		b.out = append(b.out, id)
	}
	return b, nil
}

// nodeRefs returns the names a node reads: its inputs and, for a control-flow node, the
// values of enclosing graphs that its bodies read, so that topoSort orders it after them.
func nodeRefs(np *onnxpb.NodeProto) []string {
	refs := np.GetInput()
	outer := map[string]bool{}
	for _, a := range np.GetAttribute() {
		graphs := a.GetGraphs()
		if a.GetG() != nil {
			graphs = append([]*onnxpb.GraphProto{a.GetG()}, graphs...)
		}
		for _, sg := range graphs {
			freeNames(sg, outer)
		}
	}
	if len(outer) == 0 {
		return refs
	}
	refs = slices.Clone(refs)
	for name := range outer {
		refs = append(refs, name)
	}
	slices.Sort(refs[len(np.GetInput()):]) // a deterministic order, for deterministic errors
	return refs
}

// freeNames adds to free the names sg reads without defining them.
func freeNames(sg *onnxpb.GraphProto, free map[string]bool) {
	def := map[string]bool{"": true}
	for _, t := range sg.GetInitializer() {
		def[t.GetName()] = true
	}
	for _, vi := range sg.GetInput() {
		def[vi.GetName()] = true
	}
	for _, n := range sg.GetNode() {
		for _, o := range n.GetOutput() {
			def[o] = true
		}
	}
	for _, n := range sg.GetNode() {
		for _, in := range nodeRefs(n) {
			if !def[in] {
				free[in] = true
			}
		}
	}
	for _, vo := range sg.GetOutput() {
		if !def[vo.GetName()] {
			free[vo.GetName()] = true
		}
	}
}

// truthy reports whether a condition tensor (bool, carried as int64) holds true.
func truthy(t *Tensor) bool {
	if t.DType == Int64 {
		return len(t.I) > 0 && t.I[0] != 0
	}
	return len(t.F) > 0 && t.F[0] != 0
}

// guardKernel runs where an If whose condition is known only at run time stands. It
// sets the flags that the steps of each branch test (a step whose flag is false is
// skipped, forward and backward) and outputs the condition as 1 or 0 for the steps that
// select the branch's outputs. It always runs: inside a branch that is not taken, its
// condition may be stale, and parent turns both flags off.
type guardKernel struct {
	parent *bool // the flag of the branch the If stands in; nil at the top level
	flags  [2]bool
}

func (k *guardKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if in[0].Len() != 1 {
		return nil, fmt.Errorf("the condition has shape %v, want a single value", in[0].Shape)
	}
	out := &Tensor{DType: Int64, Shape: []int{}}
	if in[0].Known() {
		out.I = []int64{0}
		if truthy(in[0]) {
			out.I[0] = 1
		}
	}
	return []*Tensor{out}, nil
}

func (k *guardKernel) Forward(_ *Context, in, out []*Tensor) error {
	on := k.parent == nil || *k.parent
	c := truthy(in[0])
	k.flags = [2]bool{on && c, on && !c}
	out[0].I[0] = 0
	if c {
		out[0].I[0] = 1
	}
	return nil
}

// selectKernel copies the taken branch's output (input 1 when input 0, the guard's
// output, is 1; input 2 otherwise) into the If's output.
type selectKernel struct{}

func (selectKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	t := in[1]
	if in[0].Known() && in[0].I[0] == 0 {
		t = in[2]
	}
	out := &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape)}
	if in[0].Known() && t.Known() {
		out.F, out.I = slices.Clone(t.F), slices.Clone(t.I)
	}
	return []*Tensor{out}, nil
}

func (selectKernel) Forward(_ *Context, in, out []*Tensor) error {
	t := in[1]
	if in[0].I[0] == 0 {
		t = in[2]
	}
	copy(out[0].F, t.F)
	copy(out[0].I, t.I)
	return nil
}

func (selectKernel) Backward(_ *Context, in, _, gout, gin []*Tensor) error {
	j := 1
	if in[0].I[0] == 0 {
		j = 2
	}
	if gin[j] == nil || gout[0] == nil {
		return nil
	}
	dst := gin[j].F[:len(gout[0].F)]
	for i, v := range gout[0].F {
		dst[i] += v
	}
	return nil
}

func (selectKernel) Retains() (in, out []bool) { return []bool{true, false, false}, []bool{false} }

// stackKernel stacks a Loop's or a Scan's per-iteration outputs, one input per
// iteration, along a new axis.
type stackKernel struct{ n, axis int }

func (k stackKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	known := true
	for _, t := range in {
		if t.DType != in[0].DType || !slices.Equal(t.Shape, in[0].Shape) {
			return nil, fmt.Errorf("scan output is %s %v in one iteration and %s %v in another; qtool needs the same shape in every iteration", in[0].DType, in[0].Shape, t.DType, t.Shape)
		}
		known = known && t.Known()
	}
	if k.axis > len(in[0].Shape) {
		return nil, fmt.Errorf("scan output axis %d is out of range for rank %d", k.axis, len(in[0].Shape)+1)
	}
	out := &Tensor{DType: in[0].DType, Shape: slices.Insert(slices.Clone(in[0].Shape), k.axis, len(in))}
	if known {
		fold(k, in, out)
	}
	return []*Tensor{out}, nil
}

// blocks returns the number of blocks before the stacking axis and each block's length.
func (k stackKernel) blocks(t *Tensor) (outer, inner int) {
	outer = 1
	for _, d := range t.Shape[:k.axis] {
		outer *= d
	}
	if outer == 0 {
		return 0, 0
	}
	return outer, t.Len() / outer
}

func (k stackKernel) Forward(_ *Context, in, out []*Tensor) error {
	n := len(in)
	for i, t := range in {
		outer, inner := k.blocks(t)
		for o := range outer {
			dst := (o*n + i) * inner
			if t.DType == Int64 {
				copy(out[0].I[dst:dst+inner], t.I[o*inner:(o+1)*inner])
			} else {
				copy(out[0].F[dst:dst+inner], t.F[o*inner:(o+1)*inner])
			}
		}
	}
	return nil
}

func (k stackKernel) Backward(_ *Context, in, _, gout, gin []*Tensor) error {
	n := len(in)
	for i, g := range gin {
		if g == nil {
			continue
		}
		outer, inner := k.blocks(in[i])
		for o := range outer {
			src := (o*n + i) * inner
			addTo(g.F[o*inner:(o+1)*inner], gout[0].F[src:src+inner])
		}
	}
	return nil
}

func (k stackKernel) Retains() (in, out []bool) { return make([]bool, k.n), []bool{false} }

// fold gives out, whose shape Infer set, the values k computes from known inputs.
func fold(k Kernel, in []*Tensor, out *Tensor) {
	if out.DType == Int64 {
		out.I = make([]int64, out.Len())
	} else {
		out.F = make([]float32, out.Len())
	}
	k.Forward(nil, in, []*Tensor{out})
}

// takeKernel is one slice of a Scan's input along its scan axis, without that axis.
type takeKernel struct{ axis, index int }

func (k takeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	t := in[0]
	out := &Tensor{DType: t.DType, Shape: slices.Delete(slices.Clone(t.Shape), k.axis, k.axis+1)}
	if t.Known() {
		fold(k, in, out)
	}
	return []*Tensor{out}, nil
}

// blocks returns the blocks before the axis, the axis's length and the elements after it.
func (k takeKernel) blocks(t *Tensor) (outer, n, inner int) {
	outer, inner = 1, 1
	for _, d := range t.Shape[:k.axis] {
		outer *= d
	}
	for _, d := range t.Shape[k.axis+1:] {
		inner *= d
	}
	return outer, t.Shape[k.axis], inner
}

func (k takeKernel) Forward(_ *Context, in, out []*Tensor) error {
	t := in[0]
	outer, n, inner := k.blocks(t)
	for o := range outer {
		src := (o*n + k.index) * inner
		if t.DType == Int64 {
			copy(out[0].I[o*inner:(o+1)*inner], t.I[src:src+inner])
		} else {
			copy(out[0].F[o*inner:(o+1)*inner], t.F[src:src+inner])
		}
	}
	return nil
}

func (k takeKernel) Backward(_ *Context, in, _, gout, gin []*Tensor) error {
	if gin[0] == nil {
		return nil
	}
	outer, n, inner := k.blocks(in[0])
	for o := range outer {
		dst := (o*n + k.index) * inner
		addTo(gin[0].F[dst:dst+inner], gout[0].F[o*inner:(o+1)*inner])
	}
	return nil
}

func (takeKernel) Retains() (in, out []bool) { return []bool{false}, []bool{false} }
