package engine

// weightKey identifies the weight values a kept form (packed rows, trimmed taps) was
// made from: the parameter, the count of in-place writes it was told of, and the memory
// the values live in, with the part of the kernel kept (zero lo and hi: all of it). The
// zero key stands for values that may change unannounced and is never current.
type weightKey struct {
	p      *Param
	gen    uint64
	data   *float32
	n      int
	lo, hi [nnMaxSpatial]int
}

// paramKey returns the key of w's current values, or the zero key unless w is the Value
// of a frozen parameter.
func paramKey(w *Tensor) weightKey {
	p := w.param
	if p == nil || p.Trainable || p.Value != w || len(w.F) == 0 {
		return weightKey{}
	}
	return weightKey{p: p, gen: p.gen, data: &w.F[0], n: len(w.F)}
}

// current reports whether a form made for key have is still good for the values of want.
func (have weightKey) current(want weightKey) bool {
	return want.p != nil && have == want
}

// trimmedConv is a convolution's weight without the kernel taps that read only padding
// for the geometry at hand, kept between runs.
type trimmedConv struct {
	key   weightKey
	w     Tensor
	trims int // how many times w was made; tests read it
}

// trimTaps returns d without the leading and trailing kernel taps that read padding only
// for every output (a 3×3 "same" convolution of a 1×1 plane, ResNet's last stage on small
// inputs, is a 1×1 one: eight of its nine taps multiply zeros), and the taps kept per
// dimension, [lo, hi). ok is false when no tap can go, or when the trimmed geometry would
// need negative padding.
func trimTaps(d *convDims) (t convDims, lo, hi [nnMaxSpatial]int, ok bool) {
	t = *d
	g := &t.g
	for j := 0; j < nnMaxSpatial; j++ {
		lo[j], hi[j] = d.g.k[j], 0
		for kj := 0; kj < d.g.k[j]; kj++ {
			if a, b := d.g.validRange(j, kj); a < b {
				lo[j], hi[j] = min(lo[j], kj), kj+1
			}
		}
		if lo[j] >= hi[j] {
			return t, lo, hi, false
		}
		ok = ok || lo[j] > 0 || hi[j] < d.g.k[j]
		g.k[j] = hi[j] - lo[j]
		g.pb[j] -= lo[j] * g.d[j]
		g.pe[j] -= (d.g.k[j] - hi[j]) * g.d[j]
		if g.pb[j] < 0 || g.pe[j] < 0 {
			return t, lo, hi, false
		}
	}
	if !ok {
		return t, lo, hi, false
	}
	g.initRanges()
	t.pointwise = g.isPointwise()
	return t, lo, hi, true
}

// trimmed returns d and w with the taps that read only padding dropped when w is a
// frozen parameter (the trimmed weight is kept until the parameter changes), else d and
// w as they are.
func (k *convKernel) trimmed(d convDims, w *Tensor) (convDims, *Tensor) {
	key := paramKey(w)
	if key.p == nil || d.depthwise {
		return d, w
	}
	t, lo, hi, ok := trimTaps(&d)
	if !ok {
		return d, w
	}
	key.lo, key.hi = lo, hi
	r := &k.trim
	if !r.key.current(key) {
		r.trims++
		og, tg := &d.g, &t.g
		r.w.DType = Float32
		r.w.Shape = append(append(r.w.Shape[:0], w.Shape[:2]...), w.Shape[2:]...)
		off := nnMaxSpatial - og.nd
		for i := range og.nd {
			r.w.Shape[2+i] = tg.k[off+i]
		}
		r.w.F = nnGrow(r.w.F, d.M*d.Cg*tg.kSize())[:d.M*d.Cg*tg.kSize()]
		dst := r.w.F
		for mc := 0; mc < d.M*d.Cg; mc++ {
			src := w.F[mc*og.kSize():]
			for a := lo[0]; a < hi[0]; a++ {
				for b := lo[1]; b < hi[1]; b++ {
					row := src[(a*og.k[1]+b)*og.k[2]:]
					dst = dst[copy(dst, row[lo[2]:hi[2]]):]
				}
			}
		}
		r.key = key
	}
	return t, &r.w
}

// weightKey returns the key of the weight values w holds: the trimmed weight's, or w's own.
func (k *convKernel) weightKey(w *Tensor) weightKey {
	if w == &k.trim.w {
		return k.trim.key
	}
	return paramKey(w)
}

// changed is Param.Changed for a kernel that writes a parameter it was given (the running
// statistics of a training-mode BatchNormalization); nothing for other tensors.
func (t *Tensor) changed() {
	if t.param != nil && t.param.Value == t {
		t.param.Changed()
	}
}
