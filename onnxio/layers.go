package onnxio

import (
	"fmt"
	"slices"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Layer is the schema of one ONNX operator type that holds parameters binarization cares
// about: the role of each of its inputs and, for the linear operators, where the output
// channels of a weight lie. It is the one place qtool writes this down; ParamRoles,
// target selection, the per-channel grids, export and inspect all read it.
type Layer struct {
	// Op is the operator type in the default domain, e.g. "Conv".
	Op string
	// roles[i] is the role of input i when it is a parameter; inputs past the end are
	// RoleOther.
	roles []Role
	// axis returns the output-channel axis of input of n, a weight of the given dims.
	axis func(n *onnxpb.NodeProto, input int, dims []int64) (int, string)
}

// layers is the schema, in the order Layers lists it. The weight layouts are the ONNX
// specification's:
//
//	Conv           X, W [M, C/group, k...], B [M]      channels on axis 0 of W
//	ConvTranspose  X, W [C, M/group, k...], B [M]      axis 1 when group = 1
//	Gemm           A [M, K], B [K, N], C               A: axis 0, B: axis 1 (swapped by transA, transB)
//	MatMul         A [..., M, K], B [..., K, N]        A: axis rank−2, B: axis rank−1
//	LSTM, GRU, RNN X, W [D, G·H, I], R [D, G·H, H],    axis 1 of W and R
//	               B [D, 2·G·H], …
//
// A recurrent op's "output channel" is a row of W and R: one gate of one hidden unit
// (G gates, H units, D directions), whose pre-activation that row alone computes. Per-row
// scales along axis 1 are therefore the natural per-channel scales; with D = 2 the two
// directions' row j share one scale, since one axis cannot also split axis 0.
var layers = []Layer{
	{Op: "Conv", roles: []Role{RoleOther, RoleWeight, RoleBias}, axis: convAxis},
	{Op: "ConvTranspose", roles: []Role{RoleOther, RoleWeight, RoleBias}, axis: convTransposeAxis},
	{Op: "Gemm", roles: []Role{RoleWeight, RoleWeight, RoleBias}, axis: gemmAxis},
	{Op: "MatMul", roles: []Role{RoleWeight, RoleWeight}, axis: matMulAxis},
	{Op: "LSTM", roles: []Role{RoleOther, RoleWeight, RoleWeight, RoleBias}, axis: recurrentAxis},
	{Op: "GRU", roles: []Role{RoleOther, RoleWeight, RoleWeight, RoleBias}, axis: recurrentAxis},
	{Op: "RNN", roles: []Role{RoleOther, RoleWeight, RoleWeight, RoleBias}, axis: recurrentAxis},
	{Op: "BatchNormalization", roles: []Role{RoleOther, RoleNorm, RoleNorm, RoleNorm, RoleNorm}},
	{Op: "InstanceNormalization", roles: []Role{RoleOther, RoleNorm, RoleNorm}},
	{Op: "LayerNormalization", roles: []Role{RoleOther, RoleNorm, RoleNorm}},
	{Op: "GroupNormalization", roles: []Role{RoleOther, RoleNorm, RoleNorm}},
}

// Layers returns the schema, one row per operator type: the linear operators Conv,
// ConvTranspose, Gemm and MatMul, the recurrent LSTM, GRU and RNN, then the
// normalisations.
func Layers() []Layer { return slices.Clone(layers) }

// LayerOf returns the schema of the default-domain operator type op, and false when
// binarization gives none of its inputs a role.
func LayerOf(op string) (Layer, bool) {
	for _, l := range layers {
		if l.Op == op {
			return l, true
		}
	}
	return Layer{}, false
}

// Role returns the role of input when it is a parameter. A weight input is a weight only
// when it holds floating-point values; ParamRoles checks that.
func (l Layer) Role(input int) Role {
	if input < 0 || input >= len(l.roles) {
		return RoleOther
	}
	return l.roles[input]
}

// Inputs returns the indices of the inputs that have role r, in increasing order.
func (l Layer) Inputs(r Role) []int {
	var in []int
	for i, ri := range l.roles {
		if ri == r {
			in = append(in, i)
		}
	}
	return in
}

// Linear reports whether the operator has weights that binarization targets.
func (l Layer) Linear() bool { return l.axis != nil }

// Normalization reports whether the operator is a normalisation, whose parameters stay in
// full precision and absorb the scale of the weights before it.
func (l Layer) Normalization() bool { return slices.Contains(l.roles, RoleNorm) }

// Layer returns the schema of the node u reads through, and false when the node is in a
// domain other than the default one or has no row in the schema.
func (u Use) Layer() (Layer, bool) {
	if u.Node == nil || u.Node.GetDomain() != "" && u.Node.GetDomain() != "ai.onnx" {
		return Layer{}, false
	}
	return LayerOf(u.Node.GetOpType())
}

// ChannelAxisError reports a weight whose output channels do not lie along one axis of
// its tensor, or an input that is no weight at all. Per-channel scales then degenerate to
// one scale for the whole tensor.
type ChannelAxisError struct {
	Op     string
	Input  int
	Dims   []int64
	Reason string
}

func (e *ChannelAxisError) Error() string {
	return fmt.Sprintf("onnxio: input %d of %s (shape %v) has no output-channel axis: %s", e.Input, e.Op, e.Dims, e.Reason)
}

// ChannelAxis returns the axis of the weight u reads, a tensor of the given dims, along
// which the output channels of u's node lie: index c on that axis holds exactly the
// weights that produce output channel c. Per-channel scales run along it. It reads the
// attributes that move the axis (Gemm's transA and transB) and refuses the layouts where
// no single axis works, such as a grouped ConvTranspose, whose output channel is split
// between axis 0 (the group) and axis 1; the error is then a *ChannelAxisError.
func (u Use) ChannelAxis(dims []int64) (int, error) {
	l, ok := u.Layer()
	op := u.Node.GetOpType()
	if !ok || l.Role(u.Input) != RoleWeight {
		return 0, &ChannelAxisError{Op: op, Input: u.Input, Dims: dims, Reason: "the input is not a weight"}
	}
	axis, why := l.axis(u.Node, u.Input, dims)
	if why != "" {
		return 0, &ChannelAxisError{Op: op, Input: u.Input, Dims: dims, Reason: why}
	}
	return axis, nil
}

// intAttr returns the integer attribute name of n, or def when n does not set it.
func intAttr(n *onnxpb.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

func convAxis(_ *onnxpb.NodeProto, _ int, dims []int64) (int, string) {
	if len(dims) < 2 {
		return 0, "a convolution weight has rank 3 or more"
	}
	// Grouping splits the input channels (axis 1), never the output ones.
	return 0, ""
}

func convTransposeAxis(n *onnxpb.NodeProto, _ int, dims []int64) (int, string) {
	if len(dims) < 2 {
		return 0, "a convolution weight has rank 3 or more"
	}
	if g := intAttr(n, "group", 1); g != 1 {
		// Output channel g·(M/group) + j is row block g of axis 0 and index j of axis 1.
		return 0, fmt.Sprintf("with group = %d the output channels run over axes 0 and 1", g)
	}
	return 1, ""
}

func gemmAxis(n *onnxpb.NodeProto, input int, dims []int64) (int, string) {
	if len(dims) != 2 {
		return 0, "a Gemm operand has rank 2"
	}
	// A's rows are the output's rows and B's columns its columns; transposing an operand
	// swaps its axes.
	if input == 0 {
		if intAttr(n, "transA", 0) != 0 {
			return 1, ""
		}
		return 0, ""
	}
	if intAttr(n, "transB", 0) != 0 {
		return 0, ""
	}
	return 1, ""
}

func matMulAxis(_ *onnxpb.NodeProto, input int, dims []int64) (int, string) {
	if len(dims) < 2 {
		// numpy semantics drop a 1-D operand's axis from the output.
		return 0, "a 1-D MatMul operand adds no axis to the output"
	}
	if input == 0 {
		return len(dims) - 2, ""
	}
	return len(dims) - 1, ""
}

func recurrentAxis(_ *onnxpb.NodeProto, _ int, dims []int64) (int, string) {
	if len(dims) != 3 {
		return 0, "a recurrent weight has shape [directions, gates·hidden, inputs]"
	}
	return 1, ""
}
