package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWinoFilter checks the filter transform against F(2, 3)'s defining property in one
// dimension: for any filter g and 4 inputs d, Aᵀ[(G g) ⊙ (Bᵀ d)] is the 2-output
// correlation of d with g, computed here in float64 from G, Bᵀ and Aᵀ written out, with
// winoFilter's 2-D transform restricted to the filters that are an outer product e₀gᵀ.
func TestWinoFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 100; trial++ {
		var g [9]float32
		for i := range g {
			g[i] = float32(r.Float64()*2 - 1)
		}
		var u [16]float32
		winoFilter(&u, g[:])
		// u = G g Gᵀ in float64.
		G := [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
		for i := 0; i < 4; i++ {
			for j := 0; j < 4; j++ {
				s := 0.0
				for a := 0; a < 3; a++ {
					for b := 0; b < 3; b++ {
						s += G[i][a] * float64(g[3*a+b]) * G[j][b]
					}
				}
				if d := math.Abs(s - float64(u[4*i+j])); d > 1e-6 {
					t.Fatalf("u[%d][%d] = %v, G g Gᵀ %v", i, j, u[4*i+j], s)
				}
			}
		}
	}
}

// TestWinoTransforms checks the assembly transforms against their Go definitions bit for
// bit, on rows of 1 to 40 tiles (a partial last block of 16, whole blocks, both), an odd
// and an even number of output rows and columns, with and without bias, residual and
// Relu, and that nothing past the output is written.
func TestWinoTransforms(t *testing.T) {
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	r := rand.New(rand.NewPCG(7, 8))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.Float64()*2 - 1)
		}
		return s
	}
	for _, tw := range []int{1, 3, 15, 16, 17, 31, 32, 33, 40} {
		for _, rows := range []int{1, 2, 3} {
			S := tw + 1
			qp := (rows+1)*S + 3 // planes further apart than they need be
			q := fill(4 * qp)
			ldv := rows*tw + 5
			got, want := fill(16*ldv), make([]float32, 16*ldv)
			copy(want, got)
			winoIn(q, qp, S, tw, rows, got, ldv)
			winoInGo(q, qp, S, tw, rows, want, ldv)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("input transform, %d rows of %d tiles: v[%d] = %v, want %v", rows, tw, i, got[i], want[i])
				}
			}
			m := fill(16 * ldv)
			for _, oddW := range []bool{false, true} {
				for _, oddH := range []bool{false, true} {
					ow, ohr := 2*tw, 2*rows
					if oddW {
						ow--
					}
					if oddH {
						ohr--
					}
					if ow == 0 {
						continue
					}
					res := fill(ohr * ow)
					for flags := 0; flags < 8; flags++ {
						name := fmt.Sprintf("output transform, %d rows of %d tiles, %d×%d, flags %d", rows, tw, ohr, ow, flags)
						const spare = 40
						y := fill(ohr*ow + spare)
						ref := append([]float32(nil), y...)
						winoOut(m, ldv, tw, rows, y[:ohr*ow], ow, ohr, 0.25, res, flags)
						winoOutGo(m, ldv, tw, rows, ref[:ohr*ow], ow, ohr, 0.25, res, flags)
						for i := range y {
							if math.Float32bits(y[i]) != math.Float32bits(ref[i]) {
								t.Fatalf("%s: y[%d] = %v, want %v", name, i, y[i], ref[i])
							}
						}
					}
				}
			}
		}
	}
}

