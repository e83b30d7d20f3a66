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
	// Axes that the walk visits in the same order merged into one (ShuffleNetV2's channel
	// split copied rows of 28 values, one odometer step each, where each image's half is
	// one run of 45 472).
	var cs, cds, css [8]int
	if r <= len(cs) {
		r = coalesceView(shape, ds, ss, &cs, &cds, &css)
		shape, ds, ss = cs[:r], cds[:r], css[:r]
	}
	if r == 0 {
		if add {
			dst[db] += src[sb]
		} else {
			dst[db] = src[sb]
		}
		return
	}
	if k := transposeAxis(ds, ss, shape); k >= 0 {
		viewTranspose(add, dst, db, ds, src, sb, ss, shape, idx, k)
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

// coalesceView writes into shape2, ds2 and ss2 the walk of shape (every axis non-empty)
// with dst strides ds and src strides ss that visits the same elements in the same
// order with fewer axes, and returns its rank: axes of size 1 dropped, and each axis
// merged into the one before it where that one's strides are this one's times its size
// in both dst and src. The order of the visits, and so of any additions, is unchanged.
func coalesceView(shape, ds, ss []int, shape2, ds2, ss2 *[8]int) int {
	n := 0
	for k, d := range shape {
		if d == 1 {
			continue
		}
		if n > 0 && ds2[n-1] == ds[k]*d && ss2[n-1] == ss[k]*d {
			shape2[n-1] *= d
			ds2[n-1], ss2[n-1] = ds[k], ss[k]
			continue
		}
		shape2[n], ds2[n], ss2[n] = d, ds[k], ss[k]
		n++
	}
	return n
}

// transposeAxis returns the axis k that viewCopy's walk of shape should read along
// instead of the last one, or -1: when the last axis is contiguous in dst but not in src
// and axis k is contiguous in src (a transpose), the walk along the last axis reads one
// value per cache line, and at power-of-two strides (the attention heads' Kᵀ of a small
// transformer: 8 KiB) every read of a row misses the same cache set; that copy took a
// quarter of the transformer's run. Only where every element of dst is written once (no
// zero stride in ds), so that the order of the additions cannot matter.
func transposeAxis(ds, ss, shape []int) int {
	r := len(shape)
	if r < 2 || ds[r-1] != 1 || ss[r-1] == 1 || shape[r-1] < 2 {
		return -1
	}
	for _, d := range ds {
		if d == 0 {
			return -1
		}
	}
	for k := r - 2; k >= 0; k-- {
		if ss[k] == 1 && shape[k] > 1 {
			return k
		}
	}
	return -1
}

// viewTranspose is viewCopy for transposeAxis's k: in tiles of 16 along k, it reads
// each src row along k once and writes it down a column of dst.
func viewTranspose[T elem](add bool, dst []T, db int, ds []int, src []T, sb int, ss []int, shape, idx []int, k int) {
	r := len(shape)
	A, C := shape[k], shape[r-1]
	dk, sc := ds[k], ss[r-1]
	idx = idx[:r]
	clear(idx)
	for {
		for a0 := 0; a0 < A; a0 += 16 {
			n := min(16, A-a0)
			for c := 0; c < C; c++ {
				s := sb + c*sc + a0
				d := db + a0*dk + c
				row := src[s : s+n]
				if add {
					for i, v := range row {
						dst[d+i*dk] += v
					}
				} else {
					for i, v := range row {
						dst[d+i*dk] = v
					}
				}
			}
		}
		// Advance the odometer over the other axes.
		j := r - 2
		for ; j >= 0; j-- {
			if j == k {
				continue
			}
			idx[j]++
			db += ds[j]
			sb += ss[j]
			if idx[j] < shape[j] {
				break
			}
			db -= ds[j] * shape[j]
			sb -= ss[j] * shape[j]
			idx[j] = 0
		}
		if j < 0 {
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
