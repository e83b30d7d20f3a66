package engine

// Depthwise 3×3 convolutions with stride 1 and one pixel of padding on every side (the
// "same" depthwise layer of MobileNet-style blocks) get their own loops: the generic
// direct loop walks each kernel offset over the plane separately, which on the small
// planes of such networks (7×7, 4×4) costs more in loop overhead than in arithmetic.
// These loops make each output row in three passes, one per input row, with the three
// taps of a row in registers.

// is3x3Same reports whether g is a 2-D 3×3 window with stride 1, dilation 1 and one
// pixel of padding on every side, so that the output plane has the input's size.
func (g *nnGeom) is3x3Same() bool {
	return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.pb[0] == 0 && g.pe[0] == 0 &&
		g.k[1] == 3 && g.k[2] == 3 && g.s[1] == 1 && g.s[2] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
		g.pb[1] == 1 && g.pb[2] == 1 && g.pe[1] == 1 && g.pe[2] == 1 &&
		g.out[1] == g.in[1] && g.out[2] == g.in[2]
}

// nnDW3x3 computes the H×W plane y = x ⋆ w (cross-correlation with the 3×3 kernel w,
// zero padding of one pixel), or adds it to y when add is set. Rows up to nnDWRowMax
// wide are made in one pass over three input rows (a zero row standing in above the top
// and below the bottom); wider ones in three passes of nnRow3.
func nnDW3x3(x, w, y []float32, H, W int, add bool) {
	if W <= nnDWRowMax {
		var zero [nnDWRowMax]float32
		z := zero[:W]
		for o1 := 0; o1 < H; o1++ {
			x0, x2 := z, z
			if o1 > 0 {
				x0 = x[(o1-1)*W : o1*W]
			}
			if o1+1 < H {
				x2 = x[(o1+1)*W : (o1+2)*W]
			}
			nnRow9(x0, x[o1*W:(o1+1)*W], x2, y[o1*W:(o1+1)*W], w, add)
		}
		return
	}
	for o1 := 0; o1 < H; o1++ {
		yr := y[o1*W : (o1+1)*W]
		first := !add
		for k1 := 0; k1 < 3; k1++ {
			i1 := o1 + k1 - 1
			if i1 < 0 || i1 >= H {
				continue
			}
			nnRow3(x[i1*W:(i1+1)*W], yr, w[3*k1], w[3*k1+1], w[3*k1+2], first)
			first = false // row o1 itself is always inside, so every yr is written
		}
	}
}

// nnDWRowMax is the widest row nnRow9 handles (its zero row lives on the stack).
const nnDWRowMax = 64

// nnRow9 sets (or adds to, with add) y[o] the 3×3 filter w over the rows x0, x1, x2
// around o: Σ_k1 w[3k1]·xk1[o−1] + w[3k1+1]·xk1[o] + w[3k1+2]·xk1[o+1], with zeros
// outside the rows; all rows have len(y) values.
func nnRow9(x0, x1, x2, y, w []float32, add bool) {
	W := len(y)
	w = w[:9]
	x0, x1, x2 = x0[:W], x1[:W], x2[:W]
	w0, w1, w2, w3, w4, w5, w6, w7, w8 := w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8]
	if W == 1 {
		v := w1*x0[0] + w4*x1[0] + w7*x2[0]
		if add {
			v += y[0]
		}
		y[0] = v
		return
	}
	first := w1*x0[0] + w2*x0[1] + w4*x1[0] + w5*x1[1] + w7*x2[0] + w8*x2[1]
	last := w0*x0[W-2] + w1*x0[W-1] + w3*x1[W-2] + w4*x1[W-1] + w6*x2[W-2] + w7*x2[W-1]
	if add {
		first += y[0]
		last += y[W-1]
	}
	// Shifted views of equal length let the compiler drop the bounds checks.
	ym := y[1 : W-1]
	n := len(ym)
	l0, m0, r0 := x0[:n], x0[1:n+1], x0[2:n+2]
	l1, m1, r1 := x1[:n], x1[1:n+1], x1[2:n+2]
	l2, m2, r2 := x2[:n], x2[1:n+1], x2[2:n+2]
	if add {
		for j := range ym {
			ym[j] += w0*l0[j] + w1*m0[j] + w2*r0[j] +
				w3*l1[j] + w4*m1[j] + w5*r1[j] +
				w6*l2[j] + w7*m2[j] + w8*r2[j]
		}
	} else {
		for j := range ym {
			ym[j] = w0*l0[j] + w1*m0[j] + w2*r0[j] +
				w3*l1[j] + w4*m1[j] + w5*r1[j] +
				w6*l2[j] + w7*m2[j] + w8*r2[j]
		}
	}
	y[0], y[W-1] = first, last
}

