package engine

import (
	"math"
	"slices"
)

// resizeOpDefs returns the rows of Resize and Upsample, which share one kernel.
func resizeOpDefs() []opDef {
	return []opDef{
		// Upsample-7 reads its scales from an attribute, Upsample-9 from input 1.
		{name: "Upsample", build: buildUpsample, inputs: arity{n: 2, since: 9, old: 1}, grad: true, sameType: true},
		{name: "Resize", build: buildResize, inputs: arity{n: 1}, grad: true, sameType: true},
	}
}

// Resize's interpolation modes.
const (
	resizeNearest = iota
	resizeLinear
	resizeCubic
)

// resizeKernel is Resize (opsets 10–19) and Upsample (7–9). Every mode is separable: an
// output element is Σ Π_d w_d·x[i_0…i_r], a tensor product of per-axis taps (one for
// nearest, two for linear, four for cubic). The taps of each axis are computed once per
// call from the shapes, scales and roi (O(Σ output dims)), and the hot loop walks output
// rows, reading the last axis's taps from flat tables: no per-element indirect calls.
// The VJP is the same walk scattering gy·w into gx.
type resizeKernel struct {
	n       *Node
	mode    int
	coord   string // coordinate_transformation_mode
	nearest string // nearest_mode; "simple" is opset 10's and Upsample's floor-or-ceil rule
	cubicA  float64
	exclude bool    // exclude_outside
	extrap  float32 // extrapolation_value, for tf_crop_and_resize
	policy  string  // keep_aspect_ratio_policy
	axes    []int64 // opset 18's axes attribute, nil for all axes
	// Where the inputs are: scales (-1 when the attribute holds them), sizes and roi
	// (-1 when the op has none).
	scalesIn, sizesIn, roiIn int
	attrScales               []float32 // Upsample-7's scales attribute

	// Per-call state, in buffers kept between calls.
	ax              []resizeAxis
	outShape        []int
	scale, roiStart []float64
	roiEnd          []float64
	// outLen is the output length before flooring, in·scale: the coordinate transforms
	// divide by it, as ONNX's reference does.
	outLen []float64
}

// resizeAxis holds one axis's taps: output index o reads t taps, input offsets
// idx[o*t:(o+1)*t] (already multiplied by the axis's input stride) with weights
// w[o*t:(o+1)*t]. ext[o] marks tf_crop_and_resize coordinates outside the input, whose
// whole output element is the extrapolation value (their taps have weight 0).
type resizeAxis struct {
	in, out, t int
	idx        []int
	w          []float32
	ext        []bool
	anyExt     bool
	identity   bool // out == in and output o reads exactly input o with weight 1
}

func buildUpsample(n *Node) (Kernel, error) {
	k := &resizeKernel{n: n, coord: "asymmetric", nearest: "simple", scalesIn: 1, sizesIn: -1, roiIn: -1}
	switch m := n.String("mode", "nearest"); m {
	case "nearest":
	case "linear", "bilinear":
		k.mode = resizeLinear
	default:
		return nil, n.Errorf("mode %q is not supported (nearest, linear)", m)
	}
	if n.Opset < 9 {
		k.scalesIn = -1
		k.attrScales = n.Floats("scales", nil)
		if len(k.attrScales) == 0 {
			return nil, n.Errorf("the scales attribute is required")
		}
	}
	return k, nil
}

