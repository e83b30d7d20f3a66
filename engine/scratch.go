package engine

import "sync/atomic"

// scratchArena is scratch memory that the kernels of one graph share. Its nodes run one
// at a time, so the largest call's scratch serves them all, where buffers kept by each
// kernel added up: training torchvision ResNet-18 at 224 px held 470 MB of convolution
// gradient buffers, one set per layer, each used for a moment of the backward pass.
// What a kernel leaves in it does not survive to its next call.
type scratchArena struct {
	busy atomic.Bool // a kernel call holds buf; a nested or concurrent one uses its own
	buf  []float32
}

// scratch returns n float32 values of scratch for one kernel call, their contents
// undefined: the graph's shared arena when the context has one and no other call holds
// it (shared is then true, and the caller must hand it to releaseScratch when done, and
// keep no reference to the values after), else *own, grown to n and kept by the caller
// between calls, as kernels run outside a graph (tests, constant folding) do.
func (ctx *Context) scratch(own *[]float32, n int) (buf []float32, shared bool) {
	if ctx != nil && ctx.arena != nil && ctx.arena.busy.CompareAndSwap(false, true) {
		a := ctx.arena
		if len(a.buf) < n {
			a.buf = nil // not held while its successor is made
			a.buf = make([]float32, n)
		}
		return a.buf[:n], true
	}
	*own = nnGrow(*own, n)
	return (*own)[:n], false
}

// releaseScratch ends the hold of a scratch call whose shared result was true.
func (ctx *Context) releaseScratch(shared bool) {
	if shared {
		ctx.arena.busy.Store(false)
	}
}
