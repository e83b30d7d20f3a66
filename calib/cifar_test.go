package calib

import (
	"path/filepath"
	"slices"
	"testing"
)

func cifarValue(rec, c, y, x int) byte { return byte(rec*5 + c*3 + y*7 + x) }

// cifarBatch builds CIFAR-10 records by hand: label byte, then R, G and B planes.
func cifarBatch(first int, labels []byte) []byte {
	var b []byte
	for k, l := range labels {
		b = append(b, l)
		for c := range 3 {
			for y := range 32 {
				for x := range 32 {
					b = append(b, cifarValue(first+k, c, y, x))
				}
			}
		}
	}
	return b
}

func TestCIFAR(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "cifar/data_batch_1.bin", cifarBatch(0, []byte{6, 9, 9}), false)
	writeFile(t, dir, "cifar/data_batch_2.bin", cifarBatch(3, []byte{4, 1}), false)
	writeFile(t, dir, "cifar/test_batch.bin", cifarBatch(100, []byte{3}), false)
	folder := filepath.Join(dir, "cifar")
	for _, path := range []string{folder, filepath.Join(folder, "data_batch_*.bin")} {
		for _, mem := range []int64{0, 1} {
			d := mustOpen(t, path, Input{Shape: shape(-1, 3, 32, 32), Classes: 10}, Options{MaxMemory: mem})
			if d.Len() != 5 {
				t.Fatalf("Len %d", d.Len())
			}
			x, y := readAll(t, d)
			if !slices.Equal(y, []int64{6, 9, 9, 4, 1}) {
				t.Errorf("labels %v", y)
			}
			for i := range 5 {
				for c := range 3 {
					for yy := range 32 {
						for xx := range 32 {
							want := float32(cifarValue(i, c, yy, xx)) / 255
							if got := x[((i*3+c)*32+yy)*32+xx]; got != want {
								t.Fatalf("%s mem %d: (%d,%d,%d,%d) = %v, want %v", path, mem, i, c, yy, xx, got, want)
							}
						}
					}
				}
			}
			// Channels-last model.
			d = mustOpen(t, path, Input{Shape: shape(-1, 32, 32, 3)}, Options{MaxMemory: mem})
			x, _ = readAll(t, d)
			if got, want := x[((4*32+5)*32+6)*3+2], float32(cifarValue(4, 2, 5, 6))/255; got != want {
				t.Errorf("NHWC: got %v, want %v", got, want)
			}
		}
	}
	// A single file.
	d := mustOpen(t, filepath.Join(folder, "test_batch.bin"), Input{Shape: shape(-1, 3072)}, Options{})
	if x, y := readAll(t, d); d.Len() != 1 || y[0] != 3 || x[1] != float32(cifarValue(100, 0, 0, 1))/255 {
		t.Errorf("test_batch: %d samples, labels %v", d.Len(), y)
	}
}

func TestCIFARGrayscale(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "b.bin", cifarBatch(0, []byte{1, 2}), false)
	in := Input{Name: "img", Shape: shape(-1, 1, 32, 32)}
	_, err := openIn(p, in, Options{})
	wantErr(t, err, `"img"`, "1 channel", "have 3")
	wantFix(t, err, Setting{"Color", Grayscale})
	for _, mem := range []int64{0, 1} {
		d := mustOpen(t, p, in, Options{Color: Grayscale, NoScale: true, MaxMemory: mem})
		x, _ := readAll(t, d)
		for i := range 2 {
			for k := range 1024 {
				y, xx := k/32, k%32
				r, g, b := float64(cifarValue(i, 0, y, xx)), float64(cifarValue(i, 1, y, xx)), float64(cifarValue(i, 2, y, xx))
				luma := 0.299*r + 0.587*g + 0.114*b // ITU-R BT.601
				if d := float64(x[i*1024+k]) - luma; d > 0.5+1e-3 || d < -0.5-1e-3 {
					t.Fatalf("sample %d pixel %d: %v, want %v", i, k, x[i*1024+k], luma)
				}
			}
		}
	}
}

func TestCIFARErrors(t *testing.T) {
	dir := t.TempDir()
	b := cifarBatch(0, []byte{1, 2, 3})
	tr := writeFile(t, dir, "tr.bin", b[:len(b)-10], false)
	_, err := openIn(tr, Input{Shape: shape(-1, 3, 32, 32)}, Options{})
	wantErr(t, err, "tr.bin", "truncated", "record 2", "offset 6146")

	b[3073] = 7
	bad := writeFile(t, dir, "bad.bin", b, false)
	_, err = openIn(bad, Input{Shape: shape(-1, 3, 32, 32), Classes: 5}, Options{})
	wantErr(t, err, "bad.bin", "record 1", "offset 3073", "label 7")

	_, err = openIn(bad, Input{Shape: shape(-1, 3, 28, 28)}, Options{})
	wantErr(t, err, "28x28", "32x32")
	wantFix(t, err, Setting{"Resize", 28})
}
