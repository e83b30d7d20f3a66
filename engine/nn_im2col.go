package engine

import (
	"fmt"
	"math"
)

// nnIm2col writes the column matrix of the C-channel image x (C × g.inSize()) into col
// (C·g.kSize() rows of g.outSize() values, row r starting at r·ld, so that several images'
// matrices can sit side by side): row (c, k0, k1, k2) holds, for every window position,
// the image value under kernel offset (k0, k1, k2), or zero where the window reaches
// into padding.
func nnIm2col(g *nnGeom, C int, x, col []float32, ld int) {
	O, isz := g.outSize(), g.inSize()
	if g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && !(g.s[1] == 1 && g.s[2] == 1 && g.out[2] == g.in[2]) {
		nnIm2col2D(g, C, x, col, ld)
		return
	}
	r := 0
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k0 := 0; k0 < g.k[0]; k0++ {
			for k1 := 0; k1 < g.k[1]; k1++ {
				for k2 := 0; k2 < g.k[2]; k2++ {
					nnGatherRow(g, xc, col[r*ld:r*ld+O], k0, k1, k2)
					r++
				}
			}
		}
	}
}

// nnIm2col2D is nnIm2col for 2-D windows whose rows cannot be moved as one shifted
// plane (strided, or narrower output rows): on the small planes of strided layers
// (7×7, 4×4 outputs) the generic row loop's per-segment calls cost more than the copying,
// so here every row is filled by plain loops, with a stride-2 loop of its own.
func nnIm2col2D(g *nnGeom, C int, x, col []float32, ld int) {
	H, W := g.in[1], g.in[2]
	OH, OW := g.out[1], g.out[2]
	s1, s2 := g.s[1], g.s[2]
	O := OH * OW
	r := 0
	for c := 0; c < C; c++ {
		xc := x[c*H*W : (c+1)*H*W]
		for k1 := 0; k1 < g.k[1]; k1++ {
			lo1, hi1 := g.rng(1, k1)
			off1 := k1*g.d[1] - g.pb[1]
			for k2 := 0; k2 < g.k[2]; k2++ {
				lo2, hi2 := g.rng(2, k2)
				off2 := k2*g.d[2] - g.pb[2]
				dst := col[r*ld : r*ld+O]
				r++
				for o1 := 0; o1 < OH; o1++ {
					seg := dst[o1*OW : (o1+1)*OW]
					if o1 < lo1 || o1 >= hi1 {
						for j := range seg {
							seg[j] = 0
						}
						continue
					}
					if lo2 >= hi2 {
						// No window column under this offset reaches the image (a kernel
						// wider than the input): lo2+off2 may lie outside the row.
						clear(seg)
						continue
					}
					i1 := o1*s1 + off1
					row := xc[i1*W : (i1+1)*W]
					for j := 0; j < lo2; j++ {
						seg[j] = 0
					}
					switch s2 {
					case 1:
						copy(seg[lo2:hi2], row[lo2+off2:])
					case 2:
						for o := lo2; o < hi2; o++ {
							seg[o] = row[2*o+off2]
						}
					default:
						for o := lo2; o < hi2; o++ {
							seg[o] = row[o*s2+off2]
						}
					}
					for j := hi2; j < OW; j++ {
						seg[j] = 0
					}
				}
			}
		}
	}
}

