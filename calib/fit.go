package calib

import (
	"fmt"
	"slices"
)

// imageDims describes decoded images as stored by a source.
type imageDims struct {
	c, h, w int
	chw     bool // stored channel-first (CIFAR); otherwise HWC
}

func isChannels(v int64) bool { return v == 1 || v == 3 }

// modelNHWC reports whether a rank-3 sample shape is channels-last: only when the last axis
// looks like channels and the first does not, since PyTorch exports (NCHW) are the norm.
func modelNHWC(m []int64) bool {
	return len(m) == 3 && isChannels(m[2]) && !isChannels(m[0])
}

func fitDim(want int64, have int) bool { return want < 0 || want == int64(have) }

// fitImage plans the conversion of decoded images to the model input.
func fitImage(name string, im imageDims, in Input, opts *Options, dt dtype) (plan, error) {
	m := []int64{-1, -1, -1} // no model: CHW
	if len(in.Shape) > 0 {
		m = in.Shape[1:]
	}
	c, h, w := im.c, im.h, im.w
	var p plan
	// storedAt returns the stored index of pixel (ch, y, x).
	storedAt := func(ch, y, x int) int32 {
		if im.chw {
			return int32((ch*h+y)*w + x)
		}
		return int32((y*w+x)*c + ch)
	}
	nhwc := false
	switch len(m) {
	case 3:
		// The data's channels and size settle the layout when the shape alone does not.
		fitsNCHW := fitDim(m[0], c) && fitDim(m[1], h) && fitDim(m[2], w)
		fitsNHWC := fitDim(m[0], h) && fitDim(m[1], w) && fitDim(m[2], c)
		nhwc = modelNHWC(m)
		if fitsNCHW != fitsNHWC {
			nhwc = fitsNHWC
		}
		mc, mh, mw := m[0], m[1], m[2]
		if nhwc {
			mh, mw, mc = m[0], m[1], m[2]
		}
		if err := imageChannels(name, in, mc, c, h, w); err != nil {
			return p, err
		}
		if !fitDim(mh, h) || !fitDim(mw, w) {
			return p, imageSizeErr(name, in, mh, mw, c, h, w, opts)
		}
		p.shape = []int64{int64(c), int64(h), int64(w)}
		if nhwc {
			p.shape = []int64{int64(h), int64(w), int64(c)}
		}
	case 2:
		if err := imageChannels(name, in, 1, c, h, w); err != nil {
			return p, err
		}
		if !fitDim(m[0], h) || !fitDim(m[1], w) {
			return p, imageSizeErr(name, in, m[0], m[1], c, h, w, opts)
		}
		p.shape = []int64{int64(h), int64(w)}
	case 1:
		if !fitDim(m[0], c*h*w) {
			e := &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: []int{c, h, w},
				Reason: fmt.Sprintf("model input %q takes %d values per sample but the images of %s have %dx%dx%d = %d", in.Name, m[0], name, c, h, w, c*h*w)}
			switch {
			case c == 3 && m[0] == int64(h*w):
				e.Fix = []Setting{{"Color", Grayscale}}
			case c == 1 && m[0] == int64(3*h*w):
				e.Fix = []Setting{{"Color", RGB}}
			default:
				for _, cc := range []int{c, 1, 3} {
					if k := isqrt(int(m[0]) / cc); k*k*cc == int(m[0]) {
						e.Fix = []Setting{{"Resize", k}}
						if cc != c {
							e.Fix = append(e.Fix, Setting{"Color", map[int]Color{1: Grayscale, 3: RGB}[cc]})
						}
						break
					}
				}
			}
			return p, e
		}
		// Flatten in CHW order, as PyTorch's Flatten of an NCHW tensor does.
		p.shape = []int64{int64(c * h * w)}
	default:
		return p, fmt.Errorf("model input %q has shape %v; images fit inputs of rank 2 ([batch,features]), 3 ([batch,H,W]) or 4 ([batch,C,H,W] or [batch,H,W,C])", in.Name, in.Shape)
	}
	n := c * h * w
	p.perm = make([]int32, 0, n)
	p.chans = make([]int32, 0, n)
	if nhwc {
		for y := range h {
			for x := range w {
				for ch := range c {
					p.perm = append(p.perm, storedAt(ch, y, x))
					p.chans = append(p.chans, int32(ch))
				}
			}
		}
	} else {
		for ch := range c {
			for y := range h {
				for x := range w {
					p.perm = append(p.perm, storedAt(ch, y, x))
					p.chans = append(p.chans, int32(ch))
				}
			}
		}
	}
	if isIdentity(p.perm) {
		p.perm = nil
	}
	return p, p.normalize(opts, c, dt, in)
}