// nnRow3 sets (first) or adds to y[o] the three-tap filter a·x[o−1] + b·x[o] + c·x[o+1],
// with zeros outside x; len(y) == len(x).
func nnRow3(x, y []float32, a, b, c float32, first bool) {
	W := len(x)
	if W == 1 {
		if first {
			y[0] = b * x[0]
		} else {
			y[0] += b * x[0]
		}
		return
	}
	y = y[:W]
	e0 := b*x[0] + c*x[1]
	e1 := a*x[W-2] + b*x[W-1]
	l, m, r := x[:W-2], x[1:W-1], x[2:W]
	ym := y[1 : W-1]
	l, m, r = l[:len(ym)], m[:len(ym)], r[:len(ym)]
	if first {
		y[0], y[W-1] = e0, e1
		for j := range ym {
			ym[j] = a*l[j] + b*m[j] + c*r[j]
		}
		return
	}
	y[0] += e0
	y[W-1] += e1
	for j := range ym {
		ym[j] += a*l[j] + b*m[j] + c*r[j]
	}
}

// nnDW3x3Back adds the gradients of one plane of nnDW3x3: gx (when non-nil) gets the
// correlation of gy with the flipped kernel, and gw (when non-nil) the nine sums
// Σ gy[o]·x[o + offset].
func nnDW3x3Back(x, w, gy, gx, gw []float32, H, W int) {
	if gx != nil {
		flip := [9]float32{w[8], w[7], w[6], w[5], w[4], w[3], w[2], w[1], w[0]}
		nnDW3x3(gy, flip[:], gx, H, W, true)
	}
	if gw == nil {
		return
	}
	var s [9]float32
	for o1 := 0; o1 < H; o1++ {
		g := gy[o1*W : (o1+1)*W]
		for k1 := 0; k1 < 3; k1++ {
			i1 := o1 + k1 - 1
			if i1 < 0 || i1 >= H {
				continue
			}
			a, b, c := nnDot3(x[i1*W:(i1+1)*W], g)
			s[3*k1] += a
			s[3*k1+1] += b
			s[3*k1+2] += c
		}
	}
	for i, v := range s {
		gw[i] += v
	}
}

// nnDot3 returns Σ g[o]·x[o−1], Σ g[o]·x[o] and Σ g[o]·x[o+1] over the positions where
// x is defined; len(g) == len(x).
func nnDot3(x, g []float32) (a, b, c float32) {
	W := len(x)
	g = g[:W]
	for j, v := range g {
		b += v * x[j]
	}
	if W == 1 {
		return 0, b, 0
	}
	gl, xl := g[1:], x[:W-1]
	xl = xl[:len(gl)]
	for j, v := range gl {
		a += v * xl[j]
	}
	gr, xr := g[:W-1], x[1:]
	xr = xr[:len(gr)]
	for j, v := range gr {
		c += v * xr[j]
	}
	return a, b, c
}

// Other depthwise windows (5×5 and 7×7, stride 2, the (2, 1) strides of text models)
// take a padded plane on CPUs with the assembly: each input plane is copied into a
// zero-padded buffer, and every output row is made 16 pixels at a time from one load
// per tap, the taps summed in registers. At column stride 2, on AVX-512, the copy splits
// each padded row into its even columns and, after them, its odd ones, so that an
// output's columns are one apart in either half and each tap again takes one load: with
// the row as it is, a tap took two loads and a permutation, and those planes ran no
// faster than at unit stride with twice the outputs. The AVX2 kernel keeps the row as it
// is (two loads and shuffles a tap): the split copy has no AVX2 form there, and its Go
// rows made those planes 1.4–2.6× slower in all.
// The generic loop instead walks the plane once per tap, reading and writing the output
// each time: on MobileNetV3's and EfficientNet's 5×5 layers that was a third of
// inference. Both sum the taps in the same order, each product rounded before it is
// added, so they give the same bits.