func buildResize(n *Node) (Kernel, error) {
	k := &resizeKernel{n: n, scalesIn: 2, sizesIn: 3, roiIn: 1, cubicA: float64(n.Float("cubic_coeff_a", -0.75)),
		exclude: n.Int("exclude_outside", 0) != 0, extrap: n.Float("extrapolation_value", 0),
		coord: n.String("coordinate_transformation_mode", "half_pixel"), nearest: n.String("nearest_mode", "round_prefer_floor"),
		policy: n.String("keep_aspect_ratio_policy", "stretch")}
	if n.Opset < 11 {
		// Resize-10 is Upsample with downsampling allowed: asymmetric coordinates, and
		// nearest takes floor when enlarging and ceil when shrinking (onnxruntime's rule).
		k.scalesIn, k.sizesIn, k.roiIn = 1, -1, -1
		k.coord, k.nearest = "asymmetric", "simple"
	} else if k.nearest == "simple" {
		return nil, n.Errorf("nearest_mode %q is not supported", k.nearest)
	}
	switch m := n.String("mode", "nearest"); m {
	case "nearest":
	case "linear":
		k.mode = resizeLinear
	case "cubic":
		if n.Opset < 11 {
			return nil, n.Errorf("mode cubic needs opset 11")
		}
		k.mode = resizeCubic
	default:
		return nil, n.Errorf("mode %q is not supported (nearest, linear, cubic)", m)
	}
	switch k.coord {
	case "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize":
	case "tf_half_pixel_for_nn":
		if n.Opset >= 13 {
			return nil, n.Errorf("coordinate_transformation_mode tf_half_pixel_for_nn was removed in opset 13")
		}
	case "half_pixel_symmetric":
		if n.Opset < 19 {
			return nil, n.Errorf("coordinate_transformation_mode half_pixel_symmetric needs opset 19")
		}
	default:
		return nil, n.Errorf("coordinate_transformation_mode %q is not supported", k.coord)
	}
	switch k.nearest {
	case "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple":
	default:
		return nil, n.Errorf("nearest_mode %q is not supported", k.nearest)
	}
	switch k.policy {
	case "stretch", "not_larger", "not_smaller":
	default:
		return nil, n.Errorf("keep_aspect_ratio_policy %q is not supported", k.policy)
	}
	if n.Int("antialias", 0) != 0 {
		return nil, n.Errorf("antialias=1 is not supported")
	}
	if n.Opset >= 18 {
		k.axes = n.Ints("axes", nil)
	}
	return k, nil
}

// resolve computes, for input shape x and the scales, sizes and roi inputs, the output
// shape and each axis's scale and roi into the kernel's buffers.
func (k *resizeKernel) resolve(x []int, in []*Tensor) error {
	r := len(x)
	k.outShape = slices.Grow(k.outShape[:0], r)[:r]
	k.scale = slices.Grow(k.scale[:0], r)[:r]
	k.roiStart = slices.Grow(k.roiStart[:0], r)[:r]
	k.roiEnd = slices.Grow(k.roiEnd[:0], r)[:r]
	k.outLen = slices.Grow(k.outLen[:0], r)[:r]
	for d := range r {
		k.outShape[d], k.scale[d], k.roiStart[d], k.roiEnd[d], k.outLen[d] = x[d], 1, 0, 1, float64(x[d])
	}
	// axes maps the i-th entry of scales, sizes and roi to an input axis.
	var axisBuf [8]int
	axes := axisBuf[:0]
	if k.axes == nil {
		for d := range r {
			axes = append(axes, d)
		}
	} else {
		for _, a := range k.axes {
			d, ok := normAxis(a, r)
			if !ok || slices.Contains(axes, d) {
				return k.n.Errorf("axes %v do not fit rank %d", k.axes, r)
			}
			axes = append(axes, d)
		}
	}
	if r > len(axisBuf) {
		return k.n.Errorf("input rank %d exceeds 8", r)
	}
	var roi, scales *Tensor
	var sizes []int64
	if k.roiIn >= 0 {
		roi = k.n.Optional(in, k.roiIn)
	}
	if k.scalesIn >= 0 {
		if s := k.n.Optional(in, k.scalesIn); s != nil && s.Len() > 0 {
			scales = s
		}
	}
	if k.sizesIn >= 0 {
		if s := k.n.Optional(in, k.sizesIn); s != nil && s.Len() > 0 {
			v, ok := intsOf(s)
			if !ok {
				return k.n.Errorf("the sizes input must be known before running (a constant, or computed from shapes)")
			}
			sizes = v
		}
	}
	crop := k.coord == "tf_crop_and_resize"
	if crop {
		switch {
		case roi == nil:
			return k.n.Errorf("tf_crop_and_resize needs the roi input")
		case !roi.Known():
			// With sizes the roi moves coordinates only, so Infer may go without it.
		default:
			if roi.DType != Float32 || roi.Len() != 2*len(axes) {
				return k.n.Errorf("roi has %d values, want %d (starts and ends of %d axes)", roi.Len(), 2*len(axes), len(axes))
			}
			for i, d := range axes {
				k.roiStart[d], k.roiEnd[d] = float64(roi.F[i]), float64(roi.F[len(axes)+i])
			}
		}
	}
	switch {
	case scales != nil && sizes != nil:
		return k.n.Errorf("only one of scales and sizes may be given")
	case k.attrScales != nil || scales != nil:
		sv := k.attrScales
		if scales != nil {
			if scales.DType != Float32 || !scales.Known() {
				return k.n.Errorf("the scales input must be a float constant known before running")
			}
			sv = scales.F
		}
		if len(sv) != len(axes) {
			return k.n.Errorf("%d scales for %d axes", len(sv), len(axes))
		}
		if crop && !roi.Known() {
			return k.n.Errorf("with scales, tf_crop_and_resize's output shape depends on the roi, which must be known before running")
		}
		for i, d := range axes {
			s := float64(sv[i])
			if !(s > 0) || math.IsInf(s, 0) {
				return k.n.Errorf("scale %g must be positive", s)
			}
			k.scale[d] = s
			// The coordinate transforms divide by in·scale even when tf_crop_and_resize
			// shrinks the output to the roi (ONNX's reference does so).
			k.outLen[d] = float64(x[d]) * s
			n := k.outLen[d]
			if crop {
				n *= k.roiEnd[d] - k.roiStart[d]
			}
			k.outShape[d] = int(math.Floor(n))
		}
	case sizes != nil:
		if len(sizes) != len(axes) {
			return k.n.Errorf("%d sizes for %d axes", len(sizes), len(axes))
		}
		for i, d := range axes {
			if sizes[i] < 0 {
				return k.n.Errorf("sizes %v must not be negative", sizes)
			}
			k.outShape[d], k.outLen[d] = int(sizes[i]), float64(sizes[i])
			if x[d] > 0 {
				k.scale[d] = float64(sizes[i]) / float64(x[d])
			}
		}
		if k.policy != "stretch" {
			// One scale for every listed axis, the smallest (not_larger) or largest
			// (not_smaller) of sizes/input, and sizes rounded from it.
			s := k.scale[axes[0]]
			for _, d := range axes[1:] {
				if k.policy == "not_larger" {
					s = min(s, k.scale[d])
				} else {
					s = max(s, k.scale[d])
				}
			}
			for _, d := range axes {
				k.scale[d] = s
				k.outLen[d] = s * float64(x[d])
				k.outShape[d] = int(math.Round(k.outLen[d]))
			}
		}
	default:
		return k.n.Errorf("one of scales and sizes must be given")
	}
	return nil
}

