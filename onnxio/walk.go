package onnxio

import (
	"fmt"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// eachTensor calls f for every TensorProto stored anywhere in the model — initializers,
// the parts of sparse initializers, tensor-valued attributes (Constant values among them),
// in the main graph, its subgraphs, local functions and training graphs — in a fixed
// order, so that two walks of a model and of its clone visit corresponding tensors. It
// stops at the first error f returns. desc names the tensor for error messages: its name,
// or for an unnamed attribute tensor the node that holds it. Recursion depth is bounded
// by the protobuf decoder's nesting limit.
func eachTensor(mp *onnxpb.ModelProto, f func(t *onnxpb.TensorProto, desc string) error) error {
	w := tensorWalker{f: f}
	if err := w.graph(mp.GetGraph()); err != nil {
		return err
	}
	for _, fn := range mp.GetFunctions() {
		if err := w.nodes(fn.GetNode()); err != nil {
			return err
		}
	}
	for _, ti := range mp.GetTrainingInfo() {
		if err := w.graph(ti.GetInitialization()); err != nil {
			return err
		}
		if err := w.graph(ti.GetAlgorithm()); err != nil {
			return err
		}
	}
	return nil
}

type tensorWalker struct {
	f func(t *onnxpb.TensorProto, desc string) error
}

// tensor visits t; holder describes where an unnamed tensor lives.
func (w tensorWalker) tensor(t *onnxpb.TensorProto, holder func() string) error {
	if t == nil {
		return nil
	}
	desc := fmt.Sprintf("tensor %q", t.GetName())
	if t.GetName() == "" && holder != nil {
		desc = "tensor in " + holder()
	}
	return w.f(t, desc)
}

func (w tensorWalker) sparse(s *onnxpb.SparseTensorProto, holder func() string) error {
	if err := w.tensor(s.GetValues(), holder); err != nil {
		return err
	}
	return w.tensor(s.GetIndices(), holder)
}

func (w tensorWalker) graph(g *onnxpb.GraphProto) error {
	if g == nil {
		return nil
	}
	for _, t := range g.GetInitializer() {
		if err := w.tensor(t, nil); err != nil {
			return err
		}
	}
	for _, s := range g.GetSparseInitializer() {
		if err := w.sparse(s, nil); err != nil {
			return err
		}
	}
	return w.nodes(g.GetNode())
}

func (w tensorWalker) nodes(nodes []*onnxpb.NodeProto) error {
	for _, n := range nodes {
		for _, a := range n.GetAttribute() {
			holder := func() string { return fmt.Sprintf("attribute %q of %s", a.GetName(), nodeDesc(n)) }
			if err := w.tensor(a.GetT(), holder); err != nil {
				return err
			}
			for _, t := range a.GetTensors() {
				if err := w.tensor(t, holder); err != nil {
					return err
				}
			}
			if err := w.sparse(a.GetSparseTensor(), holder); err != nil {
				return err
			}
			for _, s := range a.GetSparseTensors() {
				if err := w.sparse(s, holder); err != nil {
					return err
				}
			}
			if err := w.graph(a.GetG()); err != nil {
				return err
			}
			for _, g := range a.GetGraphs() {
				if err := w.graph(g); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// nodeDesc names a node for error messages: by its name, or by its op type and first
// output when it has none, as many exporters leave nodes unnamed.
func nodeDesc(n *onnxpb.NodeProto) string {
	if n.GetName() != "" {
		return fmt.Sprintf("node %q", n.GetName())
	}
	if len(n.GetOutput()) > 0 {
		return fmt.Sprintf("%s node with output %q", n.GetOpType(), n.GetOutput()[0])
	}
	return fmt.Sprintf("unnamed %s node", n.GetOpType())
}