// nnGatherRow fills dst (one im2col row) for kernel offset (k0, k1, k2).
func nnGatherRow(g *nnGeom, xc, dst []float32, k0, k1, k2 int) {
	lo0, hi0 := g.rng(0, k0)
	lo1, hi1 := g.rng(1, k1)
	lo2, hi2 := g.rng(2, k2)
	out1, out2 := g.out[1], g.out[2]
	in1, in2 := g.in[1], g.in[2]
	s2 := g.s[2]
	if lo0 >= hi0 || lo1 >= hi1 || lo2 >= hi2 {
		// The offset reaches no image value from any window (a kernel larger than the
		// input): the row is all padding, and the start index i2 below may lie outside
		// the image row.
		clear(dst)
		return
	}
	plane := out1 * out2
	p := 0
	for o0 := 0; o0 < g.out[0]; o0++ {
		if o0 < lo0 || o0 >= hi0 {
			clear(dst[p : p+plane])
			p += plane
			continue
		}
		i0 := o0*g.s[0] - g.pb[0] + k0*g.d[0]
		if g.s[1] == 1 && s2 == 1 && out2 == in2 {
			// Unit strides and rows as long as the image's: the whole plane is the image
			// plane shifted by a constant offset, so one copy moves it and only the
			// columns that wrapped around a row edge and the rows outside need zeros.
			nnShiftPlane(dst[p:p+plane], xc[i0*in1*in2:(i0+1)*in1*in2], out2,
				(k1*g.d[1]-g.pb[1])*in2+k2*g.d[2]-g.pb[2], lo1, hi1, lo2, hi2)
			p += plane
			continue
		}
		for o1 := 0; o1 < out1; o1++ {
			seg := dst[p : p+out2]
			p += out2
			if o1 < lo1 || o1 >= hi1 {
				clear(seg)
				continue
			}
			i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
			row := xc[(i0*in1+i1)*in2 : (i0*in1+i1+1)*in2]
			clear(seg[:lo2])
			i2 := lo2*s2 - g.pb[2] + k2*g.d[2]
			if s2 == 1 {
				copy(seg[lo2:hi2], row[i2:])
			} else {
				for o := lo2; o < hi2; o++ {
					seg[o] = row[i2]
					i2 += s2
				}
			}
			clear(seg[hi2:])
		}
	}
}

// nnShiftPlane sets dst[f] = src[f+off] for the positions f = o1·w + o2 with o1 in
// [lo1, hi1) and o2 in [lo2, hi2), and zero elsewhere.
func nnShiftPlane(dst, src []float32, w, off, lo1, hi1, lo2, hi2 int) {
	if lo1 >= hi1 || lo2 >= hi2 {
		clear(dst)
		return
	}
	first, last := lo1*w+lo2, (hi1-1)*w+hi2
	clear(dst[:first])
	copy(dst[first:last], src[first+off:last+off])
	clear(dst[last:])
	for o1 := lo1; o1 < hi1; o1++ {
		row := dst[o1*w : (o1+1)*w]
		for j := 0; j < lo2; j++ {
			row[j] = 0
		}
		for j := hi2; j < w; j++ {
			row[j] = 0
		}
	}
}

// nnCol2im is the adjoint of nnIm2col: it adds every entry of col (rows at stride ld)
// to the image element it was gathered from (entries gathered from padding are dropped).
func nnCol2im(g *nnGeom, C int, col, x []float32, ld int) {
	O, isz := g.outSize(), g.inSize()
	r := 0
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k0 := 0; k0 < g.k[0]; k0++ {
			for k1 := 0; k1 < g.k[1]; k1++ {
				for k2 := 0; k2 < g.k[2]; k2++ {
					nnScatterRow(g, col[r*ld:r*ld+O], xc, k0, k1, k2)
					r++
				}
			}
		}
	}
}

// nnScatterRow adds src (one im2col row for kernel offset (k0, k1, k2)) into xc.
func nnScatterRow(g *nnGeom, src, xc []float32, k0, k1, k2 int) {
	lo0, hi0 := g.rng(0, k0)
	lo1, hi1 := g.rng(1, k1)
	lo2, hi2 := g.rng(2, k2)
	out1, out2 := g.out[1], g.out[2]
	in1, in2 := g.in[1], g.in[2]
	s2 := g.s[2]
	if lo0 >= hi0 || lo1 >= hi1 || lo2 >= hi2 {
		// Nothing under this offset lies in the image (see nnGatherRow).
		return
	}
	for o0 := lo0; o0 < hi0; o0++ {
		i0 := o0*g.s[0] - g.pb[0] + k0*g.d[0]
		for o1 := lo1; o1 < hi1; o1++ {
			i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
			row := xc[(i0*in1+i1)*in2 : (i0*in1+i1+1)*in2]
			seg := src[(o0*out1+o1)*out2 : (o0*out1+o1+1)*out2]
			i2 := lo2*s2 - g.pb[2] + k2*g.d[2]
			if s2 == 1 {
				dst := row[i2 : i2+hi2-lo2]
				for o, v := range seg[lo2:hi2] {
					dst[o] += v
				}
			} else {
				for o := lo2; o < hi2; o++ {
					row[i2] += seg[o]
					i2 += s2
				}
			}
		}
	}
}

