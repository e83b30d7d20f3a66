package engine

import "math"

// poolKernel is MaxPool or AveragePool over 1 to 3 spatial dimensions, parallel over
// the N×C planes.
type poolKernel struct {
	n           *Node
	win         nnWindow
	max         bool
	includePad  bool // AveragePool count_include_pad
	columnMajor bool // MaxPool storage_order=1 for Indices
	wantIndices bool
	kernelShape []int

	tab poolTables // per-call window tables
}

func buildMaxPool(n *Node) (Kernel, error) { return buildPool(n, true) }

func buildAveragePool(n *Node) (Kernel, error) { return buildPool(n, false) }

func buildPool(n *Node, isMax bool) (Kernel, error) {
	win, err := nnParseWindow(n, true)
	if err != nil {
		return nil, err
	}
	k := &poolKernel{n: n, win: win, max: isMax}
	for _, v := range win.kernel {
		k.kernelShape = append(k.kernelShape, int(v))
	}
	if isMax {
		switch so := n.Int("storage_order", 0); so {
		case 0:
		case 1:
			k.columnMajor = true
		default:
			return nil, n.Errorf("unsupported storage_order %d (want 0 or 1)", so)
		}
		outs := n.Proto.GetOutput()
		k.wantIndices = len(outs) > 1 && outs[1] != ""
	} else {
		k.includePad = n.Int("count_include_pad", 0) != 0
		if len(n.Proto.GetOutput()) > 1 {
			return nil, n.Errorf("AveragePool has one output, the node lists %d", len(n.Proto.GetOutput()))
		}
	}
	if n.NumInputs() != 1 {
		return nil, n.Errorf("want 1 input, have %d", n.NumInputs())
	}
	return k, nil
}

func (k *poolKernel) geom(x []int) (nnGeom, error) {
	if len(x) < 3 {
		return nnGeom{}, k.n.Errorf("input X has rank %d, want at least 3 (N, C, spatial...)", len(x))
	}
	return k.win.resolve(k.n, x[2:], k.kernelShape)
}

func (k *poolKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if x.DType != Float32 && !(k.max && x.DType == Int64) {
		return nil, k.n.Errorf("input X is %v, want float32", x.DType)
	}
	g, err := k.geom(x.Shape)
	if err != nil {
		return nil, err
	}
	shape := append([]int{x.Shape[0], x.Shape[1]}, g.outShape()...)
	outs := []*Tensor{{DType: x.DType, Shape: shape}}
	if k.wantIndices {
		outs = append(outs, &Tensor{DType: Int64, Shape: append([]int(nil), shape...)})
	}
	return outs, nil
}

func (k *poolKernel) Retains() (inputs, outputs []bool) {
	// MaxPool finds the argmax again by matching its output in its input; AveragePool
	// needs shapes only.
	return []bool{k.max}, []bool{k.max, false}
}

// kRange returns the kernel offsets [klo, khi) of dimension j that place window
// position o inside [lo, hi) of the image axis.
func (g *nnGeom) kRange(j, o, lo, hi int) (klo, khi int) {
	start := o*g.s[j] - g.pb[j]
	d := g.d[j]
	// smallest k with start + k*d >= lo
	if start >= lo {
		klo = 0
	} else {
		klo = (lo - start + d - 1) / d
	}
	// smallest k with start + k*d >= hi
	if start >= hi {
		khi = 0
	} else {
		khi = (hi - start + d - 1) / d
	}
	khi = min(khi, g.k[j])
	klo = min(klo, khi)
	return klo, khi
}

// poolTables holds, per spatial dimension and window position, the kernel offsets
// [lo, hi) that land inside the image and the window's element count for
// count_include_pad, computed once per call so that the per-plane loops do no division.
type poolTables struct {
	lo, hi, cnt [nnMaxSpatial][]int
}

func (t *poolTables) fill(g *nnGeom) {
	for j := 0; j < nnMaxSpatial; j++ {
		n := g.out[j]
		if cap(t.lo[j]) < n {
			t.lo[j], t.hi[j], t.cnt[j] = make([]int, n), make([]int, n), make([]int, n)
		}
		t.lo[j], t.hi[j], t.cnt[j] = t.lo[j][:n], t.hi[j][:n], t.cnt[j][:n]
		for o := 0; o < n; o++ {
			t.lo[j][o], t.hi[j][o] = g.kRange(j, o, 0, g.in[j])
			pa, pb := g.kRange(j, o, -g.pb[j], g.in[j]+g.pe[j])
			t.cnt[j][o] = pb - pa
		}
	}
}