func (k *resizeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if x.DType != Float32 {
		return nil, k.n.Errorf("input type %s is not supported (float only)", x.DType)
	}
	if err := k.resolve(x.Shape, in); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: slices.Clone(k.outShape)}}, nil
}

// coordOf maps output index o of an axis to a coordinate in the input; out is the
// axis's unfloored output length.
func (k *resizeKernel) coordOf(o, in int, out, scale, start, end float64) float64 {
	fo := float64(o)
	switch k.coord {
	case "half_pixel":
		return (fo+0.5)/scale - 0.5
	case "half_pixel_symmetric":
		adj := math.Floor(out) / out
		center := float64(in) / 2
		return center*(1-adj) + (fo+0.5)/scale - 0.5
	case "pytorch_half_pixel":
		if out > 1 {
			return (fo+0.5)/scale - 0.5
		}
		return 0
	case "align_corners":
		if out == 1 {
			return 0
		}
		return fo * float64(in-1) / (out - 1)
	case "tf_half_pixel_for_nn":
		return (fo + 0.5) / scale
	case "tf_crop_and_resize":
		if out > 1 {
			return start*float64(in-1) + fo*(end-start)*float64(in-1)/(out-1)
		}
		return 0.5 * (start + end) * float64(in-1)
	}
	return fo / scale // asymmetric
}

// nearestIndex rounds a coordinate to an input index as nearest_mode says.
func (k *resizeKernel) nearestIndex(c, scale float64) int {
	switch k.nearest {
	case "round_prefer_ceil":
		if c-math.Floor(c) == 0.5 {
			return int(math.Ceil(c))
		}
		return int(math.Round(c))
	case "floor":
		return int(math.Floor(c))
	case "ceil":
		return int(math.Ceil(c))
	case "simple":
		if scale < 1 {
			return int(math.Ceil(c))
		}
		return int(math.Floor(c))
	}
	if c-math.Floor(c) == 0.5 { // round_prefer_floor
		return int(math.Floor(c))
	}
	return int(math.Round(c))
}

// cubicWeights returns the four cubic convolution weights of taps floor(c)-1 … floor(c)+2
// for fractional part s.
func cubicWeights(a, s float64) [4]float64 {
	w := func(t float64) float64 { // Keys' kernel at distance |t|
		t = math.Abs(t)
		switch {
		case t <= 1:
			return ((a+2)*t-(a+3))*t*t + 1
		case t < 2:
			return ((a*t-5*a)*t+8*a)*t - 4*a
		}
		return 0
	}
	return [4]float64{w(s + 1), w(s), w(1 - s), w(2 - s)}
}

