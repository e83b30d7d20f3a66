package engine

// builders returns the kernel builder of every op the engine supports, keyed by op type.
// It builds a fresh map per call so that no package state is shared between graphs.
func builders() map[string]Builder {
	m := map[string]Builder{}
	for _, set := range []map[string]Builder{nnOps(), elementwiseOps(), shapeOps(), quantOps()} {
		for k, b := range set {
			m[k] = b
		}
	}
	return m
}

// requiredInputs returns how many leading inputs of an op are required at an opset (every
// later input is optional), following the ONNX schemas; variadic ops require every input
// they list, and at least one.
func requiredInputs(op string, opset int64) (n int, variadic bool) {
	switch op {
	case "Concat", "Max", "Min":
		return 1, true
	case "Constant":
		return 0, false
	case "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "MatMul", "Conv", "ConvTranspose",
		"Expand", "Gather", "Reshape", "LayerNormalization", "DequantizeLinear", "QuantizeLinear":
		return 2, false
	case "Gemm":
		if opset < 11 {
			return 3, false
		}
		return 2, false
	case "Pad":
		if opset < 11 {
			return 1, false
		}
		return 2, false
	case "Unsqueeze":
		if opset < 13 {
			return 1, false
		}
		return 2, false
	case "Slice":
		if opset < 10 {
			return 1, false
		}
		return 3, false
	case "InstanceNormalization":
		return 3, false
	case "BatchNormalization":
		return 5, false
	}
	return 1, false
}
