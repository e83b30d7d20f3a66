package engine

import "fmt"

// Winograd's F(4×4, 3×3) (Lavin and Gray 2016): each 4×4 block of output pixels is
//
//	Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
//
// over the 6×6 input patch d under it, with
//
//	Bᵀ = [4 0 −5 0 1 0; 0 −4 −4 1 1 0; 0 4 −4 −1 1 0; 0 −2 −1 2 1 0; 0 2 −1 −2 1 0; 0 4 0 −5 0 1]
//	G  = [¼ 0 0; −⅙ −⅙ −⅙; −⅙ ⅙ −⅙; 1/24 1/12 ⅙; 1/24 −1/12 ⅙; 0 0 1]
//	Aᵀ = [1 1 1 1 1 0; 0 1 −1 2 −2 0; 0 1 1 4 4 0; 0 1 −1 8 −8 1].
//
// The products take 36 multiply-adds a tile and channel pair for 16 outputs, where
// F(2×2, 3×3) takes 16 for 4 and the direct path 144: 1.78× fewer than F(2×2). The price
// is rounding: G's sixths and twenty-fourths are not exact in float32, and Bᵀ and Aᵀ
// scale values by up to 5 and 8 before they are summed, so the results are further from
// the exact sums than F(2×2)'s (TestConvWinograd4 bounds them). The input and output
// transforms below use only additions, subtractions and multiplications by 2, 4, 5 and 8,
// each rounded on its own as written (explicit conversions keep Go from fusing them), so
// that the assembly forms compute them bit for bit.

// winoG4 is G, applied to the weights in float64 and rounded once.
var winoG4 = [6][3]float64{
	{1.0 / 4, 0, 0},
	{-1.0 / 6, -1.0 / 6, -1.0 / 6},
	{-1.0 / 6, 1.0 / 6, -1.0 / 6},
	{1.0 / 24, 1.0 / 12, 1.0 / 6},
	{1.0 / 24, -1.0 / 12, 1.0 / 6},
	{0, 0, 1},
}

// winoFilter4 sets u[6i+j] to (G g Gᵀ)[i][j] of the 3×3 filter g (row-major).
func winoFilter4(u *[36]float32, g []float32) {
	var t [6][3]float64 // G·g
	for i := range 6 {
		for c := range 3 {
			t[i][c] = float64(winoG4[i][0]*float64(g[c])) + float64(winoG4[i][1]*float64(g[3+c])) + float64(winoG4[i][2]*float64(g[6+c]))
		}
	}
	for i := range 6 {
		for j := range 6 {
			u[6*i+j] = float32(float64(t[i][0]*winoG4[j][0]) + float64(t[i][1]*winoG4[j][1]) + float64(t[i][2]*winoG4[j][2]))
		}
	}
}

// winoBt6 is Bᵀ applied to six values, each operation rounded as the assembly rounds it.
func winoBt6(s0, s1, s2, s3, s4, s5 float32) (o [6]float32) {
	a := float32(s1 + s2)
	b := float32(s3 + s4)
	c := float32(s1 - s2)
	e := float32(s4 - s3)
	f := float32(s4 - s2)
	g := float32(s3 - s1)
	o[0] = float32(float32(4*s0+s4) - float32(5*s2))
	o[1] = float32(b - 4*a)
	o[2] = float32(e + 4*c)
	o[3] = float32(f + 2*g)
	o[4] = float32(f - 2*g)
	o[5] = float32(float32(4*s1+s5) - float32(5*s3))
	return o
}

// winoAt6 is Aᵀ applied to six values, each operation rounded as the assembly rounds it.
func winoAt6(m0, m1, m2, m3, m4, m5 float32) (y [4]float32) {
	a := float32(m1 + m2)
	b := float32(m1 - m2)
	c := float32(m3 + m4)
	d := float32(m3 - m4)
	y[0] = float32(float32(m0+a) + c)
	y[1] = float32(b + 2*d)
	y[2] = float32(a + 4*c)
	y[3] = float32(float32(b+8*d) + m5)
	return y
}