// dwPlan is the padded-plane layout of one depthwise geometry.
type dwPlan struct {
	g      nnGeom
	pw, ph int     // padded row length and row count
	size   int     // buffer length: the padded plane and what the last loads overrun
	offs   []int64 // byte offset of each tap from its output's first tap
	// split, at column stride 2 on AVX-512 (dwSplit), is the number of even columns of a
	// padded row, which come first in the buffer's row, the odd ones after them; else 0.
	split int
	cs    int // the step in xp from one output's first tap to the next one's: 1, or 2
	// tail selects, sign bit set, the lanes of a row's last 16 outputs that exist
	// (dwPlaneAVX2's mask), made once here rather than on every plane.
	tail [16]int32
}

// dwPadOK reports whether g takes the padded plane: 2-D windows, undilated, with
// column stride 1 or 2.
func dwPadOK(g *nnGeom) bool {
	return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.d[1] == 1 && g.d[2] == 1 &&
		(g.s[2] == 1 || g.s[2] == 2) && g.out[1] > 0 && g.out[2] > 0
}

// setup lays p out for g, unless it already is.
func (p *dwPlan) setup(g *nnGeom) *dwPlan {
	if p.g == *g && p.offs != nil {
		return p
	}
	p.g = *g
	p.pw = g.in[2] + g.pb[2] + g.pe[2]
	p.ph = g.in[1] + g.pb[1] + g.pe[1]
	p.split, p.cs = 0, g.s[2]
	if g.s[2] == 2 && dwSplit() {
		p.split, p.cs = (p.pw+1)/2, 1
	}
	for j := range p.tail {
		p.tail[j] = 0
		if j < g.out[2]%16 {
			p.tail[j] = -1
		}
	}
	p.offs = p.offs[:0]
	for k1 := 0; k1 < g.k[1]; k1++ {
		for k2 := 0; k2 < g.k[2]; k2++ {
			// Output column o2's tap k2 reads padded column 2·o2 + k2: at column stride
			// 2, the even half's o2 + k2/2 or the odd half's.
			col := k2
			if p.split > 0 {
				col = k2 / 2
				if k2%2 == 1 {
					col += p.split
				}
			}
			p.offs = append(p.offs, int64(4*(k1*p.pw+col)))
		}
	}
	// The last chunk of the last row loads 16 columns (32 at a step of 2) from its last
	// tap (at most a row's length on), whatever the row's width; when the rows end in
	// three, dwPlaneAVX512 makes a fourth from the row below.
	rows := g.out[1]
	if rows%4 == 3 {
		rows++
	}
	last := (rows-1)*g.s[1]*p.pw + (g.out[2]-1)/16*16*p.cs + (g.k[1]-1)*p.pw + p.pw - 1
	p.size = max(p.ph*p.pw, last+16*p.cs)
	return p
}

// fill copies the plane x into the interior of the padded buffer dst, whose padding is
// zero already.
func (p *dwPlan) fill(dst, x []float32) {
	H, W := p.g.in[1], p.g.in[2]
	row0 := dst[p.g.pb[1]*p.pw:]
	if p.split == 0 {
		padRows(row0[p.g.pb[2]:], x[:H*W], H, W, p.pw)
		return
	}
	// Input column i is padded column c = pb + i: the even half's c/2, or the odd
	// half's.
	for i := range min(2, W) {
		c := p.g.pb[2] + i
		at := c / 2
		if c%2 == 1 {
			at += p.split
		}
		s2Rows(row0[at:], p.pw, x[i:H*W], W, (W-i+1)/2, H)
	}
}

// dwPlaneGo is the definition of dwPlane: y[o1, o2] = Σ over taps t, in order, of
// w[t]·xp[o1·s1·pw + o2·cs + offs[t]/4], each product rounded before it is added; with
// add, that sum plus y[o1, o2].
func dwPlaneGo(p *dwPlan, xp, y, w []float32, add bool) {
	g := &p.g
	for o1 := 0; o1 < g.out[1]; o1++ {
		for o2 := 0; o2 < g.out[2]; o2++ {
			base := o1*g.s[1]*p.pw + o2*p.cs
			acc := float32(0)
			for t, off := range p.offs {
				acc += float32(w[t] * xp[base+int(off/4)])
			}
			if add {
				acc += y[o1*g.out[2]+o2]
			}
			y[o1*g.out[2]+o2] = acc
		}
	}
}

