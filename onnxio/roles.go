package onnxio

import "github.com/qtool/qtool/onnxio/onnxpb"

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

// ParamRole classifies the named parameter by the main-graph nodes that read it. When
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
	for _, p := range params {
		tensor[p.Name] = p.Tensor
	}
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	out := make(map[string]Classification, len(params))
	for _, p := range params {
		out[p.Name] = Classification{}
	}
	for _, n := range m.Proto.GetGraph().GetNode() {
		for i, in := range n.GetInput() {
			t, ok := tensor[in]
			if !ok {
				continue
			}
			u := Use{Node: n, Input: i}
			r := useRole(u, t, tensor, producer)
			if c := out[in]; r != RoleOther && (c.Role == RoleOther || r < c.Role) {
				out[in] = Classification{Role: r, Use: u}
			}
		}
	}
	return out
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
