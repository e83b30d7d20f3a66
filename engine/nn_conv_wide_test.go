package engine

import "testing"

// TestConvPadWide checks which geometries run as padded-width rows, so that the cases of
// TestConvDirectMatchesGemm, TestConvResidual and TestConvFusedPool named for them (and
// the 28×28 fused-pool case) do take that path, and the span it computes.
func TestConvPadWide(t *testing.T) {
	for _, c := range []struct {
		h, w, k, p int
		ok         bool
		n, size    int
	}{
		{27, 27, 3, 1, true, 26*29 + 27, 27 * 29},
		{28, 28, 3, 1, true, 27*30 + 28, 28 * 30},
		{56, 56, 3, 1, true, 55*58 + 56, 56 * 58},
		{55, 55, 3, 1, true, 54*57 + 55, 55 * 57},
		// 14 and 13 outputs per row fill one panel per row either way: no gain.
		{14, 14, 3, 1, false, 13*16 + 14, 14 * 16},
		{13, 13, 3, 1, false, 12*15 + 13, 13 * 15},
		// A 16-output row fills its panel exactly.
		{16, 16, 3, 1, false, 15*18 + 16, 16 * 18},
	} {
		g := nnGeom{nd: 2, k: [nnMaxSpatial]int{1, c.k, c.k}, s: [nnMaxSpatial]int{1, 1, 1}, d: [nnMaxSpatial]int{1, 1, 1},
			in: [nnMaxSpatial]int{1, c.h, c.w}, out: [nnMaxSpatial]int{1, c.h + 2*c.p - c.k + 1, c.w + 2*c.p - c.k + 1}}
		g.pb[1], g.pb[2], g.pe[1], g.pe[2] = c.p, c.p, c.p, c.p
		var p convPad
		p.setup(&g, 2)
		ok, n, size := p.wide()
		if ok != c.ok || n != c.n || size != c.size {
			t.Errorf("%d×%d, %d×%d kernel: wide() = %v, %d, %d; want %v, %d, %d", c.h, c.w, c.k, c.k, ok, n, size, c.ok, c.n, c.size)
		}
	}
}
