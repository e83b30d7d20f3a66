package engine

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConvTilePacked checks the tilePack contract: the portable kernel with tilePack
// gives, at c[R·ldc + rank(j)], bit for bit what it gives at c[R·ldc + j] without (the
// contract TestConvTile checks against float64 sums), touching nothing past the packed
// lanes; and the AVX-512 kernel with tilePack matches the portable one bit for bit (the
// same FMAs in the same order), over gapped masks, offset tables, the add flag, bias,
// activations and one to three row blocks.
func TestConvTilePacked(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	masks := []uint64{0xffff, 0xfff3, 0x3fff, 0x8001, 0xcfff, 0x0ff0, 0}
	acts := []*nnClamp{nil, {relu: true}, {lo: -0.5, hi: 0.5}, {swish: true, a: 1.0 / 6, b: 0.5}}
	if !convTileOK() {
		t.Log("no AVX-512: checking the portable kernel's packed contract only")
	}
	for trial := 0; trial < 400; trial++ {
		k := []int{0, 1, 3, 9, 31, 144}[trial%6]
		ldb, ldc := 16+r.IntN(40), 16+r.IntN(40)
		m0, m1 := masks[r.IntN(len(masks))], masks[r.IntN(len(masks))]
		flags := r.IntN(2) * tileAdd
		var tact *tileAct
		if act := acts[r.IntN(len(acts))]; act != nil {
			ta, _ := dw3x3Flags(act)
			tact = &ta
		}
		nrb := 1 + r.IntN(3)
		rnd := func(n int) []float32 {
			s := make([]float32, n)
			for i := range s {
				s[i] = r.Float32()*2 - 1
			}
			return s
		}
		a, b0, b1 := rnd(8*k*nrb+1), rnd(max(k, 1)*ldb), rnd(max(k, 1)*ldb)
		var bias []float32
		if trial%3 != 0 {
			bias = rnd(8 * nrb)
		}
		var offs *tileOffs
		if trial%2 == 1 {
			offs = randTileOffs(r, k, len(b0))
		}
		// The packed C holds, for every row, the unpacked C's lanes of the mask in order.
		c0, c1 := rnd(8*nrb*ldc), rnd(8*nrb*ldc)
		p0, p1 := packLanes(c0, m0, ldc), packLanes(c1, m1, ldc)
		want0, want1 := slices.Clone(p0), slices.Clone(p1)
		convTileGeneric(k, a, b0, b1, ldb, c0, c1, ldc, bias, m0, m1, flags, nrb, offs, tact)
		convTileGeneric(k, a, b0, b1, ldb, want0, want1, ldc, bias, m0, m1, flags|tilePack, nrb, offs, tact)
		for _, q := range [][2][]float32{{packOnto(p0, c0, m0, ldc), want0}, {packOnto(p1, c1, m1, ldc), want1}} {
			if !sameBitsSlice(q[0], q[1]) {
				t.Fatalf("trial %d (k=%d masks %#x %#x flags %d): portable packed result differs from the unpacked one", trial, k, m0, m1, flags)
			}
		}
		if !convTileOK() {
			continue
		}
		got0, got1 := slices.Clone(p0), slices.Clone(p1)
		convTile(k, a, b0, b1, ldb, got0, got1, ldc, bias, m0, m1, flags|tilePack, nrb, offs, tact)
		if !sameBitsSlice(got0, want0) || !sameBitsSlice(got1, want1) {
			t.Fatalf("trial %d (k=%d masks %#x %#x flags %d nrb %d): AVX-512 packed tile differs from the portable one", trial, k, m0, m1, flags, nrb)
		}
	}
}

// packLanes returns a copy of c in which each row (ldc apart) holds, from its start, the
// row's lanes of mask m in order, the rest of the row unchanged.
func packLanes(c []float32, m uint64, ldc int) []float32 { return packOnto(c, c, m, ldc) }

