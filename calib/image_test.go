package calib

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestResampleConstant(t *testing.T) {
	var tmp []byte
	for _, sz := range [][4]int{{7, 5, 3, 2}, {3, 4, 9, 10}, {28, 28, 32, 32}, {32, 32, 28, 28}, {10, 3, 1, 1}} {
		h, w, oh, ow := sz[0], sz[1], sz[2], sz[3]
		src := bytes.Repeat([]byte{77, 200}, h*w)
		dst := make([]byte, oh*ow*2)
		resample(dst, src, h, w, 2, oh, ow, 0, 0, oh, ow, &tmp)
		for i, v := range dst {
			if want := src[i%2]; v != want {
				t.Fatalf("%v: output %d = %d, want %d", sz, i, v, want)
			}
		}
	}
}

// TestResampleHalve checks a 2× reduction against the triangle filter of radius 2 written out
// by hand: interior outputs weigh inputs 2i-1..2i+2 with 1/8, 3/8, 3/8, 1/8; at the border the
// weights inside the image are renormalised.
func TestResampleHalve(t *testing.T) {
	const h, w = 8, 6
	src := make([]byte, h*w)
	for i := range src {
		src[i] = byte((i * 37) % 251)
	}
	weights := func(o, n int) map[int]float64 {
		m := map[int]float64{}
		var sum float64
		for j, wt := range []float64{1, 3, 3, 1} {
			if k := 2*o - 1 + j; k >= 0 && k < n {
				m[k] = wt
				sum += wt
			}
		}
		for k := range m {
			m[k] /= sum
		}
		return m
	}
	var tmp []byte
	dst := make([]byte, h/2*w/2)
	resample(dst, src, h, w, 1, h/2, w/2, 0, 0, h/2, w/2, &tmp)
	for oy := range h / 2 {
		for ox := range w / 2 {
			var want float64
			for y, wy := range weights(oy, h) {
				for x, wx := range weights(ox, w) {
					want += wy * wx * float64(src[y*w+x])
				}
			}
			// Two roundings to uint8 (after each pass, as PIL does) put the result within
			// one grey level of the exact value.
			if got := float64(dst[oy*w/2+ox]); math.Abs(got-want) > 1 {
				t.Errorf("output (%d,%d) = %v, want %.3f", oy, ox, got, want)
			}
		}
	}
}

// TestResizeCrop checks the geometry of --resize: shorter side to N, then the centre square;
// and of --stretch.
func TestResizeCrop(t *testing.T) {
	const h, w = 4, 12
	src := make([]byte, h*w)
	for y := range h {
		for x := range w {
			src[y*w+x] = byte(20 * x)
		}
	}
	// Shorter side 4 → 2 halves the width to 6; the centre crop keeps columns 2 and 3.
	var tmp []byte
	full := make([]byte, 2*6)
	resample(full, src, h, w, 1, 2, 6, 0, 0, 2, 6, &tmp)
	p := &imgPrep{resize: 2}
	got := make([]byte, 4)
	p.run(got, src, h, w, 1)
	if want := []byte{full[2], full[3], full[8], full[9]}; !slices.Equal(got, want) {
		t.Errorf("resize+crop = %v, want %v (from %v)", got, want, full)
	}
	p = &imgPrep{resize: 2, stretch: true}
	p.run(got, src, h, w, 1)
	st := make([]byte, 4)
	resample(st, src, h, w, 1, 2, 2, 0, 0, 2, 2, &tmp)
	if !slices.Equal(got, st) {
		t.Errorf("stretch = %v, want %v", got, st)
	}
}

func savePNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Dir(path), filepath.Base(path), b.Bytes(), false)
}

func grayImg(w, h int, f func(x, y int) byte) *image.Gray {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetGray(x, y, color.Gray{f(x, y)})
		}
	}
	return m
}

func rgbImg(w, h int, f func(x, y int) (byte, byte, byte)) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			r, g, b := f(x, y)
			m.SetNRGBA(x, y, color.NRGBA{r, g, b, 255})
		}
	}
	return m
}

func TestFolderClasses(t *testing.T) {
	dir := t.TempDir()
	// Classes sort by folder name: "a_shirt" is 0, "b_shoe" is 1.
	savePNG(t, filepath.Join(dir, "b_shoe", "1.png"), grayImg(4, 3, func(x, y int) byte { return byte(10*y + x) }))
	savePNG(t, filepath.Join(dir, "a_shirt", "x.png"), grayImg(4, 3, func(x, y int) byte { return byte(100 + 10*y + x) }))
	savePNG(t, filepath.Join(dir, "a_shirt", "y.png"), grayImg(4, 3, func(x, y int) byte { return 255 }))
	os.WriteFile(filepath.Join(dir, "a_shirt", "notes.txt"), []byte("ignored"), 0o644)
	for _, mem := range []int64{0, 1} {
		d := mustOpen(t, dir, Input{Shape: shape(-1, 1, 3, 4), Classes: 2}, Options{MaxMemory: mem, NoScale: true})
		x, y := readAll(t, d)
		if !slices.Equal(y, []int64{0, 0, 1}) || d.Len() != 3 {
			t.Fatalf("labels %v", y)
		}
		for k := range 12 {
			yy, xx := k/4, k%4
			if x[k] != float32(100+10*yy+xx) || x[12+k] != 255 || x[24+k] != float32(10*yy+xx) {
				t.Fatalf("mem %d: pixel %d: %v %v %v", mem, k, x[k], x[12+k], x[24+k])
			}
		}
	}
	_, err := openIn(dir, Input{Shape: shape(-1, 1, 3, 4), Classes: 1}, Options{})
	wantErr(t, err, "2 class folders", "1 classes", "b_shoe")
	_, err = openIn(dir, Input{Shape: shape(-1, 3, 3, 4)}, Options{})
	wantErr(t, err, "3 channel")
	wantFix(t, err, Setting{"Color", RGB})
	d := mustOpen(t, dir, Input{Shape: shape(-1, 3, 3, 4)}, Options{Color: RGB, NoScale: true})
	x, _ := readAll(t, d)
	if x[0] != 100 || x[12] != 100 || x[24] != 100 || x[12+5] != 111 {
		t.Errorf("rgb from gray: %v", x[:36])
	}
}