// poolMax computes one plane's max pool and, when idx is non-nil, the flat indices of
// the maxima (base is the plane's offset in the whole tensor).
func poolMax[T float32 | int64](g *nnGeom, t *poolTables, x, y []T, idx []int64, base int, colMajor bool, lowest T) {
	p := 0
	for o0 := 0; o0 < g.out[0]; o0++ {
		a0, b0 := t.lo[0][o0], t.hi[0][o0]
		s0 := o0*g.s[0] - g.pb[0]
		for o1 := 0; o1 < g.out[1]; o1++ {
			a1, b1 := t.lo[1][o1], t.hi[1][o1]
			s1 := o1*g.s[1] - g.pb[1]
			for o2 := 0; o2 < g.out[2]; o2++ {
				a2, b2 := t.lo[2][o2], t.hi[2][o2]
				s2 := o2*g.s[2] - g.pb[2]
				best, arg := lowest, -1
				for k0 := a0; k0 < b0; k0++ {
					i0 := s0 + k0*g.d[0]
					for k1 := a1; k1 < b1; k1++ {
						r := (i0*g.in[1] + s1 + k1*g.d[1]) * g.in[2]
						for k2 := a2; k2 < b2; k2++ {
							i := r + s2 + k2*g.d[2]
							if v := x[i]; arg < 0 || v > best {
								best, arg = v, i
							}
						}
					}
				}
				y[p] = best
				if idx != nil {
					if arg < 0 {
						idx[p] = -1
					} else if colMajor {
						i2 := arg % g.in[2]
						i1 := arg / g.in[2] % g.in[1]
						i0 := arg / (g.in[2] * g.in[1])
						idx[p] = int64(base + (i2*g.in[1]+i1)*g.in[0] + i0)
					} else {
						idx[p] = int64(base + arg)
					}
				}
				p++
			}
		}
	}
}

// poolAvg computes one plane's average pool (back=false), or adds the plane's input
// gradient gy/count into x (back=true).
func poolAvg(g *nnGeom, t *poolTables, x, y []float32, includePad, back bool) {
	p := 0
	for o0 := 0; o0 < g.out[0]; o0++ {
		a0, b0 := t.lo[0][o0], t.hi[0][o0]
		s0 := o0*g.s[0] - g.pb[0]
		c0 := b0 - a0
		if includePad {
			c0 = t.cnt[0][o0]
		}
		for o1 := 0; o1 < g.out[1]; o1++ {
			a1, b1 := t.lo[1][o1], t.hi[1][o1]
			s1 := o1*g.s[1] - g.pb[1]
			c1 := b1 - a1
			if includePad {
				c1 = t.cnt[1][o1]
			}
			for o2 := 0; o2 < g.out[2]; o2++ {
				a2, b2 := t.lo[2][o2], t.hi[2][o2]
				s2 := o2*g.s[2] - g.pb[2]
				c2 := b2 - a2
				if includePad {
					c2 = t.cnt[2][o2]
				}
				var inv float32
				if cnt := c0 * c1 * c2; cnt > 0 {
					inv = 1 / float32(cnt)
				}
				if back {
					gv := y[p] * inv
					for k0 := a0; k0 < b0; k0++ {
						i0 := s0 + k0*g.d[0]
						for k1 := a1; k1 < b1; k1++ {
							r := (i0*g.in[1]+s1+k1*g.d[1])*g.in[2] + s2
							for k2 := a2; k2 < b2; k2++ {
								x[r+k2*g.d[2]] += gv
							}
						}
					}
				} else {
					var sum float32
					for k0 := a0; k0 < b0; k0++ {
						i0 := s0 + k0*g.d[0]
						for k1 := a1; k1 < b1; k1++ {
							r := (i0*g.in[1]+s1+k1*g.d[1])*g.in[2] + s2
							for k2 := a2; k2 < b2; k2++ {
								sum += x[r+k2*g.d[2]]
							}
						}
					}
					y[p] = sum * inv
				}
				p++
			}
		}
	}
}

