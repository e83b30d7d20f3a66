package calib

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// dtype is the element type of stored samples.
type dtype int

const (
	u8 dtype = iota
	i8
	i16
	i32
	i64
	f32
	f64
)

var dtypeNames = [...]string{"uint8", "int8", "int16", "int32", "int64", "float32", "float64"}

func (d dtype) String() string { return dtypeNames[d] }

func (d dtype) size() int { return [...]int{1, 1, 2, 4, 8, 4, 8}[d] }

func (d dtype) isFloat() bool { return d == f32 || d == f64 }

// decode converts n elements of type d in byte order bo from b to float32.
func decode(dst []float32, b []byte, d dtype, bo binary.ByteOrder) {
	switch d {
	case u8:
		for i := range dst {
			dst[i] = float32(b[i])
		}
	case i8:
		for i := range dst {
			dst[i] = float32(int8(b[i]))
		}
	case i16:
		for i := range dst {
			dst[i] = float32(int16(bo.Uint16(b[2*i:])))
		}
	case i32:
		for i := range dst {
			dst[i] = float32(int32(bo.Uint32(b[4*i:])))
		}
	case i64:
		for i := range dst {
			dst[i] = float32(int64(bo.Uint64(b[8*i:])))
		}
	case f32:
		for i := range dst {
			dst[i] = math.Float32frombits(bo.Uint32(b[4*i:]))
		}
	case f64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(bo.Uint64(b[8*i:])))
		}
	}
}

// decodeInt converts one integer element, reporting whether it is an exact integer.
func decodeInt(b []byte, d dtype, bo binary.ByteOrder) (int64, bool) {
	switch d {
	case u8:
		return int64(b[0]), true
	case i8:
		return int64(int8(b[0])), true
	case i16:
		return int64(int16(bo.Uint16(b))), true
	case i32:
		return int64(int32(bo.Uint32(b))), true
	case i64:
		return int64(bo.Uint64(b)), true
	case f32:
		v := float64(math.Float32frombits(bo.Uint32(b)))
		return int64(v), v == math.Trunc(v) && math.Abs(v) < 1<<53
	case f64:
		v := math.Float64frombits(bo.Uint64(b))
		return int64(v), v == math.Trunc(v) && math.Abs(v) < 1<<53
	}
	return 0, false
}

// records is a sequence of fixed-size records, held in memory or read from a file.
type records struct {
	name   string      // file name for messages
	mem    []byte      // all records, when in memory
	ra     io.ReaderAt // else the file
	base   int64       // offset of record 0 in ra
	stride int64       // distance between records
	skip   int64       // offset of the wanted bytes inside a record
	size   int         // wanted bytes per record
	n      int
	closer io.Closer
}

func (r *records) read(i int, dst []byte) error {
	off := int64(i)*r.stride + r.skip
	if r.mem != nil {
		copy(dst[:r.size], r.mem[off:off+int64(r.size)])
		return nil
	}
	if _, err := r.ra.ReadAt(dst[:r.size], r.base+off); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: record %d at offset %d: %w", r.name, i, r.base+off, err)
	}
	return nil
}

func (r *records) close() error {
	if r.closer == nil {
		return nil
	}
	c := r.closer
	r.closer = nil
	return c.Close()
}

// maybeGunzip returns a reader of f's content, decompressed when f is gzipped.
func maybeGunzip(f io.Reader, name string) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(f, 1<<16)
	head, err := br.Peek(2)
	if err != nil || head[0] != 0x1f || head[1] != 0x8b {
		return br, func() {}, nil
	}
	z, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return z, func() { z.Close() }, nil
}

// loadPayload reads want bytes from r, which has already been read up to offset start of the
// file name, and which holds avail bytes from there when that is known (else avail < 0).
// Payloads up to maxMem bytes are returned in memory; larger ones are written to a
// temporary file, removed on close, so that they can be read at random. An error names the
// offset at which the data stop.
func loadPayload(r io.Reader, name string, start, want, avail, maxMem int64) (mem []byte, ra io.ReaderAt, closer io.Closer, err error) {
	if want <= maxMem && avail >= want {
		// The data are there: read them into a buffer of their size, where growing one by
		// doubling left a quarter of a gigabyte reserved for 154 MB of images (224 px),
		// which the Go runtime counts against its memory limit.
		mem = make([]byte, want)
		n, err := io.ReadFull(r, mem)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, nil, nil, fmt.Errorf("%s: truncated: the header promises %d data bytes after offset %d but the data end at offset %d", name, want, start, start+int64(n))
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: at offset %d: %w", name, start+int64(n), err)
		}
		return mem, nil, nil, nil
	}
	if want <= maxMem {
		// Grow with the data actually present rather than trusting a header's size.
		var buf bytes.Buffer
		buf.Grow(int(min(want, 1<<20)))
		n, err := io.Copy(&buf, io.LimitReader(r, want))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: at offset %d: %w", name, start+n, err)
		}
		if n < want {
			return nil, nil, nil, fmt.Errorf("%s: truncated: the header promises %d data bytes after offset %d but the data end at offset %d", name, want, start, start+n)
		}
		return buf.Bytes(), nil, nil, nil
	}
	tmp, err := os.CreateTemp("", "qtool-calib-*")
	if err != nil {
		return nil, nil, nil, &OptionError{Option: "MaxMemory", File: name, Reason: "data exceed Options.MaxMemory, and a temporary file for them failed", Err: err}
	}
	// The name is not needed once open; removing it now leaves nothing behind on a crash.
	os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(r, want))
	if err == nil && n < want {
		err = fmt.Errorf("truncated: the header promises %d data bytes after offset %d but the data end at offset %d", want, start, start+n)
	}
	if err != nil {
		tmp.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return nil, tmp, tmp, nil
}
