package engine

import (
	"slices"
)

// shapeOpDefs returns the rows of the ops that move, reshape, create or convert data
// (shape_*.go hold the kernels).
func shapeOpDefs() []opDef {
	one, two := arity{n: 1}, arity{n: 2}
	return []opDef{
		{name: "Flatten", build: buildFlatten, inputs: one, grad: true, sameType: true},
		{name: "Reshape", build: buildReshape, inputs: two, grad: true, sameType: true},
		{name: "Squeeze", build: buildSqueeze, inputs: one, grad: true, sameType: true},
		// Axes moved from an attribute to an input in opset 13.
		{name: "Unsqueeze", build: buildUnsqueeze, inputs: arity{n: 2, since: 13, old: 1}, grad: true, sameType: true},
		{name: "Identity", build: buildIdentity, inputs: one, grad: true, sameType: true},
		{name: "Transpose", build: buildTranspose, inputs: one, grad: true, sameType: true},
		{name: "Concat", build: buildConcat, inputs: arity{n: 1, variadic: true}, grad: true, sameType: true},
		{name: "Split", build: buildSplit, inputs: one, grad: true, sameType: true},
		// Starts and ends moved from attributes to inputs in opset 10.
		{name: "Slice", build: buildSlice, inputs: arity{n: 3, since: 10, old: 1}, grad: true, sameType: true},
		{name: "Gather", build: buildGather, inputs: two, grad: true, sameType: true},
		{name: "Shape", build: buildShape, inputs: one},
		{name: "Cast", build: buildCast, inputs: one, grad: true},
		{name: "Expand", build: buildExpand, inputs: two, grad: true, sameType: true},
		{name: "Dropout", build: buildDropout, inputs: one, grad: true},
		{name: "Constant", build: buildConstant},
		{name: "ConstantOfShape", build: buildConstantOfShape, inputs: one},
		// Pads moved from an attribute to an input in opset 11.
		{name: "Pad", build: buildPad, inputs: arity{n: 2, since: 11, old: 1}, grad: true},
	}
}

// viewKernel implements the ops that only reinterpret the shape: the data is copied
// unchanged and the gradient passes through unchanged.
type viewKernel struct {
	n     *Node
	shape func(in []*Tensor) ([]int, error)
}

