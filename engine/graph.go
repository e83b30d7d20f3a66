package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Options configures a Graph. The zero value is ready to use.
type Options struct {
	// BLAS does matrix products when the Context passed to Forward or Backward has none.
	// Nil means gonum's pure-Go implementation.
	BLAS blas.Float32
	// Workers is the goroutine count used when the Context has none (Workers < 1).
	// Values below 1 mean runtime.GOMAXPROCS(0).
	Workers int
	// Seed seeds the random stream Dropout draws from in training mode when the Context
	// has no Rand.
	Seed uint64
	// MaxBytes bounds the memory, in bytes, of the graph's plans: what a Forward (and
	// Backward) allocates for one input signature, namely every intermediate value and
	// output, the values folded at plan time and, when it records for Backward, the
	// gradient buffers. Weights, parameter gradients, the caller's inputs and kernels' small
	// scratch buffers are not counted. Each tensor and the plan's total are checked before
	// anything is allocated, and a plan over the limit is refused with a *MemoryError
	// naming the node; cached plans of other signatures are dropped when the new one would
	// not fit beside them. 0 (or less) means DefaultMaxBytes, the machine's physical
	// memory: a plan above it could never run. Whatever the limit, shapes whose element
	// count overflows are refused.
	MaxBytes int64
}

// Param is a parameter of the graph: an initializer, or the tensor of a Constant node.
type Param struct {
	Name string
	// Value is the tensor the executor reads on every run; optimizers update it in place.
	// Its DType is Float32 for every floating-point ONNX type and Int64 for the others.
	Value *Tensor
	// Grad accumulates the loss gradient of Value over Backward calls until ZeroGrad. It
	// is allocated for trainable parameters and nil for the others.
	Grad *Tensor
	// Trainable reports whether Backward computes Grad; see Graph.SetTrainable.
	Trainable bool

	// gen counts the in-place writes Changed was told of. Kernels that keep a form of
	// Value between runs (packed or trimmed weights) remember the gen they made it at.
	gen uint64

	stored onnxpb.TensorProto_DataType // element type in the file, kept by WriteParams
}

// ValueInfo describes a graph input or output as the model declares it.
type ValueInfo struct {
	Name  string
	DType DType
	// Shape holds the declared dimensions, -1 for a symbolic or unknown one; it is nil
	// when the model declares no shape.
	Shape []int
}

// valueKind says where a value of the graph comes from.
type valueKind uint8

const (
	kindNode valueKind = iota
	kindInput
	kindParam
	// kindConst is an initializer of a control-flow body: a constant of the graph that is
	// no parameter, because onnxio reads and writes only the main graph's initializers.
	kindConst
)

type value struct {
	name  string
	kind  valueKind
	index int // graph input, parameter or constant index; producing node index (-1 in bodies)
}

type gnode struct {
	n       *Node
	op      string
	k       Kernel
	in, out []int // value ids; -1 for an absent optional input or output
}