// poolGrain is the number of planes below which splitting work over workers does not
// pay, for planes of isz elements.
func poolGrain(isz int) int { return max(1, 16384/max(isz, 1)) }

func (k *poolKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x := in[0]
	g, err := k.geom(x.Shape)
	if err != nil {
		return err
	}
	planes := x.Shape[0] * x.Shape[1]
	isz, osz := g.inSize(), g.outSize()
	k.tab.fill(&g)
	var idx []int64
	if k.wantIndices && len(out) > 1 && out[1] != nil {
		idx = out[1].I
	}
	ctx.Parallel(planes, poolGrain(isz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			var ip []int64
			if idx != nil {
				ip = idx[p*osz : (p+1)*osz]
			}
			switch {
			case !k.max:
				poolAvg(&g, &k.tab, x.F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz], k.includePad, false)
			case ip == nil && x.DType == Float32 && g.is2x2():
				maxPool2x2(&g, x.F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz])
			case ip == nil && x.DType == Float32 && g.rowsFirst():
				maxPoolRows(&g, &k.tab, x.F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz])
			case x.DType == Int64 && ip == nil:
				poolMaxValues(&g, &k.tab, x.I[p*isz:(p+1)*isz], out[0].I[p*osz:(p+1)*osz], math.MinInt64)
			case ip == nil:
				poolMaxValues(&g, &k.tab, x.F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz], float32(math.Inf(-1)))
			case x.DType == Int64:
				poolMax(&g, &k.tab, x.I[p*isz:(p+1)*isz], out[0].I[p*osz:(p+1)*osz], ip, p*isz, k.columnMajor, math.MinInt64)
			default:
				poolMax(&g, &k.tab, x.F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz], ip, p*isz, k.columnMajor, float32(math.Inf(-1)))
			}
		}
	})
	return nil
}

func (k *poolKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil || gin[0] == nil {
		return nil
	}
	if gin[0].DType != Float32 {
		return k.n.Errorf("no gradient for %v input", gin[0].DType)
	}
	g, err := k.geom(gin[0].Shape)
	if err != nil {
		return err
	}
	planes := gin[0].Shape[0] * gin[0].Shape[1]
	isz, osz := g.inSize(), g.outSize()
	k.tab.fill(&g)
	gx := gin[0].F
	ctx.Parallel(planes, poolGrain(isz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			gxp, gyp := gx[p*isz:(p+1)*isz], gy.F[p*osz:(p+1)*osz]
			if !k.max {
				poolAvg(&g, &k.tab, gxp, gyp, k.includePad, true)
				continue
			}
			if g.is2x2() {
				maxPool2x2Back(&g, in[0].F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz], gyp, gxp)
				continue
			}
			maxPoolBack(&g, &k.tab, in[0].F[p*isz:(p+1)*isz], out[0].F[p*osz:(p+1)*osz], gyp, gxp)
		}
	})
	return nil
}

// maxPoolBack routes each output gradient to the first element of its window that
// equals the window's maximum y, the element poolMax selected. Matching y instead of
// tracking the running maximum keeps the loop free of unpredictable branches.
func maxPoolBack(g *nnGeom, t *poolTables, x, y, gy, gx []float32) {
	p := 0
	for o0 := 0; o0 < g.out[0]; o0++ {
		a0, b0 := t.lo[0][o0], t.hi[0][o0]
		s0 := o0*g.s[0] - g.pb[0]
		for o1 := 0; o1 < g.out[1]; o1++ {
			a1, b1 := t.lo[1][o1], t.hi[1][o1]
			s1 := o1*g.s[1] - g.pb[1]
			for o2 := 0; o2 < g.out[2]; o2++ {
				a2, b2 := t.lo[2][o2], t.hi[2][o2]
				s2 := o2*g.s[2] - g.pb[2]
				yv := y[p]
			window:
				for k0 := a0; k0 < b0; k0++ {
					i0 := s0 + k0*g.d[0]
					for k1 := a1; k1 < b1; k1++ {
						r := (i0*g.in[1]+s1+k1*g.d[1])*g.in[2] + s2
						for k2 := a2; k2 < b2; k2++ {
							if i := r + k2*g.d[2]; x[i] == yv {
								gx[i] += gy[p]
								break window
							}
						}
					}
				}
				p++
			}
		}
	}
}