func (k *viewKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) == 0 || in[0] == nil {
		return nil, k.n.Errorf("missing input")
	}
	s, err := k.shape(in)
	if err != nil {
		return nil, err
	}
	if numel(s) != in[0].Len() {
		return nil, k.n.Errorf("cannot view shape %v (%d elements) as %v (%d elements)", in[0].Shape, in[0].Len(), s, numel(s))
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

func (k *viewKernel) Forward(_ *Context, in, out []*Tensor) error {
	copyData(out[0], in[0])
	return nil
}

func (k *viewKernel) Backward(_ *Context, _, _, gout, gin []*Tensor) error {
	if gin[0] != nil && gout[0] != nil {
		addTo(gin[0].F, gout[0].F)
	}
	return nil
}

func (k *viewKernel) Retains() (in, out []bool) { return []bool{false, false}, []bool{false} }

func buildIdentity(n *Node) (Kernel, error) {
	return &viewKernel{n: n, shape: func(in []*Tensor) ([]int, error) {
		return slices.Clone(in[0].Shape), nil
	}}, nil
}

func buildFlatten(n *Node) (Kernel, error) {
	axis := n.Int("axis", 1)
	return &viewKernel{n: n, shape: func(in []*Tensor) ([]int, error) {
		r := len(in[0].Shape)
		a := axis
		if a < 0 {
			a += int64(r)
		}
		if a < 0 || a > int64(r) {
			return nil, n.Errorf("axis %d is outside [%d, %d] for an input of rank %d", axis, -r, r, r)
		}
		return []int{numel(in[0].Shape[:a]), numel(in[0].Shape[a:])}, nil
	}}, nil
}

func buildReshape(n *Node) (Kernel, error) {
	if n.Opset < 5 {
		return nil, n.Errorf("Reshape before opset 5 (shape attribute) is not supported")
	}
	allowZero := n.Int("allowzero", 0) != 0
	return &viewKernel{n: n, shape: func(in []*Tensor) ([]int, error) {
		spec, ok := intsOf(in[1])
		if !present(in, 1) || !ok {
			return nil, n.Errorf("the target shape must be known before running (a constant, or computed from shapes)")
		}
		if len(in[1].Shape) != 1 {
			return nil, n.Errorf("the target shape must be 1-D, got shape %v", in[1].Shape)
		}
		src := in[0].Shape
		s := make([]int, len(spec))
		infer := -1
		for i, d := range spec {
			switch {
			case d == -1:
				if infer >= 0 {
					return nil, n.Errorf("target shape %v has more than one -1", spec)
				}
				infer = i
			case d == 0 && !allowZero:
				if i >= len(src) {
					return nil, n.Errorf("target shape %v copies dimension %d, but the input %v has rank %d", spec, i, src, len(src))
				}
				s[i] = src[i]
			case d < 0:
				return nil, n.Errorf("target shape %v has a negative dimension %d", spec, d)
			default:
				s[i] = int(d)
			}
		}
		if infer >= 0 {
			s[infer] = 1
			rest := numel(s)
			if rest == 0 || in[0].Len()%rest != 0 {
				return nil, n.Errorf("cannot infer the -1 in %v for an input of shape %v", spec, src)
			}
			s[infer] = in[0].Len() / rest
		}
		return s, nil
	}}, nil
}

// axesOf reads the axes of Squeeze/Unsqueeze: an attribute before opset 13, input 1 from
// 13. ok is false when no axes are given.
func axesOf(n *Node, in []*Tensor) (axes []int64, ok bool, err error) {
	if n.Opset < 13 {
		return n.Ints("axes", nil), n.Has("axes"), nil
	}
	if !present(in, 1) {
		return nil, false, nil
	}
	v, known := intsOf(in[1])
	if !known {
		return nil, false, n.Errorf("the axes input must be known before running (a constant)")
	}
	return v, true, nil
}

func buildSqueeze(n *Node) (Kernel, error) {
	return &viewKernel{n: n, shape: func(in []*Tensor) ([]int, error) {
		src := in[0].Shape
		axes, given, err := axesOf(n, in)
		if err != nil {
			return nil, err
		}
		drop := make([]bool, len(src))
		if !given {
			for i, d := range src {
				drop[i] = d == 1
			}
		}
		for _, a := range axes {
			i, ok := normAxis(a, len(src))
			if !ok {
				return nil, n.Errorf("axis %d is out of range for an input of shape %v", a, src)
			}
			if src[i] != 1 {
				return nil, n.Errorf("cannot squeeze axis %d of shape %v: its size is %d, not 1", a, src, src[i])
			}
			drop[i] = true
		}
		var s []int
		for i, d := range src {
			if !drop[i] {
				s = append(s, d)
			}
		}
		return s, nil
	}}, nil
}

func buildUnsqueeze(n *Node) (Kernel, error) {
	if n.Opset < 13 && !n.Has("axes") {
		return nil, n.Errorf("attribute axes is required before opset 13")
	}
	return &viewKernel{n: n, shape: func(in []*Tensor) ([]int, error) {
		src := in[0].Shape
		axes, given, err := axesOf(n, in)
		if err != nil {
			return nil, err
		}
		if !given {
			return nil, n.Errorf("input axes is required")
		}
		r := len(src) + len(axes)
		ins := make([]bool, r)
		for _, a := range axes {
			i, ok := normAxis(a, r)
			if !ok {
				return nil, n.Errorf("axis %d is out of range for an output of rank %d", a, r)
			}
			if ins[i] {
				return nil, n.Errorf("axis %d is repeated in %v", a, axes)
			}
			ins[i] = true
		}
		s := make([]int, r)
		j := 0
		for i := range s {
			if ins[i] {
				s[i] = 1
			} else {
				s[i] = src[j]
				j++
			}
		}
		return s, nil
	}}, nil
}

// transposeKernel permutes the axes.
type transposeKernel struct {
	n    *Node
	perm []int64
	stridedView
}

func buildTranspose(n *Node) (Kernel, error) {
	return &transposeKernel{n: n, perm: n.Ints("perm", nil)}, nil
}

// permOf returns the permutation for an input of rank r.
func (k *transposeKernel) permOf(r int) ([]int, error) {
	p := make([]int, r)
	if k.perm == nil {
		for i := range p {
			p[i] = r - 1 - i
		}
		return p, nil
	}
	if len(k.perm) != r {
		return nil, k.n.Errorf("perm %v has %d entries, the input has rank %d", k.perm, len(k.perm), r)
	}
	seen := make([]bool, r)
	for i, a := range k.perm {
		j, ok := normAxis(a, r)
		if !ok || seen[j] {
			return nil, k.n.Errorf("perm %v is not a permutation of 0..%d", k.perm, r-1)
		}
		seen[j] = true
		p[i] = j
	}
	return p, nil
}

func (k *transposeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	p, err := k.permOf(len(in[0].Shape))
	if err != nil {
		return nil, err
	}
	s := make([]int, len(p))
	for i, j := range p {
		s[i] = in[0].Shape[j]
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

// strides sets k.st to the input strides seen along the output axes and k.ss to the
// output's own strides.
func (k *transposeKernel) strides(inShape, outShape []int) {
	r := len(inShape)
	k.ss = stridesOf(k.ss, inShape)
	k.st = slices.Grow(k.st[:0], r)[:r]
	for i := range r {
		j := i
		if k.perm == nil {
			j = r - 1 - i
		} else {
			j, _ = normAxis(k.perm[i], r)
		}
		k.st[i] = k.ss[j]
	}
	k.ss = stridesOf(k.ss, outShape)
	k.idx = slices.Grow(k.idx[:0], r)[:r]
}

func (k *transposeKernel) Forward(_ *Context, in, out []*Tensor) error {
	k.strides(in[0].Shape, out[0].Shape)
	k.copyForward(in[0], out[0])
	return nil
}

func (k *transposeKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	k.strides(in[0].Shape, out[0].Shape)
	k.addBackward(gin[0], gout[0])
	return nil
}

func (k *transposeKernel) Retains() (in, out []bool) { return []bool{false}, []bool{false} }

// concatKernel joins its inputs along an axis.
type concatKernel struct {
	n    *Node
	axis int64
}

func buildConcat(n *Node) (Kernel, error) {
	if !n.Has("axis") {
		return nil, n.Errorf("attribute axis is required")
	}
	return &concatKernel{n: n, axis: n.Int("axis", 0)}, nil
}

func (k *concatKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) == 0 {
		return nil, k.n.Errorf("no inputs")
	}
	first := in[0]
	r := len(first.Shape)
	a, ok := normAxis(k.axis, r)
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for inputs of rank %d", k.axis, r)
	}
	s := slices.Clone(first.Shape)
	s[a] = 0
	for i, t := range in {
		if t == nil {
			return nil, k.n.Errorf("input %d is missing", i)
		}
		if t.DType != first.DType || len(t.Shape) != r {
			return nil, k.n.Errorf("input %d (%s %v) does not match input 0 (%s %v)", i, t.DType, t.Shape, first.DType, first.Shape)
		}
		for d := range r {
			if d != a && t.Shape[d] != first.Shape[d] {
				return nil, k.n.Errorf("input %d has shape %v, input 0 has %v: only axis %d may differ", i, t.Shape, first.Shape, a)
			}
		}
		s[a] += t.Shape[a]
	}
	return []*Tensor{{DType: first.DType, Shape: s}}, nil
}

// blocks returns how many outer blocks the axis splits a shape into, and the size of
// one block of each part along the axis.
func splitBlocks(shape []int, axis int) (outer, inner int) {
	return numel(shape[:axis]), numel(shape[axis+1:])
}

func (k *concatKernel) Forward(_ *Context, in, out []*Tensor) error {
	a, _ := normAxis(k.axis, len(out[0].Shape))
	outer, inner := splitBlocks(out[0].Shape, a)
	row := out[0].Shape[a] * inner
	off := 0
	for _, t := range in {
		w := t.Shape[a] * inner
		for o := range outer {
			if t.DType == Int64 {
				copy(out[0].I[o*row+off:o*row+off+w], t.I[o*w:(o+1)*w])
			} else {
				copy(out[0].F[o*row+off:o*row+off+w], t.F[o*w:(o+1)*w])
			}
		}
		off += w
	}
	return nil
}

func (k *concatKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	a, _ := normAxis(k.axis, len(out[0].Shape))
	outer, inner := splitBlocks(out[0].Shape, a)
	row := out[0].Shape[a] * inner
	off := 0
	for i, t := range in {
		w := t.Shape[a] * inner
		if gin[i] != nil {
			for o := range outer {
				addTo(gin[i].F[o*w:(o+1)*w], gout[0].F[o*row+off:o*row+off+w])
			}
		}
		off += w
	}
	return nil
}

// Concat's backward needs only shapes, which the executor keeps for every value.
func (k *concatKernel) Retains() (in, out []bool) {
	return make([]bool, len(k.n.Proto.GetInput())), []bool{false}
}

// splitKernel cuts its input into parts along an axis.
type splitKernel struct {
	n     *Node
	axis  int64
	attr  []int64 // split sizes from the attribute (before opset 13)
	parts int
	sizes []int // per output, set by Infer
}

func buildSplit(n *Node) (Kernel, error) {
	k := &splitKernel{n: n, axis: n.Int("axis", 0), parts: len(n.Proto.GetOutput())}
	if n.Opset < 13 {
		k.attr = n.Ints("split", nil)
	}
	if n.Opset >= 18 && n.Has("num_outputs") {
		if no := n.Int("num_outputs", 0); no != int64(k.parts) {
			return nil, n.Errorf("num_outputs is %d but the node has %d outputs", no, k.parts)
		}
	}
	if k.parts == 0 {
		return nil, n.Errorf("no outputs")
	}
	return k, nil
}

func (k *splitKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	shape := in[0].Shape
	a, ok := normAxis(k.axis, len(shape))
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for an input of shape %v", k.axis, shape)
	}
	dim := shape[a]
	sizes := k.attr
	if k.n.Opset >= 13 && present(in, 1) {
		v, known := intsOf(in[1])
		if !known {
			return nil, k.n.Errorf("the split input must be known before running (a constant)")
		}
		sizes = v
	}
	k.sizes = make([]int, k.parts)
	switch {
	case sizes != nil:
		if len(sizes) != k.parts {
			return nil, k.n.Errorf("split %v has %d entries, the node has %d outputs", sizes, len(sizes), k.parts)
		}
		sum := 0
		for i, s := range sizes {
			if s < 0 {
				return nil, k.n.Errorf("split %v has a negative size", sizes)
			}
			k.sizes[i] = int(s)
			sum += int(s)
		}
		if sum != dim {
			return nil, k.n.Errorf("split %v sums to %d, but axis %d has size %d", sizes, sum, a, dim)
		}
	case k.n.Opset >= 18:
		// Equal parts; since opset 18 the last part may be smaller.
		c := (dim + k.parts - 1) / k.parts
		for i := range k.sizes {
			k.sizes[i] = max(0, min(c, dim-i*c))
		}
		if c*(k.parts-1) >= dim && dim > 0 {
			return nil, k.n.Errorf("cannot split size %d into %d non-empty parts", dim, k.parts)
		}
	default:
		if dim%k.parts != 0 {
			return nil, k.n.Errorf("axis %d of size %d does not split into %d equal parts", a, dim, k.parts)
		}
		for i := range k.sizes {
			k.sizes[i] = dim / k.parts
		}
	}
	outs := make([]*Tensor, k.parts)
	for i, s := range k.sizes {
		sh := slices.Clone(shape)
		sh[a] = s
		outs[i] = &Tensor{DType: in[0].DType, Shape: sh}
	}
	return outs, nil
}

