package engine

import (
	"slices"
)

// sliceKernel takes a strided window of its input.
type sliceKernel struct {
	n                 *Node
	starts, ends, axs []int64 // attributes, before opset 10
	// Scratch for the window's geometry, recomputed from the inputs on every call
	// because plans for different shapes share the kernel.
	// view holds the window as a strided copy: base, st (input strides along the
	// output axes), ss (output strides) and idx.
	view                    stridedView
	inStr, start, count, sp []int
	seen                    []bool
}

func buildSlice(n *Node) (Kernel, error) {
	k := &sliceKernel{n: n}
	if n.Opset < 10 {
		k.starts, k.ends, k.axs = n.Ints("starts", nil), n.Ints("ends", nil), n.Ints("axes", nil)
		if k.starts == nil || k.ends == nil {
			return nil, n.Errorf("attributes starts and ends are required before opset 10")
		}
	}
	return k, nil
}

// geometry sets k.view and k.count (the output shape).
func (k *sliceKernel) geometry(in []*Tensor) error {
	shape := in[0].Shape
	r := len(shape)
	starts, ends, axes := k.starts, k.ends, k.axs
	var steps []int64
	if k.n.Opset >= 10 {
		if !present(in, 1) || !present(in, 2) {
			return k.n.Errorf("inputs starts and ends are required")
		}
		for i, p := range []*[]int64{&starts, &ends, &axes, &steps} {
			if present(in, i+1) {
				var ok bool
				if *p, ok = intsOf(in[i+1]); !ok {
					return k.n.Errorf("input %d (starts, ends, axes, steps) must be known before running (a constant)", i+1)
				}
			}
		}
	}
	if len(starts) != len(ends) || (axes != nil && len(axes) != len(starts)) || (steps != nil && len(steps) != len(starts)) {
		return k.n.Errorf("starts %v, ends %v, axes %v and steps %v must have the same length", starts, ends, axes, steps)
	}
	k.inStr = stridesOf(k.inStr, shape)
	k.start = slices.Grow(k.start[:0], r)[:r]
	k.count = append(k.count[:0], shape...)
	k.sp = slices.Grow(k.sp[:0], r)[:r]
	k.seen = slices.Grow(k.seen[:0], r)[:r]
	for i := range r {
		k.start[i], k.sp[i], k.seen[i] = 0, 1, false
	}
	for i := range starts {
		a := i
		if axes != nil {
			var ok bool
			if a, ok = normAxis(axes[i], r); !ok {
				return k.n.Errorf("axis %d is out of range for an input of shape %v", axes[i], shape)
			}
		} else if a >= r {
			return k.n.Errorf("%d starts given for an input of rank %d", len(starts), r)
		}
		if k.seen[a] {
			return k.n.Errorf("axis %d is repeated in %v", a, axes)
		}
		k.seen[a] = true
		s := int64(1)
		if steps != nil {
			s = steps[i]
		}
		if s == 0 {
			return k.n.Errorf("steps must not be 0")
		}
		b, c := sliceRange(starts[i], ends[i], s, int64(shape[a]))
		k.start[a], k.count[a], k.sp[a] = int(b), int(c), int(s)
	}
	v := &k.view
	v.base = 0
	v.st = slices.Grow(v.st[:0], r)[:r]
	for d := range r {
		v.base += k.start[d] * k.inStr[d]
		v.st[d] = k.sp[d] * k.inStr[d]
	}
	v.ss = stridesOf(v.ss, k.count)
	v.idx = slices.Grow(v.idx[:0], r)[:r]
	return nil
}

func (k *sliceKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if err := k.geometry(in); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: in[0].DType, Shape: slices.Clone(k.count)}}, nil
}

// sliceRange clamps a start and end for a dimension of size dim as ONNX specifies and
// returns the clamped start and the number of elements taken.
func sliceRange(start, end, step, dim int64) (int64, int64) {
	if start < 0 {
		start += dim
	}
	if end < 0 {
		end += dim
	}
	if step > 0 {
		start = min(max(start, 0), dim)
		end = min(max(end, 0), dim)
		if end <= start {
			return start, 0
		}
		return start, (end - start + step - 1) / step
	}
	start = min(max(start, -1), dim-1)
	end = min(max(end, -1), dim-1)
	if end >= start {
		return start, 0
	}
	return start, (start - end - step - 1) / -step
}

// Forward splits a large window over the workers: ShuffleNetV2's channel splits were a
// tenth of its time at batch 32, twice onnxruntime's.
func (k *sliceKernel) Forward(ctx *Context, in, out []*Tensor) error {
	if err := k.geometry(in); err != nil {
		return err
	}
	k.view.copyForwardOn(ctx, in[0], out[0])
	return nil
}

func (k *sliceKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] != nil && gout[0] != nil {
		if err := k.geometry(in); err != nil {
			return err
		}
		k.view.addBackward(gin[0], gout[0])
	}
	return nil
}

func (k *sliceKernel) Retains() (in, out []bool) {
	return []bool{false, false, false, false, false}, []bool{false}
}