// dwGradWGo is the definition of dwGradW: gw[t] += Σ over the plane of
// gy[o1, o2]·xp[o1·s1·pw + o2·cs + offs[t]/4], summed as the assembly sums it: in 16
// lanes (lane j takes the outputs o2 ≡ j mod 16 of every row, a zero where a row's last
// chunk has no output), then the lanes pairwise by halves.
func dwGradWGo(p *dwPlan, xp, gy, gw []float32) {
	g := &p.g
	oh, ow := g.out[1], g.out[2]
	for t, off := range p.offs {
		var acc [16]float32
		for o1 := 0; o1 < oh; o1++ {
			for c0 := 0; c0 < ow; c0 += 16 {
				for j := range acc {
					v := float32(0)
					if o := c0 + j; o < ow {
						v = float32(gy[o1*ow+o] * xp[o1*g.s[1]*p.pw+o*p.cs+int(off/4)])
					}
					acc[j] += v
				}
			}
		}
		var s8 [8]float32
		for i := range s8 {
			s8[i] = acc[i] + acc[i+8]
		}
		var s4 [4]float32
		for i := range s4 {
			s4[i] = s8[i] + s8[i+4]
		}
		gw[t] += (s4[0] + s4[1]) + (s4[2] + s4[3])
	}
}

// dwTransposed returns the geometry whose padded-plane convolution with the flipped
// taps is the input gradient of the unit-stride geometry g (the output gradient padded
// by k − 1 − p on each side), and whether there is one.
func dwTransposed(g *nnGeom) (nnGeom, bool) {
	t := nnGeom{nd: 2, k: g.k, s: g.s, d: g.d, in: g.out, out: g.in}
	if g.s[1] != 1 || g.s[2] != 1 {
		return t, false
	}
	for j := 1; j < nnMaxSpatial; j++ {
		t.pb[j] = g.k[j] - 1 - g.pb[j]
		t.pe[j] = g.k[j] - 1 - g.pe[j]
		if t.pb[j] < 0 || t.pe[j] < 0 {
			return t, false
		}
	}
	return t, dwPadOK(&t)
}

// planeBiasAct adds bias (when not nil) to the plane y and applies act (when not nil),
// as the unfused nodes would.
func planeBiasAct(y []float32, bias []float32, act *nnClamp) {
	switch {
	case bias != nil && act != nil:
		act.apply(y, y, bias[0])
	case bias != nil:
		for j := range y {
			y[j] += bias[0]
		}
	case act != nil:
		act.applyNoBias(y, y)
	}
}

// dwBuffers makes sure each of nw workers has a padded-plane buffer laid out for p in
// bufs, for[i] recording the geometry of bufs[i]: the padding stays zero from plane to
// plane, and only the interior is copied.
func dwBuffers(bufs *[][]float32, geoms *[]nnGeom, nw int, p *dwPlan) {
	for len(*bufs) < nw {
		*bufs = append(*bufs, nil)
		*geoms = append(*geoms, nnGeom{})
	}
	for i := range nw {
		if len((*bufs)[i]) != p.size || (*geoms)[i] != p.g {
			(*bufs)[i] = make([]float32, p.size)
			(*geoms)[i] = p.g
		}
	}
}

// forwardDWPad is forwardDepthwise on the padded plane (dwPadOK and dwPlaneFast),
// bias and act included, parallel over output planes.
func (k *convKernel) forwardDWPad(ctx *Context, d *convDims, x, w, bias, y []float32, act *nnClamp) {
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	p := k.dwPlan.setup(g)
	nw := nnWorkers(ctx, d.N*d.M)
	dwBuffers(&k.dwBuf, &k.dwFor, nw, p)
	// As the direct path (convStreamMin): an output larger than the caches is stored
	// non-temporally, unless the plane's mean is taken from it right after; SiLU goes
	// through a scratch plane of each worker's, on AVX-512 (siluRowsTo streams).
	streamMin := convStreamMin
	if k.streamMin != 0 {
		streamMin = k.streamMin
	}
	stream := k.gap == nil && streamMin > 0 && d.N*d.M*O >= streamMin && dwPlaneFast() &&
		(act == nil || !act.silu || convTileOK())
	if stream {
		k.direct.streamed++
		for len(k.dwTmp) < nw {
			k.dwTmp = append(k.dwTmp, nil)
		}
	}
	nnEach(ctx, nw, d.N*d.M, func(wk, lo, hi int) {
		buf := k.dwBuf[wk]
		var tmp []float32
		if stream {
			defer storeFence()
			if act != nil && act.silu {
				k.dwTmp[wk] = nnGrow(k.dwTmp[wk], O)
				tmp = k.dwTmp[wk]
			}
		}
		for pl := lo; pl < hi; pl++ {
			i, m := pl/d.M, pl%d.M
			c := m / d.Mg
			p.fill(buf, x[(i*d.C+c)*isz:(i*d.C+c+1)*isz])
			var bm []float32
			if bias != nil {
				bm = bias[m : m+1]
			}
			dwPlane(p, buf, y[pl*O:(pl+1)*O], w[m*K:(m+1)*K], bm, act, stream, tmp)
			if k.gap != nil {
				k.gap[pl] = planeMean(y[pl*O : (pl+1)*O])
			}
		}
	})
	k.gapDone = k.gap != nil
}