func (k *splitKernel) Forward(_ *Context, in, out []*Tensor) error {
	a, _ := normAxis(k.axis, len(in[0].Shape))
	outer, inner := splitBlocks(in[0].Shape, a)
	row := in[0].Shape[a] * inner
	off := 0
	for _, t := range out {
		w := t.Shape[a] * inner
		for o := range outer {
			if t.DType == Int64 {
				copy(t.I[o*w:(o+1)*w], in[0].I[o*row+off:o*row+off+w])
			} else {
				copy(t.F[o*w:(o+1)*w], in[0].F[o*row+off:o*row+off+w])
			}
		}
		off += w
	}
	return nil
}

func (k *splitKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil {
		return nil
	}
	a, _ := normAxis(k.axis, len(in[0].Shape))
	outer, inner := splitBlocks(in[0].Shape, a)
	row := in[0].Shape[a] * inner
	off := 0
	for j, t := range out {
		w := t.Shape[a] * inner
		if gout[j] != nil {
			for o := range outer {
				addTo(gin[0].F[o*row+off:o*row+off+w], gout[j].F[o*w:(o+1)*w])
			}
		}
		off += w
	}
	return nil
}

func (k *splitKernel) Retains() (in, out []bool) {
	return []bool{false, false}, make([]bool, k.parts)
}