// Graph is an ONNX model ready to run. It is not safe for concurrent use: outputs and
// intermediate buffers belong to the graph and are reused from run to run.
type Graph struct {
	name    string
	opts    Options
	rand    *rand.Rand
	ctx     Context // the run's context: the caller's, with defaults filled in
	values  []value
	nodes   []gnode // in topological order
	params  []*Param
	consts  []*Tensor // initializers of control-flow bodies (kindConst)
	inputs  []ValueInfo
	inIDs   []int
	outputs []ValueInfo
	outIDs  []int

	plans  map[string]*plan
	cached int64 // bytes of the plans in plans
	last   *plan
	keyBuf []byte
	// ready is set by a training-mode Forward and cleared by Backward, so that Backward
	// never reads the buffers of an inference run or of a run it already used.
	ready bool
	// noFuse keeps inference plans unfused, so that tests can compare the two.
	noFuse bool
	// noExpandDW keeps pointwise and depthwise steps apart (fuseExpandDW), so that tests
	// can compare the two.
	noExpandDW bool
	// expandBandAbove and expandBandRows, when not 0, set the expanded planes (pixels)
	// above which fused pairs run in bands of output rows (−1: none, those planes stay
	// apart), and the rows a band (tests).
	expandBandAbove, expandBandRows int
	// noProject keeps projections apart from the bands before them (fuseProjection), so
	// that benchmarks can compare the two.
	noProject bool
	// noScaleProject keeps channel-scaling Muls apart from the pointwise Conv after them
	// (fuseScaleProject); scaleChunk, when not 0, sets the pixels of its items (tests).
	noScaleProject bool
	scaleChunk     int
	// noRelease keeps every activation the backward pass reads to its end (tests).
	noRelease bool
	// noConcatInPlace makes Concat copy every input (tests; see concatInPlace);
	// noStridedConcat only those a batch of images would have written a row apart.
	noConcatInPlace bool
	noStridedConcat bool
	// noUnroll runs every Loop at run time, so that tests can compare it with unrolling.
	noUnroll bool
	// pool holds the workers of ctx.Workers > 1 between runs; a cleanup closes it when
	// the graph is collected.
	pool *workerPool
	// arena is the scratch its kernels share between runs (scratch.go); noArena (tests)
	// makes each kernel keep its own.
	arena   scratchArena
	zero    gradZeroer
	noArena bool
	// folds holds, by node, the outputs of the nodes that plans folded through frozen
	// float parameters and whose outputs a step reads, so that plans for other input
	// shapes share them (one float copy of a packed weight, not one a plan); foldedFrom
	// the parameters folded through, as they were then. clearPlans drops both.
	folds      map[*gnode][]*Tensor
	foldedFrom map[*Param]foldUse
	// kept holds the values that a body reads or the graph outputs: a plan never drops
	// them, whoever else reads them.
	kept map[int]bool
}

// foldUse is a folded parameter's value and write count when it was folded.
type foldUse struct {
	val *Tensor
	gen uint64
}

// noteFold records the frozen parameters a folded node read, so that the plans are
// remade when one is written.
func (g *Graph) noteFold(frozen []*Param) {
	if g.foldedFrom == nil {
		g.folds, g.foldedFrom = map[*gnode][]*Tensor{}, map[*Param]foldUse{}
	}
	for _, par := range frozen {
		g.foldedFrom[par] = foldUse{val: par.Value, gen: par.gen}
	}
}

// foldsStale reports whether a parameter some plan folded through was written (Changed),
// replaced or made trainable since.
func (g *Graph) foldsStale() bool {
	for par, u := range g.foldedFrom {
		if par.Value != u.val || par.gen != u.gen || par.Trainable {
			return true
		}
	}
	return false
}

