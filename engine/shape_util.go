package engine

import "slices"

// Helpers shared by the shape ops: axis normalisation, strides and strided copies.

// normAxis maps an axis in [-rank, rank) to [0, rank).
func normAxis(a int64, rank int) (int, bool) {
	if a < 0 {
		a += int64(rank)
	}
	return int(a), a >= 0 && a < int64(rank)
}

// stridesOf returns row-major strides of shape into dst (resized as needed).
func stridesOf(dst []int, shape []int) []int {
	dst = slices.Grow(dst[:0], len(shape))[:len(shape)]
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		dst[i] = s
		s *= shape[i]
	}
	return dst
}

// elem is the element types tensors hold.
type elem interface{ float32 | int64 }

// viewCopy walks the index space shape in row-major order and, for each index i, copies
// (or with add, adds) src[sb + Σ i_d·ss_d] into dst[db + Σ i_d·ds_d]. Strides may be zero
// (broadcasting) or negative. idx is scratch of at least len(shape) ints.
func viewCopy[T elem](add bool, dst []T, db int, ds []int, src []T, sb int, ss []int, shape []int, idx []int) {
	r := len(shape)
	for _, d := range shape {
		if d == 0 {
			return
		}
	}
	if r == 0 {
		if add {
			dst[db] += src[sb]
		} else {
			dst[db] = src[sb]
		}
		return
	}
	idx = idx[:r]
	clear(idx)
	n, dIn, sIn := shape[r-1], ds[r-1], ss[r-1]
	for {
		d, s := db, sb
		switch {
		case add && dIn == 1 && sIn == 1:
			for k, v := range src[s : s+n] {
				dst[d+k] += v
			}
		case !add && dIn == 1 && sIn == 1:
			copy(dst[d:d+n], src[s:s+n])
		case add:
			for k := 0; k < n; k++ {
				dst[d] += src[s]
				d, s = d+dIn, s+sIn
			}
		default:
			for k := 0; k < n; k++ {
				dst[d] = src[s]
				d, s = d+dIn, s+sIn
			}
		}
		// Advance the odometer over the outer dimensions.
		k := r - 2
		for ; k >= 0; k-- {
			idx[k]++
			db += ds[k]
			sb += ss[k]
			if idx[k] < shape[k] {
				break
			}
			db -= ds[k] * shape[k]
			sb -= ss[k] * shape[k]
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}

// copyData copies src's values into dst of the same type and length.
func copyData(dst, src *Tensor) {
	if src.DType == Int64 {
		copy(dst.I, src.I)
	} else {
		copy(dst.F, src.F)
	}
}

// addTo adds src into dst elementwise.
func addTo(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

// intsOf returns a known integer input's values, or ok=false when the input is absent or
// known only at run time.
func intsOf(t *Tensor) ([]int64, bool) {
	if t == nil || t.DType != Int64 || !t.Known() {
		return nil, false
	}
	return t.I, true
}

// present reports whether optional input i is given.
func present(in []*Tensor, i int) bool { return i < len(in) && in[i] != nil }
