package main

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/train"
)

// writeOutputs runs m over d in inference mode and writes every float32 output to path as
// an .npz archive: one array per output, named after it, the batches concatenated along
// each output's batch axis. The npy headers are written here because npyio's writer only knows 1-D
// slices and 2-D matrices; the files are plain NumPy v1.0 arrays (np.load reads them).
func writeOutputs(ctx context.Context, m *loaded, d calib.Dataset, batchSize int, be backend, path string) error {
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: batchSize})
	if err != nil {
		return err
	}
	outs := m.Graph.Outputs()
	// Each output's batches, concatenated at the end along the output's own batch axis
	// (a recurrent state [layers, N, H] has it on axis 1).
	parts := make([][]*engine.Tensor, len(outs))
	axes := make([]int, len(outs))
	run := &engine.Context{BLAS: be.BLAS, Workers: be.Workers, NoGrad: true}
	// Through a Feed: every input of the model is given, and a fixed-batch model runs in
	// chunks of its declared batch.
	var f train.Feed
	for b.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f.Load(m.Graph, b); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		ys, err := f.Forward(m.Graph, run)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
		for i, y := range ys {
			if y.DType != engine.Float32 {
				continue
			}
			a := f.OutAxes[i]
			if a < 0 {
				return fmt.Errorf("%s: output %s has no batch axis of size %d: --outputs concatenates outputs along their batch axis", m.Path, outs[i].Name, f.N)
			}
			if parts[i] != nil {
				p := parts[i][0]
				if a != axes[i] || len(y.Shape) != len(p.Shape) || !slices.Equal(y.Shape[:a], p.Shape[:a]) || !slices.Equal(y.Shape[a+1:], p.Shape[a+1:]) {
					return fmt.Errorf("%s: output %s has shape %v after %v: its batches cannot be concatenated", m.Path, outs[i].Name, y.Shape, p.Shape)
				}
			}
			axes[i] = a
			parts[i] = append(parts[i], &engine.Tensor{DType: engine.Float32, Shape: append([]int(nil), y.Shape...), F: append([]float32(nil), y.F...)})
		}
	}
	if err := b.Err(); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		z := zip.NewWriter(w)
		for i, o := range outs {
			if parts[i] == nil {
				continue
			}
			shape, vals := concatAlong(parts[i], axes[i])
			f, err := z.Create(o.Name + ".npy")
			if err != nil {
				return err
			}
			if err := writeNpy(f, shape, vals); err != nil {
				return err
			}
		}
		return z.Close()
	})
}

// concatAlong concatenates ts, equal in shape but along axis a, along a.
func concatAlong(ts []*engine.Tensor, a int) ([]int, []float32) {
	shape := append([]int(nil), ts[0].Shape...)
	shape[a] = 0
	for _, t := range ts {
		shape[a] += t.Shape[a]
	}
	outer := 1
	for _, d := range shape[:a] {
		outer *= d
	}
	vals := make([]float32, 0, outer*len(ts)*len(ts[0].F)/max(outer, 1))
	for o := 0; o < outer; o++ {
		for _, t := range ts {
			slab := len(t.F) / max(outer, 1)
			vals = append(vals, t.F[o*slab:(o+1)*slab]...)
		}
	}
	return shape, vals
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