// sliceKernel takes a strided window of its input.
type sliceKernel struct {
	n                 *Node
	starts, ends, axs []int64 // attributes, before opset 10
	// Scratch for the window's geometry, recomputed from the inputs on every call
	// because plans for different shapes share the kernel.
	base                    int
	st, ss, idx             []int
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

// geometry sets k.base, k.st (input strides along the output axes), k.ss (output
// strides) and k.count (the output shape).
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
	k.base = 0
	k.st = slices.Grow(k.st[:0], r)[:r]
	for d := range r {
		k.base += k.start[d] * k.inStr[d]
		k.st[d] = k.sp[d] * k.inStr[d]
	}
	k.ss = stridesOf(k.ss, k.count)
	k.idx = slices.Grow(k.idx[:0], r)[:r]
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

func (k *sliceKernel) Forward(_ *Context, in, out []*Tensor) error {
	if err := k.geometry(in); err != nil {
		return err
	}
	if in[0].DType == Int64 {
		viewCopy(false, out[0].I, 0, k.ss, in[0].I, k.base, k.st, out[0].Shape, k.idx)
	} else {
		viewCopy(false, out[0].F, 0, k.ss, in[0].F, k.base, k.st, out[0].Shape, k.idx)
	}
	return nil
}

func (k *sliceKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] != nil && gout[0] != nil {
		if err := k.geometry(in); err != nil {
			return err
		}
		viewCopy(true, gin[0].F, k.base, k.st, gout[0].F, 0, k.ss, out[0].Shape, k.idx)
	}
	return nil
}

