package main

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/atomicfile"
)

// writeOutputs runs m over d in inference mode and writes every float32 output to path as
// an .npz archive: one array per output, named after it, the batches concatenated along
// the first axis. The npy headers are written here because npyio's writer only knows 1-D
// slices and 2-D matrices; the files are plain NumPy v1.0 arrays (np.load reads them).
func writeOutputs(ctx context.Context, m *loaded, d calib.Dataset, batchSize int, be backend, path string) error {
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: batchSize})
	if err != nil {
		return err
	}
	outs := m.Graph.Outputs()
	vals := make([][]float32, len(outs))
	shapes := make([][]int, len(outs))
	run := &engine.Context{BLAS: be.BLAS, Workers: be.Workers, NoGrad: true}
	for b.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		shape := make([]int, len(b.Shape()))
		for i, v := range b.Shape() {
			shape[i] = int(v)
		}
		ys, err := m.Graph.Forward(run, engine.NewFloat(shape, b.X()))
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		for i, y := range ys {
			if y.DType != engine.Float32 {
				continue
			}
			if shapes[i] == nil {
				shapes[i] = append([]int(nil), y.Shape...)
				if len(shapes[i]) == 0 {
					return fmt.Errorf("%s: output %s is a scalar: --outputs concatenates outputs along their batch axis", m.Path, outs[i].Name)
				}
			} else {
				if len(y.Shape) != len(shapes[i]) || !equalInts(y.Shape[1:], shapes[i][1:]) {
					return fmt.Errorf("%s: output %s has shape %v after %v: its batches cannot be concatenated", m.Path, outs[i].Name, y.Shape, shapes[i])
				}
				shapes[i][0] += y.Shape[0]
			}
			vals[i] = append(vals[i], y.F...)
		}
	}
	if err := b.Err(); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		z := zip.NewWriter(w)
		for i, o := range outs {
			if shapes[i] == nil {
				continue
			}
			f, err := z.Create(o.Name + ".npy")
			if err != nil {
				return err
			}
			if err := writeNpy(f, shapes[i], vals[i]); err != nil {
				return err
			}
		}
		return z.Close()
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// writeNpy writes a little-endian float32 C-order array in NumPy's format v1.0.
func writeNpy(w io.Writer, shape []int, v []float32) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", tuple)
	// The magic (6), version (2) and length (2) plus the header and its newline are padded
	// to a multiple of 64 bytes, as NumPy writes them.
	pad := 64 - (10+len(hdr)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr += strings.Repeat(" ", pad) + "\n"
	buf := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	buf = append(buf, hdr...)
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	if _, err := w.Write(buf); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}
