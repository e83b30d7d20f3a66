package calib

import (
	"bytes"
	"image"
	"image/color"
	"image/color/palette"
	"image/jpeg"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npy"
)

// TestDetect opens every format under names that do not say what it is.
func TestDetect(t *testing.T) {
	dir := t.TempDir()
	var nb bytes.Buffer
	npy.Write(&nb, []float32{1, 2})
	files := map[string][]byte{
		"npy-data":  nb.Bytes(),
		"idx-data":  idxBytes(0x08, []int{2, 1}, []byte{1, 2}),
		"csv-data":  []byte("1\n2\n"),
		"cifar.bin": cifarBatch(0, []byte{1, 2}),
	}
	for name, b := range files {
		p := writeFile(t, dir, name, b, false)
		in := Input{Shape: shape(-1, 1)}
		if name == "cifar.bin" {
			in.Shape = shape(-1, 3, 32, 32)
		}
		d := mustOpen(t, p, in, Options{NoScale: true})
		if d.Len() != 2 {
			t.Errorf("%s: %d samples", name, d.Len())
		}
	}
	g := writeFile(t, dir, "blob.gz", files["idx-data"], true)
	if d := mustOpen(t, g, Input{Shape: shape(-1, 1)}, Options{}); d.Len() != 2 {
		t.Errorf("gzipped idx without a telling name: %d samples", d.Len())
	}
	bin := writeFile(t, dir, "blob", []byte{0xff, 0xfe, 0, 1, 2}, false)
	_, err := openIn(bin, Input{Shape: shape(-1, 1)}, Options{})
	wantErr(t, err, "blob", "unknown format")
	_, err = openIn(filepath.Join(dir, "missing.npy"), Input{Shape: shape(-1, 1)}, Options{})
	wantErr(t, err, "missing.npy")
	_, err = openIn(filepath.Join(dir, "nothing_*.bin"), Input{Shape: shape(-1, 1)}, Options{})
	wantErr(t, err, "no file matches")
}

func TestNpyIntegerDtypes(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]any{
		"i8":  []int8{-3, 4},
		"i16": []int16{-300, 4},
		"i32": []int32{-70000, 4},
		"f64": []float64{-1e300 * 0, 4},
	} {
		p := writeNpy(t, dir, name+".npy", v)
		d := mustOpen(t, p, Input{Shape: shape(-1)}, Options{})
		x, _ := readAll(t, d)
		want := map[string]float32{"i8": -3, "i16": -300, "i32": -70000, "f64": 0}[name]
		if !slices.Equal(x, []float32{want, 4}) {
			t.Errorf("%s: %v", name, x)
		}
	}
}

// TestPixels decodes the image types the standard decoders produce into HWC bytes.
func TestPixels(t *testing.T) {
	r := image.Rect(1, 2, 4, 4) // a non-zero origin, as sub-images have
	g16 := image.NewGray16(r)
	pal := image.NewPaletted(r, palette.Plan9)
	rgba := image.NewRGBA(r)
	n64 := image.NewNRGBA64(r)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			v := uint8(40*x + 7*y)
			g16.SetGray16(x, y, color.Gray16{uint16(v)<<8 | 0x7f})
			pal.Set(x, y, color.RGBA{v, 0, 255 - v, 255})
			rgba.SetRGBA(x, y, color.RGBA{v / 2, v / 2, v / 2, 128}) // premultiplied: NRGBA (v, v, v) with alpha
			n64.SetNRGBA64(x, y, color.NRGBA64{uint16(v) << 8, 0, 0, 0xffff})
		}
	}
	px, c := pixels(nil, g16)
	if c != 1 || px[0] != 40+14 || px[5] != 120+21 {
		t.Errorf("gray16: %d channels, %v", c, px)
	}
	px, c = pixels(nil, pal)
	if pc := pal.Palette[pal.ColorIndexAt(1, 3)].(color.RGBA); c != 3 || px[9] != pc.R || px[11] != pc.B {
		t.Errorf("paletted: %d channels, %v, want %v", c, px[9:12], pc)
	}
	px, c = pixels(nil, rgba)
	if want := color.NRGBAModel.Convert(rgba.At(3, 3)).(color.NRGBA); c != 3 || px[15] != want.R || px[16] != want.G {
		t.Errorf("rgba with alpha: %v, want %v", px[15:18], want)
	}
	px, c = pixels(nil, n64)
	if c != 3 || px[3] != 80+14 || px[4] != 0 {
		t.Errorf("nrgba64: %d channels, %v", c, px)
	}
	// A grayscale JPEG decodes to one channel.
	var b bytes.Buffer
	gray := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range gray.Pix {
		gray.Pix[i] = 100
	}
	jpeg.Encode(&b, gray, &jpeg.Options{Quality: 100})
	img, err := jpeg.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	px, c = pixels(nil, img)
	if c != 1 || px[0] < 99 || px[0] > 101 {
		t.Errorf("gray jpeg: %d channels, %v", c, px[0])
	}
}
