package engine

// shapeOpDefs returns the rows of the ops that move, reshape, create or convert data
// (shape_*.go hold the kernels).
func shapeOpDefs() []opDef {
	one, two := arity{n: 1}, arity{n: 2}
	return []opDef{
		{name: "Flatten", build: buildFlatten, inputs: one, grad: true, sameType: true},
		{name: "Reshape", build: buildReshape, inputs: two, grad: true, sameType: true},
		{name: "Squeeze", build: buildSqueeze, inputs: one, grad: true, sameType: true},
		// Axes moved from an attribute to an input in opset 13.
		{name: "Unsqueeze", build: buildUnsqueeze, inputs: arity{n: 2, since: 13, old: 1}, grad: true, sameType: true},
		{name: "Identity", build: buildIdentity, inputs: one, grad: true, sameType: true},
		{name: "Transpose", build: buildTranspose, inputs: one, grad: true, sameType: true},
		{name: "Concat", build: buildConcat, inputs: arity{n: 1, variadic: true}, grad: true, sameType: true},
		{name: "Split", build: buildSplit, inputs: one, grad: true, sameType: true},
		// Starts and ends moved from attributes to inputs in opset 10.
		{name: "Slice", build: buildSlice, inputs: arity{n: 3, since: 10, old: 1}, grad: true, sameType: true},
		{name: "Gather", build: buildGather, inputs: two, grad: true, sameType: true},
		{name: "Shape", build: buildShape, inputs: one},
		{name: "Size", build: buildSize, inputs: one},
		{name: "Range", build: buildRange, inputs: arity{n: 3}},
		{name: "Cast", build: buildCast, inputs: one, grad: true},
		{name: "Expand", build: buildExpand, inputs: two, grad: true, sameType: true},
		{name: "Tile", build: buildTile, inputs: two, grad: true, sameType: true},
		{name: "Dropout", build: buildDropout, inputs: one, grad: true},
		{name: "Constant", build: buildConstant},
		{name: "ConstantOfShape", build: buildConstantOfShape, inputs: one},
		// Pads moved from an attribute to an input in opset 11.
		{name: "Pad", build: buildPad, inputs: arity{n: 2, since: 11, old: 1}, grad: true},
	}
}
