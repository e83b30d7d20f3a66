package calib

import (
	"bytes"
	"math"
	"os"
	"testing"

	"github.com/sbinet/npyio/npy"
)

// fuzzRead reads a data set that opened without error, checking that what it returns is
// sane; read errors are fine, panics are not.
func fuzzRead(t *testing.T, d Dataset) {
	if d.Len() <= 0 {
		t.Fatalf("opened a data set of %d samples", d.Len())
	}
	size := SampleSize(d)
	if size <= 0 {
		t.Fatalf("sample shape %v", d.SampleShape())
	}
	idx := []int{0, d.Len() - 1}
	if d.Len()*size <= 1<<16 {
		idx = idx[:0]
		for i := range d.Len() {
			idx = append(idx, i)
		}
	}
	x := make([]float32, len(idx)*size)
	y := make([]int64, len(idx))
	if err := d.Read(idx, x, y); err != nil {
		return
	}
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("read a non-finite value %v without error", v)
		}
	}
	if d.HasLabels() {
		for _, l := range y {
			if l < 0 || l >= 10 {
				t.Fatalf("label %d passed the check for 10 classes", l)
			}
		}
	}
	b, err := NewBatches(d, BatchOptions{Size: 3, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.Next()
}

func fuzzOptions(flags byte) Options {
	o := Options{NoScale: flags&2 != 0}
	if flags&1 != 0 {
		o.MaxMemory = 64 // stream from disk
	}
	return o
}

func FuzzIdx(f *testing.F) {
	f.Add(idxBytes(0x08, []int{3, 2, 2}, idxPixels(3, 2, 2)), idxBytes(0x08, []int{3}, []byte{1, 2, 9}), byte(0))
	f.Add(idxBytes(0x08, []int{3, 2, 2}, idxPixels(3, 2, 2)), []byte(nil), byte(1))
	f.Add(idxBytes(0x0D, []int{2, 3}, []byte{0x3f, 0x80, 0, 0, 0x7f, 0xc0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), idxBytes(0x0C, []int{2}, []byte{0, 0, 0, 1, 0, 0, 0, 11}), byte(4))
	f.Add(idxBytes(0x08, []int{2, 2, 2, 3}, idxPixels(2, 2, 6)), idxBytes(0x08, []int{2}, []byte{1, 2}), byte(5))
	f.Add(idxBytes(0x0E, []int{1, 1}, make([]byte, 8)), []byte{0, 0, 8, 1, 0, 0, 0, 1}, byte(6))
	f.Fuzz(func(t *testing.T, images, labels []byte, flags byte) {
		dir := t.TempDir()
		gz := flags&4 != 0
		ext := ""
		if gz {
			ext = ".gz"
		}
		p := writeFile(t, dir, "f-images-idx3-ubyte"+ext, images, gz)
		if len(labels) > 0 {
			writeFile(t, dir, "f-labels-idx1-ubyte"+ext, labels, flags&8 != 0)
		}
		o := fuzzOptions(flags)
		d, err := openIdx(p, Input{Shape: shape(-1, -1), Classes: 10}, &o)
		if err != nil {
			return
		}
		defer d.Close()
		fuzzRead(t, d)
	})
}

func FuzzNpy(f *testing.F) {
	add := func(x, y any, flags byte) {
		var bx, by bytes.Buffer
		if err := npy.Write(&bx, x); err != nil {
			f.Fatal(err)
		}
		if y != nil {
			if err := npy.Write(&by, y); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(bx.Bytes(), by.Bytes(), flags)
	}
	add(toArrays([][]float32{{1, 2}, {3, 4}}), []int64{0, 9}, 0)
	add(toArrays([][]float64{{1, 2}, {3, 4}, {5, 6}}), []int32{0, 1, 2}, 1)
	add(toArrays([][][]uint8{{{1, 2}}, {{3, 4}}}), []uint8{3, 4}, 2)
	add(toArrays([][]int64{{1}, {2}}), nil, 3)
	add([]float32{1, 2, 3}, []float64{1, 2, 3}, 0)
	f.Add([]byte("\x93NUMPY\x01\x00\x46\x00{'descr': '>f4', 'fortran_order': False, 'shape': (2, 1), }          \n\x3f\x80\x00\x00\x7f\xc0\x00\x00"), []byte(nil), byte(0))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr':'<f4'}\n"), []byte(nil), byte(0))
	// Files written by NumPy itself: big-endian, Fortran order, format version 2.
	for _, name := range []string{"x_be", "x_fortran", "x_v2", "x_f8"} {
		x, err := os.ReadFile("testdata/numpy/" + name + ".npy")
		if err != nil {
			f.Fatal(err)
		}
		y, err := os.ReadFile("testdata/numpy/y_i4.npy")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(x, y, byte(0))
	}
	f.Fuzz(func(t *testing.T, x, y []byte, flags byte) {
		dir := t.TempDir()
		p := writeFile(t, dir, "x.npy", x, false)
		o := fuzzOptions(flags)
		if len(y) > 0 {
			o.Labels = writeFile(t, dir, "y.npy", y, false)
		}
		d, err := openNpy(p, Input{Shape: shape(-1, -1), Classes: 10}, &o)
		if err != nil {
			return
		}
		defer d.Close()
		fuzzRead(t, d)
	})
}