// poolMaxValues is poolMax without indices, with the branch-free max builtin.
func poolMaxValues[T float32 | int64](g *nnGeom, t *poolTables, x, y []T, lowest T) {
	p := 0
	for o0 := 0; o0 < g.out[0]; o0++ {
		a0, b0 := t.lo[0][o0], t.hi[0][o0]
		s0 := o0*g.s[0] - g.pb[0]
		for o1 := 0; o1 < g.out[1]; o1++ {
			a1, b1 := t.lo[1][o1], t.hi[1][o1]
			s1 := o1*g.s[1] - g.pb[1]
			for o2 := 0; o2 < g.out[2]; o2++ {
				a2, b2 := t.lo[2][o2], t.hi[2][o2]
				s2 := o2*g.s[2] - g.pb[2]
				best := lowest
				for k0 := a0; k0 < b0; k0++ {
					i0 := s0 + k0*g.d[0]
					for k1 := a1; k1 < b1; k1++ {
						r := (i0*g.in[1]+s1+k1*g.d[1])*g.in[2] + s2
						for k2 := a2; k2 < b2; k2++ {
							best = max(best, x[r+k2*g.d[2]])
						}
					}
				}
				y[p] = best
				p++
			}
		}
	}
}

// poolable reports whether a Conv on the direct path can apply this MaxPool itself, image
// by image: 2×2 windows (is2x2) or the row-wise ones (rowsFirst: ResNet's and
// SqueezeNet's 3×3 stride-2 pools, whose input, pooled after the whole batch, came back
// from memory), no indices, float values.
func (k *poolKernel) poolable(g *nnGeom) bool {
	return k.max && !k.wantIndices && (g.is2x2() || g.rowsFirst())
}

// maxPlane is the max pool of one plane of a poolable geometry g, for a convolution
// that pools its output per block of images while it is in the cache; prepare(g) must
// have been called since g last changed.
func (k *poolKernel) maxPlane(g *nnGeom, x, y []float32) {
	if g.is2x2() {
		maxPool2x2(g, x, y)
		return
	}
	maxPoolRows(g, &k.tab, x, y)
}

// maxPlaneRows is maxPlane for the output rows [oa, ob) (see maxPoolRowsIn): x holds
// the input rows from row0 on, y the output rows from oa on. A 2×2 pool's rows are a
// plane of their own: its windows do not overlap and none is clipped.
func (k *poolKernel) maxPlaneRows(g *nnGeom, x, y []float32, oa, ob, row0 int) {
	if g.is2x2() {
		sub := *g
		sub.in[1], sub.out[1] = 2*(ob-oa), ob-oa
		maxPool2x2(&sub, x[(2*oa-row0)*g.in[2]:], y)
		return
	}
	maxPoolRowsIn(g, &k.tab, x, y, oa, ob, row0)
}

// prepare fills the window tables of g for maxPlane.
func (k *poolKernel) prepare(g *nnGeom) { k.tab.fill(g) }

// is2x2 reports whether g is the CNN workhorse: 2-D, 2×2 windows at stride 2, no
// dilation or padding, every window inside the image.
func (g *nnGeom) is2x2() bool {
	return g.in[0] == 1 && g.k[1] == 2 && g.k[2] == 2 && g.s[1] == 2 && g.s[2] == 2 &&
		g.d[1] == 1 && g.d[2] == 1 && g.pb[1] == 0 && g.pb[2] == 0 &&
		2*g.out[1] <= g.in[1] && 2*g.out[2] <= g.in[2]
}

// maxPool2x2 is poolMaxValues for is2x2 geometries: in assembly where the CPU allows
// (four times faster on the fmnist CNN's planes), else maxPool2x2Go.
func maxPool2x2(g *nnGeom, x, y []float32) {
	if maxPool2x2Fast() {
		maxPool2x2Plane(g, x, y)
		return
	}
	maxPool2x2Go(g, x, y)
}

