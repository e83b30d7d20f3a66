package onnxio

import (
	"maps"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Role says what a parameter is to binarization: the weights of the linear operators
// are put on the binary grid, everything else stays in full precision.
type Role int

const (
	// RoleOther is any parameter that is neither a weight, a bias nor a normalisation
	// parameter: shapes, indices, scalars, embedding tables and the like.
	RoleOther Role = iota
	// RoleWeight is the weight of a linear operator, which binarization targets: input 1
	// of Conv and ConvTranspose, input 1 of Gemm (and input 0 when it is a parameter),
	// and either operand of MatMul that is a parameter (see Layers). Only floating-point
	// tensors qualify.
	RoleWeight
	// RoleBias is the bias of Conv, ConvTranspose or Gemm (input 2), or a parameter added
	// to the output of one of them or of MatMul.
	RoleBias
	// RoleNorm is the scale, shift, mean or variance of a normalisation operator.
	RoleNorm
)

// String returns "weight", "bias", "normalization" or "other".
func (r Role) String() string {
	switch r {
	case RoleWeight:
		return "weight"
	case RoleBias:
		return "bias"
	case RoleNorm:
		return "normalization"
	}
	return "other"
}

// Classification is the role of one parameter and the read that decided it; Use.Node
// is nil for RoleOther.
type Classification struct {
	Role Role
	Use  Use
}

// ParamRole classifies the named parameter by the nodes that read it (ParamReads). When
// its readers disagree the strongest role wins, in the order weight, bias,
// normalization, other, so that a weight shared with another operator is still
// targeted.
func (m *Model) ParamRole(name string) Classification {
	return m.ParamRoles()[name]
}

// ParamRoles classifies every parameter of Params, keyed by name.
func (m *Model) ParamRoles() map[string]Classification {
	params := m.Params()
	tensor := make(map[string]*onnxpb.TensorProto, len(params))
	out := make(map[string]Classification, len(params))
	for _, p := range params {
		tensor[p.Name] = p.Tensor
		out[p.Name] = Classification{}
	}
	m.walkReads(tensor, func(u Use, producer map[string]*onnxpb.NodeProto) {
		in := u.Node.GetInput()[u.Input]
		r := useRole(u, tensor[in], tensor, producer)
		if c := out[in]; r != RoleOther && (c.Role == RoleOther || r < c.Role) {
			out[in] = Classification{Role: r, Use: u}
		}
	})
	return out
}

// ParamReads returns every read of a parameter by a node, in graph order: those of the
// main graph's nodes and, where a control-flow node (If, Loop, Scan) stands, those of
// its bodies' nodes, which read a parameter by its name unless the body defines that
// name itself.
func (m *Model) ParamReads() []Use {
	tensor := map[string]*onnxpb.TensorProto{}
	for _, p := range m.Params() {
		tensor[p.Name] = p.Tensor
	}
	var uses []Use
	m.walkReads(tensor, func(u Use, _ map[string]*onnxpb.NodeProto) { uses = append(uses, u) })
	return uses
}

// walkReads calls read for every read of a parameter of params, in graph order, with the
// producers of the values in the reading node's scope.
func (m *Model) walkReads(params map[string]*onnxpb.TensorProto, read func(Use, map[string]*onnxpb.NodeProto)) {
	var walk func(nodes []*onnxpb.NodeProto, shadow map[string]bool, outer map[string]*onnxpb.NodeProto)
	walk = func(nodes []*onnxpb.NodeProto, shadow map[string]bool, outer map[string]*onnxpb.NodeProto) {
		producer := maps.Clone(outer)
		for _, n := range nodes {
			for _, o := range n.GetOutput() {
				producer[o] = n
			}
		}
		for _, n := range nodes {
			for i, in := range n.GetInput() {
				if _, ok := params[in]; ok && !shadow[in] {
					read(Use{Node: n, Input: i}, producer)
				}
			}
			for _, a := range n.GetAttribute() {
				for _, sg := range append([]*onnxpb.GraphProto{a.GetG()}, a.GetGraphs()...) {
					if sg == nil {
						continue
					}
					inner := maps.Clone(shadow)
					for _, t := range sg.GetInitializer() {
						inner[t.GetName()] = true
					}
					for _, vi := range sg.GetInput() {
						inner[vi.GetName()] = true
					}
					for _, bn := range sg.GetNode() {
						for _, o := range bn.GetOutput() {
							inner[o] = true
						}
					}
					walk(sg.GetNode(), inner, producer)
				}
			}
		}
	}
	walk(m.Proto.GetGraph().GetNode(), map[string]bool{}, map[string]*onnxpb.NodeProto{})
}

// useRole is the role one read gives a parameter.
func useRole(u Use, t *onnxpb.TensorProto, params map[string]*onnxpb.TensorProto, producer map[string]*onnxpb.NodeProto) Role {
	if l, ok := u.Layer(); ok {
		r := l.Role(u.Input)
		if r == RoleWeight && !IsFloat(DataType(t.GetDataType())) {
			return RoleOther
		}
		return r
	}
	n := u.Node
	if n.GetOpType() != "Add" || n.GetDomain() != "" && n.GetDomain() != "ai.onnx" || len(n.GetInput()) != 2 {
		return RoleOther
	}
	// The bias of a Linear layer that PyTorch exports as MatMul followed by Add.
	other := n.GetInput()[1-u.Input]
	if _, isParam := params[other]; !isParam && isLinear(producer[other]) {
		return RoleBias
	}
	return RoleOther
}

func isLinear(n *onnxpb.NodeProto) bool {
	if n == nil {
		return false
	}
	l, ok := Use{Node: n}.Layer()
	return ok && l.Linear()
}
