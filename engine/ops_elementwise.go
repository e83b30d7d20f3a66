package engine

// elementwiseOps returns the builders of this file's ops.
func elementwiseOps() map[string]Builder {
	return map[string]Builder{}
}
