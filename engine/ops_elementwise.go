package engine

// elementwiseOpDefs returns the rows of the element-wise, activation, softmax and
// reduction ops (files elementwise_*.go).
func elementwiseOpDefs() []opDef {
	one, two := arity{n: 1}, arity{n: 2}
	defs := []opDef{
		{name: "Min", build: newMinMax(false), inputs: arity{n: 1, variadic: true}, grad: true},
		{name: "Max", build: newMinMax(true), inputs: arity{n: 1, variadic: true}, grad: true},

		{name: "Softmax", build: newSoftmax(false), inputs: one, grad: true},
		{name: "LogSoftmax", build: newSoftmax(true), inputs: one, grad: true},

		{name: "ReduceSum", build: newReduce(reduceSum, false, false), inputs: one, grad: true},
		{name: "ReduceMean", build: newReduce(reduceSum, true, false), inputs: one, grad: true},
		{name: "ReduceMax", build: newReduce(reduceMax, false, false), inputs: one, grad: true},
		{name: "ReduceProd", build: newReduce(reduceProd, false, false), inputs: one, grad: true},
		{name: "ReduceL2", build: newReduce(reduceSum, false, true), inputs: one, grad: true},
		{name: "ArgMax", build: buildArgMax, inputs: one},
		{name: "CumSum", build: buildCumSum, inputs: two, grad: true, sameType: true},
	}
	defs = append(defs, unaryOpDefs()...)
	bin := binaryOps()
	for i := range bin {
		defs = append(defs, opDef{name: bin[i].name, build: newBinary(&bin[i]), inputs: two, grad: true})
	}
	return defs
}

// unaryOpDefs returns a row per op of unaryOps (elementwise_unary.go).
func unaryOpDefs() []opDef {
	ops := unaryOps()
	defs := make([]opDef, len(ops))
	for i := range ops {
		defs[i] = opDef{name: ops[i].name, build: newUnary(&ops[i]), inputs: arity{n: 1}, grad: true}
	}
	return defs
}
