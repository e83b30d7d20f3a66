package export

import (
	"fmt"
	"math"
	"slices"
)

// Weight is one quantized parameter as an algorithm produced it.
type Weight struct {
	// Name is the parameter's name in the model: an initializer or a Constant node's output.
	Name string
	// Values are the quantized float32 values in the tensor's row-major order. Each must
	// equal float32(level)·scale bit for bit for some level, with the scale of its channel.
	Values []float32
	// Grid is the set the values lie on.
	Grid Grid
}

// Grid describes a quantization grid: integer levels times a float32 scale.
type Grid struct {
	// Levels are the distinct integer levels in increasing order, at most 256 of them,
	// each in [−2^24, 2^24] so that float32 holds it exactly.
	Levels []int
	// Scales is nil when the values are the levels themselves, one scale for the whole
	// tensor, or one per index of the tensor's dimension Axis. Scales must be finite and
	// non-negative.
	Scales []float32
	// Axis is the output-channel axis that per-channel scales run along.
	Axis int
}

// String describes the grid, e.g. "{-1,1}×α per channel (axis 0)".
func (g Grid) String() string {
	s := "{"
	for i, l := range g.Levels {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(l)
	}
	s += "}"
	switch len(g.Scales) {
	case 0:
	case 1:
		s += "×α"
	default:
		s += fmt.Sprintf("×α per channel (axis %d)", g.Axis)
	}
	return s
}

// Bits returns the width of a packed code: 1 for two levels, 2 for up to 4, 4 for up
// to 16, 8 for up to 256. A grid of one level still takes 1 bit.
func (g Grid) Bits() int {
	switch n := len(g.Levels); {
	case n <= 2:
		return 1
	case n <= 4:
		return 2
	case n <= 16:
		return 4
	}
	return 8
}

// check validates the grid for a tensor of the given dims.
func (g Grid) check(dims []int64) error {
	if len(g.Levels) == 0 || len(g.Levels) > 256 {
		return fmt.Errorf("grid has %d levels, want 1 to 256", len(g.Levels))
	}
	for i, l := range g.Levels {
		if l < -(1<<24) || l > 1<<24 {
			return fmt.Errorf("level %d is outside [-2^24, 2^24], where float32 stops holding integers exactly", l)
		}
		if i > 0 && l <= g.Levels[i-1] {
			return fmt.Errorf("levels %v are not distinct and increasing", g.Levels)
		}
	}
	switch {
	case len(g.Scales) > 1:
		if g.Axis < 0 || g.Axis >= len(dims) {
			return fmt.Errorf("channel axis %d is out of range for shape %v", g.Axis, dims)
		}
		if int64(len(g.Scales)) != dims[g.Axis] {
			return fmt.Errorf("%d scales for %d channels on axis %d of shape %v", len(g.Scales), dims[g.Axis], g.Axis, dims)
		}
	}
	for c, s := range g.Scales {
		if !(s >= 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("scale %d is %v, want a finite scale ≥ 0", c, s)
		}
	}
	return nil
}

// perChannel reports whether the grid has one scale per channel (more than one scale).
func (g Grid) perChannel() bool { return len(g.Scales) > 1 }

// channelLayout returns the inner block size and channel count for per-channel scales:
// element i belongs to channel (i/inner) % channels.
func channelLayout(dims []int64, axis int) (inner, channels int) {
	inner = 1
	for _, d := range dims[axis+1:] {
		inner *= int(d)
	}
	return inner, int(dims[axis])
}