// nnDepthwiseRow adds w times the image values under kernel offset (k0, k1, k2) to the
// output plane y (g.outSize()), the direct form of a convolution with one input channel
// per output channel.
func nnDepthwiseRow(g *nnGeom, w float32, xc, y []float32, k0, k1, k2 int) {
	lo0, hi0 := g.rng(0, k0)
	lo1, hi1 := g.rng(1, k1)
	lo2, hi2 := g.rng(2, k2)
	out1, out2 := g.out[1], g.out[2]
	in1, in2 := g.in[1], g.in[2]
	s2 := g.s[2]
	if lo0 >= hi0 || lo1 >= hi1 || lo2 >= hi2 {
		// Nothing under this offset lies in the image (see nnGatherRow).
		return
	}
	for o0 := lo0; o0 < hi0; o0++ {
		i0 := o0*g.s[0] - g.pb[0] + k0*g.d[0]
		for o1 := lo1; o1 < hi1; o1++ {
			i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
			row := xc[(i0*in1+i1)*in2 : (i0*in1+i1+1)*in2]
			seg := y[(o0*out1+o1)*out2 : (o0*out1+o1+1)*out2]
			i2 := lo2*s2 - g.pb[2] + k2*g.d[2]
			if s2 == 1 {
				src := row[i2 : i2+hi2-lo2]
				for o, v := range src {
					seg[lo2+o] += w * v
				}
			} else {
				for o := lo2; o < hi2; o++ {
					seg[o] += w * row[i2]
					i2 += s2
				}
			}
		}
	}
}

// nnDepthwiseBackRow is the adjoint of nnDepthwiseRow: it adds w·gy to the image
// gradient gx and returns the gradient of w, Σ gy·x over the covered positions.
func nnDepthwiseBackRow(g *nnGeom, w float32, xc, gy, gx []float32, k0, k1, k2 int) float32 {
	lo0, hi0 := g.rng(0, k0)
	lo1, hi1 := g.rng(1, k1)
	lo2, hi2 := g.rng(2, k2)
	out1, out2 := g.out[1], g.out[2]
	in1, in2 := g.in[1], g.in[2]
	s2 := g.s[2]
	if lo0 >= hi0 || lo1 >= hi1 || lo2 >= hi2 {
		// Nothing under this offset lies in the image (see nnGatherRow).
		return 0
	}
	var gw float32
	for o0 := lo0; o0 < hi0; o0++ {
		i0 := o0*g.s[0] - g.pb[0] + k0*g.d[0]
		for o1 := lo1; o1 < hi1; o1++ {
			i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
			base := (i0*in1 + i1) * in2
			seg := gy[(o0*out1+o1)*out2 : (o0*out1+o1+1)*out2]
			i2 := lo2*s2 - g.pb[2] + k2*g.d[2]
			for o := lo2; o < hi2; o++ {
				v := seg[o]
				if xc != nil {
					gw += v * xc[base+i2]
				}
				if gx != nil {
					gx[base+i2] += w * v
				}
				i2 += s2
			}
		}
	}
	return gw
}

// nnGatherTable is the im2col of one 2-D geometry as an index list: for every kernel
// offset k and output position p, the image index the column matrix reads, or −1 where
// the window reaches into padding. With it a column row is one gather loop, with no
// per-row bookkeeping: on the 7×7 and 4×4 outputs of strided layers that bookkeeping
// costs more than the copying.
type nnGatherTable struct {
	g   nnGeom
	idx []int32 // K×O image indices; -1 where the window reads padding
}

// nnUseTable reports whether im2col of g goes through a gather table: 2-D windows
// whose rows cannot be moved as one shifted plane (see nnGatherRow), or small planes, of
// moderate size.
func nnUseTable(g *nnGeom) bool {
	return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 &&
		(!(g.s[1] == 1 && g.s[2] == 1 && g.out[2] == g.in[2]) || g.outSize() <= nnShiftMin) &&
		g.kSize()*g.outSize() <= 1<<20 && g.inSize() <= math.MaxInt32
}

// nnShiftMin is the smallest output plane that nnShiftPlane moves rather than the gather
// table: on ResNet-18's 4×4, 2×2 and 1×1 planes at 32 px its per-row bookkeeping took a
// third of the run, more than the products.
const nnShiftMin = 64

