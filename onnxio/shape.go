package onnxio

import (
	"strconv"
	"strings"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Dim is one dimension of a declared shape: a fixed size, a symbolic name such as a
// batch dimension (dim_param), or unknown.
type Dim struct {
	Value int64  // the size, when Fixed
	Param string // the symbolic name, when the dimension has one
	Fixed bool
}

// String returns the size, the symbolic name, or "?" for an unknown dimension.
func (d Dim) String() string {
	switch {
	case d.Fixed:
		return strconv.FormatInt(d.Value, 10)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// ValueType is the declared type of a graph input, output or value_info entry.
type ValueType struct {
	Name string
	// Kind is "tensor", "sparse_tensor", "sequence", "map" or "optional", or "" when the
	// entry declares no type.
	Kind string
	// Elem is the element type of a tensor or sparse tensor.
	Elem DataType
	// Ranked reports whether the shape is declared; Shape is then the dimensions, empty
	// for a scalar.
	Ranked bool
	Shape  []Dim
}

// ShapeString formats the shape as "[batch 1 28 28]", "[]" for a scalar and "?" when
// it is not declared.
func (v ValueType) ShapeString() string {
	if !v.Ranked {
		return "?"
	}
	parts := make([]string, len(v.Shape))
	for i, d := range v.Shape {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ValueInfo describes a ValueInfoProto.
func ValueInfo(vi *onnxpb.ValueInfoProto) ValueType {
	v := ValueType{Name: vi.GetName()}
	tp := vi.GetType()
	var shape *onnxpb.TensorShapeProto
	switch {
	case tp.GetTensorType() != nil:
		v.Kind = "tensor"
		v.Elem = DataType(tp.GetTensorType().GetElemType())
		shape = tp.GetTensorType().GetShape()
	case tp.GetSparseTensorType() != nil:
		v.Kind = "sparse_tensor"
		v.Elem = DataType(tp.GetSparseTensorType().GetElemType())
		shape = tp.GetSparseTensorType().GetShape()
	case tp.GetSequenceType() != nil:
		v.Kind = "sequence"
	case tp.GetMapType() != nil:
		v.Kind = "map"
	case tp.GetOptionalType() != nil:
		v.Kind = "optional"
	}
	if shape != nil {
		v.Ranked = true
		v.Shape = make([]Dim, len(shape.GetDim()))
		for i, d := range shape.GetDim() {
			switch x := d.GetValue().(type) {
			case *onnxpb.TensorShapeProto_Dimension_DimValue:
				v.Shape[i] = Dim{Value: x.DimValue, Fixed: true}
			case *onnxpb.TensorShapeProto_Dimension_DimParam:
				v.Shape[i] = Dim{Param: x.DimParam}
			}
		}
	}
	return v
}

// Inputs describes the main graph's inputs that callers feed: those without an
// initializer of the same name, which IR versions before 4 list among the inputs.
func (m *Model) Inputs() []ValueType {
	g := m.Proto.GetGraph()
	inits := make(map[string]bool, len(g.GetInitializer()))
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	var vs []ValueType
	for _, vi := range g.GetInput() {
		if !inits[vi.GetName()] {
			vs = append(vs, ValueInfo(vi))
		}
	}
	return vs
}

// Outputs describes the main graph's outputs.
func (m *Model) Outputs() []ValueType {
	var vs []ValueType
	for _, vi := range m.Proto.GetGraph().GetOutput() {
		vs = append(vs, ValueInfo(vi))
	}
	return vs
}