func imageChannels(name string, in Input, want int64, have, h, w int) error {
	if fitDim(want, have) {
		return nil
	}
	e := &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: []int{have, h, w},
		Reason: fmt.Sprintf("model input %q takes %d channel(s) but the images of %s have %d", in.Name, want, name, have)}
	switch want {
	case 1:
		e.Fix = []Setting{{"Color", Grayscale}}
	case 3:
		e.Fix = []Setting{{"Color", RGB}}
	default:
		e.Reason += ": calib decodes images to 1 or 3 channels only"
	}
	return e
}

func imageSizeErr(name string, in Input, mh, mw int64, c, h, w int, opts *Options) error {
	e := &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: []int{c, h, w},
		Reason: fmt.Sprintf("model input %q takes %sx%s images but %s gives %dx%d", in.Name, dimStr(mh), dimStr(mw), name, h, w)}
	switch {
	case mh == mw || mh < 0 || mw < 0:
		k := int(max(mh, mw))
		e.Fix = []Setting{{"Resize", k}}
		if opts.Resize > 0 {
			e.Reason += fmt.Sprintf(" after resizing to %d", opts.Resize)
		} else {
			e.Alt = []Setting{{"Resize", k}, {"Stretch", true}}
		}
	default:
		e.Reason += fmt.Sprintf(": calib resizes to squares only; resize the data to %dx%d beforehand", mh, mw)
	}
	return e
}

func dimStr(v int64) string {
	if v < 0 {
		return "?"
	}
	return fmt.Sprint(v)
}

func isqrt(n int) int {
	k := 0
	for (k+1)*(k+1) <= n {
		k++
	}
	return k
}

func isIdentity(p []int32) bool {
	for i, v := range p {
		if int(v) != i {
			return false
		}
	}
	return true
}

// fitArray plans the conversion of stored arrays of per-sample shape dims to the model input.
func fitArray(name string, dims []int, in Input, opts *Options, dt dtype) (plan, error) {
	var m []int64
	if len(in.Shape) > 0 {
		m = in.Shape[1:]
	} else {
		// No model: the stored shape, in the model layout the data's layout implies.
		for range dims {
			m = append(m, -1)
		}
		if len(dims) == 3 && opts.Layout == NHWC {
			m[2] = int64(dims[2])
		}
	}
	var p plan
	s := slices.Clone(dims)
	nch := 1
	if len(s) == 3 && len(m) == 3 {
		dataNHWC := opts.Layout == NHWC
		mNHWC := modelNHWC(m)
		t, perm := s, []int32(nil)
		if dataNHWC != mNHWC {
			t, perm = transposed(s, dataNHWC)
		}
		fits := shapeFits(m, t)
		if !fits && perm != nil && shapeFits(m, s) {
			// The samples already have the model's shape (say [76,32,1] for an input
			// [-1,76,32,1]) while the conversion the layouts imply would not fit: the data
			// are in the model's layout already, and Options.Layout describes a conversion
			// the data do not need. Taking them as they are is the only reading that fits.
			t, perm, fits = s, nil, true
		}
		if fits {
			p.shape = toInt64(t)
			p.perm = perm
			if mNHWC {
				nch = t[2]
			} else {
				nch = t[0]
			}
			p.chans = channelsOf(t, mNHWC)
			return p, p.normalize(opts, nch, dt, in)
		}
		other := Layout(1 - opts.Layout)
		ot := s
		if !dataNHWC != mNHWC {
			ot, _ = transposed(s, !dataNHWC)
		}
		if shapeFits(m, ot) {
			return p, &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: dims,
				Reason: fmt.Sprintf("%s holds samples of shape %v, which as %s do not fit model input %q %v", name, dims, opts.Layout, in.Name, in.Shape),
				Fix:    []Setting{{"Layout", other}}}
		}
		return p, &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: dims,
			Reason: fmt.Sprintf("%s holds samples of shape %v but model input %q takes %v per sample (batch %v)", name, dims, in.Name, m, in.Shape)}
	}
	if shapeFits(m, s) {
		p.shape = toInt64(s)
		return p, p.normalize(opts, 1, dt, in)
	}
	// A reshape that keeps the element order: flattening, unflattening, or adding or removing
	// axes of size 1, such as [28,28] → [784] or [1,28,28].
	n := 1
	for _, v := range s {
		n *= v
	}
	if r, ok := resolve(m, n); ok && (len(s) <= 1 || len(m) <= 1 || slices.Equal(squeeze(toInt64(s)), squeeze(r))) {
		p.shape = r
		return p, p.normalize(opts, 1, dt, in)
	}
	if len(s) == 3 && len(m) == 3 {
		return p, &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: dims,
			Reason: fmt.Sprintf("%s holds samples of shape %v but model input %q takes %v", name, dims, in.Name, m)}
	}
	return p, &ShapeError{File: name, Input: in.Name, Want: in.Shape, Got: dims,
		Reason: fmt.Sprintf("%s holds samples of shape %v (%d values) but model input %q takes %v per sample: no reshape keeps the element order", name, dims, n, in.Name, shapeString(m))}
}

