package engine

// Packed panels for the implicit im2col (convPad). Panels that follow output rows leave
// lanes empty at every row's end: a 56-pixel row fills 56 of 64 lanes, 55 of 64, 27 of
// 32. Output pixel (h, w) reads the padded image from h·pw + w on (pw the padded row
// length), so panels can instead run straight along positions h·pw + w, the pw − W
// positions at each row's end (which read the padding and wrap into the next row)
// masked off; with tilePack the kernel stores a panel's valid lanes one after the
// other, and the output plane has them one after the other too, across the row end.
// Only the AVX-512 kernel packs (VCOMPRESSPS). An earlier form that computed those
// positions into a buffer and copied the rows out gained nothing: the copy cost what
// the lanes saved.

// packedPanels is the number of panels of one plane along padded rows.
func (p *convPad) packedPanels() int {
	g := &p.geom.g
	return ((g.out[1]-1)*p.w + g.out[2] + 15) / 16
}

// panelsPacked appends the panels of one output plane along padded rows, reading the
// padded image from po and writing the plane from yo.
func (p *convPad) panelsPacked(dst []convPanel, po, yo int) []convPanel {
	g := &p.geom.g
	W := g.out[2]
	n := (g.out[1]-1)*p.w + W
	for s := 0; s < n; s += 16 {
		var m uint64
		for j := 0; j < 16 && s+j < n; j++ {
			if (s+j)%p.w < W {
				m |= 1 << j
			}
		}
		// The plane index of the first valid lane: a position past a row's end
		// counts as the next row's first pixel.
		dst = append(dst, convPanel{b: po + s, c: yo + s/p.w*W + min(s%p.w, W), m: m})
	}
	return dst
}