// Build checks every node of m against the supported ops and returns the graph. All
// unsupported ops and attribute values are reported together in one error.
func Build(m *onnxio.Model, opts Options) (*Graph, error) {
	gp := m.Proto.GetGraph()
	if len(gp.GetSparseInitializer()) > 0 {
		return nil, fmt.Errorf("engine: %s: sparse initializers are not supported; store them densely", m.Name)
	}
	if opts.BLAS == nil {
		opts.BLAS = gonum.Implementation{}
	}
	if opts.Workers < 1 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	g := &Graph{
		name:  m.Name,
		opts:  opts,
		rand:  rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		plans: map[string]*plan{},
	}
	ids := map[string]int{}
	add := g.addValue
	var err error

	// Parameters come first, so that an input that is also an initializer (IR < 4 lists
	// every initializer as an input) is a parameter.
	lifted := map[*onnxpb.NodeProto]bool{}
	constants := map[string]bool{} // parameters a Constant node holds
	bytesRead := byteReaders(gp)
	for _, p := range m.Params() {
		if _, dup := ids[p.Name]; dup {
			return nil, fmt.Errorf("engine: %s: parameter %q is defined twice", m.Name, p.Name)
		}
		if codes := heldBytes(p.Tensor, bytesRead[p.Name]); codes != nil {
			dt := onnxpb.TensorProto_DataType(p.Tensor.GetDataType())
			par := &Param{Name: p.Name, Value: &Tensor{DType: Int64, Shape: intDims(p.Tensor.GetDims()), u8: codes, s8: dt == onnxpb.TensorProto_INT8}, stored: dt}
			par.Value.param = par
			g.params = append(g.params, par)
			ids[p.Name] = add(value{name: p.Name, kind: kindParam, index: len(g.params) - 1})
			continue
		}
		t, err := m.Tensor(p.Tensor)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		par := &Param{Name: p.Name, Value: fromONNX(t), stored: t.Type}
		par.Value.param = par
		g.params = append(g.params, par)
		ids[p.Name] = add(value{name: p.Name, kind: kindParam, index: len(g.params) - 1})
		if p.Node != nil {
			lifted[p.Node] = true
			constants[p.Name] = true
		}
	}
	for _, vi := range gp.GetInput() {
		if _, isParam := ids[vi.GetName()]; isParam {
			continue
		}
		info, err := valueInfo(vi)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: input %q: %w", m.Name, vi.GetName(), err)
		}
		g.inputs = append(g.inputs, info)
		id := add(value{name: info.Name, kind: kindInput, index: len(g.inputs) - 1})
		g.inIDs = append(g.inIDs, id)
		ids[info.Name] = id
	}

	// Every node is checked before anything fails, so that one error lists them all.
	var bad []string
	var nodes []*onnxpb.NodeProto
	for _, np := range gp.GetNode() {
		if lifted[np] {
			continue
		}
		nodes = append(nodes, np)
	}
	pinned := map[string]bool{}
	for _, vi := range gp.GetOutput() {
		pinned[vi.GetName()] = true
	}
	bodyReads(nodes, pinned)
	nodes = fuseHardSwish(nodes, pinned)
	nodes = fuseSiLU(nodes, pinned)
	byName := map[string]*Param{}
	for _, par := range g.params {
		byName[par.Name] = par
	}
	nodes = fuseLayerNorm(nodes, pinned, func(name string) ([]float32, []int, bool, bool) {
		par := byName[name]
		if par == nil || par.Value.DType != Float32 {
			return nil, nil, false, false
		}
		return par.Value.F, par.Value.Shape, constants[name], true
	})
	bc := &buildCtx{opset: m.Opset(""), msOpset: m.Opset(MSDomain), reg: registry(), types: declaredTypes(g.params, gp), bad: &bad}
	top := &nameScope{ids: ids}
	if g.nodes, err = g.buildNodes(bc, nodes, top, ""); err != nil {
		return nil, fmt.Errorf("engine: %s: %w", m.Name, err)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("engine: %s: %d unsupported node(s): %s", m.Name, len(bad), strings.Join(bad, "; "))
	}
	g.widenStrayBytes(pinned)
	g.kept = map[int]bool{}
	for name := range pinned {
		if id, ok := ids[name]; ok {
			g.kept[id] = true
		}
	}
	for _, vi := range gp.GetOutput() {
		id, ok := ids[vi.GetName()]
		if !ok {
			return nil, fmt.Errorf("engine: %s: graph output %q is not produced by any node, input or initializer", m.Name, vi.GetName())
		}
		info, err := valueInfo(vi)
		if err != nil {
			return nil, fmt.Errorf("engine: %s: output %q: %w", m.Name, vi.GetName(), err)
		}
		g.outputs = append(g.outputs, info)
		g.outIDs = append(g.outIDs, id)
	}
	return g, nil
}

// byteReaders returns the names that nodes of the top-level graph read as values they
// take in bytes (byteInput): MatMulNBits' codes and zero points, Cast's input,
// DequantizeLinear's codes and zero point.
func byteReaders(gp *onnxpb.GraphProto) map[string]bool {
	names := map[string]bool{}
	for _, n := range gp.GetNode() {
		for i, in := range n.GetInput() {
			if in != "" && byteInput(n.GetDomain(), n.GetOpType(), i) {
				names[in] = true
			}
		}
	}
	return names
}

// byteInput reports whether input i of an op reads an integer tensor held in bytes.
func byteInput(domain, op string, i int) bool {
	switch {
	case domain == MSDomain && op == "MatMulNBits":
		return i == 1 || i == 3
	case domain != "" && domain != "ai.onnx":
		return false
	case op == "Cast":
		return i == 0
	case op == "DequantizeLinear":
		return i == 0 || i == 2
	}
	return false
}

