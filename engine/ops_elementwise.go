package engine

// elementwiseOps returns the builders of the element-wise, activation, softmax and
// reduction ops (files elementwise_*.go).
func elementwiseOps() map[string]Builder {
	return map[string]Builder{
		"Add":   newBinary(opAdd),
		"Sub":   newBinary(opSub),
		"Mul":   newBinary(opMul),
		"Div":   newBinary(opDiv),
		"Pow":   newBinary(opPow),
		"PRelu": newBinary(opPRelu),
		"Min":   newMinMax(false),
		"Max":   newMinMax(true),

		"Sqrt":        newUnary(uSqrt),
		"Neg":         newUnary(uNeg),
		"Abs":         newUnary(uAbs),
		"Exp":         newUnary(uExp),
		"Log":         newUnary(uLog),
		"Erf":         newUnary(uErf),
		"Reciprocal":  newUnary(uRecip),
		"Relu":        newUnary(uRelu),
		"LeakyRelu":   newUnary(uLeakyRelu),
		"Sigmoid":     newUnary(uSigmoid),
		"HardSigmoid": newUnary(uHardSigmoid),
		"HardSwish":   newUnary(uHardSwish),
		"Tanh":        newUnary(uTanh),
		"Clip":        newUnary(uClip),

		"Softmax":    newSoftmax(false),
		"LogSoftmax": newSoftmax(true),

		"ReduceSum":  newReduce(reduceSum, false),
		"ReduceMean": newReduce(reduceSum, true),
		"ReduceMax":  newReduce(reduceMax, false),
	}
}