// maxPool2x2Go is maxPool2x2 in Go, two input rows at a time.
func maxPool2x2Go(g *nnGeom, x, y []float32) {
	W, ow := g.in[2], g.out[2]
	for o1 := 0; o1 < g.out[1]; o1++ {
		r0 := x[2*o1*W : 2*o1*W+2*ow]
		r1 := x[(2*o1+1)*W : (2*o1+1)*W+2*ow]
		yr := y[o1*ow : (o1+1)*ow]
		r0, r1 = r0[:2*len(yr)], r1[:2*len(yr)]
		for o2 := range yr {
			i := 2 * o2
			yr[o2] = max(max(r0[i], r0[i+1]), max(r1[i], r1[i+1]))
		}
	}
}

// maxPoolRowsMax is the longest input row maxPoolRows takes: its row of column maxima
// lives on the stack.
const maxPoolRowsMax = 512

// rowsFirst reports whether maxPoolRows takes g: 2-D, no dilation, rows of at most
// maxPoolRowsMax.
func (g *nnGeom) rowsFirst() bool {
	return g.in[0] == 1 && g.k[0] == 1 && g.d[1] == 1 && g.d[2] == 1 && g.in[2] <= maxPoolRowsMax
}

// maxPoolRows is poolMaxValues for rowsFirst geometries (ResNet's, ShuffleNet's and
// SqueezeNet's 3×3 stride-2 pools): per output row, the maximum of its window's input
// rows column by column, then of each window's columns of that, in loops without the
// generic walk's per-element index arithmetic. Max is exact, so the order does not
// change the result; NaN propagates as in poolMaxValues, whose max does the same.
func maxPoolRows(g *nnGeom, t *poolTables, x, y []float32) {
	maxPoolRowsIn(g, t, x, y, 0, g.out[1], 0)
}

// maxPoolRowsIn is maxPoolRows for the output rows [oa, ob) only, from x holding the
// input rows from row0 on (row0 may be negative: rows before 0 are never read) into y
// holding the output rows from oa on: what a convolution that pools its output as it
// makes its rows (pooledChunks) needs.
func maxPoolRowsIn(g *nnGeom, t *poolTables, x, y []float32, oa, ob, row0 int) {
	if !maxPoolRowsFast(g, t, x, y, oa, ob, row0) {
		maxPoolRowsGo(g, t, x, y, oa, ob, row0)
	}
}

// maxPoolEnd is the input row after the last that output row o1 of g's max pool reads.
func maxPoolEnd(g *nnGeom, t *poolTables, o1 int) int {
	return o1*g.s[1] - g.pb[1] + t.hi[1][o1]
}

// maxPoolRowsGo is maxPoolRowsIn in Go.
func maxPoolRowsGo(g *nnGeom, t *poolTables, x, y []float32, oa, ob, row0 int) {
	var buf [maxPoolRowsMax]float32
	W := g.in[2]
	col := buf[:W]
	for o1 := oa; o1 < ob; o1++ {
		a1, b1 := t.lo[1][o1], t.hi[1][o1]
		yr := y[(o1-oa)*g.out[2] : (o1-oa+1)*g.out[2]]
		if a1 >= b1 {
			for i := range yr {
				yr[i] = float32(math.Inf(-1))
			}
			continue
		}
		s1 := o1*g.s[1] - g.pb[1] - row0
		copy(col, x[(s1+a1)*W:(s1+a1+1)*W])
		for k1 := a1 + 1; k1 < b1; k1++ {
			r := x[(s1+k1)*W : (s1+k1+1)*W]
			for j, v := range r {
				col[j] = max(col[j], v)
			}
		}
		for o2 := range yr {
			a2, b2 := t.lo[2][o2], t.hi[2][o2]
			s2 := o2*g.s[2] - g.pb[2]
			if b2-a2 == 3 {
				// The 3-wide windows of the common pools, without the slice loop.
				w := col[s2+a2 : s2+a2+3]
				yr[o2] = max(w[0], w[1], w[2])
				continue
			}
			best := float32(math.Inf(-1))
			for _, v := range col[s2+a2 : s2+b2] {
				best = max(best, v)
			}
			yr[o2] = best
		}
	}
}

// maxPool2x2Back is maxPoolBack for is2x2 geometries: the gradient goes to the first
// window element, in row-major order, equal to the output. In assembly where the CPU
// allows, else maxPool2x2BackGo.
func maxPool2x2Back(g *nnGeom, x, y, gy, gx []float32) {
	if maxPool2x2Fast() {
		maxPool2x2BackPlane(g, x, y, gy, gx)
		return
	}
	maxPool2x2BackGo(g, x, y, gy, gx)
}