// heldBytes returns a copy of the bytes of t when it is a UINT8 or INT8 initializer
// stored in raw_data within the file and read as bytes (readers), and nil otherwise: a
// 4-bit weight of 4096 × 4096 then takes 8 MB in the graph instead of the 64 MB of int64
// values. Build widens it again if another node reads it (widenStrayBytes).
func heldBytes(t *onnxpb.TensorProto, readers bool) []byte {
	dt := onnxpb.TensorProto_DataType(t.GetDataType())
	if !readers || dt != onnxpb.TensorProto_UINT8 && dt != onnxpb.TensorProto_INT8 || t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return nil
	}
	n := 1
	for _, d := range t.GetDims() {
		if d < 0 {
			return nil
		}
		n *= int(d)
	}
	if raw := t.GetRawData(); len(raw) == n && n > 0 {
		return slices.Clone(raw)
	}
	return nil
}

// intDims converts ONNX dimensions to a shape.
func intDims(dims []int64) []int {
	shape := make([]int, len(dims))
	for i, d := range dims {
		shape[i] = int(d)
	}
	return shape
}

// widenStrayBytes gives back int64 values to every byte-held parameter (heldBytes) that
// a node reads other than as byteInput says, or that a body reads or the graph outputs
// (pinned): only those inputs of those kernels read u8.
func (g *Graph) widenStrayBytes(pinned map[string]bool) {
	stray := map[int]bool{}
	for _, gn := range g.nodes {
		for i, id := range gn.in {
			if id >= 0 && !byteInput(gn.n.Proto.GetDomain(), gn.n.Proto.GetOpType(), i) {
				stray[id] = true
			}
		}
	}
	for id, v := range g.values {
		if v.kind != kindParam {
			continue
		}
		t := g.params[v.index].Value
		if t.u8 != nil && (stray[id] || pinned[v.name]) {
			t.I, t.u8, t.s8 = t.intValues(), nil, false
		}
	}
}

func (g *Graph) addValue(v value) int {
	g.values = append(g.values, v)
	return len(g.values) - 1
}

// nameScope resolves value names: a control-flow body sees its own values first, then
// those of the graphs that enclose it.
type nameScope struct {
	parent *nameScope
	ids    map[string]int
}

func (s *nameScope) lookup(name string) (int, bool) {
	for ; s != nil; s = s.parent {
		if id, ok := s.ids[name]; ok {
			return id, true
		}
	}
	return 0, false
}

// buildCtx is what building the nodes of the graph and of its bodies shares.
type buildCtx struct {
	opset   int64
	msOpset int64 // com.microsoft's, for MatMulNBits
	reg     map[string]opDef
	types   map[string]onnxpb.TensorProto_DataType
	bad     *[]string // what is unsupported, collected across all bodies
}

// buildNodes orders nodes topologically, makes their kernels and value ids, and adds the
// names they define to sc. path prefixes the errors of nodes inside a body. Unsupported
// nodes are collected in bc.bad; the error is for a graph that cannot be read at all.
func (g *Graph) buildNodes(bc *buildCtx, nodes []*onnxpb.NodeProto, sc *nameScope, path string) ([]gnode, error) {
	order, err := topoSort(nodes, func(name string) bool { _, ok := sc.lookup(name); return ok })
	if err != nil {
		return nil, fmt.Errorf("%s%w", path, err)
	}
	var out []gnode
	for _, np := range order {
		n := &Node{Proto: np, Opset: bc.opset}
		if np.GetDomain() == MSDomain {
			n.Opset = bc.msOpset
		}
		for _, in := range np.GetInput() {
			n.InputTypes = append(n.InputTypes, bc.types[in])
		}
		var k Kernel
		key, known := opKey(np.GetDomain(), np.GetOpType())
		def, ok := bc.reg[key]
		if !known || (!ok && np.GetDomain() == MSDomain) {
			*bc.bad = append(*bc.bad, path+n.Errorf("op %s of domain %q is not supported", np.GetOpType(), np.GetDomain()).Error())
		} else if !ok {
			*bc.bad = append(*bc.bad, path+n.Errorf("op %s is not supported", np.GetOpType()).Error())
			// A control-flow node's bodies are listed too, so that one error says everything
			// a model needs, not only the outermost op.
			*bc.bad = append(*bc.bad, unsupportedInside(np, bc.reg, path+n.Errorf("").Error())...)
		} else if err := checkNodeInputs(n, def.inputs); err != nil {
			*bc.bad = append(*bc.bad, path+err.Error())
		} else if isControl(key) {
			k, err = g.buildControl(bc, n, sc, path)
			if err != nil {
				return nil, err
			}
		} else if k, err = makeKernel(def.build, n); err != nil {
			*bc.bad = append(*bc.bad, path+err.Error())
		}
		var outTypes []onnxpb.TensorProto_DataType
		if t, ok := k.(outputTyper); ok {
			outTypes = t.outputTypes()
		} else if def.sameType && len(n.InputTypes) > 0 {
			outTypes = slices.Repeat(n.InputTypes[:1], len(np.GetOutput()))
		}
		for i, dt := range outTypes {
			if outs := np.GetOutput(); i < len(outs) && outs[i] != "" && dt != onnxpb.TensorProto_UNDEFINED {
				if _, declared := bc.types[outs[i]]; !declared {
					bc.types[outs[i]] = dt
				}
			}
		}
		index := -1
		if sc.parent == nil {
			index = len(out)
		}
		gn := gnode{n: n, op: np.GetOpType(), k: k}
		for _, in := range np.GetInput() {
			if in == "" {
				gn.in = append(gn.in, -1)
				continue
			}
			id, _ := sc.lookup(in) // topoSort checked that it exists
			gn.in = append(gn.in, id)
		}
		for _, o := range np.GetOutput() {
			if o == "" {
				gn.out = append(gn.out, g.addValue(value{name: "", kind: kindNode, index: index}))
				continue
			}
			if _, dup := sc.ids[o]; dup {
				return nil, fmt.Errorf("%s%s", path, n.Errorf("output %q is already defined elsewhere in the graph", o))
			}
			sc.ids[o] = g.addValue(value{name: o, kind: kindNode, index: index})
			gn.out = append(gn.out, sc.ids[o])
		}
		out = append(out, gn)
	}
	return out, nil
}

