package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// tapsCases are convolutions the taps path takes: ResNet-18's 2 × 2 and 4 × 4 planes at
// 32 px (a few channels), a batch that is not a multiple of 16 lanes, a stride, a 5 × 5
// kernel, dilation, pixels that read only padding, and a batch split into chunks of X.
var tapsCases = []struct {
	convCase
	plane bool // the path without the taps gives the same bits (forwardGemmTile's chunks)
}{
	{convCase{name: "2x2_m40_n16", x: []int{16, 24, 2, 2}, w: []int{40, 24, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, true},
	{convCase{name: "2x2_m8_n33", x: []int{33, 16, 2, 2}, w: []int{8, 16, 3, 3}, pads: []int{1, 1, 1, 1}}, true},
	{convCase{name: "4x4_m24_n17", x: []int{17, 16, 4, 4}, w: []int{24, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, false},
	{convCase{name: "4x4_s2_to_2x2", x: []int{32, 8, 4, 4}, w: []int{16, 8, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, bias: true}, true},
	{convCase{name: "3x3_k5", x: []int{20, 8, 3, 3}, w: []int{20, 8, 5, 5}, pads: []int{2, 2, 2, 2}, bias: true}, true},
	{convCase{name: "4x4_d2", x: []int{16, 8, 4, 4}, w: []int{16, 8, 3, 3}, dil: []int{2, 2}, pads: []int{2, 2, 2, 2}}, false},
	{convCase{name: "empty_pixels", x: []int{16, 4, 2, 2}, w: []int{9, 4, 2, 2}, strides: []int{3, 3}, pads: []int{2, 2, 2, 2}, bias: true}, true},
	{convCase{name: "chunks", x: []int{70, 16, 2, 2}, w: []int{16, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true}, true},
}

// tapsChunked is the case run in chunks of 20 images (the last of 10: a partial panel of
// lanes); the path without the taps gathers its own chunks.
const tapsChunked = "chunks"

// TestConvTaps runs tapsCases through the taps path (frozen weights, as it requires) on
// 1–3 workers and checks every output exactly against the fused multiply-add chain the
// path's contract states (from 0 in the column matrix's order, the bias and activation
// after), against the float64 reference convolution, and, where the path without the
// taps sums the same chains (planes under 16 pixels), against it bit for bit.
func TestConvTaps(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no AVX-512 or AVX2+FMA tile kernel on this CPU: the taps path does not run")
	}
	for _, tc := range tapsCases {
		c := tc.convCase
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(11, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				in[1].param = &Param{Name: "w", Value: in[1]}
				var b64 []float64
				var b []float32
				if c.bias {
					b, b64 = in[2].F, to64(in[2].F)
				}
				want, _ := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b64, 1, strides, dil, pads)
				// The chain from 0 with every tap (a padding tap adds 0·w, which changes
				// no sum but a −0), dilation through a kernel spread with zeros.
				ws, wf := c.w, in[1].F
				if len(dil) > 0 && dil[0] > 1 {
					ws, wf = dilateKernel(c.w, wf, dil)
				}
				chain := fmaChainConv(in[0].F, c.x, wf, ws, nil, 1, orOnes(strides), pads, nil)
				taps := buildKernel(t, n).(*convKernel)
				plain := buildKernel(t, n).(*convKernel)
				plain.noTaps = true
				if c.name == tapsChunked {
					taps.tapsChunk = 20
				}
				ctx := nntGoCtx(workers)
				for _, act := range testActs {
					var outs [2][]float32
					for j, k := range []*convKernel{taps, plain} {
						outs[j] = runTwice(t, k, ctx, n, in, act)
					}
					nntClose(t, fmt.Sprintf("taps path, act %v", act), outs[0], refAct(want, act), 1e-5, 1e-5)
					exp := append([]float32(nil), chain...)
					plane := len(exp) / c.x[0] / c.w[0]
					for i := range exp {
						if b != nil {
							exp[i] += b[i/plane%c.w[0]]
						}
					}
					if act != nil {
						act.applyNoBias(exp, exp)
					}
					for i, v := range outs[0] {
						if v != exp[i] {
							t.Fatalf("act %v: Y[%d] = %v, the FMA chain gives %v", act, i, v, exp[i])
						}
						if tc.plane && v != outs[1][i] {
							t.Fatalf("act %v: Y[%d] = %v, without the taps path %v", act, i, v, outs[1][i])
						}
					}
				}
				if taps.taps.taken == 0 {
					t.Fatal("the taps path did not run")
				}
				if plain.taps.taken != 0 {
					t.Fatal("noTaps: the taps path ran")
				}
				if taps.taps.packs != 1 {
					t.Errorf("the weights were packed %d times over %d runs, want once", taps.taps.packs, 2*len(testActs))
				}
			})
		}
	}
}

// TestConvTapsNotTaken checks the path's limits: a batch under a panel of lanes, weights
// that are not frozen, planes over 16 pixels, and windows that read the image through
// more than convTapsMaxValid of their taps (all of them; 84 %), and classes that would
// hold more than convTapsMaxPack times the weight (5 × 5 on 4 × 4 planes: 7.8 times).
func TestConvTapsNotTaken(t *testing.T) {
	if !convDirectOK() {
		t.Skip("no tile kernel on this CPU")
	}
	for _, tc := range []struct {
		c      convCase
		frozen bool
	}{
		{convCase{name: "batch15", x: []int{15, 8, 2, 2}, w: []int{16, 8, 3, 3}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "trained", x: []int{16, 8, 2, 2}, w: []int{16, 8, 3, 3}, pads: []int{1, 1, 1, 1}}, false},
		{convCase{name: "5x5_plane", x: []int{16, 8, 5, 5}, w: []int{16, 8, 3, 3}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "4x4_valid", x: []int{16, 8, 6, 6}, w: []int{16, 8, 3, 3}}, true},
		{convCase{name: "4x4_s2_k2_valid", x: []int{16, 8, 8, 8}, w: []int{16, 8, 2, 2}, strides: []int{2, 2}}, true},
		{convCase{name: "8x8_s2_to_4x4", x: []int{16, 8, 8, 8}, w: []int{16, 8, 3, 3}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}}, true},
		{convCase{name: "k5_on_4x4_pack", x: []int{16, 8, 4, 4}, w: []int{16, 8, 5, 5}, pads: []int{2, 2, 2, 2}}, true},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(12, 1))
			n, strides, dil, pads := tc.c.node(11)
			in := tc.c.inputs(r)
			if tc.frozen {
				in[1].param = &Param{Name: "w", Value: in[1]}
			}
			want, _ := refConv(to64(in[0].F), tc.c.x, to64(in[1].F), tc.c.w, nil, 1, strides, dil, pads)
			k := buildKernel(t, n).(*convKernel)
			y := nntRun(t, k, nntGoCtx(2), in)[0]
			nntClose(t, "Y", y.F, want, 1e-5, 1e-5)
			if k.taps.taken != 0 {
				t.Fatal("the taps path ran")
			}
		})
	}
}

// dilateKernel spreads a 2-D kernel's taps dil apart with zeros between them.
func dilateKernel(ws []int, w []float32, dil []int) ([]int, []float32) {
	M, C, KH, KW := ws[0], ws[1], ws[2], ws[3]
	EH, EW := (KH-1)*dil[0]+1, (KW-1)*dil[1]+1
	out := make([]float32, M*C*EH*EW)
	for mc := 0; mc < M*C; mc++ {
		for a := 0; a < KH; a++ {
			for b := 0; b < KW; b++ {
				out[(mc*EH+a*dil[0])*EW+b*dil[1]] = w[(mc*KH+a)*KW+b]
			}
		}
	}
	return []int{M, C, EH, EW}, out
}

// orOnes is s, or unit strides when s is empty.
func orOnes(s []int) []int {
	if len(s) == 0 {
		return []int{1, 1}
	}
	return s
}
