package engine

import "slices"

// padKernel pads (or, with negative pads, crops) its input.
type padKernel struct {
	n     *Node
	mode  string
	pads  []int64 // attribute, before opset 11
	value float32 // attribute, before opset 11
	// Scratch, recomputed from the shapes on every call: for each axis and output
	// coordinate, the input offset it reads (coordinate × stride), or -1 for padding.
	pb, pe   []int
	maps     [][]int
	idx, str []int
}

func buildPad(n *Node) (Kernel, error) {
	k := &padKernel{n: n, mode: n.String("mode", "constant")}
	switch k.mode {
	case "constant", "reflect", "edge":
	case "wrap":
		if n.Opset < 19 {
			return nil, n.Errorf("mode wrap needs opset 19")
		}
	default:
		return nil, n.Errorf("mode %q is not supported", k.mode)
	}
	if n.Opset < 11 {
		if !n.Has("pads") {
			return nil, n.Errorf("attribute pads is required before opset 11")
		}
		k.pads, k.value = n.Ints("pads", nil), n.Float("value", 0)
	}
	return k, nil
}

// padsOf returns the begin and end pads for every axis of an input of rank r, in
// scratch owned by the kernel.
func (k *padKernel) padsOf(in []*Tensor, r int) (begin, end []int, err error) {
	pads := k.pads
	var axes []int64
	if k.n.Opset >= 11 {
		var ok bool
		if pads, ok = intsOf(in[1]); !present(in, 1) || !ok {
			return nil, nil, k.n.Errorf("the pads input must be known before running (a constant)")
		}
		if k.n.Opset >= 18 && present(in, 3) {
			if axes, ok = intsOf(in[3]); !ok {
				return nil, nil, k.n.Errorf("the axes input must be known before running (a constant)")
			}
		}
	}
	na := r
	if axes != nil {
		na = len(axes)
	}
	if len(pads) != 2*na {
		return nil, nil, k.n.Errorf("pads %v must hold 2×%d values", pads, na)
	}
	k.pb = slices.Grow(k.pb[:0], r)[:r]
	k.pe = slices.Grow(k.pe[:0], r)[:r]
	clear(k.pb)
	clear(k.pe)
	for i := range na {
		j := i
		if axes != nil {
			var ok bool
			if j, ok = normAxis(axes[i], r); !ok {
				return nil, nil, k.n.Errorf("axis %d is out of range for rank %d", axes[i], r)
			}
		}
		k.pb[j], k.pe[j] = int(pads[i]), int(pads[i+na])
	}
	return k.pb, k.pe, nil
}

func (k *padKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	shape := in[0].Shape
	begin, end, err := k.padsOf(in, len(shape))
	if err != nil {
		return nil, err
	}
	begin, end = slices.Clone(begin), slices.Clone(end)
	if k.n.Opset >= 11 && present(in, 2) && (in[2].DType != in[0].DType || in[2].Len() != 1) {
		return nil, k.n.Errorf("constant_value must be a %s scalar, got %s %v", in[0].DType, in[2].DType, in[2].Shape)
	}
	s := make([]int, len(shape))
	for i, d := range shape {
		s[i] = d + begin[i] + end[i]
		if s[i] < 0 {
			return nil, k.n.Errorf("pads %v %v crop more than axis %d of shape %v holds", begin, end, i, shape)
		}
		if d == 0 && s[i] > 0 && k.mode != "constant" {
			return nil, k.n.Errorf("mode %s cannot pad the empty axis %d", k.mode, i)
		}
	}
	return []*Tensor{{DType: in[0].DType, Shape: s}}, nil
}

// geometry fills k.maps for the given shapes.
func (k *padKernel) geometry(in []*Tensor, out []int) error {
	shape := in[0].Shape
	r := len(shape)
	begin, _, err := k.padsOf(in, r)
	if err != nil {
		return err
	}
	k.str = stridesOf(k.str, shape)
	for len(k.maps) < r {
		k.maps = append(k.maps, nil)
	}
	for d := range r {
		m := slices.Grow(k.maps[d][:0], out[d])[:out[d]]
		n := shape[d]
		for i := range m {
			j := i - begin[d]
			if j < 0 || j >= n {
				switch k.mode {
				case "constant":
					j = -1
				case "edge":
					j = min(max(j, 0), n-1)
				case "reflect":
					j = reflectIndex(j, n)
				case "wrap":
					j = ((j % n) + n) % n
				}
			}
			if j >= 0 {
				j *= k.str[d]
			}
			m[i] = j
		}
		k.maps[d] = m
	}
	k.idx = slices.Grow(k.idx[:0], r)[:r]
	return nil
}

// reflectIndex mirrors j into [0, n) without repeating the edge, as numpy's reflect mode
// does, also for pads longer than the axis.
func reflectIndex(j, n int) int {
	if n == 1 {
		return 0
	}
	p := 2 * (n - 1)
	j = ((j % p) + p) % p
	if j >= n {
		j = p - j
	}
	return j
}

// walk calls fn for every output element with its index and the input offset it reads,
// or -1 for a padding element.
func (k *padKernel) walk(outShape []int, fn func(o, s int)) {
	r := len(outShape)
	n := numel(outShape)
	if n == 0 {
		return
	}
	clear(k.idx)
	for o := range n {
		s := 0
		for d := range r {
			m := k.maps[d][k.idx[d]]
			if m < 0 {
				s = -1
				break
			}
			s += m
		}
		fn(o, s)
		for d := r - 1; d >= 0; d-- {
			if k.idx[d]++; k.idx[d] < outShape[d] {
				break
			}
			k.idx[d] = 0
		}
	}
}

func (k *padKernel) Forward(_ *Context, in, out []*Tensor) error {
	if err := k.geometry(in, out[0].Shape); err != nil {
		return err
	}
	x, y := in[0], out[0]
	if x.DType == Int64 {
		var v int64
		if k.n.Opset >= 11 && present(in, 2) && in[2].Len() == 1 {
			v = in[2].I[0]
		}
		k.walk(y.Shape, func(o, s int) {
			if s < 0 {
				y.I[o] = v
			} else {
				y.I[o] = x.I[s]
			}
		})
		return nil
	}
	v := k.value
	if k.n.Opset >= 11 && present(in, 2) && in[2].Len() == 1 {
		v = in[2].F[0]
	}
	k.walk(y.Shape, func(o, s int) {
		if s < 0 {
			y.F[o] = v
		} else {
			y.F[o] = x.F[s]
		}
	})
	return nil
}

func (k *padKernel) Backward(_ *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	if err := k.geometry(in, out[0].Shape); err != nil {
		return err
	}
	g := gout[0].F
	if gx := gin[0]; gx != nil {
		k.walk(out[0].Shape, func(o, s int) {
			if s >= 0 {
				gx.F[s] += g[o]
			}
		})
	}
	// The padding value is an input since opset 11 and can carry a gradient too.
	if len(gin) > 2 && gin[2] != nil {
		k.walk(out[0].Shape, func(o, s int) {
			if s < 0 {
				gin[2].F[0] += g[o]
			}
		})
	}
	return nil
}

func (k *padKernel) Retains() (in, out []bool) {
	return []bool{false, false, false, false}, []bool{false}
}