// table returns t built for g, rebuilding it only when the geometry changed.
func (t *nnGatherTable) table(g *nnGeom) *nnGatherTable {
	if t.idx != nil && t.g == *g {
		return t
	}
	t.g = *g
	K, O, W := g.kSize(), g.outSize(), g.in[2]
	if cap(t.idx) < K*O {
		t.idx = make([]int32, K*O)
	}
	t.idx = t.idx[:K*O]
	k := 0
	for k1 := 0; k1 < g.k[1]; k1++ {
		for k2 := 0; k2 < g.k[2]; k2++ {
			p := 0
			for o1 := 0; o1 < g.out[1]; o1++ {
				i1 := o1*g.s[1] - g.pb[1] + k1*g.d[1]
				for o2 := 0; o2 < g.out[2]; o2++ {
					i2 := o2*g.s[2] - g.pb[2] + k2*g.d[2]
					if i1 < 0 || i1 >= g.in[1] || i2 < 0 || i2 >= W {
						t.idx[k*O+p] = -1
					} else {
						t.idx[k*O+p] = int32(i1*W + i2)
					}
					p++
				}
			}
			k++
		}
	}
	return t
}

// im2col is nnIm2col through the table.
func (t *nnGatherTable) im2col(C int, x, col []float32, ld int) {
	K, O, isz := t.g.kSize(), t.g.outSize(), t.g.inSize()
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k := 0; k < K; k++ {
			r := c*K + k
			dst := col[r*ld : r*ld+O]
			gatherRow(dst, xc, t.idx[k*O:(k+1)*O], isz)
		}
	}
}

// im2colRange is im2col of output pixels [p0, p1) only, into rows of ld values.
func (t *nnGatherTable) im2colRange(C int, x, col []float32, ld, p0, p1 int) {
	K, O, isz := t.g.kSize(), t.g.outSize(), t.g.inSize()
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k := 0; k < K; k++ {
			r := c*K + k
			gatherRow(col[r*ld:r*ld+p1-p0], xc, t.idx[k*O+p0:k*O+p1], isz)
		}
	}
}

// gatherRowGo is the definition of gatherRow: dst[p] = src[idx[p]], or 0 where idx[p] is
// negative (padding). The table's rows run 16 at a time through AVX-512 gathers where
// the CPU allows (a tenth of ResNet-18's run at 224 px and batch 1 was this loop).
func gatherRowGo(dst, src []float32, idx []int32) {
	dst = dst[:len(idx)]
	for p, j := range idx {
		if j >= 0 {
			dst[p] = src[j]
		} else {
			dst[p] = 0
		}
	}
}

// padRowsGo copies rows rows of w values, consecutive in src, to the rows of dst, pitch
// values apart (pitch ≥ w), writing nothing else: an image's rows into the interior of
// its zero-padded copy.
func padRowsGo(dst, src []float32, rows, w, pitch int) {
	for h := range rows {
		copy(dst[h*pitch:h*pitch+w], src[h*w:(h+1)*w])
	}
}

// im2colItems is im2col for channels [c0, c1) of cnt items side by side (item i's
// channel c at x[i·step + c·isz], its columns at [i·O, (i+1)·O) of each row), looping
// over the items innermost: on planes of a few pixels the per-item rows are too short to
// pay for their own loop.
func (t *nnGatherTable) im2colItems(c0, c1 int, x []float32, step, cnt int, col []float32, ld int) {
	K, O, isz := t.g.kSize(), t.g.outSize(), t.g.inSize()
	for c := c0; c < c1; c++ {
		for k := 0; k < K; k++ {
			dst := col[(c*K+k)*ld : (c*K+k)*ld+cnt*O]
			for p, j := range t.idx[k*O : (k+1)*O] {
				if j < 0 {
					for i := range cnt {
						dst[i*O+p] = 0
					}
					continue
				}
				src := x[c*isz+int(j):]
				for i := range cnt {
					dst[i*O+p] = src[i*step]
				}
			}
		}
	}
}

// col2im is nnCol2im through the table: entries gathered from padding are dropped.
func (t *nnGatherTable) col2im(C int, col, x []float32, ld int) {
	K, O, isz := t.g.kSize(), t.g.outSize(), t.g.inSize()
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k := 0; k < K; k++ {
			r := c*K + k
			src := col[r*ld : r*ld+O]
			ix := t.idx[k*O : (k+1)*O]
			ix = ix[:len(src)]
			for p, j := range ix {
				if j >= 0 {
					xc[j] += src[p]
				}
			}
		}
	}
}

