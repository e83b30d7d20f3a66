package engine

// shapeOps returns the builders of this file's ops.
func shapeOps() map[string]Builder {
	return map[string]Builder{}
}