// taps fills the taps of every axis for input shape x (resolve has run).
func (k *resizeKernel) taps(x []int) {
	r := len(x)
	if cap(k.ax) < r {
		k.ax = make([]resizeAxis, r)
	}
	k.ax = k.ax[:r]
	stride := 1
	t := [...]int{resizeNearest: 1, resizeLinear: 2, resizeCubic: 4}[k.mode]
	for d := r - 1; d >= 0; d-- {
		a := &k.ax[d]
		in, out := x[d], k.outShape[d]
		a.in, a.out, a.t, a.anyExt = in, out, t, false
		a.idx = slices.Grow(a.idx[:0], out*t)[:out*t]
		a.w = slices.Grow(a.w[:0], out*t)[:out*t]
		a.ext = slices.Grow(a.ext[:0], out)[:out]
		clear(a.ext)
		for o := range out {
			c := k.coordOf(o, in, k.outLen[d], k.scale[d], k.roiStart[d], k.roiEnd[d])
			idx, w := a.idx[o*t:(o+1)*t], a.w[o*t:(o+1)*t]
			clear(w)
			clear(idx)
			if k.coord == "tf_crop_and_resize" && (c < 0 || c > float64(in-1)) {
				a.ext[o], a.anyExt = true, true
				continue
			}
			switch k.mode {
			case resizeNearest:
				idx[0], w[0] = min(max(k.nearestIndex(c, k.scale[d]), 0), in-1)*stride, 1
			case resizeLinear:
				c = min(max(c, 0), float64(in-1))
				i0 := int(math.Floor(c))
				f := c - float64(i0)
				idx[0], idx[1] = i0*stride, min(i0+1, in-1)*stride
				w[0], w[1] = float32(1-f), float32(f)
			case resizeCubic:
				i0 := int(math.Floor(c))
				cw := cubicWeights(k.cubicA, c-float64(i0))
				var sum float64
				for j := range 4 {
					i := i0 - 1 + j
					if k.exclude && (i < 0 || i >= in) {
						cw[j] = 0
					}
					sum += cw[j]
					idx[j] = min(max(i, 0), in-1) * stride
				}
				for j := range 4 {
					if k.exclude {
						cw[j] /= sum
					}
					w[j] = float32(cw[j])
				}
			}
		}
		// Collapse an axis that copies straight through (N and C, usually) to one tap,
		// so that the walk does not visit zero-weight taps.
		a.identity = in == out && !a.anyExt
		for o := 0; o < out && a.identity; o++ {
			for j := range t {
				if v := a.w[o*t+j]; v != 0 && (v != 1 || a.idx[o*t+j] != o*stride) {
					a.identity = false
				}
			}
		}
		if a.identity && t > 1 {
			a.t = 1
			for o := range out {
				a.idx[o], a.w[o] = o*stride, 1
			}
		}
		stride *= in
	}
}

// layout returns how many leading identity axes there are (their product is the number
// of independent planes) and the input and output sizes of one plane.
func (k *resizeKernel) layout() (lead, planes, isz, osz int) {
	planes, isz, osz = 1, 1, 1
	for lead < len(k.ax)-1 && k.ax[lead].identity {
		planes *= k.ax[lead].in
		lead++
	}
	for _, a := range k.ax[lead:] {
		isz *= a.in
		osz *= a.out
	}
	return lead, planes, isz, osz
}

func (k *resizeKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x, y := in[0], out[0]
	if err := k.resolve(x.Shape, in); err != nil {
		return err
	}
	if len(x.Shape) == 0 {
		y.F[0] = x.F[0]
		return nil
	}
	k.taps(x.Shape)
	lead, planes, isz, osz := k.layout()
	if isz == 0 || osz == 0 {
		clear(y.F)
		return nil
	}
	ax := k.ax[lead:]
	ctx.Parallel(planes, max(1, 16384/osz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			resizePlane(false, ax, k.extrap, x.F[p*isz:(p+1)*isz], y.F[p*osz:(p+1)*osz])
		}
	})
	return nil
}

