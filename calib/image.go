package calib

import (
	"image"
	"image/color"
	"math"
)

// imgPrep converts decoded images (HWC uint8) to the requested channels and size.
type imgPrep struct {
	color   Color
	resize  int
	stretch bool

	conv []byte // colour-converted image
	tmp  []byte // horizontally resampled image
}

func newImgPrep(o *Options) *imgPrep {
	return &imgPrep{color: o.Color, resize: o.Resize, stretch: o.Stretch}
}

// channels returns the output channels for images with cin channels.
func (p *imgPrep) channels(cin int) int {
	switch p.color {
	case Grayscale:
		return 1
	case RGB:
		return 3
	}
	return cin
}

// size returns the output size for an h×w image.
func (p *imgPrep) size(h, w int) (int, int) {
	if p.resize == 0 {
		return h, w
	}
	return p.resize, p.resize
}

// identity reports whether images with cin channels pass unchanged.
func (p *imgPrep) identity(cin int) bool {
	return p.resize == 0 && p.channels(cin) == cin
}

// run converts the h×w×cin image src to dst, laid out HWC.
func (p *imgPrep) run(dst, src []byte, h, w, cin int) {
	cout := p.channels(cin)
	img := src[:h*w*cin]
	if cout != cin {
		p.conv = growBytes(p.conv, h*w*cout)
		convertChannels(p.conv, img, cin, cout)
		img = p.conv
	}
	if p.resize == 0 {
		copy(dst, img)
		return
	}
	rh, rw := p.resize, p.resize
	if !p.stretch {
		// Shorter side to resize, the other in proportion (truncated, as torchvision does),
		// then the centre square.
		if w <= h {
			rh = p.resize * h / w
		} else {
			rw = p.resize * w / h
		}
	}
	top := int(math.RoundToEven(float64(rh-p.resize) / 2))
	left := int(math.RoundToEven(float64(rw-p.resize) / 2))
	resample(dst, img, h, w, cout, rh, rw, top, left, p.resize, p.resize, &p.tmp)
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// convertChannels converts between 1 and 3 channels. Gray from RGB uses the ITU-R BT.601 luma
// weights in the fixed-point form of PIL's convert("L").
func convertChannels(dst, src []byte, cin, cout int) {
	n := len(src) / cin
	switch {
	case cin == 1 && cout == 3:
		for i := range n {
			v := src[i]
			dst[3*i], dst[3*i+1], dst[3*i+2] = v, v, v
		}
	case cin == 3 && cout == 1:
		for i := range n {
			r, g, b := uint32(src[3*i]), uint32(src[3*i+1]), uint32(src[3*i+2])
			dst[i] = byte((19595*r + 38470*g + 7471*b + 1<<15) >> 16)
		}
	}
}

// resample resizes the h×w×c image src to rh×rw with a triangle (bilinear) filter widened by
// the scale factor when shrinking, so that every source pixel contributes (antialiasing), and
// writes the oh×ow window at (top, left) of the result to dst. It follows PIL's
// Image.resize(BILINEAR), which torchvision uses on images, to the bit: weights in 22-bit
// fixed point, the horizontal pass first, rounded to uint8, then the vertical pass.
func resample(dst, src []byte, h, w, c, rh, rw, top, left, oh, ow int, tmp *[]byte) {
	xs, xn, xw, xk := taps(w, rw, left, ow)
	ys, yn, yw, yk := taps(h, rh, top, oh)
	if cap(*tmp) < h*ow*c {
		*tmp = make([]byte, h*ow*c)
	}
	t := (*tmp)[:h*ow*c]
	for y := range h {
		row := src[y*w*c : (y+1)*w*c]
		for x := range ow {
			ws := xw[x*xk : x*xk+xn[x]]
			for ch := range c {
				acc := int64(1) << (fixBits - 1)
				for k, wt := range ws {
					acc += int64(wt) * int64(row[(xs[x]+k)*c+ch])
				}
				t[(y*ow+x)*c+ch] = clip8(acc)
			}
		}
	}
	for y := range oh {
		ws := yw[y*yk : y*yk+yn[y]]
		for i := range ow * c {
			acc := int64(1) << (fixBits - 1)
			for k, wt := range ws {
				acc += int64(wt) * int64(t[(ys[y]+k)*ow*c+i])
			}
			dst[y*ow*c+i] = clip8(acc)
		}
	}
}

// fixBits is the fixed-point precision of resampling weights, PIL's PRECISION_BITS.
const fixBits = 32 - 8 - 2

func clip8(v int64) byte {
	v >>= fixBits
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return byte(v)
}

// taps computes, for outputs off..off+n-1 of a resize from in to out samples, the first input
// index, the number of inputs and their fixed-point weights (k per output, zero-padded).
func taps(in, out, off, n int) (starts, counts []int, weights []int32, k int) {
	scale := float64(in) / float64(out)
	fscale := max(scale, 1)
	support := fscale // the triangle's radius is 1 input pixel, widened when shrinking
	k = int(math.Ceil(support))*2 + 1
	starts = make([]int, n)
	counts = make([]int, n)
	weights = make([]int32, n*k)
	wt := make([]float64, k)
	for o := range n {
		center := (float64(o+off) + 0.5) * scale
		lo := max(0, int(center-support+0.5))
		hi := min(in, int(center+support+0.5))
		cnt := min(hi-lo, k)
		var sum float64
		for j := range cnt {
			v := math.Abs((float64(j+lo) - center + 0.5) / fscale)
			if v < 1 {
				v = 1 - v
			} else {
				v = 0
			}
			wt[j] = v
			sum += v
		}
		for j := range cnt {
			if sum != 0 {
				wt[j] /= sum
			}
			if wt[j] < 0 {
				weights[o*k+j] = int32(-0.5 + wt[j]*(1<<fixBits))
			} else {
				weights[o*k+j] = int32(0.5 + wt[j]*(1<<fixBits))
			}
		}
		starts[o], counts[o] = lo, max(cnt, 0)
	}
	return starts, counts, weights, k
}

// isGrayModel reports whether images of color model m are grayscale.
func isGrayModel(m color.Model) bool {
	return m == color.GrayModel || m == color.Gray16Model
}

// pixels stores img as HWC uint8 with 1 channel for grayscale images and 3 otherwise. Alpha is
// dropped, as PIL's convert("RGB") does.
func pixels(dst []byte, img image.Image) ([]byte, int) {
	b := img.Bounds()
	h, w := b.Dy(), b.Dx()
	switch m := img.(type) {
	case *image.Gray:
		dst = growBytes(dst, h*w)
		for y := range h {
			copy(dst[y*w:(y+1)*w], m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):])
		}
		return dst, 1
	case *image.Gray16:
		dst = growBytes(dst, h*w)
		for y := range h {
			for x := range w {
				dst[y*w+x] = byte(m.Gray16At(b.Min.X+x, b.Min.Y+y).Y >> 8)
			}
		}
		return dst, 1
	case *image.YCbCr:
		dst = growBytes(dst, h*w*3)
		for y := range h {
			for x := range w {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				o := (y*w + x) * 3
				dst[o], dst[o+1], dst[o+2] = r, g, bb
			}
		}
		return dst, 3
	case *image.RGBA:
		dst = growBytes(dst, h*w*3)
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				o := (y*w + x) * 3
				if row[4*x+3] == 255 {
					dst[o], dst[o+1], dst[o+2] = row[4*x], row[4*x+1], row[4*x+2]
					continue
				}
				c := color.NRGBAModel.Convert(m.RGBAAt(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				dst[o], dst[o+1], dst[o+2] = c.R, c.G, c.B
			}
		}
		return dst, 3
	case *image.NRGBA:
		dst = growBytes(dst, h*w*3)
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				o := (y*w + x) * 3
				dst[o], dst[o+1], dst[o+2] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
		return dst, 3
	}
	if isGrayModel(img.ColorModel()) {
		dst = growBytes(dst, h*w)
		for y := range h {
			for x := range w {
				dst[y*w+x] = color.GrayModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.Gray).Y
			}
		}
		return dst, 1
	}
	dst = growBytes(dst, h*w*3)
	for y := range h {
		for x := range w {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			o := (y*w + x) * 3
			dst[o], dst[o+1], dst[o+2] = c.R, c.G, c.B
		}
	}
	return dst, 3
}
