package engine

// builders returns the kernel builder of every op the engine supports, keyed by op type.
// It builds a fresh map per call so that no package state is shared between graphs.
func builders() map[string]Builder {
	m := map[string]Builder{}
	for _, set := range []map[string]Builder{nnOps(), elementwiseOps(), shapeOps()} {
		for k, b := range set {
			m[k] = b
		}
	}
	return m
}
