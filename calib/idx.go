package calib

import (
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// idx element types (the third byte of the magic number).
var idxTypes = map[byte]dtype{0x08: u8, 0x09: i8, 0x0B: i16, 0x0C: i32, 0x0D: f32, 0x0E: f64}

func validIdxType(b byte) bool { _, ok := idxTypes[b]; return ok }

// idxFile is an opened idx file positioned after its header.
type idxFile struct {
	f      *os.File
	r      io.Reader // content, decompressed when gzipped
	closeZ func()
	gz     bool
	size   int64 // file size
	dt     dtype
	dims   []int
	hdr    int64 // header length
}

func openIdxFile(path string) (*idxFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	x := &idxFile{f: f, size: st.Size()}
	r, closeZ, err := maybeGunzip(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	x.r, x.closeZ = r, closeZ
	_, x.gz = r.(*gzip.Reader)
	if err := x.readHeader(path); err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

func (x *idxFile) close() {
	x.closeZ()
	x.f.Close()
}

func (x *idxFile) readHeader(path string) error {
	var magic [4]byte
	if _, err := io.ReadFull(x.r, magic[:]); err != nil {
		return fmt.Errorf("%s: truncated idx header at offset 0: %w", path, err)
	}
	dt, ok := idxTypes[magic[2]]
	if magic[0] != 0 || magic[1] != 0 || !ok || magic[3] == 0 {
		return fmt.Errorf("%s: not an idx file: bad magic number % x at offset 0", path, magic)
	}
	nd := int(magic[3])
	buf := make([]byte, 4*nd)
	if _, err := io.ReadFull(x.r, buf); err != nil {
		return fmt.Errorf("%s: truncated idx header: %d dimensions need %d bytes after offset 4: %w", path, nd, 4*nd, err)
	}
	x.dims = make([]int, nd)
	for i := range nd {
		d := binary.BigEndian.Uint32(buf[4*i:])
		if d == 0 || d > math.MaxInt32 {
			return fmt.Errorf("%s: idx dimension %d (offset %d) is %d", path, i, 4+4*i, d)
		}
		x.dims[i] = int(d)
	}
	x.dt = dt
	x.hdr = int64(4 + 4*nd)
	return nil
}

// payload returns the number of data bytes the header promises.
func (x *idxFile) payload(path string) (int64, error) {
	n, ok := prodDims(x.dims)
	if !ok || n > maxElems/int64(x.dt.size()) {
		return 0, fmt.Errorf("%s: idx dimensions %v are too large", path, x.dims)
	}
	want := n * int64(x.dt.size())
	if !x.gz && x.size-x.hdr < want {
		return 0, fmt.Errorf("%s: truncated: the header (dimensions %v) promises %d data bytes after offset %d but the file ends at offset %d, in sample %d", path, x.dims, want, x.hdr, x.size, (x.size-x.hdr)/(want/int64(x.dims[0])))
	}
	return want, nil
}

// avail returns the bytes after the header, or -1 when the file is gzipped and they are
// not known before it is read.
func (x *idxFile) avail() int64 {
	if x.gz {
		return -1
	}
	return x.size - x.hdr
}

// load makes the payload readable at random: in memory when it fits in maxMem, else from the
// file itself, or from a temporary copy when the file is gzipped.
func (x *idxFile) load(path string, maxMem int64) (*records, error) {
	want, err := x.payload(path)
	if err != nil {
		return nil, err
	}
	if !x.gz && want > maxMem {
		return &records{name: path, ra: x.f, base: x.hdr, closer: x.f}, nil
	}
	mem, ra, closer, err := loadPayload(x.r, path, x.hdr, want, x.avail(), maxMem)
	if err != nil {
		return nil, err
	}
	x.closeZ()
	x.f.Close()
	return &records{name: path, mem: mem, ra: ra, closer: closer}, nil
}

func openIdx(path string, in Input, o *Options) (*set, error) {
	x, err := openIdxFile(path)
	if err != nil {
		return nil, err
	}
	if len(x.dims) < 2 {
		x.close()
		return nil, fmt.Errorf("%s: idx file with dimensions %v holds no samples: is it a labels file? Open the images file", path, x.dims)
	}
	rec, err := x.load(path, o.maxMemory())
	if err != nil {
		x.close()
		return nil, err
	}
	n := x.dims[0]
	sdims := x.dims[1:]
	per, _ := prodDims(sdims)
	rec.n, rec.size, rec.stride = n, int(per)*x.dt.size(), per*int64(x.dt.size())

	labels, err := idxLabels(path, o, n, in.Classes)
	if err != nil {
		rec.close()
		return nil, err
	}
	if x.dt == u8 && (len(sdims) == 2 || (len(sdims) == 3 && (sdims[2] == 1 || sdims[2] == 3))) {
		im := imageDims{c: 1, h: sdims[0], w: sdims[1]}
		if len(sdims) == 3 {
			im.c = sdims[2]
		}
		return newImageSet(path, n, rec, im, labels, in, o)
	}
	return newArraySet(path, rec, x.dt, binary.BigEndian, sdims, labels, in, o)
}

// idxLabelsPath returns the conventional labels file for an images file, if it exists:
// train-images-idx3-ubyte.gz → train-labels-idx1-ubyte.gz (gzipped or not).
func idxLabelsPath(images string) string {
	dir, base := filepath.Split(images)
	lb := strings.NewReplacer("images", "labels", "idx3", "idx1").Replace(base)
	if lb == base {
		return ""
	}
	cands := []string{lb}
	if strings.HasSuffix(lb, ".gz") {
		cands = append(cands, strings.TrimSuffix(lb, ".gz"))
	} else {
		cands = append(cands, lb+".gz")
	}
	for _, c := range cands {
		if st, err := os.Stat(filepath.Join(dir, c)); err == nil && !st.IsDir() {
			return filepath.Join(dir, c)
		}
	}
	return ""
}

func idxLabels(images string, o *Options, n, classes int) ([]int64, error) {
	path := o.Labels
	if path == "" {
		path = idxLabelsPath(images)
		if path == "" {
			return nil, nil
		}
	}
	x, err := openIdxFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("labels: %w", err)
		}
		return nil, err
	}
	defer x.close()
	if len(x.dims) != 1 {
		return nil, fmt.Errorf("%s: an idx labels file has one dimension, this one has %v", path, x.dims)
	}
	if x.dt.isFloat() {
		return nil, fmt.Errorf("%s: labels must be integers, the file holds %s", path, x.dt)
	}
	if x.dims[0] != n {
		return nil, fmt.Errorf("%s has %d labels but %s has %d samples", path, x.dims[0], images, n)
	}
	want, err := x.payload(path)
	if err != nil {
		return nil, err
	}
	mem, _, _, err := loadPayload(x.r, path, x.hdr, want, x.avail(), math.MaxInt64)
	if err != nil {
		return nil, err
	}
	es := x.dt.size()
	labels := make([]int64, n)
	for i := range labels {
		labels[i], _ = decodeInt(mem[i*es:], x.dt, binary.BigEndian)
	}
	err = checkLabels(labels, classes, path, func(i int) string {
		return fmt.Sprintf("entry %d (offset %d)", i, x.hdr+int64(i*es))
	})
	return labels, err
}