// s2Plan is the stride-2 im2col of one geometry and channel count (see im2colS2): per row
// (c, k1, k2) of the column matrix, an entry for the output rows whose window row lies in
// the image. Everything else in the matrix is zero for every image, so the buffer the plan
// fills is cleared once, when it is laid out for the geometry.
type s2Plan struct {
	g nnGeom
	C int
	e []s2Entry
}

// s2Entry is one row of the column matrix for the assembly: byte offsets of its first
// output row in the matrix and of that row's o2 = 0 element in the image (which may lie
// before the image, in padding no lane reads), the number of output rows, and the input
// lanes 2·o2 for the o2 whose window column lies in the image.
type s2Entry struct {
	dst, src, rows int64
	in             uint64
}

// plan returns p made for g and C channels, rebuilding it only when they change. A
// buffer it fills must be zero wherever the plan does not write: cleared when it is laid
// out for g and C, and used for nothing else.
func (p *s2Plan) plan(g *nnGeom, C int) *s2Plan {
	if p.e != nil && p.g == *g && p.C == C {
		return p
	}
	p.g, p.C = *g, C
	p.e = p.e[:0]
	H, W := g.in[1], g.in[2]
	OW, O := g.out[2], g.outSize()
	r := 0
	for c := 0; c < C; c++ {
		for k1 := 0; k1 < g.k[1]; k1++ {
			lo1, hi1 := g.rng(1, k1)
			for k2 := 0; k2 < g.k[2]; k2++ {
				lo2, hi2 := g.rng(2, k2)
				e := s2Entry{dst: int64(4 * (r*O + lo1*OW))}
				r++
				if lo1 < hi1 && lo2 < hi2 {
					i1 := lo1*g.s[1] + k1*g.d[1] - g.pb[1]
					e.src = int64(4 * (c*H*W + i1*W + k2*g.d[2] - g.pb[2]))
					e.rows = int64(hi1 - lo1)
					for o := lo2; o < hi2; o++ {
						e.in |= 1 << (2 * o)
					}
					// The assembly trusts the plan: check that every lane it reads lies
					// in the image and every row it writes in the matrix.
					first := int(e.src/4) + 2*lo2
					last := int(e.src/4) + (hi1-lo1-1)*g.s[1]*W + 2*(hi2-1)
					if first < c*H*W || last >= (c+1)*H*W || int(e.dst/4)+(hi1-lo1)*OW > C*g.kSize()*O || 2*(hi2-1) > 31 {
						panic(fmt.Sprintf("stride-2 im2col plan out of range: %+v", *g))
					}
				}
				p.e = append(p.e, e)
			}
		}
	}
	return p
}

// cpPlan builds the transposed column matrix of a 2-D window geometry (see colT2D) by
// copies from the image channel-last and zero-padded (H+pb+pe rows of W+pb+pe pixels of
// C values, the padding never written): per output position and kernel row, one copy of
// K2·C values, or K2 copies of C values with dilated columns.
type cpPlan struct {
	g              nnGeom
	C              int
	w              int // padded row length in pixels
	srcLen, dstLen int // values the plan reads and writes
	e              []cpEntry
}

// cpEntry is one copy for the assembly: byte offsets into colᵀ and into the padded image,
// the number of whole groups of 16 values, and the lanes of the last group.
type cpEntry struct {
	dst, src, full int64
	tail           uint64
}

// plan returns p made for g and C channels, rebuilding it only when they change.
func (p *cpPlan) plan(g *nnGeom, C int) *cpPlan {
	if p.e != nil && p.g == *g && p.C == C {
		return p
	}
	p.g, p.C = *g, C
	p.w = g.in[2] + g.pb[2] + g.pe[2]
	p.srcLen = (g.in[1] + g.pb[1] + g.pe[1]) * p.w * C
	K1, K2 := g.k[1], g.k[2]
	CK := C * K1 * K2
	p.dstLen = g.outSize() * CK
	p.e = p.e[:0]
	add := func(dst, src, n int) {
		if src < 0 || src+n > p.srcLen || dst < 0 || dst+n > p.dstLen || n <= 0 {
			panic(fmt.Sprintf("colᵀ plan out of range: %+v", *g))
		}
		full := (n - 1) / 16
		last := n - 16*full
		p.e = append(p.e, cpEntry{dst: int64(4 * dst), src: int64(4 * src), full: int64(full), tail: 1<<last - 1})
	}
	o := 0
	for o1 := 0; o1 < g.out[1]; o1++ {
		for o2 := 0; o2 < g.out[2]; o2++ {
			for k1 := 0; k1 < K1; k1++ {
				ih := o1*g.s[1] + k1*g.d[1] // padded coordinates
				iw := o2 * g.s[2]
				dst := o*CK + k1*K2*C
				if g.d[2] == 1 {
					add(dst, (ih*p.w+iw)*C, K2*C)
					continue
				}
				for k2 := 0; k2 < K2; k2++ {
					add(dst+k2*C, (ih*p.w+iw+k2*g.d[2])*C, C)
				}
			}
			o++
		}
	}
	return p
}