// wino4Planes fills the eight planes of one channel's zero-padded image that tile rows
// [t0, t0+rows) read: plane (a, b), a < 2 and b < 4, at p[(4a+b)·pp:], row y', column x
// holding the padded pixel (2(2t0+y')+a, 4x+b), for y' < 2rows+2 and x < S;
// pp ≥ (2rows+2)·S. Tile row y reads rows 2y to 2y+2 of them. It makes them from the
// quarter planes of the same pixels (winoQuarters, into q, 4·(2rows+2)·2S values), each
// the even (b < 2) or odd columns of one quarter plane from column b/2 on.
func wino4Planes(p []float32, pp, S, t0, rows int, x []float32, h, w, pt, pl int, q []float32) {
	S2 := 2 * S
	qp := (2*rows + 2) * S2
	winoQuarters(q, qp, S2, 2*t0, 2*rows+1, x, h, w, pt, pl)
	for a := range 2 {
		for b := range 4 {
			src := q[(2*a+b%2)*qp+b/2 : (2*a+b%2+1)*qp]
			s2Rows(p[(4*a+b)*pp:], S, src, S2, S, 2*rows+2)
		}
	}
}

// wino4PlaneSize is the size of one of wino4Planes' planes for rows tile rows of S columns.
func wino4PlaneSize(rows, S int) int { return (2*rows + 2) * S }

// wino4PlanesLen is the scratch wino4Planes needs: the eight planes and the quarter
// planes they come from.
func wino4PlanesLen(rows, S int) int { return 8*wino4PlaneSize(rows, S) + 4*(2*rows+2)*2*S }

// winoIn4Go is the definition of the input transform of one channel over rows rows of tw
// tiles: with p as wino4Planes leaves it (plane size pp, row length S > tw), it sets
// v[ξ·ldv + y·tw + x] to (Bᵀ d B)[i][j], ξ = 6i + j, d the 6×6 patch of tile (y, x):
// Bᵀ down each of its columns first, then along each row of the result.
func winoIn4Go(p []float32, pp, S, tw, rows int, v []float32, ldv int) {
	for y := range rows {
		for x := range tw {
			var z [6][6]float32 // Bᵀ d
			for c := range 6 {
				var d [6]float32
				for r := range 6 {
					d[r] = p[(4*(r%2)+c%4)*pp+(2*y+r/2)*S+x+c/4]
				}
				col := winoBt6(d[0], d[1], d[2], d[3], d[4], d[5])
				for i := range 6 {
					z[i][c] = col[i]
				}
			}
			o := y*tw + x
			for i := range 6 {
				row := winoBt6(z[i][0], z[i][1], z[i][2], z[i][3], z[i][4], z[i][5])
				for j := range 6 {
					v[(6*i+j)*ldv+o] = row[j]
				}
			}
		}
	}
}

// winoOut4Go is the definition of the output transform of one output channel: from its
// products m[ξ·ldm + y·tw + x] over rows rows of tw tiles, it writes output pixel
// (4y + a, 4x + b) = (Aᵀ m A)[a][b] (+ bias, + res, Relu, as flags say) to y at row
// stride ow, for the rows below ohr and the columns below ow: Aᵀ down each column of
// the 6×6 products first, then along each row of the result.
func winoOut4Go(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, bias float32, res []float32, flags int) {
	for ty := range rows {
		for tx := range tw {
			o := ty*tw + tx
			var w [4][6]float32 // Aᵀ m
			for j := range 6 {
				col := winoAt6(m[j*ldm+o], m[(6+j)*ldm+o], m[(12+j)*ldm+o], m[(18+j)*ldm+o], m[(24+j)*ldm+o], m[(30+j)*ldm+o])
				for a := range 4 {
					w[a][j] = col[a]
				}
			}
			for a := range 4 {
				oy := 4*ty + a
				if oy >= ohr {
					break
				}
				out := winoAt6(w[a][0], w[a][1], w[a][2], w[a][3], w[a][4], w[a][5])
				for b := range 4 {
					ox := 4*tx + b
					if ox >= ow {
						break
					}
					y[oy*ow+ox] = winoEpilogue(out[b], bias, res, oy*ow+ox, flags)
				}
			}
		}
	}
}

// wino4Tabs holds the byte offsets the assembly transforms read and write through, for
// the strides they were made for: each patch value's in the planes (pp, S), each
// transformed matrix's in v (ldv) and each product matrix's in m (ldm).
type wino4Tabs struct {
	pp, s, ldv, ldm int
	offs, voffs     [36]int64
	moffs           [36]int64
}

