package engine

import (
	"slices"
)

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
	if sameData(out[0], in[0]) {
		return nil // the plan gave the view its input's buffer
	}
	copyData(out[0], in[0])
	return nil
}

// sameData reports whether a and b hold the same buffer.
func sameData(a, b *Tensor) bool {
	switch {
	case len(a.F) > 0 && len(b.F) > 0:
		return &a.F[0] == &b.F[0]
	case len(a.I) > 0 && len(b.I) > 0:
		return &a.I[0] == &b.I[0]
	}
	return false
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
