//go:build amd64 && !purego

package engine

import "fmt"

//go:noescape
func normRowAVX512(x, y, s, b *float32, n int, mu, inv float32)

//go:noescape
func normRowAVX2(x, y, s, b *float32, n int, mu, inv float32)

// normRow is normRowGo in AVX-512 or AVX where the CPU allows, bit for bit.
func normRow(x, y, s, b []float32, mu, inv float32) {
	n := len(x)
	if n == 0 {
		return
	}
	if len(y) < n || len(s) < n || (b != nil && len(b) < n) {
		panic(fmt.Sprintf("normalising %d values into %d with %d scales and %d biases", n, len(y), len(s), len(b)))
	}
	var bp *float32
	if b != nil {
		bp = &b[0]
	}
	switch {
	case convTileOK():
		normRowAVX512(&x[0], &y[0], &s[0], bp, n, mu, inv)
	case convTileAVX2OK():
		m := n &^ 7
		if m > 0 {
			normRowAVX2(&x[0], &y[0], &s[0], bp, m, mu, inv)
		}
		if m < n {
			var tb []float32
			if b != nil {
				tb = b[m:n]
			}
			normRowGo(x[m:n], y[m:n], s[m:n], tb, mu, inv)
		}
	default:
		normRowGo(x, y, s, b, mu, inv)
	}
}

//go:noescape
func gatherRowAVX512(dst, src *float32, idx *int32, n int)

// gatherRow is gatherRowGo, by AVX-512 gathers where the CPU allows, else AVX2 ones where
// it has those (rows of 16 or more). Every idx[p] must be
// below bound (the gather table's are below the image plane's size, by construction),
// which src must hold.
func gatherRow(dst, src []float32, idx []int32, bound int) {
	n := len(idx)
	avx2 := !convTileOK() && convTileAVX2OK()
	if !convTileOK() && !avx2 || n < 16 {
		gatherRowGo(dst, src, idx)
		return
	}
	if len(dst) < n || len(src) < bound {
		panic(fmt.Sprintf("gathering %d values into %d from %d, indices below %d", n, len(dst), len(src), bound))
	}
	if avx2 {
		// Whole blocks of 8; the rest in Go.
		m := n &^ 7
		gatherRowAVX2(&dst[0], &src[0], &idx[0], m)
		gatherRowGo(dst[m:n], src, idx[m:])
		return
	}
	gatherRowAVX512(&dst[0], &src[0], &idx[0], n)
}

//go:noescape
func gatherRowAVX2(dst, src *float32, idx *int32, n int)

//go:noescape
func padRowsAVX512(dst, src *float32, rows, w, pitch int, tail uint64)

// padRows is padRowsGo in AVX-512 where the CPU allows: the padded planes of the depthwise
// and implicit-im2col paths are filled a row at a time, and on MobileNetV3-small's 7×7 and
// 14×14 planes the call to memmove for each row of 7 or 14 values cost more than the copy.
func padRows(dst, src []float32, rows, w, pitch int) {
	if rows <= 0 || w <= 0 {
		return
	}
	if !convTileOK() && !convTileAVX2OK() {
		padRowsGo(dst, src, rows, w, pitch)
		return
	}
	if pitch < w || len(src) < rows*w || len(dst) < (rows-1)*pitch+w {
		panic(fmt.Sprintf("copying %d rows of %d values, %d apart, from %d values into %d", rows, w, pitch, len(src), len(dst)))
	}
	if convTileOK() {
		padRowsAVX512(&dst[0], &src[0], rows, w, pitch, laneMask(w%16))
		return
	}
	padRowsAVX2(&dst[0], &src[0], rows, w, pitch, &avx2LaneMasks[8-w%8])
}

//go:noescape
func padRowsAVX2(dst, src *float32, rows, w, pitch int, mask *int32)

// avx2LaneMasks[8−n:16−n] is VMASKMOVPS's mask of the first n of 8 lanes.
var avx2LaneMasks = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

//go:noescape
func s2RowsAVX2(dst *float32, ldd int, src *float32, lds, blocks, rows int, lo, hi, st *int32)

// s2RowsMasked is s2Rows (arguments checked) through s2RowsAVX2: whole blocks of 8 but
// the last, which takes the 1 to 8 values left through masks. Per row, blocks of 8 in
// assembly and the rest in Go held the stride-2 im2col of ResNet-18's stem at 32 px (rows
// of 13 to 16 values) to half the layer's time on the AVX2 path.
func s2RowsMasked(dst []float32, ldd int, src []float32, lds, n, rows int) {
	blocks := (n - 1) / 8
	k := n - 8*blocks    // values in the last block, 1 to 8
	a := min(8, 2*k-1)   // of its 2k − 1 values read, lanes 0-7
	b := max(0, 2*k-1-8) // and lanes 8-15
	s2RowsAVX2(&dst[0], ldd, &src[0], lds, blocks, rows, &avx2LaneMasks[8-a], &avx2LaneMasks[8-b], &avx2LaneMasks[8-k])
}

//go:noescape
func s2RowsAVX512(dst *float32, ldd int, src *float32, lds, n, rows int, even *int32)

// dwEven is the permutation that takes the even lanes of two registers (s2RowsAVX512).
var dwEven = [16]int32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}

// s2Rows is s2Row on rows rows: dst[i·ldd:][:n] takes the even values of src[i·lds:],
// which must hold the 2n − 1 values read; in one AVX-512 call where the CPU allows (the
// Winograd path's quarter planes made a call per row of 28 values).
func s2Rows(dst []float32, ldd int, src []float32, lds, n, rows int) {
	if n <= 0 || rows <= 0 {
		return
	}
	if ldd < n || lds < 2*n-1 || len(dst) < (rows-1)*ldd+n || len(src) < (rows-1)*lds+2*n-1 {
		panic(fmt.Sprintf("stride-2 copy of %d rows of %d values (%d and %d apart) from %d into %d", rows, n, lds, ldd, len(src), len(dst)))
	}
	if !convTileOK() {
		if convTileAVX2OK() {
			s2RowsMasked(dst, ldd, src, lds, n, rows)
			return
		}
		for i := range rows {
			s2RowGo(dst[i*ldd:i*ldd+n], src[i*lds:i*lds+2*n-1])
		}
		return
	}
	s2RowsAVX512(&dst[0], ldd, &src[0], lds, n, rows, &dwEven[0])
}

// s2Row is s2RowGo in AVX-512 or AVX2 where the CPU allows.
func s2Row(dst, src []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	if len(src) < 2*n-1 {
		panic(fmt.Sprintf("stride-2 copy of %d values from %d", n, len(src)))
	}
	switch {
	case convTileOK():
		s2RowsAVX512(&dst[0], n, &src[0], 2*n, n, 1, &dwEven[0])
	case convTileAVX2OK():
		s2RowsMasked(dst, n, src, 2*n, n, 1)
	default:
		s2RowGo(dst, src)
	}
}