func (k *sliceKernel) Retains() (in, out []bool) {
	return []bool{false, false, false, false, false}, []bool{false}
}

// gatherKernel picks entries of its data along an axis.
type gatherKernel struct {
	n    *Node
	axis int64
}

func buildGather(n *Node) (Kernel, error) {
	return &gatherKernel{n: n, axis: n.Int("axis", 0)}, nil
}

func (k *gatherKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	data, ind := in[0], in[1]
	a, ok := normAxis(k.axis, len(data.Shape))
	if !ok {
		return nil, k.n.Errorf("axis %d is out of range for data of shape %v", k.axis, data.Shape)
	}
	if ind.DType != Int64 {
		return nil, k.n.Errorf("indices must be integers")
	}
	s := slices.Concat(data.Shape[:a], ind.Shape, data.Shape[a+1:])
	return []*Tensor{{DType: data.DType, Shape: s}}, nil
}

func (k *gatherKernel) Forward(_ *Context, in, out []*Tensor) error {
	data, ind := in[0], in[1]
	a, _ := normAxis(k.axis, len(data.Shape))
	outer, inner := splitBlocks(data.Shape, a)
	dim := data.Shape[a]
	for j, ix := range ind.I {
		if ix < -int64(dim) || ix >= int64(dim) {
			return k.n.Errorf("index %d (entry %d) is out of range for axis %d of size %d", ix, j, a, dim)
		}
	}
	m := len(ind.I)
	for o := range outer {
		for j, ix := range ind.I {
			if ix < 0 {
				ix += int64(dim)
			}
			src := (o*dim + int(ix)) * inner
			dst := (o*m + j) * inner
			if data.DType == Int64 {
				copy(out[0].I[dst:dst+inner], data.I[src:src+inner])
			} else {
				copy(out[0].F[dst:dst+inner], data.F[src:src+inner])
			}
		}
	}
	return nil
}

func (k *gatherKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	data, ind := in[0], in[1]
	a, _ := normAxis(k.axis, len(data.Shape))
	outer, inner := splitBlocks(data.Shape, a)
	dim := data.Shape[a]
	m := len(ind.I)
	for o := range outer {
		for j, ix := range ind.I {
			if ix < 0 {
				ix += int64(dim)
			}
			dst := (o*dim + int(ix)) * inner
			src := (o*m + j) * inner
			addTo(gin[0].F[dst:dst+inner], gout[0].F[src:src+inner])
		}
	}
	return nil
}

// Gather's backward reads the indices, and of the data only its shape.
func (k *gatherKernel) Retains() (in, out []bool) { return []bool{false, true}, []bool{false} }
