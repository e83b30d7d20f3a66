package engine

// opDef is one row of the op table: everything the graph builder and the tests need to
// know about an op besides its kernel's code. Rows live next to their kernels (the
// *OpDefs functions of each file); registry gathers them into the one table that Build
// consults and that TestOpCoverage walks.
type opDef struct {
	name  string
	build Builder
	// inputs is how many leading inputs the ONNX schema requires (every later input is
	// optional), and how that changed between opsets.
	inputs arity
	// grad is true when the kernel has a vector-Jacobian product (implements
	// Differentiable); TestOpCoverage then demands a finite-difference check of it.
	grad bool
	// sameType is true when the op moves data without changing its element type, so
	// that its outputs have the declared type of its first input.
	sameType bool
}

// arity is the number of inputs an op requires at an opset.
type arity struct {
	n int // required leading inputs from opset `since` on
	// variadic ops require every input they list, and at least n.
	variadic bool
	// Before opset since the op required old inputs instead of n.
	since int64
	old   int
}

// at returns the required leading inputs at an opset.
func (a arity) at(opset int64) int {
	if opset < a.since {
		return a.old
	}
	return a.n
}

// registry returns the op table keyed by op type. It builds a fresh map per call so that
// no package state is shared between graphs; a duplicate row panics, since it can only be
// a programming error that every test would hit.
func registry() map[string]opDef {
	m := map[string]opDef{}
	for _, set := range [][]opDef{nnOpDefs(), elementwiseOpDefs(), logicOpDefs(), shapeOpDefs(), quantOpDefs(), controlOpDefs(), resizeOpDefs(), einsumOpDefs(), nbitsOpDefs()} {
		for _, d := range set {
			if _, dup := m[d.name]; dup {
				panic("engine: op " + d.name + " is registered twice")
			}
			m[d.name] = d
		}
	}
	return m
}

// MSDomain is onnxruntime's contrib domain, whose MatMulNBits the engine runs so that
// qtool can evaluate the files its matmulnbits export writes.
const MSDomain = "com.microsoft"

// opKey returns the op table key of a node: its op type in the default domain, and
// "com.microsoft.<op>" in onnxruntime's; ok is false for every other domain.
func opKey(domain, op string) (key string, ok bool) {
	switch domain {
	case "", "ai.onnx":
		return op, true
	case MSDomain:
		return MSDomain + "." + op, true
	}
	return "", false
}
