package onnxio

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Param is a constant tensor of the main graph: an initializer, or the value of a
// Constant node, which several converters use for weights.
type Param struct {
	Name   string
	Tensor *onnxpb.TensorProto
	// Node is the Constant node that holds the tensor, or nil for an initializer.
	Node *onnxpb.NodeProto
}

// constantValue returns the tensor of a Constant node holding its value in the "value"
// attribute, or nil. Constants given as value_float, value_ints and the like are small
// literals, not parameters, and the engine evaluates them as nodes.
func constantValue(n *onnxpb.NodeProto) *onnxpb.TensorProto {
	if n.GetOpType() != "Constant" || (n.GetDomain() != "" && n.GetDomain() != "ai.onnx") || len(n.GetOutput()) != 1 {
		return nil
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() == "value" && a.GetT() != nil {
			return a.GetT()
		}
	}
	return nil
}

// Params lists the main graph's parameters — initializers first, in file order, then
// the tensors of Constant nodes in node order — each under the name the graph uses for it.
func (m *Model) Params() []Param {
	g := m.Proto.GetGraph()
	var ps []Param
	for _, t := range g.GetInitializer() {
		ps = append(ps, Param{Name: t.GetName(), Tensor: t})
	}
	for _, n := range g.GetNode() {
		if t := constantValue(n); t != nil {
			ps = append(ps, Param{Name: n.GetOutput()[0], Tensor: t, Node: n})
		}
	}
	return ps
}

// Param returns the parameter with the given name.
func (m *Model) Param(name string) (Param, bool) {
	for _, p := range m.Params() {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// SetParam replaces the value of the named parameter where it lives: the initializer, or
// the Constant node's value attribute. The tensor's name is set to the parameter's name.
func (m *Model) SetParam(name string, t *onnxpb.TensorProto) error {
	t.Name = proto.String(name)
	g := m.Proto.GetGraph()
	for i, init := range g.GetInitializer() {
		if init.GetName() == name {
			g.Initializer[i] = t
			return nil
		}
	}
	for _, n := range g.GetNode() {
		if constantValue(n) == nil || n.GetOutput()[0] != name {
			continue
		}
		for _, a := range n.GetAttribute() {
			if a.GetName() == "value" {
				a.T = t
				return nil
			}
		}
	}
	return fmt.Errorf("onnxio: %s: no parameter named %q", m.Name, name)
}

// Consumers returns the main-graph nodes that read the named value, with the input slot
// each reads it in.
func (m *Model) Consumers(name string) []Use {
	var uses []Use
	for _, n := range m.Proto.GetGraph().GetNode() {
		for i, in := range n.GetInput() {
			if in == name {
				uses = append(uses, Use{Node: n, Input: i})
			}
		}
	}
	return uses
}

// Use is one read of a value by a node.
type Use struct {
	Node  *onnxpb.NodeProto
	Input int
}