// outputTyper is implemented by kernels whose output element types are fixed by their
// attributes or inputs' types (Cast, QuantizeLinear), so that later nodes see them in
// Node.InputTypes.
type outputTyper interface {
	outputTypes() []onnxpb.TensorProto_DataType
}

// declaredTypes collects the element types the model states for its values: parameters'
// stored types, then graph inputs, outputs and value_info.
func declaredTypes(params []*Param, gp *onnxpb.GraphProto) map[string]onnxpb.TensorProto_DataType {
	types := map[string]onnxpb.TensorProto_DataType{}
	for _, vi := range slices.Concat(gp.GetInput(), gp.GetOutput(), gp.GetValueInfo()) {
		if dt := onnxpb.TensorProto_DataType(vi.GetType().GetTensorType().GetElemType()); dt != onnxpb.TensorProto_UNDEFINED {
			types[vi.GetName()] = dt
		}
	}
	for _, p := range params {
		types[p.Name] = p.stored
	}
	return types
}

// checkNodeInputs verifies that a node gives every input its op requires, so that kernels
// can rely on them.
func checkNodeInputs(n *Node, a arity) error {
	req := a.at(n.Opset)
	in := n.Proto.GetInput()
	if a.variadic {
		req = max(req, len(in))
	}
	for i := range req {
		if !n.HasInput(i) {
			return n.Errorf("input %d is required", i)
		}
	}
	return nil
}

// makeKernel calls a builder, turning a panic on a malformed node into an error.
func makeKernel(b Builder, n *Node) (k Kernel, err error) {
	defer func() {
		if r := recover(); r != nil {
			k, err = nil, n.Errorf("malformed node: %v", r)
		}
	}()
	k, err = b(n)
	if err == nil && k == nil {
		err = n.Errorf("builder returned no kernel")
	}
	return k, err
}

