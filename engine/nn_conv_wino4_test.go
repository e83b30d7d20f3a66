package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// wino4Values draws transform inputs: mostly uniform, with zeros of both signs,
// subnormals, infinities, values that overflow when scaled and (with nan) NaN mixed in,
// so that the assembly's rounding and its treatment of special values are compared with
// the definitions' too. Without input NaNs every NaN is the CPU's default one, whose sign
// Relu reads; which of two input NaNs a sum keeps depends on the operand order, which Go
// leaves to the compiler.
func wino4Values(r *rand.Rand, n int, nan bool) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), 3e38, -3e38}
	if nan {
		special = append(special, float32(math.NaN()))
	}
	x := make([]float32, n)
	for i := range x {
		if r.IntN(20) == 0 {
			x[i] = special[r.IntN(len(special))]
		} else {
			x[i] = float32(r.Float64()*8 - 4)
		}
	}
	return x
}

// TestWino4Transforms checks winoIn4 and winoOut4 (the AVX2 forms where the CPU has
// them) against winoIn4Go and winoOut4Go bit for bit, over rows of 1 to 19 tiles (whole
// and partial blocks of 8), 1 to 3 tile rows, every output clip and flag combination, and
// that they write nothing outside their outputs.
func TestWino4Transforms(t *testing.T) {
	if !wino4Fast() {
		t.Skip("no AVX2+FMA on this CPU: the F(4×4) transforms have no assembly form")
	}
	r := rand.New(rand.NewPCG(7, 7))
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || math.IsNaN(float64(a)) && math.IsNaN(float64(b))
	}
	for tw := 1; tw <= 19; tw++ {
		for rows := 1; rows <= 3; rows++ {
			S := tw + 1 + r.IntN(3)
			pp := wino4PlaneSize(rows, S) + r.IntN(5)
			p := wino4Values(r, 8*pp, true)
			ldv := rows*tw + r.IntN(7)
			got, want := make([]float32, 36*ldv), make([]float32, 36*ldv)
			for i := range got {
				got[i], want[i] = -7, -7
			}
			winoIn4(p, pp, S, tw, rows, got, ldv, new(wino4Tabs))
			winoIn4Go(p, pp, S, tw, rows, want, ldv)
			for i := range got {
				if !same(got[i], want[i]) {
					t.Fatalf("input transform, %d rows of %d tiles: v[%d] = %v, want %v", rows, tw, i, got[i], want[i])
				}
			}
			m := wino4Values(r, 36*ldv, false)
			for _, clip := range [][2]int{{0, 0}, {1, 2}, {3, 3}, {2, 1}} {
				ow, ohr := 4*tw-clip[0], 4*rows-clip[1]
				if ow < 1 || ohr < 1 {
					continue
				}
				for flags := 0; flags < 8; flags++ {
					res := wino4Values(r, ohr*ow, false)
					bias := float32(r.Float64() - 0.5)
					got, want := make([]float32, ohr*ow+8), make([]float32, ohr*ow+8)
					for i := range got {
						got[i], want[i] = -7, -7
					}
					winoOut4(m, ldv, tw, rows, got[:ohr*ow], ow, ohr, bias, res, flags, new(wino4Tabs))
					winoOut4Go(m, ldv, tw, rows, want[:ohr*ow], ow, ohr, bias, res, flags)
					for i := range got {
						if !same(got[i], want[i]) {
							t.Fatalf("output transform, %d rows of %d tiles, %d×%d, flags %d: y[%d] = %v, want %v", rows, tw, ohr, ow, flags, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestWino4Definitions checks the definitions themselves against the transforms'
// matrices in float64: winoBt6 and winoAt6 on random inputs, to the rounding their
// few operations allow, and winoFilter4 likewise.
func TestWino4Definitions(t *testing.T) {
	bt := [6][6]float64{{4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}}
	at := [4][6]float64{{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}
	r := rand.New(rand.NewPCG(8, 8))
	for range 1000 {
		var s [6]float32
		for i := range s {
			s[i] = float32(r.Float64()*2 - 1)
		}
		o := winoBt6(s[0], s[1], s[2], s[3], s[4], s[5])
		y := winoAt6(s[0], s[1], s[2], s[3], s[4], s[5])
		for i := range 6 {
			var want, mag float64
			for j := range 6 {
				want += bt[i][j] * float64(s[j])
				mag += math.Abs(bt[i][j] * float64(s[j]))
			}
			if math.Abs(float64(o[i])-want) > 4*0x1p-24*mag {
				t.Fatalf("Bᵀ row %d of %v: %v, want %v", i, s, o[i], want)
			}
			if i < 4 {
				want, mag = 0, 0
				for j := range 6 {
					want += at[i][j] * float64(s[j])
					mag += math.Abs(at[i][j] * float64(s[j]))
				}
				if math.Abs(float64(y[i])-want) > 4*0x1p-24*mag {
					t.Fatalf("Aᵀ row %d of %v: %v, want %v", i, s, y[i], want)
				}
			}
		}
		var g [9]float32
		for i := range g {
			g[i] = float32(r.Float64()*2 - 1)
		}
		var u [36]float32
		winoFilter4(&u, g[:])
		for i := range 6 {
			for j := range 6 {
				var want float64
				for a := range 3 {
					for b := range 3 {
						want += winoG4[i][a] * float64(g[3*a+b]) * winoG4[j][b]
					}
				}
				if math.Abs(float64(u[6*i+j])-want) > 0x1p-24*math.Abs(want)+1e-12 {
					t.Fatalf("G g Gᵀ [%d][%d]: %v, want %v", i, j, u[6*i+j], want)
				}
			}
		}
	}
}

// wino4Cases are convolutions taken in 4 × 4 tiles on every CPU with the assembly (batches
// of wino4MinBatch): even and odd planes (last tiles partly outside), asymmetric and no
// padding, output channels not a multiple of 8, chunks of tile rows and of whole images;
// and at batch 1, where only the AVX2 path takes them (with AVX-512 the 2 × 2 tiles make
// them, under the same bound).
var wino4Cases = []convCase{
	{name: "even_batch8", x: []int{8, 32, 12, 12}, w: []int{16, 32, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "odd_plane_batch8", x: []int{8, 33, 13, 15}, w: []int{19, 33, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "no_pad_batch8", x: []int{8, 32, 14, 17}, w: []int{24, 32, 3, 3}},
	{name: "asym_pad_batch8", x: []int{8, 36, 13, 14}, w: []int{16, 36, 3, 3}, pads: []int{2, 0, 0, 2}, bias: true},
	{name: "rows_batch1", x: []int{1, 32, 30, 37}, w: []int{40, 32, 3, 3}, pads: []int{1, 1, 1, 1}, bias: true},
	{name: "resnet_like_batch1", x: []int{1, 64, 28, 28}, w: []int{64, 64, 3, 3}, pads: []int{1, 1, 1, 1}},
}

// wino4Mag is the first-order bound's magnitude for each output of the F(4×4) path:
// |Aᵀ| (Σ over input channels of (|G| |g| |Gᵀ|) ⊙ (|Bᵀ| |d| |B|)) |A| per 4 × 4 tile, d the
// tile's 6 × 6 zero-padded input patch, in float64. The rounding of the input transform
// (three roundings a pass, two passes), of the weights' (once), of the sums over C input
// channels and of the output transform (three a pass, two passes) keeps every output
// within (C + 13)·2⁻²⁴ of it, to first order.
func wino4Mag(x []float64, xs []int, w []float64, ws []int, pads []int) []float64 {
	bt := [6][6]float64{{4, 0, 5, 0, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 4, 4, 1, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 2, 1, 2, 1, 0}, {0, 4, 0, 5, 0, 1}}
	at := [4][6]float64{{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}}
	N, C, H, W := xs[0], xs[1], xs[2], xs[3]
	M := ws[0]
	OH, OW := H+pads[0]+pads[2]-2, W+pads[1]+pads[3]-2
	mag := make([]float64, N*M*OH*OW)
	// |G| |g| |Gᵀ| and |Bᵀ| |d| |B| for every filter and every channel's tile.
	var u, v [36]float64
	for i := range N {
		for ty := 0; 4*ty < OH; ty++ {
			for tx := 0; 4*tx < OW; tx++ {
				vs := make([][36]float64, C)
				for c := range C {
					var d [6][6]float64
					for r := range 6 {
						for q := range 6 {
							y, xx := 4*ty+r-pads[0], 4*tx+q-pads[1]
							if y >= 0 && y < H && xx >= 0 && xx < W {
								d[r][q] = math.Abs(x[((i*C+c)*H+y)*W+xx])
							}
						}
					}
					for a := range 6 {
						for b := range 6 {
							s := 0.0
							for r := range 6 {
								for q := range 6 {
									s += bt[a][r] * d[r][q] * bt[b][q]
								}
							}
							v[6*a+b] = s
						}
					}
					vs[c] = v
				}
				for m := range M {
					var p [36]float64
					for c := range C {
						g := w[(m*C+c)*9 : (m*C+c+1)*9]
						for a := range 6 {
							for b := range 6 {
								s := 0.0
								for r := range 3 {
									for q := range 3 {
										s += math.Abs(winoG4[a][r]) * math.Abs(g[3*r+q]) * math.Abs(winoG4[b][q])
									}
								}
								u[6*a+b] = s
							}
						}
						for k := range p {
							p[k] += u[k] * vs[c][k]
						}
					}
					for a := range 4 {
						for b := range 4 {
							oy, ox := 4*ty+a, 4*tx+b
							if oy >= OH || ox >= OW {
								continue
							}
							s := 0.0
							for r := range 6 {
								for q := range 6 {
									s += at[a][r] * p[6*r+q] * at[b][q]
								}
							}
							mag[((i*M+m)*OH+oy)*OW+ox] = s
						}
					}
				}
			}
		}
	}
	return mag
}

// TestConvWinograd4 runs wino4Cases, plain, with each fused activation and with a
// residual, on 1 to 3 workers, against the float64 reference convolution, within the
// first-order rounding bound of wino4Mag (times C + 16, for the bias and residual
// additions and second-order terms), and checks that the F(4×4) path ran where wino4OK
// takes the case. A negative control: F(2×2)'s transforms would meet the bound too, so
// the same outputs made with one F(4×4) product matrix dropped must break it.
func TestConvWinograd4(t *testing.T) {
	if !winoFast() {
		t.Skip("no AVX-512 or AVX2+FMA on this CPU: the Winograd path does not run")
	}
	for _, c := range wino4Cases {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/w%d", c.name, workers), func(t *testing.T) {
				r := rand.New(rand.NewPCG(23, uint64(workers)))
				n, strides, dil, pads := c.node(11)
				in := c.inputs(r)
				in[1].param = &Param{Name: "w", Value: in[1]}
				var b []float64
				if c.bias {
					b = to64(in[2].F)
				}
				want, ws := refConv(to64(in[0].F), c.x, to64(in[1].F), c.w, b, 1, strides, dil, pads)
				mag := wino4Mag(to64(in[0].F), c.x, to64(in[1].F), c.w, pads)
				k := buildKernel(t, n).(*convKernel)
				d, err := k.dims(c.x, c.w, n.Optional(in, 2))
				if err != nil {
					t.Fatal(err)
				}
				if !k.winogradOK(&d, nil) {
					t.Fatal("the Winograd path does not take this case")
				}
				f4 := k.wino4OK(&d, weightKey{p: in[1].param})
				if c.x[0] >= wino4MinBatch && !f4 {
					t.Fatal("the F(4×4) path does not take this case")
				}
				ctx := nntGoCtx(workers)
				res := nntRand(r, ws, -1, 1)
				C := float64(c.x[1])
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
						if err := k.run(ctx, in[0], in[1], n.Optional(in, 2), y, act, nil, nil, rt); err != nil {
							t.Fatal(err)
						}
						if got := len(k.direct.wu) == winoWeightsLen(&d, 4); got != f4 {
							t.Fatalf("F(4×4) transformed weights %v, wino4OK %v", got, f4)
						}
						bad := 0
						for i, v := range y.F {
							tol := (C+16)*0x1p-24*mag[i] + 2*0x1p-24*(math.Abs(exp[i])+1)
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
				if !f4 {
					return
				}
				// The control: one of the 36 transformed weight matrices zeroed.
				u := k.direct.wu
				clear(u[7*len(u)/36 : 8*len(u)/36])
				y := nntRun(t, k, ctx, in)[0]
				far := 0
				for i, v := range y.F {
					if math.Abs(float64(v)-want[i]) > (C+16)*0x1p-24*mag[i]+2*0x1p-24*(math.Abs(want[i])+1) {
						far++
					}
				}
				if far == 0 {
					t.Fatal("with a transformed weight matrix zeroed, every output still met the bound")
				}
			})
		}
	}
}
