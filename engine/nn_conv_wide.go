package engine

// Padded-width output rows for the implicit im2col (convPad). Panels that follow output
// rows leave lanes empty at every row's end: a 56-pixel row fills 56 of 64 lanes, 55 of
// 64, 27 of 32, 13 of 16. Output pixel (h, w) reads the padded image from h·pw + w on
// (pw the padded row length), so the kernel can instead run its panels straight along
// h·pw + w over the whole plane, computing pw − W pixels per row that read the padding
// and wrap into the next row, which are then left out when the rows are copied into
// the output planes: 56 of 58 lanes do useful work, 55 of 57, 27 of 29, 13 of 15.

// wide reports whether the padded-width flow takes fewer panels than one panel run per
// output row, and if so the span of positions it computes per output plane (n, the last
// one the last real pixel) and the plane size of its buffer (size, rows of pw).
func (p *convPad) wide() (ok bool, n, size int) {
	g := &p.geom.g
	H, W := g.out[1], g.out[2]
	n = (H-1)*p.w + W
	return (n+15)/16 < H*((W+15)/16), n, H * p.w
}

// wideCopy copies rows [r0, r1) of the output planes of nimg images between the
// padded-width buffer wide (mg planes per image) and y, whose planes of image j start at
// yo + j·ystride (rows of W): into wide when in, out of it otherwise.
func (p *convPad) wideCopy(wide, y []float32, nimg, mg, r0, r1, yo, ystride int, in bool) {
	g := &p.geom.g
	H, W := g.out[1], g.out[2]
	size, O := H*p.w, H*W
	for j := 0; j < nimg; j++ {
		for m := r0; m < r1; m++ {
			wp := wide[(j*mg+m)*size:]
			yp := y[yo+j*ystride+m*O:]
			for h := 0; h < H; h++ {
				if in {
					copy(wp[h*p.w:h*p.w+W], yp[h*W:h*W+W])
				} else {
					copy(yp[h*W:h*W+W], wp[h*p.w:h*p.w+W])
				}
			}
		}
	}
}