// maxPool2x2BackGo is maxPool2x2Back in Go.
func maxPool2x2BackGo(g *nnGeom, x, y, gy, gx []float32) {
	W, ow := g.in[2], g.out[2]
	for o1 := 0; o1 < g.out[1]; o1++ {
		a, b := 2*o1*W, (2*o1+1)*W
		for o2 := 0; o2 < ow; o2++ {
			yv, i := y[o1*ow+o2], 2*o2
			// Checked last to first so that the first match wins; plain conditional
			// assignments compile to conditional moves, not unpredictable branches.
			j := b + i + 1
			if x[b+i] == yv {
				j = b + i
			}
			if x[a+i+1] == yv {
				j = a + i + 1
			}
			if x[a+i] == yv {
				j = a + i
			}
			if x[j] == yv { // false only for a NaN maximum, which has no first match
				gx[j] += gy[o1*ow+o2]
			}
		}
	}
}

// globalPoolKernel is GlobalAveragePool or GlobalMaxPool: one value per N×C plane.
type globalPoolKernel struct {
	n   *Node
	max bool
}

func buildGlobalAveragePool(n *Node) (Kernel, error) { return buildGlobalPool(n, false) }

func buildGlobalMaxPool(n *Node) (Kernel, error) { return buildGlobalPool(n, true) }

func buildGlobalPool(n *Node, isMax bool) (Kernel, error) {
	if n.NumInputs() != 1 {
		return nil, n.Errorf("want 1 input, have %d", n.NumInputs())
	}
	return &globalPoolKernel{n: n, max: isMax}, nil
}

func (k *globalPoolKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if x.DType != Float32 {
		return nil, k.n.Errorf("input X is %v, want float32", x.DType)
	}
	if len(x.Shape) < 3 {
		return nil, k.n.Errorf("input X has rank %d, want at least 3 (N, C, spatial...)", len(x.Shape))
	}
	shape := make([]int, len(x.Shape))
	shape[0], shape[1] = x.Shape[0], x.Shape[1]
	for i := 2; i < len(shape); i++ {
		shape[i] = 1
	}
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

func (k *globalPoolKernel) Retains() (inputs, outputs []bool) {
	return []bool{k.max}, []bool{false}
}

func (k *globalPoolKernel) Forward(ctx *Context, in, out []*Tensor) error {
	x := in[0]
	planes := x.Shape[0] * x.Shape[1]
	if planes == 0 {
		return nil
	}
	isz := x.Len() / planes
	y := out[0].F
	if isz == 1 {
		// Planes of one value (ResNet-18's last stage at 32 px): the mean and the max
		// are the value itself, + 0 as planeMean's sum from 0 makes −0 into +0. A call
		// of planeMean a plane took 36 µs for 512 channels at batch 1.
		for p, v := range x.F[:planes] {
			if k.max {
				y[p] = v
			} else {
				y[p] = v + 0
			}
		}
		return nil
	}
	ctx.Parallel(planes, poolGrain(isz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			xp := x.F[p*isz : (p+1)*isz]
			if k.max {
				best := float32(math.Inf(-1))
				for i, v := range xp {
					if i == 0 || v > best {
						best = v
					}
				}
				y[p] = best
				continue
			}
			// BatchNormalization's float64 sums, 16 lanes at a time where the CPU
			// allows: one sum after another held EfficientNet's squeeze-excitation
			// averages at a tenth of its run.
			y[p] = planeMean(xp)
		}
	})
	return nil
}

func (k *globalPoolKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil || gin[0] == nil {
		return nil
	}
	shape := gin[0].Shape
	planes := shape[0] * shape[1]
	if planes == 0 {
		return nil
	}
	isz := numel(shape) / planes
	gx := gin[0].F
	ctx.Parallel(planes, poolGrain(isz), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			gxp := gx[p*isz : (p+1)*isz]
			if k.max {
				xp := in[0].F[p*isz : (p+1)*isz]
				arg := 0
				for i, v := range xp {
					if v > xp[arg] {
						arg = i
					}
				}
				if isz > 0 {
					gxp[arg] += gy.F[p]
				}
				continue
			}
			v := gy.F[p] / float32(isz)
			for i := range gxp {
				gxp[i] += v
			}
		}
	})
	return nil
}