func shapeString(m []int64) string {
	s := "["
	for i, v := range m {
		if i > 0 {
			s += ","
		}
		s += dimStr(v)
	}
	return s + "]"
}

// transposed returns the shape s (CHW, or HWC when fromNHWC) in the other layout and, for
// each element of the result, its index in the original.
func transposed(s []int, fromNHWC bool) ([]int, []int32) {
	perm := make([]int32, 0, s[0]*s[1]*s[2])
	if fromNHWC {
		h, w, c := s[0], s[1], s[2]
		for ch := range c {
			for y := range h {
				for x := range w {
					perm = append(perm, int32((y*w+x)*c+ch))
				}
			}
		}
		return []int{c, h, w}, perm
	}
	c, h, w := s[0], s[1], s[2]
	for y := range h {
		for x := range w {
			for ch := range c {
				perm = append(perm, int32((ch*h+y)*w+x))
			}
		}
	}
	return []int{h, w, c}, perm
}

func channelsOf(t []int, nhwc bool) []int32 {
	n := t[0] * t[1] * t[2]
	ch := make([]int32, n)
	for j := range ch {
		if nhwc {
			ch[j] = int32(j % t[2])
		} else {
			ch[j] = int32(j / (t[1] * t[2]))
		}
	}
	return ch
}

func shapeFits(m []int64, s []int) bool {
	if len(m) != len(s) {
		return false
	}
	for i := range m {
		if !fitDim(m[i], s[i]) {
			return false
		}
	}
	return true
}

// resolve fills at most one free dimension of m so that it holds n elements.
func resolve(m []int64, n int) ([]int64, bool) {
	r := slices.Clone(m)
	known, free := 1, -1
	for i, v := range m {
		switch {
		case v >= 0:
			known *= int(v)
		case free >= 0:
			return nil, false
		default:
			free = i
		}
	}
	if free >= 0 {
		if known == 0 || n%known != 0 {
			return nil, false
		}
		r[free] = int64(n / known)
		return r, true
	}
	return r, known == n
}

func squeeze(s []int64) []int64 {
	var r []int64
	for _, v := range s {
		if v != 1 {
			r = append(r, v)
		}
	}
	return r
}

func toInt64(s []int) []int64 {
	r := make([]int64, len(s))
	for i, v := range s {
		r[i] = int64(v)
	}
	return r
}

// normalize sets up scaling and per-channel normalisation for nch channels.
func (p *plan) normalize(opts *Options, nch int, dt dtype, in Input) error {
	if p.chans == nil || nch == 1 {
		p.chans = nil
		nch = 1
	}
	for _, v := range [][]float64{opts.Mean, opts.Std} {
		if len(v) > 1 && len(v) != nch {
			if nch == 1 {
				return &OptionError{Option: "Mean", Reason: fmt.Sprintf("Options.Mean/Options.Std have %d values but model input %q %v has no channel axis (or one channel): give one value", len(v), in.Name, in.Shape)}
			}
			return &OptionError{Option: "Mean", Reason: fmt.Sprintf("Options.Mean/Options.Std have %d values but the data have %d channels", len(v), nch)}
		}
	}
	mean := make([]float64, nch)
	std := make([]float64, nch)
	for c := range nch {
		mean[c], std[c] = 0, 1
		if len(opts.Mean) == 1 {
			mean[c] = opts.Mean[0]
		} else if len(opts.Mean) > 1 {
			mean[c] = opts.Mean[c]
		}
		if len(opts.Std) == 1 {
			std[c] = opts.Std[0]
		} else if len(opts.Std) > 1 {
			std[c] = opts.Std[c]
		}
	}
	// Normalise in float32 arithmetic, as torchvision's ToTensor and Normalize do, so that
	// the inputs match a PyTorch pipeline bit for bit.
	if dt == u8 {
		p.lut = make([]float32, nch*256)
		for c := range nch {
			m, s := float32(mean[c]), float32(std[c])
			for v := range 256 {
				x := float32(v)
				if !opts.NoScale {
					x /= 255
				}
				p.lut[c*256+v] = (x - m) / s
			}
		}
		return nil
	}
	if opts.Mean != nil || opts.Std != nil {
		p.mean, p.std = make([]float32, nch), make([]float32, nch)
		for c := range nch {
			p.mean[c], p.std[c] = float32(mean[c]), float32(std[c])
		}
	}
	return nil
}
