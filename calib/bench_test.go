package calib

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// fashionSized writes idx files of Fashion-MNIST's training size (60000 28×28 images) and
// returns the images file.
func fashionSized(b *testing.B) string {
	const n = 60000
	dir := b.TempDir()
	px := make([]byte, n*784)
	for i := range px {
		px[i] = byte(i * 2654435761 >> 24)
	}
	lb := make([]byte, n)
	for i := range lb {
		lb[i] = byte(i % 10)
	}
	p := writeFile(b, dir, "train-images-idx3-ubyte", idxBytes(0x08, []int{n, 28, 28}, px), false)
	writeFile(b, dir, "train-labels-idx1-ubyte", idxBytes(0x08, []int{n}, lb), false)
	return p
}

func benchBatches(b *testing.B, d Dataset, size int) {
	it, err := NewBatches(d, BatchOptions{Size: size, Shuffle: true, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	samples := 0
	for b.Loop() {
		if !it.Next() {
			it.Reset()
			it.Next()
		}
		samples += it.Len()
	}
	if err := it.Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkBatchesIdx iterates shuffled batches of 256 over Fashion-MNIST-sized idx data held
// in memory and streamed from disk.
func BenchmarkBatchesIdx(b *testing.B) {
	p := fashionSized(b)
	for _, c := range []struct {
		name string
		mem  int64
	}{{"memory", 0}, {"stream", 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			d := mustOpen(b, p, Input{Shape: shape(-1, 1, 28, 28), Classes: 10}, Options{MaxMemory: c.mem})
			benchBatches(b, d, 256)
		})
	}
}

// BenchmarkBatchesNpy does the same with float32 .npy data ([60000,1,28,28], 188 MB).
func BenchmarkBatchesNpy(b *testing.B) {
	const n = 60000
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	hdr := "{'descr': '<f4', 'fortran_order': False, 'shape': (60000, 1, 28, 28), }"
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(hdr))))
	buf.WriteString(hdr)
	for i := range n * 784 {
		buf.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(i%255)/255)))
	}
	p := writeFile(b, b.TempDir(), "x.npy", buf.Bytes(), false)
	for _, c := range []struct {
		name string
		mem  int64
	}{{"memory", 0}, {"stream", 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			d := mustOpen(b, p, Input{Shape: shape(-1, 784)}, Options{MaxMemory: c.mem})
			benchBatches(b, d, 256)
		})
	}
}