// packOnto returns a copy of base in which each row (ldc apart) holds, from its start,
// the lanes of mask m of c's row in order.
func packOnto(base, c []float32, m uint64, ldc int) []float32 {
	p := slices.Clone(base)
	for r := 0; r+16 <= len(c); r += ldc {
		n := 0
		for j := 0; j < 16; j++ {
			if m&(1<<j) != 0 {
				p[r+n] = c[r+j]
				n++
			}
		}
	}
	return p
}

func sameBitsSlice(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestConvPanelsPacked checks the panels along padded rows against a lane-by-lane walk:
// every output pixel in exactly one lane, at the plane index its panel's lane rank says,
// reading the padded image at h·pw + w; and that the layers of ResNet-18 and SqueezeNet
// with rows of 27, 28, 55 and 56 pixels take fewer panels that way (the direct path then
// packs them on AVX-512 CPUs, which TestConvDirectMatchesGemm's wide_rows cases cover).
func TestConvPanelsPacked(t *testing.T) {
	for _, c := range []struct {
		hw, k, p int
		fewer    bool
	}{{56, 3, 1, true}, {55, 3, 1, true}, {28, 3, 1, true}, {27, 3, 1, true}, {14, 3, 1, false}, {13, 3, 1, false}, {16, 3, 1, false}, {20, 5, 2, true}} {
		g := nnGeom{nd: 2, k: [nnMaxSpatial]int{1, c.k, c.k}, s: [nnMaxSpatial]int{1, 1, 1}, d: [nnMaxSpatial]int{1, 1, 1},
			in: [nnMaxSpatial]int{1, c.hw, c.hw}, out: [nnMaxSpatial]int{1, c.hw + 2*c.p - c.k + 1, c.hw + 2*c.p - c.k + 1}}
		g.pb[1], g.pb[2], g.pe[1], g.pe[2] = c.p, c.p, c.p, c.p
		var pad convPad
		pad.setup(&g, 1)
		H, W := g.out[1], g.out[2]
		if fewer := pad.packedPanels() < H*((W+15)/16); fewer != c.fewer {
			t.Errorf("%d×%d: packed panels %d, row panels %d", H, W, pad.packedPanels(), H*((W+15)/16))
		}
		const po, yo = 7, 11
		pan := pad.panelsPacked(nil, po, yo)
		if len(pan) != pad.packedPanels() {
			t.Fatalf("%d×%d: %d panels, packedPanels says %d", H, W, len(pan), pad.packedPanels())
		}
		seen := make([]bool, H*W)
		for _, q := range pan {
			n := 0
			for j := 0; j < 16; j++ {
				if q.m&(1<<j) == 0 {
					continue
				}
				pos := q.b - po + j
				h, w := pos/pad.w, pos%pad.w
				if w >= W || h >= H {
					t.Fatalf("%d×%d: lane %d of panel at %d is position (%d, %d), not a pixel", H, W, j, q.b, h, w)
				}
				if y := q.c - yo + n; y != h*W+w || seen[y] {
					t.Fatalf("%d×%d: pixel (%d, %d) at plane index %d (seen before: %v)", H, W, h, w, y, y < len(seen) && seen[y])
				}
				seen[h*W+w] = true
				n++
			}
			if n != bits.OnesCount64(q.m) {
				t.Fatal("lane count")
			}
		}
		for i, ok := range seen {
			if !ok {
				t.Fatalf("%d×%d: pixel %d in no panel", H, W, i)
			}
		}
	}
}

// randTileOffs returns an offset table of k rows anywhere in a B of n values, each row
// leaving room for 16 lanes.
func randTileOffs(r *rand.Rand, k, n int) *tileOffs {
	offs := &tileOffs{off: make([]int64, k)}
	for i := range offs.off {
		offs.off[i] = 4 * int64(r.IntN(n-15))
		offs.max = max(offs.max, offs.off[i])
	}
	return offs
}
