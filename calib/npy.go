package calib

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sbinet/npyio/npz"
)

// npyHeader is the parsed header of a .npy stream.
type npyHeader struct {
	dt      dtype
	bo      binary.ByteOrder
	dims    []int
	fortran bool
	descr   string
	length  int64 // header bytes, including magic and padding
}

// maxNpyHeader bounds the header length; NumPy writes a few hundred bytes at most.
const maxNpyHeader = 1 << 20

// readNpyHeader parses a .npy header. npyio's header parser slices without bounds checks and
// panics on malformed headers (found by fuzzing), so calib parses the header itself and uses
// npyio for the .npz container.
func readNpyHeader(r io.Reader, name string) (npyHeader, error) {
	var h npyHeader
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return h, fmt.Errorf("%s: truncated .npy header at offset 0: %w", name, err)
	}
	if !bytes.Equal(pre[:6], npyMagic) {
		return h, fmt.Errorf("%s: not a .npy file: bad magic % x at offset 0", name, pre[:6])
	}
	var hl int64
	switch pre[6] {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return h, fmt.Errorf("%s: truncated .npy header at offset 8: %w", name, err)
		}
		hl = int64(binary.LittleEndian.Uint16(pre[8:10]))
		h.length = 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return h, fmt.Errorf("%s: truncated .npy header at offset 8: %w", name, err)
		}
		hl = int64(binary.LittleEndian.Uint32(b[:]))
		h.length = 12
	default:
		return h, fmt.Errorf("%s: unsupported .npy format version %d.%d", name, pre[6], pre[7])
	}
	if hl > maxNpyHeader {
		return h, fmt.Errorf("%s: .npy header length %d at offset 8 is implausible", name, hl)
	}
	buf := make([]byte, hl)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, fmt.Errorf("%s: truncated .npy header: %d header bytes promised after offset %d: %w", name, hl, h.length, err)
	}
	h.length += hl
	d, err := parsePyDict(string(buf))
	if err != nil {
		return h, fmt.Errorf("%s: .npy header %q: %w", name, strings.TrimSpace(string(buf)), err)
	}
	descr, ok1 := d["descr"].(string)
	fortran, ok2 := d["fortran_order"].(bool)
	shape, ok3 := d["shape"].([]int)
	if !ok1 || !ok2 || !ok3 {
		return h, fmt.Errorf("%s: .npy header %q lacks descr, fortran_order or shape", name, strings.TrimSpace(string(buf)))
	}
	h.descr, h.fortran, h.dims = descr, fortran, shape
	h.dt, h.bo, err = npyDtype(descr)
	if err != nil {
		return h, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

func npyDtype(descr string) (dtype, binary.ByteOrder, error) {
	bo := binary.ByteOrder(binary.LittleEndian)
	t := descr
	if t != "" && strings.ContainsRune("<>|=", rune(t[0])) {
		if t[0] == '>' {
			bo = binary.BigEndian
		}
		t = t[1:]
	}
	dt, ok := map[string]dtype{"u1": u8, "i1": i8, "i2": i16, "i4": i32, "i8": i64, "f4": f32, "f8": f64}[t]
	if !ok {
		return 0, nil, fmt.Errorf("unsupported dtype %q: use float32, float64, uint8 or int64 (x.astype(np.float32))", descr)
	}
	return dt, bo, nil
}

// parsePyDict parses the Python dict literal of a .npy header: string keys; values that are
// strings, True/False or tuples of integers.
func parsePyDict(s string) (map[string]any, error) {
	p := &pyParser{s: s}
	p.space()
	if !p.eat('{') {
		return nil, errors.New("header is not a dict")
	}
	d := map[string]any{}
	for {
		p.space()
		if p.eat('}') {
			return d, nil
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if !p.eat(':') {
			return nil, fmt.Errorf("missing ':' after key %q", k)
		}
		p.space()
		v, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		d[k] = v
		p.space()
		if !p.eat(',') {
			p.space()
			if !p.eat('}') {
				return nil, errors.New("missing ',' or '}'")
			}
			return d, nil
		}
	}
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("expected a string at byte %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *pyParser) value() (any, error) {
	switch {
	case p.i >= len(p.s):
		return nil, errors.New("missing value")
	case p.s[p.i] == '\'' || p.s[p.i] == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	case p.s[p.i] == '(':
		p.i++
		var dims []int
		for {
			p.space()
			if p.eat(')') {
				return dims, nil
			}
			j := p.i
			for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
				j++
			}
			v, err := strconv.Atoi(strings.TrimSuffix(p.s[p.i:j], "L"))
			if err != nil || v > math.MaxInt32 {
				return nil, fmt.Errorf("bad dimension at byte %d", p.i)
			}
			dims = append(dims, v)
			p.i = j
			p.space()
			if !p.eat(',') {
				p.space()
				if !p.eat(')') {
					return nil, fmt.Errorf("missing ',' or ')' at byte %d", p.i)
				}
				return dims, nil
			}
		}
	}
	return nil, fmt.Errorf("unsupported value at byte %d", p.i)
}

// npyArray is a .npy stream: its header, how to read it sequentially (r, positioned after
// the header) and, when possible, at random (ra at offset base of the data, avail bytes).
type npyArray struct {
	name  string
	h     npyHeader
	r     io.Reader
	ra    io.ReaderAt
	base  int64
	avail int64 // bytes after the header when known, else -1
}

// samples makes the array readable sample by sample.
func (a *npyArray) samples(maxMem int64, closer io.Closer) (*records, error) {
	h := a.h
	if len(h.dims) == 0 {
		return nil, fmt.Errorf("%s: the array is a scalar; want one sample per row of the first axis", a.name)
	}
	per, ok := prodDims(h.dims[1:])
	if !ok || h.dims[0] == 0 || per > maxElems/int64(h.dt.size())/int64(h.dims[0]) {
		return nil, fmt.Errorf("%s: shape %v holds no data or is too large", a.name, h.dims)
	}
	size := per * int64(h.dt.size())
	want := size * int64(h.dims[0])
	if a.avail >= 0 && a.avail < want {
		return nil, fmt.Errorf("%s: truncated: shape %v of %s promises %d data bytes after offset %d but the data end at offset %d, in sample %d", a.name, h.dims, h.dt, want, h.length, h.length+a.avail, a.avail/size)
	}
	rec := &records{name: a.name, n: h.dims[0], size: int(size), stride: size}
	fortran := h.fortran && len(h.dims) > 1
	if fortran && want > maxMem {
		return nil, &OptionError{Option: "MaxMemory", File: a.name, Reason: "the array is in Fortran order and larger than Options.MaxMemory, so it cannot be read sample by sample: save it with np.save(f, np.ascontiguousarray(x)) or raise Options.MaxMemory"}
	}
	if a.ra != nil && want > maxMem {
		rec.ra, rec.base, rec.closer = a.ra, a.base, closer
		return rec, nil
	}
	mem, ra, c, err := loadPayload(a.r, a.name, h.length, want, a.avail, maxMem)
	if err != nil {
		return nil, err
	}
	if closer != nil {
		closer.Close()
	}
	if fortran {
		mem = fortranToC(mem, h.dims, h.dt.size())
	}
	rec.mem, rec.ra, rec.closer = mem, ra, c
	return rec, nil
}

// fortranToC reorders a column-major array of the given dims and element size to row-major.
func fortranToC(src []byte, dims []int, es int) []byte {
	dst := make([]byte, len(src))
	fstride := make([]int, len(dims))
	st := 1
	for j, d := range dims {
		fstride[j] = st
		st *= d
	}
	idx := make([]int, len(dims))
	for c := 0; c < len(src)/es; c++ {
		f := 0
		for j, i := range idx {
			f += i * fstride[j]
		}
		copy(dst[c*es:(c+1)*es], src[f*es:(f+1)*es])
		// Advance the row-major multi-index.
		for j := len(idx) - 1; j >= 0; j-- {
			idx[j]++
			if idx[j] < dims[j] {
				break
			}
			idx[j] = 0
		}
	}
	return dst
}

// labels reads the array as integer labels: one per sample from (N,) or (N,1), or one per
// position from (N,T), T > 1, for a sequence model (the second return value is T, 1 for
// the others). Labels o.ignored marks are stored as IgnoredLabel.
func (a *npyArray) labels(n, classes int, o *Options) ([]int64, int, error) {
	h := a.h
	if len(h.dims) == 0 || len(h.dims) > 2 {
		return nil, 0, fmt.Errorf("%s: labels must have shape (N,), (N,1) or, one per position of a sequence, (N,T), not %v (one-hot labels: save y.argmax(-1))", a.name, h.dims)
	}
	if h.dims[0] != n {
		return nil, 0, fmt.Errorf("%s has %d labels for %d samples", a.name, h.dims[0], n)
	}
	width := 1
	if len(h.dims) == 2 {
		width = h.dims[1]
	}
	if width < 1 {
		return nil, 0, fmt.Errorf("%s: labels of shape %v hold no label per sample", a.name, h.dims)
	}
	rec, err := a.samples(math.MaxInt64, nil)
	if err != nil {
		return nil, 0, err
	}
	es := h.dt.size()
	ignore := o.ignored(width > 1)
	labels := make([]int64, n*width)
	for i := range labels {
		v, ok := decodeInt(rec.mem[i*es:], h.dt, h.bo)
		if !ok {
			return nil, 0, fmt.Errorf("%s: entry %d (offset %d) is not an integer label", a.name, i, h.length+int64(i*es))
		}
		if slices.Contains(ignore, v) {
			v = IgnoredLabel
		}
		labels[i] = v
	}
	if width > 1 && width == classes && oneHot(labels, width) {
		// [N, C] one-hot rows look like sequences of C labels 0/1 of a model with C classes:
		// refuse them rather than train every position of a sequence the model has not.
		return nil, 0, fmt.Errorf("%s: labels of shape %v are one-hot rows of the model's %d classes, not one label per position of a sequence: save y.argmax(-1) for shape (N,)", a.name, h.dims, classes)
	}
	err = checkLabels(labels, classes, a.name, func(i int) string {
		if width > 1 {
			return fmt.Sprintf("sample %d, position %d (offset %d)", i/width, i%width, h.length+int64(i*es))
		}
		return fmt.Sprintf("entry %d (offset %d)", i, h.length+int64(i*es))
	})
	return labels, width, err
}

// oneHot reports whether every row of width labels holds one 1 and zeros.
func oneHot(labels []int64, width int) bool {
	for r := 0; r < len(labels); r += width {
		ones := 0
		for _, v := range labels[r : r+width] {
			switch v {
			case 0:
			case 1:
				ones++
			default:
				return false
			}
		}
		if ones != 1 {
			return false
		}
	}
	return true
}

// openNpyFile opens a .npy file for reading its array.
func openNpyFile(path string) (*npyArray, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	r := io.NewSectionReader(f, 0, st.Size())
	h, err := readNpyHeader(r, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &npyArray{name: path, h: h, r: r, ra: f, base: h.length, avail: st.Size() - h.length}, f, nil
}

func openNpy(path string, in Input, o *Options) (*set, error) {
	a, f, err := openNpyFile(path)
	if err != nil {
		return nil, err
	}
	rec, err := a.samples(o.maxMemory(), f)
	if err != nil {
		f.Close()
		return nil, err
	}
	var labels []int64
	width := 1
	if o.Labels != "" {
		la, lf, err := openNpyFile(o.Labels)
		if err != nil {
			rec.close()
			return nil, fmt.Errorf("labels: %w", err)
		}
		labels, width, err = la.labels(rec.n, in.Classes, o)
		lf.Close()
		if err != nil {
			rec.close()
			return nil, err
		}
	}
	s, err := newArraySet(path, rec, a.h.dt, a.h.bo, a.h.dims[1:], labels, in, o)
	if err != nil {
		return nil, err
	}
	s.lwidth = width
	return s, nil
}

func openNpz(path string, in Input, o *Options) (*set, error) {
	xk, yk := o.XKey, o.YKey
	if xk == "" {
		xk = "x"
	}
	if yk == "" {
		yk = "y"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	z, err := npz.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	member := func(key string) *zip.File {
		for _, m := range zr.File {
			if m.Name == key || m.Name == key+".npy" {
				return m
			}
		}
		return nil
	}
	keys := strings.Join(z.Keys(), ", ")
	if len(o.Inputs) > 0 && in.Name != "" && member(in.Name) != nil {
		xk = in.Name // a model with several inputs: every array named after its input
	} else if o.XKey == "" && member(xk) == nil && in.Name != "" && member(in.Name) != nil {
		// No XKey and no "x": the array named after the model's input, as exporters' and
		// onnxruntime users' archives name it.
		xk = in.Name
	}
	xm := member(xk)
	if xm == nil {
		f.Close()
		return nil, &OptionError{Option: "XKey", File: path, Reason: fmt.Sprintf("no array %q (it has %s): choose one with Options.XKey", xk, keys)}
	}
	xa, xc, err := npzArray(f, path, xm)
	if err != nil {
		f.Close()
		return nil, err
	}
	rec, err := xa.samples(o.maxMemory(), nil)
	if xc != nil {
		xc.Close()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if rec.ra == io.ReaderAt(f) {
		rec.closer = f
	} else {
		// The data are in memory or in a temporary file; the archive is needed only for the
		// labels below.
		defer f.Close()
	}
	var labels []int64
	width := 1
	if ym := member(yk); ym != nil {
		ya, yc, err := npzArray(f, path, ym)
		if err == nil {
			labels, width, err = ya.labels(rec.n, in.Classes, o)
		}
		if yc != nil {
			yc.Close()
		}
		if err != nil {
			rec.close()
			return nil, err
		}
	} else if o.YKey != "" {
		rec.close()
		return nil, &OptionError{Option: "YKey", File: path, Reason: fmt.Sprintf("no array %q (it has %s): choose one with Options.YKey", yk, keys)}
	}
	var extras []*extra
	if len(o.Inputs) > 0 {
		if extras, err = readExtras(f, path, member, keys, in, rec.n, o); err != nil {
			rec.close()
			return nil, err
		}
	}
	s, err := newArraySet(path, rec, xa.h.dt, xa.h.bo, xa.h.dims[1:], labels, in, o)
	if err != nil {
		return nil, err
	}
	s.extras, s.lwidth = extras, width
	return s, nil
}

// npzArray opens one member of an .npz archive. Members stored without compression (np.savez)
// can be read at random from the archive itself.
func npzArray(f *os.File, path string, m *zip.File) (*npyArray, io.Closer, error) {
	name := path + ":" + m.Name
	rc, err := m.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	h, err := readNpyHeader(rc, name)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	a := &npyArray{name: name, h: h, r: rc, avail: int64(m.UncompressedSize64) - h.length}
	if m.Method == zip.Store {
		if off, err := m.DataOffset(); err == nil {
			a.ra, a.base = f, off+h.length
		}
	}
	return a, rc, nil
}
