package train

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// BNStatsError reports a BatchNormalization node whose running statistics are not
// parameters the re-estimation can write, even after following Identity nodes.
type BNStatsError struct {
	Node, Mean, Var string
	// Producer is the op that computes the statistic instead, when one does.
	Producer string
}

func (e *BNStatsError) Error() string {
	s := fmt.Sprintf("recalibrate BatchNorm: node %s: running statistics %s and %s are not float parameters of the graph", e.Node, e.Mean, e.Var)
	if e.Producer != "" {
		s += fmt.Sprintf(" (one is computed by a %s node)", e.Producer)
	}
	return s
}

// SeparateBNStats gives every BatchNormalization node of m's main graph running
// statistics of its own, so that RecalibrateBN and training-mode passes can write them.
// Exporters merge identical initializers: PyTorch 1.13 makes every freshly initialised
// running mean an Identity of one zero tensor, often a BatchNorm's own bias, and every
// running variance an Identity of a ones tensor, often a BatchNorm's scale. Written in
// place through the alias, the statistics of sixty nodes would overwrite each other and
// the trained scale and shift, so each aliased statistic instead becomes a new
// initializer holding a copy of the value its Identity chain starts from (named after
// the node, made unique), and the Identity nodes left without consumers are removed.
// Only Identity is followed: it is what exporters emit for merged initializers, and any
// other producer (a Reshape, an arithmetic op) computes a value no write could invert.
//
// Call it before building m's graph. It returns the names of the nodes it changed;
// models without aliased statistics are left exactly as they were.
func SeparateBNStats(m *onnxio.Model) ([]string, error) {
	g := m.Proto.GetGraph()
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	used := map[string]bool{}
	for _, p := range m.Params() {
		used[p.Name] = true
	}
	for n := range producer {
		used[n] = true
	}
	for _, v := range g.GetInput() {
		used[v.GetName()] = true
	}
	// resolve follows Identity nodes from name back to a parameter.
	resolve := func(name string) (*onnxpb.TensorProto, string, bool) {
		for range len(g.GetNode()) + 1 {
			if p, ok := m.Param(name); ok {
				return p.Tensor, "", true
			}
			n := producer[name]
			if n == nil {
				return nil, "", false
			}
			if n.GetOpType() != "Identity" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") || len(n.GetInput()) != 1 {
				return nil, n.GetOpType(), false
			}
			name = n.GetInput()[0]
		}
		return nil, "", false
	}
	var changed []string
	for _, n := range g.GetNode() {
		if n.GetOpType() != "BatchNormalization" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") || len(n.GetInput()) < 5 {
			continue
		}
		node := n.GetName()
		if node == "" && len(n.GetOutput()) > 0 {
			node = n.GetOutput()[0]
		}
		did := false
		for i, suffix := range [...]string{3: "running_mean", 4: "running_var"} {
			if suffix == "" {
				continue
			}
			in := n.GetInput()[i]
			if _, ok := m.Param(in); ok {
				continue
			}
			t, op, ok := resolve(in)
			if !ok {
				return changed, &BNStatsError{Node: node, Mean: n.GetInput()[3], Var: n.GetInput()[4], Producer: op}
			}
			name := node + "." + suffix
			for k := 1; used[name]; k++ {
				name = fmt.Sprintf("%s.%s_%d", node, suffix, k)
			}
			used[name] = true
			c := proto.Clone(t).(*onnxpb.TensorProto)
			c.Name = proto.String(name)
			g.Initializer = append(g.Initializer, c)
			n.Input[i] = name
			did = true
		}
		if did {
			changed = append(changed, node)
		}
	}
	if len(changed) > 0 {
		pruneIdentities(g)
	}
	return changed, nil
}

// pruneIdentities removes the Identity nodes whose outputs nothing reads (no node, no
// graph output, no subgraph by name), repeating until none is left.
func pruneIdentities(g *onnxpb.GraphProto) {
	for {
		read := map[string]bool{}
		for _, o := range g.GetOutput() {
			read[o.GetName()] = true
		}
		var mark func(ns []*onnxpb.NodeProto)
		mark = func(ns []*onnxpb.NodeProto) {
			for _, n := range ns {
				for _, in := range n.GetInput() {
					read[in] = true
				}
				for _, a := range n.GetAttribute() {
					// A subgraph may read outer values by name.
					if sg := a.GetG(); sg != nil {
						mark(sg.GetNode())
						for _, o := range sg.GetOutput() {
							read[o.GetName()] = true
						}
					}
					for _, sg := range a.GetGraphs() {
						mark(sg.GetNode())
						for _, o := range sg.GetOutput() {
							read[o.GetName()] = true
						}
					}
				}
			}
		}
		mark(g.GetNode())
		kept := g.Node[:0]
		removed := false
		for _, n := range g.GetNode() {
			if n.GetOpType() == "Identity" && len(n.GetOutput()) == 1 && !read[n.GetOutput()[0]] {
				removed = true
				continue
			}
			kept = append(kept, n)
		}
		g.Node = kept
		if !removed {
			return
		}
	}
}