// Codes returns, for each value, the index into g.Levels of its level, checking that
// every value equals float32(level)·scale bit for bit. dims is the tensor's shape. The
// error names the first offending index in row-major order.
func (g Grid) Codes(values []float32, dims []int64) ([]uint8, error) {
	if err := g.check(dims); err != nil {
		return nil, err
	}
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	if len(values) != n {
		return nil, fmt.Errorf("%d values for shape %v (%d elements)", len(values), dims, n)
	}
	lo, hi := g.Levels[0], g.Levels[len(g.Levels)-1]
	// index[l-lo] is the code of level l, or -1; the span is small for real grids.
	var index []int16
	if hi-lo < 1<<16 {
		index = make([]int16, hi-lo+1)
		for i := range index {
			index[i] = -1
		}
		for i, l := range g.Levels {
			index[l-lo] = int16(i)
		}
	}
	codes := make([]uint8, n)
	if n == 0 {
		return codes, nil
	}
	inner, channels := n, 1
	if g.perChannel() {
		inner, channels = channelLayout(dims, g.Axis)
	}
	prods := make([]uint32, len(g.Levels))
	for start := 0; start < n; start += inner {
		scale := float32(1)
		if len(g.Scales) > 0 {
			scale = g.Scales[(start/inner)%channels]
		}
		// The bit patterns a runtime produces for each level in this block.
		for c, l := range g.Levels {
			prods[c] = math.Float32bits(float32(l) * scale)
		}
		inv := 0.0
		if scale > 0 {
			inv = 1 / float64(scale)
		}
		blk := values[start : start+inner]
		if len(prods) == 2 && prods[0] != prods[1] {
			// Two levels, the binary case: one comparison decides, a second confirms.
			if j, ok := codes2(codes[start:start+inner], blk, prods[0], prods[1]); !ok {
				i := start + j
				return nil, fmt.Errorf("value %v at index %d (%s) is not float32(level)×scale for any level of %s (scale %v)", blk[j], i, indexString(i, dims), g, scale)
			}
			continue
		}
		for j, v := range blk {
			bits := math.Float32bits(v)
			code := -1
			if len(prods) > 8 && inv > 0 {
				// Round to the nearest level, then confirm; the scan below settles the rest.
				r := float64(v) * inv
				if r >= float64(lo)-0.5 && r <= float64(hi)+0.5 {
					l := int(math.Floor(r + 0.5))
					c := -1
					if index != nil {
						c = int(index[l-lo])
					} else if k, ok := slices.BinarySearch(g.Levels, l); ok {
						c = k
					}
					if c >= 0 && prods[c] == bits {
						code = c
					}
				}
			}
			if code < 0 {
				for c, p := range prods {
					if p == bits {
						code = c
						break
					}
				}
			}
			if code < 0 {
				i := start + j
				return nil, fmt.Errorf("value %v at index %d (%s) is not float32(level)×scale for any level of %s (scale %v)", v, i, indexString(i, dims), g, scale)
			}
			codes[start+j] = uint8(code)
		}
	}
	return codes, nil
}

// codes2 writes code 0 where v has bits p0 and 1 where it has bits p1; it returns the
// index of the first value with neither and false.
func codes2(dst []uint8, vals []float32, p0, p1 uint32) (int, bool) {
	bad := false
	for j, v := range vals {
		b := math.Float32bits(v)
		is1 := b == p1
		bad = bad || !is1 && b != p0
		var c uint8
		if is1 {
			c = 1
		}
		dst[j] = c
	}
	if !bad {
		return 0, true
	}
	for j, v := range vals {
		if b := math.Float32bits(v); b != p0 && b != p1 {
			return j, false
		}
	}
	return 0, true
}

// indexString formats a flat index as a multi-index of dims, e.g. "[3 0 2 1]".
func indexString(i int, dims []int64) string {
	idx := make([]int64, len(dims))
	for k := len(dims) - 1; k >= 0; k-- {
		if dims[k] > 0 {
			idx[k] = int64(i) % dims[k]
			i /= int(dims[k])
		}
	}
	return fmt.Sprint(idx)
}

// Values returns float32(level)·scale for each code: what the unpacking subgraph and
// DequantizeLinear compute in a runtime.
func (g Grid) Values(codes []uint8, dims []int64) []float32 {
	out := make([]float32, len(codes))
	inner, channels := len(codes), 1
	if g.perChannel() {
		inner, channels = channelLayout(dims, g.Axis)
	}
	if inner == 0 {
		return out
	}
	for start := 0; start < len(codes); start += inner {
		for j, c := range codes[start : start+inner] {
			v := float32(g.Levels[c])
			if len(g.Scales) > 0 {
				v *= g.Scales[(start/inner)%channels]
			}
			out[start+j] = v
		}
	}
	return out
}

// ScalesFromValues returns the scales of a grid whose values are given: for each
// channel along axis (or for the whole tensor when perChannel is false), the largest
// magnitude divided by the largest level magnitude, in float32. The division is exact
// when the largest level is ±1 (binary and ternary grids) or a power of two; for other
// grids the scale may differ from the algorithm's in the last bit, and Codes then
// reports the values as off the grid, so callers should pass the algorithm's own scale.
func ScalesFromValues(values []float32, dims []int64, levels []int, axis int, perChannel bool) []float32 {
	top := 0
	for _, l := range levels {
		top = max(top, l, -l)
	}
	inner, channels := len(values), 1
	if perChannel {
		inner, channels = channelLayout(dims, axis)
	}
	scales := make([]float32, channels)
	if inner == 0 || top == 0 {
		return scales
	}
	for start := 0; start < len(values); start += inner {
		c := (start / inner) % channels
		for _, v := range values[start : start+inner] {
			scales[c] = max(scales[c], float32(math.Abs(float64(v))))
		}
	}
	for c := range scales {
		scales[c] /= float32(top)
	}
	return scales
}