func (k *resizeKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	if gin[0] == nil || gout[0] == nil {
		return nil
	}
	x := in[0]
	if err := k.resolve(x.Shape, in); err != nil {
		return err
	}
	if len(x.Shape) == 0 {
		gin[0].F[0] += gout[0].F[0]
		return nil
	}
	k.taps(x.Shape)
	lead, planes, isz, osz := k.layout()
	if isz == 0 || osz == 0 {
		return nil
	}
	ax := k.ax[lead:]
	gx, gy := gin[0].F, gout[0].F
	// Planes are independent, so workers scatter into disjoint parts of gx.
	ctx.Parallel(planes, max(1, 16384/osz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			resizePlane(true, ax, 0, gx[p*isz:(p+1)*isz], gy[p*osz:(p+1)*osz])
		}
	})
	return nil
}

// Retains keeps roi, scales and sizes; the gradient needs X's shape only.
func (k *resizeKernel) Retains() (in, out []bool) {
	return []bool{false, true, true, true}, []bool{false}
}

// resizePlane interpolates one plane: x is the input block of axes ax, y the output
// block. With back it is the VJP instead: x receives Σ w·y (added), y is read. The walk
// goes over output rows (every axis but the last); for each row it enumerates the
// combinations of the outer axes' taps, and the inner loop over the last axis reads its
// taps from flat tables.
func resizePlane(back bool, ax []resizeAxis, extrap float32, x, y []float32) {
	r := len(ax)
	last := &ax[r-1]
	n, t := last.out, last.t
	var o, j [8]int // the row's output index and the current tap of each outer axis
	rows := len(y) / n
	for row := range rows {
		yr := y[row*n : (row+1)*n]
		ext := false
		for d := range r - 1 {
			ext = ext || ax[d].ext[o[d]]
		}
		if ext {
			if !back {
				for i := range yr {
					yr[i] = extrap
				}
			}
		} else {
			first := true
			for {
				// One combination of outer taps: its input row and weight.
				off, w := 0, float32(1)
				for d := range r - 1 {
					a := &ax[d]
					k := o[d]*a.t + j[d]
					off += a.idx[k]
					w *= a.w[k]
				}
				if w != 0 || first {
					switch {
					case back:
						resizeRowBack(x[off:], yr, last.idx, last.w, t, w)
					case first:
						resizeRow(x[off:], yr, last.idx, last.w, t, w, false)
					default:
						resizeRow(x[off:], yr, last.idx, last.w, t, w, true)
					}
					first = false
				}
				d := r - 2
				for ; d >= 0; d-- {
					if j[d]++; j[d] < ax[d].t {
						break
					}
					j[d] = 0
				}
				if d < 0 {
					break
				}
			}
			if last.anyExt && !back {
				for i, e := range last.ext {
					if e {
						yr[i] = extrap
					}
				}
			}
		}
		for d := r - 2; d >= 0; d-- {
			if o[d]++; o[d] < ax[d].out {
				break
			}
			o[d] = 0
		}
	}
}

// resizeRow computes (or with add, adds) y[i] = w·Σ_j ws[i·t+j]·x[idx[i·t+j]].
func resizeRow(x, y []float32, idx []int, ws []float32, t int, w float32, add bool) {
	switch t {
	case 1:
		idx, ws = idx[:len(y)], ws[:len(y)]
		for i := range y {
			v := w * ws[i] * x[idx[i]]
			if add {
				v += y[i]
			}
			y[i] = v
		}
	case 2:
		idx, ws = idx[:2*len(y)], ws[:2*len(y)]
		for i := range y {
			v := w * (ws[2*i]*x[idx[2*i]] + ws[2*i+1]*x[idx[2*i+1]])
			if add {
				v += y[i]
			}
			y[i] = v
		}
	default:
		idx, ws = idx[:4*len(y)], ws[:4*len(y)]
		for i := range y {
			b := 4 * i
			v := w * (ws[b]*x[idx[b]] + ws[b+1]*x[idx[b+1]] + ws[b+2]*x[idx[b+2]] + ws[b+3]*x[idx[b+3]])
			if add {
				v += y[i]
			}
			y[i] = v
		}
	}
}

// resizeRowBack adds w·ws[i·t+j]·gy[i] into gx[idx[i·t+j]].
func resizeRowBack(gx, gy []float32, idx []int, ws []float32, t int, w float32) {
	idx, ws = idx[:t*len(gy)], ws[:t*len(gy)]
	for i, g := range gy {
		g *= w
		for j := i * t; j < (i+1)*t; j++ {
			gx[idx[j]] += ws[j] * g
		}
	}
}