func TestFolderRGBAndJPEG(t *testing.T) {
	dir := t.TempDir()
	col := func(x, y int) (byte, byte, byte) { return byte(40 * x), byte(50 * y), 200 }
	savePNG(t, filepath.Join(dir, "a.png"), rgbImg(3, 2, col))
	jimg := rgbImg(3, 2, func(x, y int) (byte, byte, byte) { return 90, 90, 90 })
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, jimg, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "b.JPG", jb.Bytes(), false)
	mean, std := []float64{0.5, 0.4, 0.3}, []float64{0.2, 0.25, 0.5}
	for _, mem := range []int64{0, 1} {
		// NHWC model, normalised.
		d := mustOpen(t, dir, Input{Shape: shape(-1, 2, 3, 3)}, Options{MaxMemory: mem, Mean: mean, Std: std})
		if d.HasLabels() {
			t.Error("top-level images have labels")
		}
		x, _ := readAll(t, d)
		for yy := range 2 {
			for xx := range 3 {
				r, g, b := col(xx, yy)
				for c, v := range []byte{r, g, b} {
					want := (float32(v)/255 - float32(mean[c])) / float32(std[c])
					if got := x[(yy*3+xx)*3+c]; got != want {
						t.Fatalf("pixel (%d,%d,%d) = %v, want %v", yy, xx, c, got, want)
					}
				}
			}
		}
		// A flat grey JPEG at quality 100 decodes to 90 ± 1.
		for c := range 3 {
			v := x[18+c]*float32(std[c]) + float32(mean[c])
			if math.Abs(float64(v*255-90)) > 1.01 {
				t.Errorf("jpeg channel %d = %v", c, v*255)
			}
		}
	}
}

func TestFolderErrors(t *testing.T) {
	dir := t.TempDir()
	savePNG(t, filepath.Join(dir, "a.png"), grayImg(4, 4, func(x, y int) byte { return 1 }))
	savePNG(t, filepath.Join(dir, "b.png"), grayImg(5, 4, func(x, y int) byte { return 1 }))
	_, err := openIn(dir, Input{Shape: shape(-1, 1, 4, 4)}, Options{})
	wantErr(t, err, "b.png", "5x4")
	wantFix(t, err, Setting{"Resize", 0})
	d := mustOpen(t, dir, Input{Shape: shape(-1, 1, 4, 4)}, Options{Resize: 4})
	if d.Len() != 2 {
		t.Errorf("Len %d", d.Len())
	}
	_, err = openIn(dir, Input{Name: "in", Shape: shape(-1, 1, 28, 28)}, Options{Resize: 4})
	wantErr(t, err, `"in"`, "28x28", "4x4")
	wantFix(t, err, Setting{"Resize", 28})

	writeFile(t, dir, "c.png", []byte("\x89PNG\r\n\x1a\nnot really"), false)
	_, err = openIn(dir, Input{Shape: shape(-1, 1, 4, 4)}, Options{Resize: 4})
	wantErr(t, err, "corrupt image", "c.png", "entry 2")

	// A corrupt body behind a valid header is caught when the image is decoded.
	good, _ := os.ReadFile(filepath.Join(dir, "a.png"))
	os.Remove(filepath.Join(dir, "c.png"))
	writeFile(t, dir, "c.png", good[:len(good)-20], false)
	for _, mem := range []int64{0, 1} {
		d, err := openIn(dir, Input{Shape: shape(-1, 1, 4, 4)}, Options{Resize: 4, MaxMemory: mem})
		if err == nil {
			_, err = readAllErr(d)
			d.Close()
		}
		wantErr(t, err, "corrupt image", "c.png", "entry 2")
	}

	mixed := t.TempDir()
	savePNG(t, filepath.Join(mixed, "top.png"), grayImg(2, 2, func(x, y int) byte { return 1 }))
	savePNG(t, filepath.Join(mixed, "cls", "a.png"), grayImg(2, 2, func(x, y int) byte { return 1 }))
	_, err = openIn(mixed, Input{Shape: shape(-1, 4)}, Options{})
	wantErr(t, err, "mixes images")
}

func readAllErr(d Dataset) ([]float32, error) {
	idx := make([]int, d.Len())
	for i := range idx {
		idx[i] = i
	}
	x := make([]float32, d.Len()*SampleSize(d))
	return x, d.Read(idx, x, nil)
}
