package engine

// nnOps returns the builders of this file's ops.
func nnOps() map[string]Builder {
	return map[string]Builder{}
}
