package engine

// SetMaxBytes changes the bound on the graph's plans (Options.MaxBytes; 0 or less means
// DefaultMaxBytes) and drops the cached plans when they no longer fit under it. A caller
// that runs several graphs side by side within one memory budget (binarize: the graph it
// trains and its full-precision teacher) gives each graph its share, so that the plans
// all the graphs cache stay within the budget together.
func (g *Graph) SetMaxBytes(n int64) {
	g.opts.MaxBytes = n
	if g.cached > g.maxBytes() {
		g.clearPlans()
	}
}
