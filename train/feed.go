package train

import (
	"fmt"

	"github.com/qtool/qtool/engine"
)

// MultiBatcher is a Batcher whose batches also hold the model's inputs after the first;
// *calib.Batches implements it. X and Shape are always the model's first input.
type MultiBatcher interface {
	Batcher
	// ExtraInputs returns the number of inputs a batch holds besides X.
	ExtraInputs() int
	// ExtraInput returns input k after X: its name, shape in the current batch, batch axis
	// (-1: none, the same tensor for every batch) and its float32 or int64 values.
	ExtraInput(k int) (name string, shape []int64, axis int, f []float32, i []int64)
}

// Feed holds a model's inputs for one batch, in the graph's input order, and runs a graph
// that declares a fixed batch in chunks of it.
type Feed struct {
	// Inputs are the graph's inputs; they alias the Batcher's buffers.
	Inputs []*engine.Tensor
	// Axes is the batch axis of each input, -1 for an input without one.
	Axes []int
	// N is the number of samples.
	N int
	// OutAxes holds, per output of the last Forward, its batch axis, or -1 for an output
	// without one (a value shared by every sample).
	OutAxes []int

	ts    []engine.Tensor
	chunk []engine.Tensor
	cptrs []*engine.Tensor
	outs  []engine.Tensor
	optrs []*engine.Tensor
}

// DeclaredBatch returns the batch g's first input declares when it is fixed (a model
// exported with a static batch, commonly 1), or 0 when it is free.
func DeclaredBatch(g *engine.Graph) int {
	if in := g.Inputs(); len(in) > 0 && len(in[0].Shape) > 0 && in[0].Shape[0] > 0 {
		return in[0].Shape[0]
	}
	return 0
}

// Load wraps data's current batch as g's inputs, matched by name for the inputs after the
// first, without copying.
func (f *Feed) Load(g *engine.Graph, data Batcher) error {
	ins := g.Inputs()
	if cap(f.ts) < len(ins) {
		f.ts = make([]engine.Tensor, len(ins))
		f.Inputs = make([]*engine.Tensor, len(ins))
		f.Axes = make([]int, len(ins))
	}
	f.ts, f.Inputs, f.Axes = f.ts[:len(ins)], f.Inputs[:len(ins)], f.Axes[:len(ins)]
	sh := data.Shape()
	t := &f.ts[0]
	t.DType, t.F, t.I = engine.Float32, data.X(), nil
	t.Shape = t.Shape[:0]
	for _, d := range sh {
		t.Shape = append(t.Shape, int(d))
	}
	f.Inputs[0], f.Axes[0], f.N = t, 0, t.Shape[0]
	mb, _ := data.(MultiBatcher)
	for k := 1; k < len(ins); k++ {
		found := false
		for j := 0; mb != nil && j < mb.ExtraInputs(); j++ {
			name, shape, axis, fv, iv := mb.ExtraInput(j)
			if name != ins[k].Name {
				continue
			}
			t := &f.ts[k]
			t.F, t.I, t.DType = fv, iv, engine.Float32
			if iv != nil {
				t.DType = engine.Int64
			}
			t.Shape = t.Shape[:0]
			for _, d := range shape {
				t.Shape = append(t.Shape, int(d))
			}
			f.Inputs[k], f.Axes[k], found = t, axis, true
			break
		}
		if !found {
			return fmt.Errorf("the model's input %q is not in the data", ins[k].Name)
		}
	}
	return nil
}

// Chunks returns the sample ranges [lo,hi) g is run on: the whole batch, or, for a graph
// whose first input declares a fixed batch B, consecutive chunks of B samples. The last
// chunk may be shorter than B; Slice pads it.
func (f *Feed) Chunks(g *engine.Graph) [][2]int { return f.ChunksOf(DeclaredBatch(g)) }

// ChunksOf splits the batch into consecutive ranges of b samples, the last one possibly
// shorter; b ≤ 0 or b ≥ N gives the whole batch.
func (f *Feed) ChunksOf(b int) [][2]int {
	if b <= 0 || b >= f.N {
		return [][2]int{{0, f.N}}
	}
	var r [][2]int
	for lo := 0; lo < f.N; lo += b {
		r = append(r, [2]int{lo, min(lo+b, f.N)})
	}
	return r
}

