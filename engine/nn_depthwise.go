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