// winoCases are convolutions the Winograd path takes: even and odd planes (a last tile
// half outside), asymmetric and no padding, output channels not a multiple of 8, rows of
// more than 16 tiles, chunks of several whole images (small planes), chunks of tile rows
// of one image (large planes, and small ones at batch 1, shared by the workers) at
// batch 1 and batch 3.
var winoCases = []convCase{
	{name: "even_32to16", x: []int{2, 32, 12, 12}, w: []int{16, 32, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "odd_plane", x: []int{3, 33, 13, 15}, w: []int{19, 33, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "no_pad", x: []int{2, 32, 14, 15}, w: []int{24, 32, 3, 3}},
	{name: "asym_pad", x: []int{1, 36, 14, 13}, w: []int{16, 36, 3, 3}, pads: []int{2, 0, 0, 2}, bias: true},
	{name: "wide_rows", x: []int{1, 32, 12, 70}, w: []int{32, 32, 3, 3}, pads: []int{1, 1, 1, 1}},
	{name: "row_chunks_batch3", x: []int{3, 32, 30, 20}, w: []int{16, 32, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "small_plane_one_image", x: []int{1, 32, 13, 13}, w: []int{40, 32, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "resnet_like", x: []int{2, 64, 14, 14}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	// Planes below winoMinPlane, taken for their channels and batch: chunks of whole
	// images, the last one short, and an odd plane whose last tiles are half outside.
	{name: "small_planes_batch5", x: []int{5, 128, 7, 7}, w: []int{128, 128, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "small_odd_plane_batch8", x: []int{8, 128, 5, 6}, w: []int{136, 128, 3, 3}, pads: []int{1, 1, 1, 1}},
	// Few tiles: the workers share the output channels (winoSplit), with a last row
	// block of 4 channels and an odd plane; at 64 to 127 tiles (resnet_like,
	// small_planes_batch5) from two workers on, one worker making tile rows as above, so
	// that TestConvWinogradWorkersAgree compares the two.
	{name: "few_tiles_batch1", x: []int{1, 256, 7, 8}, w: []int{260, 256, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "few_tiles_batch2", x: []int{2, 256, 7, 7}, w: []int{256, 256, 3, 3}, pads: []int{1, 1, 1, 1}},
}

// winoAVX2Cases are convolutions only the AVX2 path sends to the Winograd path (its
// channel thresholds, winoAVX2Ch and winoAVX2MinC): ResNet-18's first stage at 32 px at
// batch 1 (16 tiles shared by output channels, 64 of them: 8 row blocks), an odd plane of
// 72 output channels at batch 2, 64 channels on 7 × 7 planes at batch 32 (chunks of whole
// images), and 16 input channels on an odd plane (SqueezeNet's first expand layers).
var winoAVX2Cases = []convCase{
	{name: "avx2_64ch_8x8_batch1", x: []int{1, 64, 8, 8}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "avx2_odd_72out_batch2", x: []int{2, 64, 7, 9}, w: []int{72, 64, 3, 3}, pads: []int{1, 1, 1, 1}},
	{name: "avx2_64ch_7x7_batch32", x: []int{32, 64, 7, 7}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "avx2_16in_odd_plane", x: []int{2, 16, 29, 31}, w: []int{64, 16, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
}

// winoCasesHere is winoCases, and on the AVX2 path winoAVX2Cases too.
func winoCasesHere() []convCase {
	if convTileOK() {
		return winoCases
	}
	return append(slices.Clone(winoCases), winoAVX2Cases...)
}

// TestWinogradSmallPlanes checks where planes below winoMinPlane take the Winograd path:
// with AVX-512, with 128 channels or more in and out and at least winoMinCols tiles in
// the batch, or 256 channels and winoFewCols tiles; on the AVX2 path with 64 channels and
// winoFewCols tiles; from 32 input channels with AVX-512 and 16 on the AVX2 path; and not
// with fewer channels, fewer tiles or planes below winoSmallPlane (where the measurements
// in winoSmallPlane's comment had it lose).
func TestWinogradSmallPlanes(t *testing.T) {
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for _, c := range []struct {
		x, w       []int
		want, avx2 bool // with AVX-512, on the AVX2 path
	}{
		{[]int{4, 512, 7, 7}, []int{512, 512, 3, 3}, true, true},    // 64 tiles
		{[]int{3, 128, 7, 7}, []int{128, 128, 3, 3}, false, true},   // 48 tiles, 128 channels
		{[]int{1, 512, 7, 7}, []int{512, 512, 3, 3}, true, true},    // 16 tiles, 512 channels
		{[]int{1, 256, 7, 7}, []int{255, 256, 3, 3}, false, true},   // 255 out
		{[]int{1, 256, 6, 6}, []int{256, 256, 3, 3}, false, false},  // 9 tiles
		{[]int{32, 64, 7, 7}, []int{64, 64, 3, 3}, false, true},     // 64 channels
		{[]int{32, 256, 7, 7}, []int{64, 256, 3, 3}, false, true},   // 64 out
		{[]int{1, 64, 8, 8}, []int{64, 64, 3, 3}, false, true},      // 16 tiles, 64 channels
		{[]int{1, 64, 8, 8}, []int{63, 64, 3, 3}, false, false},     // 63 out
		{[]int{8, 48, 8, 8}, []int{48, 48, 3, 3}, false, false},     // 48 channels
		{[]int{32, 128, 5, 5}, []int{128, 128, 3, 3}, true, true},   // 5 × 5
		{[]int{32, 512, 4, 4}, []int{512, 512, 3, 3}, false, false}, // 4 × 4
		{[]int{1, 64, 12, 12}, []int{64, 64, 3, 3}, true, true},     // winoMinPlane: any batch
		{[]int{1, 16, 12, 12}, []int{64, 16, 3, 3}, false, true},    // 16 in
		{[]int{1, 15, 12, 12}, []int{64, 15, 3, 3}, false, false},   // 15 in
		{[]int{1, 32, 12, 12}, []int{15, 32, 3, 3}, false, false},   // 15 out
	} {
		k, d := pad1Dims(t, c.x, c.w)
		want := c.want
		if !convTileOK() {
			want = c.avx2
		}
		if got := k.winogradOK(&d, nil); got != want {
			t.Errorf("x %v, w %v: winogradOK %v, want %v (AVX-512 tile kernel %v)", c.x, c.w, got, want, convTileOK())
		}
	}
}

// TestConvWinograd runs the Winograd path on winoCases, plain, with each fused activation
// and with a residual, with 1 to 3 workers, against the float64 reference convolution.
// The bound is that of the transforms' rounding: each output is a sum of 16 terms per
// input channel, each of magnitude up to 4·|x|max·Σ|g| (the transforms add four values
// and G's rows sum to at most 1.5 in magnitude twice), so 1e-5 of the sum of |w|·|x| over
// the window, times a small constant, bounds it; the test uses 8·2⁻²⁴·(that sum)·16.
func TestConvWinograd(t *testing.T) {
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for _, c := range winoCasesHere() {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(21, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				in[1].param = &Param{Name: "w", Value: in[1]}
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, 1, strides, dil, pads)
				mag, _ := refConv(absAll(to64(in[0].F)), c.x, absAll(to64(in[1].F)), c.w, nil, 1, strides, dil, pads)
				k := buildKernel(t, n).(*convKernel)
				d, err := k.dims(c.x, c.w, n.Optional(in, 2))
				if err != nil {
					t.Fatal(err)
				}
				if !k.winogradOK(&d, nil) {
					t.Fatal("the Winograd path does not take this case")
				}
				ctx := nntGoCtx(workers)
				res := nntRand(r, ws, -1, 1)
				for _, withRes := range []bool{false, true} {
					for _, act := range testActs {
						exp := append([]float64(nil), want...)
						var rt *Tensor
						if withRes {
							rt = res
							for i, v := range res.F {
								exp[i] += float64(v)
							}
						}
						exp = refAct(exp, act)
						y := NewFloat(ws, make([]float32, len(want)))
						for i := range y.F {
							y.F[i] = float32(math.NaN())
						}
						k.direct.wu = nil
						if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, rt); err != nil {
							t.Fatal(err)
						}
						if k.direct.wu == nil {
							t.Fatal("the Winograd path did not run")
						}
						bad := 0
						for i, v := range y.F {
							tol := 8*0x1p-24*16*mag[i] + 1e-6
							if withRes {
								tol += 0x1p-24 * 2
							}
							if math.IsNaN(float64(v)) || math.Abs(float64(v)-exp[i]) > tol {
								if bad < 5 {
									t.Errorf("res %v act %v: Y[%d] = %v, want %v (tolerance %.3g)", withRes, act, i, v, exp[i], tol)
								}
								bad++
							}
						}
						if bad > 0 {
							t.Fatalf("res %v act %v: %d of %d values differ", withRes, act, bad, len(y.F))
						}
					}
				}
			})
		}
	}
}

// TestConvWinogradWorkersAgree checks that the Winograd path's output does not depend on
// the number of workers, bit for bit, at batch 1 (where chunks of one image are shared)
// and batch 3.
func TestConvWinogradWorkersAgree(t *testing.T) {
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for _, c := range winoCasesHere() {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, 32))
			n, _, _, _ := c.node(11)
			in := c.inputs(r)
			var first []float32
			for _, workers := range []int{1, 2, 3, 4} {
				k := buildKernel(t, n).(*convKernel)
				y := nntRun(t, k, nntGoCtx(workers), in)[0]
				if first == nil {
					first = y.F
					continue
				}
				for i, v := range y.F {
					if math.Float32bits(v) != math.Float32bits(first[i]) {
						t.Fatalf("%d workers: Y[%d] = %v, 1 worker %v", workers, i, v, first[i])
					}
				}
			}
		})
	}
}

func absAll(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Abs(v)
	}
	return out
}
