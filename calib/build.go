package calib

import (
	"encoding/binary"
)

// maxElems bounds the element count a header may claim, so that size arithmetic cannot overflow.
const maxElems = 1 << 50

// prodDims multiplies dims, failing on zero, negative or absurd sizes.
func prodDims(dims []int) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d <= 0 || n > maxElems/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// prepSource converts images stored in a records source to HWC with the requested channels
// and size.
type prepSource struct {
	inner   source
	im      imageDims
	prep    *imgPrep
	raw     []byte
	hwc     []byte
	inBytes int
}

func (p *prepSource) read(i int, dst []byte) error {
	if p.raw == nil {
		p.raw = make([]byte, p.inBytes)
	}
	if err := p.inner.read(i, p.raw); err != nil {
		return err
	}
	img := p.raw
	if p.im.chw {
		p.hwc = growBytes(p.hwc, len(img))
		hw := p.im.h * p.im.w
		for c := range p.im.c {
			for k := range hw {
				p.hwc[k*p.im.c+c] = img[c*hw+k]
			}
		}
		img = p.hwc
	}
	p.prep.run(dst, img, p.im.h, p.im.w, p.im.c)
	return nil
}

func (p *prepSource) close() error { return p.inner.close() }

// cache reads all n samples of src into memory.
func cache(src source, n, size int) (*records, error) {
	mem := make([]byte, n*size)
	for i := range n {
		if err := src.read(i, mem[i*size:(i+1)*size]); err != nil {
			return nil, err
		}
	}
	return &records{mem: mem, stride: int64(size), size: size, n: n}, nil
}

// newImageSet builds a data set of n uint8 images stored as im in src. Images are converted
// (channels, size) when the options ask for it, and the converted images are kept in memory
// when they fit in MaxMemory.
func newImageSet(name string, n int, src source, im imageDims, labels []int64, in Input, o *Options) (*set, error) {
	prep := newImgPrep(o)
	sbytes := im.c * im.h * im.w
	if !prep.identity(im.c) {
		oc := prep.channels(im.c)
		oh, ow := prep.size(im.h, im.w)
		ps := &prepSource{inner: src, im: im, prep: prep, inBytes: sbytes}
		im = imageDims{c: oc, h: oh, w: ow}
		sbytes = oc * oh * ow
		src = ps
		if int64(n)*int64(sbytes) <= o.maxMemory() {
			rec, err := cache(ps, n, sbytes)
			ps.close()
			if err != nil {
				return nil, err
			}
			src = rec
		}
	}
	p, err := fitImage(name, im, in, o, u8)
	if err != nil {
		src.close()
		return nil, err
	}
	return &set{name: name, n: n, src: src, sbytes: sbytes, dt: u8, bo: binary.LittleEndian, labels: labels, plan: p}, nil
}

// newArraySet builds a data set of n arrays of per-sample shape dims and type dt in rec.
func newArraySet(name string, rec *records, dt dtype, bo binary.ByteOrder, dims []int, labels []int64, in Input, o *Options) (*set, error) {
	p, err := fitArray(name, dims, in, o, dt)
	if err != nil {
		rec.close()
		return nil, err
	}
	s := &set{name: name, n: rec.n, src: rec, sbytes: rec.size, dt: dt, bo: bo, labels: labels, plan: p}
	if rec.mem != nil {
		if err := s.checkFinite(rec.mem, int(rec.stride), int(rec.skip)); err != nil {
			rec.close()
			return nil, err
		}
	}
	return s, nil
}
