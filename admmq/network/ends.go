package network

import (
	"maps"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// The vertices of a dataflow that stand for no node: where the graph's inputs come from
// and where its outputs go.
const (
	flowSource = iota
	flowSink
)

// dataflow is a model's node-to-node dependency structure, subgraph bodies included: a
// vertex per node (main graph and bodies), plus an entry vertex per control-flow node
// that stands for the values it hands its bodies.
type dataflow struct {
	node  []*onnxpb.NodeProto // nil for flowSource, flowSink and entry vertices
	preds [][]int
}

func (f *dataflow) add(n *onnxpb.NodeProto) int {
	f.node = append(f.node, n)
	f.preds = append(f.preds, nil)
	return len(f.node) - 1
}

// newDataflow resolves every value a node reads to the vertex that produces it, by name
// and scope (a body sees the values of the graphs around it unless it defines the name
// itself). A control-flow node's own inputs (an If's condition, a Loop's trip count and
// initial values) feed its entry vertex, which produces its bodies' inputs; its outputs
// come from its bodies' outputs. An If's condition therefore decides which path the data
// takes but lies on none: the data reach an If's outputs only through the branch bodies.
// Parameters resolve to no vertex: they are not on any path from an input.
func newDataflow(m *onnxio.Model) *dataflow {
	f := &dataflow{}
	f.add(nil) // flowSource
	f.add(nil) // flowSink
	g := m.Proto.GetGraph()
	scope := map[string]int{}
	for _, vi := range g.GetInput() {
		scope[vi.GetName()] = flowSource
	}
	// An initializer listed among the inputs too is a parameter with a default, not data.
	for _, t := range g.GetInitializer() {
		delete(scope, t.GetName())
	}
	scope = f.graph(g.GetNode(), scope)
	for _, vi := range g.GetOutput() {
		if v, ok := scope[vi.GetName()]; ok {
			f.preds[flowSink] = append(f.preds[flowSink], v)
		}
	}
	return f
}

// graph adds nodes to f in the scope outer and returns the scope that their outputs extend.
func (f *dataflow) graph(nodes []*onnxpb.NodeProto, outer map[string]int) map[string]int {
	scope := maps.Clone(outer)
	vertex := make([]int, len(nodes))
	for i, n := range nodes {
		vertex[i] = f.add(n)
		for _, o := range n.GetOutput() {
			if o != "" {
				scope[o] = vertex[i]
			}
		}
	}
	for i, n := range nodes {
		v := vertex[i]
		var bodies []*onnxpb.GraphProto
		for _, a := range n.GetAttribute() {
			if a.GetG() != nil {
				bodies = append(bodies, a.GetG())
			}
			bodies = append(bodies, a.GetGraphs()...)
		}
		reader := v
		if len(bodies) > 0 {
			reader = f.add(nil)
		}
		for _, in := range n.GetInput() {
			if p, ok := scope[in]; ok && in != "" {
				f.preds[reader] = append(f.preds[reader], p)
			}
		}
		for _, b := range bodies {
			inner := maps.Clone(scope)
			for _, vi := range b.GetInput() {
				inner[vi.GetName()] = reader
			}
			for _, t := range b.GetInitializer() {
				delete(inner, t.GetName())
			}
			inner = f.graph(b.GetNode(), inner)
			for _, vi := range b.GetOutput() {
				if p, ok := inner[vi.GetName()]; ok {
					f.preds[v] = append(f.preds[v], p)
				}
			}
		}
	}
	return scope
}

// ends returns the weights among order (graph order) that a path meets first from the
// graph's inputs, and those it meets last before the graph's outputs. A weight is first
// when some path of the dataflow from a graph input reaches a node that reads it without
// passing through another node that reads one of order's weights; last when some path
// from it to a graph output passes through no such node. A trunk with two heads thus has
// two last weights, an If whose branches each end in a layer has both, and a network with
// two inputs has a first weight on each; a residual connection that skips a layer makes the
// layer after it first (or last) too. Both lists follow order.
func ends(m *onnxio.Model, order []string) (first, last []string) {
	weight := map[string]bool{}
	for _, w := range order {
		weight[w] = true
	}
	reads := map[*onnxpb.NodeProto][]string{}
	for _, u := range m.ParamReads() {
		if in := u.Node.GetInput()[u.Input]; weight[in] {
			reads[u.Node] = append(reads[u.Node], in)
		}
	}
	f := newDataflow(m)
	succs := make([][]int, len(f.preds))
	for v, ps := range f.preds {
		for _, p := range ps {
			succs[p] = append(succs[p], v)
		}
	}
	// search walks from start along next, stopping at the vertices that read a weight.
	search := func(start int, next [][]int) map[string]bool {
		found := map[string]bool{}
		seen := map[int]bool{start: true}
		stack := []int{start}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if ws := reads[f.node[v]]; v != start && len(ws) > 0 {
				for _, w := range ws {
					found[w] = true
				}
				continue
			}
			for _, u := range next[v] {
				if !seen[u] {
					seen[u] = true
					stack = append(stack, u)
				}
			}
		}
		return found
	}
	isFirst, isLast := search(flowSource, succs), search(flowSink, f.preds)
	for _, w := range order {
		if isFirst[w] {
			first = append(first, w)
		}
		if isLast[w] {
			last = append(last, w)
		}
	}
	return first, last
}