// topoSort orders nodes so that each comes after the producers of its inputs, keeping
// the file order where it is already valid. known reports the names available before any
// node runs (inputs, parameters and the values of enclosing graphs). The values that a
// control-flow node's bodies read from the graph count as its inputs.
func topoSort(nodes []*onnxpb.NodeProto, known func(string) bool) ([]*onnxpb.NodeProto, error) {
	producer := map[string]int{}
	for i, n := range nodes {
		for _, o := range n.GetOutput() {
			if o != "" {
				producer[o] = i
			}
		}
	}
	waiting := make([]int, len(nodes)) // unfinished producers per node
	users := make([][]int, len(nodes))
	for i, n := range nodes {
		seen := map[int]bool{}
		for _, in := range nodeRefs(n) {
			if in == "" || known(in) {
				continue
			}
			p, ok := producer[in]
			if !ok {
				nd := &Node{Proto: n}
				return nil, nd.Errorf("input %q is not a graph input, an initializer or the output of any node", in)
			}
			if !seen[p] {
				seen[p] = true
				waiting[i]++
				users[p] = append(users[p], i)
			}
		}
	}
	// Kahn's algorithm with the ready set kept sorted by file position.
	var ready []int
	for i := range nodes {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	order := make([]*onnxpb.NodeProto, 0, len(nodes))
	for len(ready) > 0 {
		best := 0
		for j := range ready {
			if ready[j] < ready[best] {
				best = j
			}
		}
		i := ready[best]
		ready = append(ready[:best], ready[best+1:]...)
		order = append(order, nodes[i])
		for _, u := range users[i] {
			if waiting[u]--; waiting[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if len(order) < len(nodes) {
		for i, w := range waiting {
			if w > 0 {
				nd := &Node{Proto: nodes[i]}
				return nil, nd.Errorf("the graph has a cycle through this node")
			}
		}
	}
	return order, nil
}

// valueInfo reads a declared input or output type.
func valueInfo(vi *onnxpb.ValueInfoProto) (ValueInfo, error) {
	info := ValueInfo{Name: vi.GetName(), DType: Float32}
	tt := vi.GetType().GetTensorType()
	if vi.GetType() != nil && tt == nil {
		return info, fmt.Errorf("only tensor values are supported, not %T", vi.GetType().GetValue())
	}
	if tt == nil {
		return info, nil
	}
	dt := onnxpb.TensorProto_DataType(tt.GetElemType())
	switch {
	case onnxio.IsFloat(dt):
	case onnxio.IsInt(dt):
		info.DType = Int64
	case dt == onnxpb.TensorProto_UNDEFINED:
	default:
		return info, fmt.Errorf("data type %s is not supported (qtool computes in float32 and int64)", dt)
	}
	if sh := tt.GetShape(); sh != nil {
		info.Shape = make([]int, len(sh.GetDim()))
		for i, d := range sh.GetDim() {
			info.Shape[i] = -1
			if v, ok := d.GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue); ok && v.DimValue >= 0 {
				info.Shape[i] = int(v.DimValue)
			}
		}
	}
	return info, nil
}

// fromONNX converts a decoded onnxio tensor to an engine tensor, sharing its data.
func fromONNX(t *onnxio.Tensor) *Tensor {
	shape := intDims(t.Dims)
	if onnxio.IsFloat(t.Type) {
		if t.Float == nil {
			t.Float = []float32{}
		}
		return NewFloat(shape, t.Float)
	}
	if t.Int == nil {
		t.Int = []int64{}
	}
	return NewInt(shape, t.Int)
}

// Inputs describes the graph's inputs (initializers excluded), in the order Forward takes
// them.
func (g *Graph) Inputs() []ValueInfo { return g.inputs }

// Outputs describes the graph's outputs, in the order Forward returns them.
func (g *Graph) Outputs() []ValueInfo { return g.outputs }

// Params returns the graph's parameters: initializers in file order, then the tensors of
// Constant nodes in node order.
func (g *Graph) Params() []*Param { return g.params }

// Param returns the named parameter, or nil.
func (g *Graph) Param(name string) *Param {
	for _, p := range g.params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// SetTrainable makes exactly the named parameters trainable and freezes all others. It
// allocates (zeroed) gradients for the trainable ones and drops the others' gradients.
// Only floating-point parameters can be trainable. On error nothing changes.
func (g *Graph) SetTrainable(names ...string) error {
	want := map[string]bool{}
	var bad []string
	for _, name := range names {
		p := g.Param(name)
		switch {
		case p == nil:
			bad = append(bad, fmt.Sprintf("%q is not a parameter", name))
		case p.Value.DType != Float32:
			bad = append(bad, fmt.Sprintf("%q holds %s values, only float tensors can be trained", name, p.Value.DType))
		default:
			want[name] = true
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("engine: %s: SetTrainable: %s", g.name, strings.Join(bad, "; "))
	}
	for _, p := range g.params {
		if p.Trainable != want[p.Name] {
			// Forms kept while the parameter was frozen must not outlive its training.
			p.Changed()
		}
		p.Trainable = want[p.Name]
		switch {
		case !p.Trainable:
			p.Grad = nil
		case p.Grad == nil:
			p.Grad = NewFloat(append([]int(nil), p.Value.Shape...), make([]float32, p.Value.Len()))
		}
	}
	// Training plans depend on which values carry gradients.
	g.clearPlans()
	return nil
}

// ZeroGrad sets the gradients of all trainable parameters to zero.
func (g *Graph) ZeroGrad() {
	for _, p := range g.params {
		if p.Grad != nil {
			clear(p.Grad.F)
		}
	}
}

// WriteParams stores the current values of the graph's floating-point parameters into
// m, which must be the model the graph was built from or a copy of it. Each tensor keeps
// the element type it was stored with (float16, bfloat16, double or float).
func (g *Graph) WriteParams(m *onnxio.Model) error {
	for _, p := range g.params {
		if p.Value.DType != Float32 {
			continue
		}
		dims := make([]int64, len(p.Value.Shape))
		for i, d := range p.Value.Shape {
			dims[i] = int64(d)
		}
		if err := m.SetParam(p.Name, encodeFloat(p.Name, dims, p.Value.F, p.stored)); err != nil {
			return fmt.Errorf("engine: %s: writing parameters: %w", g.name, err)
		}
	}
	return nil
}

// maxBytes is the memory limit of the graph's plans.
func (g *Graph) maxBytes() int64 {
	if g.opts.MaxBytes > 0 {
		return g.opts.MaxBytes
	}
	return DefaultMaxBytes()
}

// makeRoom drops the cached plans when a new plan of n bytes would not fit beside them,
// so that all the plans a graph holds stay within its limit.
func (g *Graph) makeRoom(n int64) {
	if n > g.maxBytes()-g.cached {
		g.clearPlans()
	}
}

func (g *Graph) clearPlans() {
	g.folds, g.foldedFrom = nil, nil
	clear(g.plans)
	g.cached = 0
	g.last = nil
	g.ready = false
}

// unsupportedInside lists the unsupported ops of the subgraphs held in np's attributes
// (If's branches, Loop's and Scan's bodies), recursively, each prefixed by the path of
// nodes and attributes that leads to it.
func unsupportedInside(np *onnxpb.NodeProto, reg map[string]opDef, path string) []string {
	var bad []string
	path = strings.TrimSuffix(path, ": ")
	for _, a := range np.GetAttribute() {
		graphs := a.GetGraphs()
		if a.GetG() != nil {
			graphs = append([]*onnxpb.GraphProto{a.GetG()}, graphs...)
		}
		for _, sg := range graphs {
			for _, inner := range sg.GetNode() {
				where := fmt.Sprintf("%s, %s: node %q (%s)", path, a.GetName(), inner.GetName(), inner.GetOpType())
				key, known := opKey(inner.GetDomain(), inner.GetOpType())
				if _, ok := reg[key]; !known || !ok && inner.GetDomain() == MSDomain {
					bad = append(bad, fmt.Sprintf("%s: op %s of domain %q is not supported", where, inner.GetOpType(), inner.GetDomain()))
				} else if !ok {
					bad = append(bad, fmt.Sprintf("%s: op %s is not supported", where, inner.GetOpType()))
				}
				bad = append(bad, unsupportedInside(inner, reg, where)...)
			}
		}
	}
	return bad
}

// Changed tells the graph that p.Value's elements were written in place since the last
// run. Kernels keep forms derived from the values of frozen parameters (packed weights,
// weights without the taps that see only padding) from one run to the next, and remake
// them only after Changed; so whoever writes a parameter that is not trainable between
// runs must call it before the next run. Trainable parameters need no call: nothing
// derived from them is kept, since optimizers rewrite them on every step. A Value
// replaced by another tensor is never cached.
func (p *Param) Changed() { p.gen++ }

// ParamsChanged calls Changed on every parameter, for writers that replace many values at
// once (restoring a checkpoint, projecting every layer).
func (g *Graph) ParamsChanged() {
	for _, p := range g.params {
		p.Changed()
	}
}