// fill copies xT (the image channel-last, H·W × C) into the interior of the padded image
// xp, whose padding is zero already.
func (p *cpPlan) fill(xp, xT []float32) {
	g := &p.g
	H, W, C := g.in[1], g.in[2], p.C
	for h := 0; h < H; h++ {
		o := ((h+g.pb[1])*p.w + g.pb[2]) * C
		copy(xp[o:o+W*C], xT[h*W*C:(h+1)*W*C])
	}
}

// nnUseS2Rows reports whether im2col of g copies rows at column stride 2
// (nnIm2colS2Rows) rather than through the gather table: 2-D windows of column stride 2
// whose output rows are wide enough (16 or more) for vector copies. On ResNet-18's 7×7
// stem at 224 px the table's gathers took half the convolution's time.
func nnUseS2Rows(g *nnGeom) bool {
	return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.s[2] == 2 && g.out[2] >= 16
}

// nnIm2colS2Rows is nnIm2col for nnUseS2Rows's windows, output rows [o1lo, o1hi) only:
// row c·K + k of col (row stride ld) holds those output rows side by side.
func nnIm2colS2Rows(g *nnGeom, C int, x, col []float32, ld, o1lo, o1hi int) {
	H, W, OW := g.in[1], g.in[2], g.out[2]
	isz := g.inSize()
	r := 0
	for c := 0; c < C; c++ {
		xc := x[c*isz : (c+1)*isz]
		for k1 := 0; k1 < g.k[1]; k1++ {
			for k2 := 0; k2 < g.k[2]; k2++ {
				row := col[r*ld : r*ld+(o1hi-o1lo)*OW]
				r++
				// Output column o2 reads input column 2·o2 + off: inside the image for
				// o2 in [lo, hi).
				off := k2*g.d[2] - g.pb[2]
				lo := min(OW, max(0, (1-off)/2)) // ⌈−off/2⌉ for off ≤ 0
				hi := 0
				if W-1-off >= 0 {
					hi = min(OW, (W-1-off)/2+1)
				}
				hi = max(hi, lo)
				// Output rows o1 read input row i1 = o1·s − pb + k1·d: inside the image
				// for o1 in [vlo, vhi), made in one s2Rows call.
				base := k1*g.d[1] - g.pb[1]
				vlo, vhi := o1lo, o1hi
				if base < 0 {
					vlo = min(o1hi, max(vlo, (-base+g.s[1]-1)/g.s[1]))
				}
				if H-1-base < 0 {
					vhi = vlo
				} else {
					vhi = min(vhi, (H-1-base)/g.s[1]+1)
				}
				vhi = max(vhi, vlo)
				clear(row[:(vlo-o1lo)*OW])
				clear(row[(vhi-o1lo)*OW:])
				for o1 := vlo; o1 < vhi; o1++ {
					seg := row[(o1-o1lo)*OW : (o1-o1lo+1)*OW]
					for i := range seg[:lo] {
						seg[i] = 0
					}
					for i := hi; i < OW; i++ {
						seg[i] = 0
					}
				}
				if hi > lo && vhi > vlo {
					i1 := vlo*g.s[1] + base
					s2Rows(row[(vlo-o1lo)*OW+lo:], OW, xc[i1*W+2*lo+off:], g.s[1]*W, hi-lo, vhi-vlo)
				}
			}
		}
	}
}

// s2RowGo is the definition of s2Row: dst[j] = src[2j], src holding 2·len(dst) − 1 or
// more values.
func s2RowGo(dst, src []float32) {
	if len(dst) == 0 {
		return
	}
	src = src[:2*len(dst)-1]
	for j := range dst {
		dst[j] = src[2*j]
	}
}