// in returns the tables for the input transform's strides, made anew when they changed.
func (t *wino4Tabs) in(pp, S, ldv int) *wino4Tabs {
	if t.pp != pp || t.s != S || t.ldv != ldv {
		t.pp, t.s, t.ldv = pp, S, ldv
		for c := range 6 {
			for r := range 6 {
				t.offs[6*c+r] = int64(4 * ((4*(r%2)+c%4)*pp + (r/2)*S + c/4))
			}
		}
		for xi := range t.voffs {
			t.voffs[xi] = int64(4 * xi * ldv)
		}
	}
	return t
}

// out returns the tables for the output transform's stride, made anew when it changed.
func (t *wino4Tabs) out(ldm int) *wino4Tabs {
	if t.ldm != ldm {
		t.ldm = ldm
		for xi := range t.moffs {
			t.moffs[xi] = int64(4 * xi * ldm)
		}
	}
	return t
}

// wino4Check panics (the executor turns that into an error naming the node) when a
// transform would reach outside its slices: the assembly works on raw pointers.
func wino4Check(p []float32, pp, S, tw, rows int, v []float32, ldv int) {
	if tw < 1 || rows < 1 || S <= tw || pp < wino4PlaneSize(rows, S) || len(p) < 8*pp || ldv < rows*tw || len(v) < 35*ldv+rows*tw {
		panic(fmt.Sprintf("winograd F(4×4) input transform out of range: %d rows of %d tiles, S %d, planes %d of %d, ld %d of %d", rows, tw, S, pp, len(p), ldv, len(v)))
	}
}

// wino4OutCheck is wino4Check for the output transform.
func wino4OutCheck(m []float32, ldm, tw, rows int, y []float32, ow, ohr int, res []float32, flags int) {
	if tw < 1 || rows < 1 || ohr < 4*rows-3 || ohr > 4*rows || ow > 4*tw || ow < 4*tw-3 ||
		ldm < rows*tw || len(m) < 35*ldm+rows*tw || len(y) < ohr*ow || (flags&winoRes != 0 && len(res) < ohr*ow) {
		panic(fmt.Sprintf("winograd F(4×4) output transform out of range: %d rows of %d tiles, ld %d of %d, output %d×%d of %d", rows, tw, ldm, len(m), ohr, ow, len(y)))
	}
}

// wino4OK reports whether forwardWinograd makes d in 4 × 4 tiles: frozen weights only,
// whose 36 transformed matrices are made once (G's float64 sums would cost every
// training step as much as the products save), where the batch has winoFewCols tiles of
// 4 × 4 or more; with AVX-512, whose products run at twice the rate of the transforms'
// 8 lanes, only from wino4MinBatch images on. BenchmarkConvWinograd4 (two workers,
// alternating, Zen 5, 2026-12-02; F(4×4) time over F(2×2)): on the AVX2 path ResNet-18's
// 64@56, 128@28, 256@14 layers 0.84, 0.94, 0.73 at batch 1 and 0.85, 0.71, 0.85 at
// batch 8, 512@7 2.2 at batch 1 (4 tiles: 9.4 MiB of transformed weights for 4 tiles)
// and 0.77 at batch 8; with AVX-512 1.05–1.10 at batch 1 and 0.95, 0.72, 0.99, 0.83 at
// batch 8.
func (k *convKernel) wino4OK(d *convDims, wk weightKey) bool {
	if k.noWino4 || wk.p == nil || !wino4Fast() {
		return false
	}
	if convTileOK() && d.N < wino4MinBatch {
		return false
	}
	oh, ow := d.g.out[1], d.g.out[2]
	return oh >= wino4MinPlane && ow >= wino4MinPlane && d.N*((oh+3)/4)*((ow+3)/4) >= winoFewCols
}

// wino4MinBatch is the smallest batch that takes 4 × 4 tiles with AVX-512; wino4MinPlane
// the smallest plane on any CPU (7 × 7, the smallest measured: its 4 tiles a plane make
// 64 outputs for 49, smaller planes waste more).
const (
	wino4MinBatch = 8
	wino4MinPlane = 7
)