// planeMean is GlobalAveragePool of one plane, as globalPoolKernel computes it.
func planeMean(x []float32) float32 { return float32(nnSum64(x) / float64(len(x))) }

// backwardDWPad adds image i's gradients on the padded planes with worker wk's buffers:
// the weight gradient (into gw when not nil) by dwGradW over the padded image planes, and
// the input gradient (into gx when not nil) by dwPlaneAdd over the padded output
// gradient when pT (unit strides) is set, else by the generic loop.
func (k *convKernel) backwardDWPad(d *convDims, p, pT *dwPlan, wk, i int, x, w, gy, gx, gw []float32) {
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	for m := 0; m < d.M; m++ {
		c := m / d.Mg
		gym := gy[(i*d.M+m)*O : (i*d.M+m+1)*O]
		if gw != nil {
			p.fill(k.dwBuf[wk], x[(i*d.C+c)*isz:(i*d.C+c+1)*isz])
			dwGradW(p, k.dwBuf[wk], gym, gw[m*K:(m+1)*K])
		}
		if gx == nil {
			continue
		}
		gxc := gx[(i*d.C+c)*isz : (i*d.C+c+1)*isz]
		if pT != nil {
			pT.fill(k.dwBufT[wk], gym)
			dwPlaneAdd(pT, k.dwBufT[wk], gxc, k.wflip[m*K:(m+1)*K])
			continue
		}
		r := m * K
		for k1 := 0; k1 < g.k[1]; k1++ {
			for k2 := 0; k2 < g.k[2]; k2++ {
				if g.out[0] == 1 && (g.s[2] == 1 || g.s[2] == 2) {
					dwBackTap(g, w[r], gym, gxc, k1, k2)
				} else {
					nnDepthwiseBackRow(g, w[r], nil, gym, gxc, 0, k1, k2)
				}
				r++
			}
		}
	}
}

// dwBackTap is nnDepthwiseBackRow's input gradient (xc nil, k0 = 0) for a 2-D window of
// column stride 1 or 2 (the padded-plane path's strided layers: MobileNet's (2, 2), the
// OCR classifier's (2, 1)), the same products added in the same order: with stride 2
// the tap's rows as one dwBackS2 call, with stride 1 a vector call a row. Value by value
// in Go, the strided depthwise layers' input gradient took 8–9 % of a training step of
// MobileNetV3-small and of the OCR classifier.
func dwBackTap(g *nnGeom, w float32, gy, gx []float32, k1, k2 int) {
	lo1, hi1 := g.rng(1, k1)
	lo2, hi2 := g.rng(2, k2)
	if lo1 >= hi1 || lo2 >= hi2 {
		return
	}
	in2, out2, s2 := g.in[2], g.out[2], g.s[2]
	i1 := lo1*g.s[1] - g.pb[1] + k1*g.d[1]
	i2 := s2*lo2 - g.pb[2] + k2*g.d[2]
	n, ldx := hi2-lo2, g.s[1]*in2
	gx, gy = gx[i1*in2+i2:], gy[lo1*out2+lo2:]
	if s2 == 2 {
		dwBackS2(gx, ldx, gy, out2, n, hi1-lo1, w)
		return
	}
	for r := range hi1 - lo1 {
		affineAddVec(gx[r*ldx:r*ldx+n], gy[r*out2:r*out2+n], w)
	}
}

// dwBackS2Go is the definition of dwBackS2: gx[r·ldx + 2j] += w·gy[r·ldy + j] for r < rows
// and j < n, each product rounded before it is added.
func dwBackS2Go(gx []float32, ldx int, gy []float32, ldy, n, rows int, w float32) {
	for r := range rows {
		dst := gx[r*ldx : r*ldx+2*n-1]
		for j, v := range gy[r*ldy : r*ldy+n] {
			dst[2*j] += w * v
		}
	}
}