// Slice returns the inputs restricted to samples [lo,hi) along their batch axes, padded to
// pad samples by repeating sample hi-1 when pad > hi-lo (the padding's outputs are
// meaningless and dropped by the caller). Inputs without a batch axis are passed whole.
// The result is valid until the next call.
func (f *Feed) Slice(lo, hi, pad int) []*engine.Tensor {
	if lo == 0 && hi == f.N && pad <= f.N {
		return f.Inputs
	}
	pad = max(pad, hi-lo)
	if len(f.chunk) < len(f.Inputs) {
		f.chunk = make([]engine.Tensor, len(f.Inputs))
		f.cptrs = make([]*engine.Tensor, len(f.Inputs))
	}
	for k, t := range f.Inputs {
		a := f.Axes[k]
		if a < 0 {
			f.cptrs[k] = t
			continue
		}
		c := &f.chunk[k]
		c.DType = t.DType
		c.Shape = append(c.Shape[:0], t.Shape...)
		c.Shape[a] = pad
		outer, inner := 1, 1
		for j, d := range t.Shape {
			if j < a {
				outer *= d
			} else if j > a {
				inner *= d
			}
		}
		n := outer * pad * inner
		if t.DType == engine.Int64 {
			c.I = grow(c.I, n)
		} else {
			c.F = grow(c.F, n)
		}
		for o := range outer {
			for s := range pad {
				src := (o*t.Shape[a] + min(lo+s, hi-1)) * inner
				dst := (o*pad + s) * inner
				if t.DType == engine.Int64 {
					copy(c.I[dst:dst+inner], t.I[src:src+inner])
				} else {
					copy(c.F[dst:dst+inner], t.F[src:src+inner])
				}
			}
		}
		f.cptrs[k] = c
	}
	return f.cptrs[:len(f.Inputs)]
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Forward runs g in the inference mode of run over the batch and returns its outputs for
// all f.N samples. A graph declaring a fixed batch runs chunk by chunk, the last chunk
// padded, and its outputs are gathered along each output's batch axis; in inference mode a
// sample's outputs do not depend on the other samples, so this equals one pass.
func (f *Feed) Forward(g *engine.Graph, run *engine.Context) ([]*engine.Tensor, error) {
	chunks := f.Chunks(g)
	if len(chunks) == 1 {
		outs, err := g.Forward(run, f.Inputs...)
		if err != nil {
			return nil, err
		}
		f.OutAxes = grow(f.OutAxes, len(outs))
		for k, o := range outs {
			f.OutAxes[k] = outputAxis(g, k, o, f.N)
		}
		return outs, nil
	}
	b := DeclaredBatch(g)
	for ci, c := range chunks {
		outs, err := g.Forward(run, f.Slice(c[0], c[1], b)...)
		if err != nil {
			return nil, err
		}
		if ci == 0 {
			f.outs = make([]engine.Tensor, len(outs))
			f.optrs = make([]*engine.Tensor, len(outs))
			f.OutAxes = grow(f.OutAxes, len(outs))
			for k, o := range outs {
				t := &f.outs[k]
				t.DType = o.DType
				t.Shape = append([]int(nil), o.Shape...)
				a := outputAxis(g, k, o, b)
				f.OutAxes[k] = a
				if a >= 0 {
					t.Shape[a] = f.N
				}
				t.F, t.I = nil, nil
				if o.DType == engine.Int64 {
					t.I = make([]int64, t.Len())
				} else {
					t.F = make([]float32, t.Len())
				}
				f.optrs[k] = t
			}
		}
		for k, o := range outs {
			a := outputAxis(g, k, o, b)
			if a < 0 {
				if ci == 0 {
					copy(f.outs[k].F, o.F)
					copy(f.outs[k].I, o.I)
				}
				continue
			}
			outer, inner := 1, 1
			for j, d := range o.Shape {
				if j < a {
					outer *= d
				} else if j > a {
					inner *= d
				}
			}
			real := c[1] - c[0]
			for p := range outer {
				src := p * o.Shape[a] * inner
				dst := (p*f.N + c[0]) * inner
				if o.DType == engine.Int64 {
					copy(f.outs[k].I[dst:dst+real*inner], o.I[src:src+real*inner])
				} else {
					copy(f.outs[k].F[dst:dst+real*inner], o.F[src:src+real*inner])
				}
			}
		}
	}
	return f.optrs, nil
}

// outputAxis is the batch axis of output k of a graph run on chunks of b samples: the
// first axis the model declares symbolic or b that holds b values, or -1.
func outputAxis(g *engine.Graph, k int, o *engine.Tensor, b int) int {
	decl := g.Outputs()[k].Shape
	for a, d := range o.Shape {
		if d == b && (decl == nil || a >= len(decl) || decl[a] < 0 || decl[a] == b) {
			return a
		}
	}
	return -1
}
