package engine

import "fmt"

// Depthwise planes of up to 16 outputs a row on the AVX2 path (8 with AVX-512) take 8
// channels at a time in the lanes, as onnxruntime's channel-blocked kernels do: the 8
// input planes are transposed into one padded buffer of 8 values a pixel, each output
// pixel's 8 channels are summed in one register tap by tap, and every 8 pixels are
// transposed back into the 8 output planes. One plane at a time (dwPlane) took a padded
// copy and a call of its own per plane, 100–210 ns a plane of MobileNetV2's 14 × 14 and
// 7 × 7 layers against onnxruntime's 40–120. The sums are dwPlaneGo's (each product
// rounded before it is added, taps in order, from +0), then the bias and the activation
// as planeBiasAct applies them: the same bits as the padded-plane path.

// dwLanes is the lanes layout of one depthwise geometry.
type dwLanes struct {
	g      nnGeom
	pw, ph int
	// taps holds each tap's byte offset from an output pixel's first tap in the padded
	// buffer, then −1; pix each output pixel's first tap's, in groups of 8, the last group
	// padded with its last pixel's; tail is how many pixels of the last group exist.
	taps, pix []int64
	tail      int
}

// dwLanesOK reports whether the lanes path takes d with activation act: one output plane
// per input plane, whole groups of 8 channels, a padded-plane geometry (dwPadOK) with
// output rows of at most 16, and an activation the kernel applies, or SiLU (applied to
// each group's planes right after them, as dwPlane does). With AVX-512, whose one-plane
// kernel holds a row of 16 outputs in a register, only rows of at most 8: measured alone
// (32 images, interleaved), 576 channels 14 → 7 at stride 2 and 1 152 channels of 5×5 at
// 7 × 7 took 0.75–0.85 of the AVX-512 planes' time, 672 channels of 5×5 at 14 × 14 1.13.
// (3×3 "same" windows on rows of at most 16 take dw3x3Planes before either.)
func (k *convKernel) dwLanesOK(d *convDims, act *nnClamp) bool {
	if k.noDWLanes || !dwLanesFast() || d.Mg != 1 || d.Cg != 1 || d.M%8 != 0 || !dwPadOK(&d.g) || d.g.out[2] > 16 ||
		convTileOK() && d.g.out[2] > 8 {
		return false
	}
	_, ok := dw3x3Flags(act)
	return ok || act.silu
}

// setup lays l out for g, unless it already is.
func (l *dwLanes) setup(g *nnGeom) *dwLanes {
	if l.g == *g && l.taps != nil {
		return l
	}
	l.g = *g
	l.pw = g.in[2] + g.pb[2] + g.pe[2]
	l.ph = g.in[1] + g.pb[1] + g.pe[1]
	l.taps = l.taps[:0]
	for k1 := 0; k1 < g.k[1]; k1++ {
		for k2 := 0; k2 < g.k[2]; k2++ {
			l.taps = append(l.taps, int64(32*(k1*l.pw+k2)))
		}
	}
	l.taps = append(l.taps, -1)
	O := g.out[1] * g.out[2]
	l.pix = l.pix[:0]
	for p := 0; p < (O+7)/8*8; p++ {
		q := min(p, O-1)
		o1, o2 := q/g.out[2], q%g.out[2]
		l.pix = append(l.pix, int64(32*(o1*g.s[1]*l.pw+o2*g.s[2])))
	}
	l.tail = O - (O-1)/8*8
	return l
}

// forwardDWLanes makes d's output planes through the lanes, an image's group of 8
// channels an item, and, for a fused GlobalAveragePool (k.gap), their means while they
// are in the cache, as forwardDWPad does.
func (k *convKernel) forwardDWLanes(ctx *Context, d *convDims, x, w, bias, y []float32, act *nnClamp) {
	g := &d.g
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	l := k.dwLanes.setup(g)
	t, _ := dw3x3Flags(act)
	silu := act != nil && act.silu
	groups := d.M / 8
	nw := nnWorkers(ctx, d.N*groups)
	for len(k.dwLaneBuf) < nw {
		k.dwLaneBuf = append(k.dwLaneBuf, dwLaneBuf{})
	}
	for i := range nw {
		k.dwLaneBuf[i].grow(l, isz, K)
	}
	nnEach(ctx, nw, d.N*groups, func(wk, lo, hi int) {
		b := &k.dwLaneBuf[wk]
		for it := lo; it < hi; it++ {
			i, c0 := it/groups, it%groups*8
			xs := x[(i*d.C+c0)*isz : (i*d.C+c0+8)*isz]
			transpose8Rows(b.t, xs, isz)
			// The rows into the padded buffer, whose border stays zero.
			W := g.in[2]
			for h := range g.in[1] {
				at := ((h+g.pb[1])*l.pw + g.pb[2]) * 8
				copy(b.p[at:at+W*8], b.t[h*W*8:(h+1)*W*8])
			}
			for tp := range K {
				for j := range 8 {
					b.w[tp*8+j] = w[(c0+j)*K+tp]
				}
			}
			var bv []float32
			if bias != nil {
				copy(b.b[:], bias[c0:c0+8])
				bv = b.b[:]
			}
			ys := y[(i*d.M+c0)*O : (i*d.M+c0+8)*O]
			dwLanesRun(l, b.p, ys, O, b.w, bv, t)
			if silu {
				siluVec(ys, ys)
			}
			if k.gap != nil {
				for j := range 8 {
					k.gap[i*d.M+c0+j] = planeMean(ys[j*O : (j+1)*O])
				}
			}
		}
	})
	k.gapDone = k.gap != nil
}

// dwLaneBuf is one worker's scratch of the lanes path.
type dwLaneBuf struct {
	t, p, w []float32 // the 8 planes transposed, padded, and the taps' weights
	b       [8]float32
	pFor    nnGeom // the geometry p's zero border was made for
}

func (b *dwLaneBuf) grow(l *dwLanes, isz, K int) {
	b.t = nnGrow(b.t, 8*isz)
	if n := 8 * l.pw * l.ph; len(b.p) != n || b.pFor != l.g {
		b.p = make([]float32, n)
		b.pFor = l.g
	}
	b.w = nnGrow(b.w, 8*K)
}

// transpose8Rows sets t[p·8 + j] = x[j·n + p] for the 8 rows of n values of x.
func transpose8Rows(t, x []float32, n int) {
	if len(t) < 8*n || len(x) < 8*n {
		panic(fmt.Sprintf("transpose of 8 rows of %d out of range: lens %d %d", n, len(t), len(x)))
	}
	done := 0
	if dwLanesFast() && n >= 8 {
		done = n / 8 * 8
		transpose8AVX2(&t[0], &x[0], n/8, n, 8)
	}
	for p := done; p < n; p++ {
		for j := range 8 {
			t[p*8+j] = x[j*n+p]
		}
	}
}

// dwLanesGo is the definition of dwLanesRun: plane j of y (O values, ldy apart) is
// dwPlaneGo's sum over the taps of lane j of p, then its bias and activation (t).
func dwLanesGo(l *dwLanes, p, y []float32, ldy int, w, bias []float32, t tileAct) {
	O := l.g.out[1] * l.g.out[2]
	K := len(l.taps) - 1
	for q := range O {
		for j := range 8 {
			acc := float32(0)
			for tp := range K {
				acc += float32(w[tp*8+j] * p[int(l.pix[q]+l.taps[tp])/4+j])
			}
			if bias != nil {
				acc += bias[j]
			}
			y[j*ldy+q] = t.apply(acc)
		}
	}
}
