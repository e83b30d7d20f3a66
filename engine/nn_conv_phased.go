package engine

// The phase planes: the implicit im2col of stride-2 2-D windows. Output pixel (y, x)
// reads input (2y + k1 − p1, 2x + k2 − p2) through tap (k1, k2); split into its four
// phases (even and odd rows, even and odd columns), the image is four planes in which
// every tap reads a unit-stride window: tap k reads phase (k − p) mod 2 at the shift
// ⌊(k − p)/2⌋. Zero-padded like convPad's buffer, the planes let the tile kernel read
// every tap's row of the column matrix through an offset table, output row by output
// row, as for unit strides, and copy each input value once where the column matrix (of
// s2Plan or the stride-2 row copies) writes it once per tap that reads it. The sums are
// the same chains of fused multiply-adds as through the column matrix (the bias, then the
// taps in (channel, k1, k2) order, padding as 0·w), so the two give the same bits
// (TestConvPhased).
//
// Where they pay (BenchmarkConvPhased, batch 32, one layer, old and new builds
// alternating on the Zen 5): short sums, the stems of MobileNet and EfficientNet (3 → 32
// channels, 3×3 at 224 px: 5.1–5.5 → 3.4 ms with AVX-512, 8.7–8.8 → 6.3–6.5 on the AVX2
// path), a 7×7 stem (3 → 64: 32 → 23 and 56–63 → 47–50 ms) and 3×3 layers of 8 and 16
// input channels at 112 px (1.08–1.19×). With 64 input channels (576 rows of the sum,
// ResNet-18's 56 → 28 layer) the planes lost 5–14 %: the kernel then reads 576 rows
// through the table, misaligned and in as many streams, where the column matrix is read
// in order. And at batch 1, where the workers split one image's channels and each filled
// every plane, the stems lost 10–13 %: hence whole images to each worker only.
const convPhasedMaxK = 160

// phaseShift returns the phase (0 or 1) and the shift of tap k of a stride-2 dimension
// with padding p before it: input 2y + k − p = 2(y + shift) + phase.
func phaseShift(k, p int) (phase, shift int) {
	v := k - p
	phase = v & 1
	return phase, (v - phase) / 2
}

// phased returns the phase planes' layout of d, set up for its geometry, or nil when d
// does not take them: 2-D windows of stride 2 and dilation 1, sums of at most
// convPhasedMaxK rows, whose output rows are at least as wide as padded's (12 pixels, 8
// with AVX-512), unless c.noPhased. The caller gives them batches of at least two images
// a worker.
func (c *convDirect) phased(d *convDims) *convPad {
	g := &d.g
	minRow := 12
	if convTileOK() {
		minRow = 8
	}
	if c.noPhased || d.pointwise || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.s[1] != 2 || g.s[2] != 2 ||
		g.d[1] != 1 || g.d[2] != 1 || g.out[2] < minRow || d.Cg*g.kSize() > convPhasedMaxK {
		return nil
	}
	return c.pad.setupPhased(g, d.Cg)
}

// setupPhased lays p out as phase planes for C channels of geometry g, unless it
// already is: per channel four planes (phase of the row, then of the column), each
// out[1] + the span of the row shifts rows of out[2] + the span of the column shifts,
// row r and column q of plane (a, b) holding input (2(r + lo1) + a, 2(q + lo2) + b), lo
// the smallest shift, or 0 outside the image.
func (p *convPad) setupPhased(g *nnGeom, C int) *convPad {
	if p.geom == (padGeom{g: *g, C: C}) && p.phase {
		return p
	}
	p.geom = padGeom{g: *g, C: C}
	p.phase = true
	for j := 1; j <= 2; j++ {
		_, lo := phaseShift(0, g.pb[j])
		_, hi := phaseShift(g.k[j]-1, g.pb[j])
		p.lo[j], p.span[j] = lo, g.out[j]+hi-lo
	}
	p.w = p.span[2]
	plane := p.span[1] * p.w
	p.size = 4 * plane
	p.tapOffsets(g, C, func(ch, k1, k2 int) int {
		a, s1 := phaseShift(k1, g.pb[1])
		b, s2 := phaseShift(k2, g.pb[2])
		return ch*p.size + (2*a+b)*plane + (s1-p.lo[1])*p.w + s2 - p.lo[2]
	})
	return p
}

// fillPhased copies the C-channel image x into the phase planes of dst, whose cells
// outside the image are zero already.
func (p *convPad) fillPhased(dst, x []float32, C int) {
	g := &p.geom.g
	H, W := g.in[1], g.in[2]
	plane := p.span[1] * p.w
	for ch := 0; ch < C; ch++ {
		xc := x[ch*H*W : (ch+1)*H*W]
		for a := 0; a < 2; a++ {
			// Rows r with 0 ≤ 2(r + lo) + a < H.
			r0 := max(0, ceilDiv(-a, 2)-p.lo[1])
			r1 := min(p.span[1], ceilDiv(H-a, 2)-p.lo[1])
			for b := 0; b < 2; b++ {
				q0 := max(0, ceilDiv(-b, 2)-p.lo[2])
				q1 := min(p.w, ceilDiv(W-b, 2)-p.lo[2])
				if r1 <= r0 || q1 <= q0 {
					continue
				}
				pl := dst[ch*p.size+(2*a+b)*plane:]
				iy, ix := 2*(r0+p.lo[1])+a, 2*(q0+p.lo[2])+b
				s2Rows(pl[r0*p.w+q0:], p.w, xc[iy*W+ix:], 2*W, q1-q0, r1-r0)
			}
		}
	}
}

// ceilDiv is ⌈a/b⌉ for b > 0 and any sign of a.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}
