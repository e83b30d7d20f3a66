package calib

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CIFAR-10 binary records: one label byte, then 32×32 red, green and blue planes.
const (
	cifarSide   = 32
	cifarPixels = 3 * cifarSide * cifarSide
	cifarRecord = 1 + cifarPixels
)

// cifarFiles expands path (a .bin file, a glob pattern or a folder) to the batch files.
func cifarFiles(path string) ([]string, error) {
	if st, err := os.Stat(path); err == nil {
		if !st.IsDir() {
			return []string{path}, nil
		}
		m, err := filepath.Glob(filepath.Join(globEscape(path), "data_batch_*.bin"))
		if err != nil {
			return nil, fmt.Errorf("data %s: %w", path, err)
		}
		slices.Sort(m)
		return m, nil
	}
	m, err := filepath.Glob(path)
	if err != nil {
		return nil, fmt.Errorf("data %s: bad pattern: %w", path, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("data %s: no file matches", path)
	}
	slices.Sort(m)
	for _, f := range m {
		if !strings.HasSuffix(strings.ToLower(f), ".bin") {
			return nil, fmt.Errorf("data %s matches %s, which is not a CIFAR .bin file", path, f)
		}
	}
	return m, nil
}

// multiRecords concatenates records from several files.
type multiRecords struct {
	parts []*records
	first []int // index of each part's first record
}

func (m *multiRecords) read(i int, dst []byte) error {
	k, _ := slices.BinarySearch(m.first, i+1)
	p := k - 1
	return m.parts[p].read(i-m.first[p], dst)
}

func (m *multiRecords) close() error {
	var first error
	for _, p := range m.parts {
		if err := p.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func openCIFAR(path string, in Input, o *Options) (*set, error) {
	files, err := cifarFiles(path)
	if err != nil {
		return nil, err
	}
	var total int64
	sizes := make([]int64, len(files))
	for i, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
		if st.Size() == 0 || st.Size()%cifarRecord != 0 {
			return nil, fmt.Errorf("%s: truncated or not a CIFAR-10 batch: %d bytes is not a whole number of %d-byte records (record %d is cut at offset %d)", f, st.Size(), cifarRecord, st.Size()/cifarRecord, st.Size()/cifarRecord*cifarRecord)
		}
		sizes[i] = st.Size()
		total += st.Size()
	}
	inMem := total <= o.maxMemory()
	var (
		labels []int64
		src    source
		n      int
	)
	mr := &multiRecords{}
	closeAll := func() { mr.close() }
	var mem []byte
	if inMem {
		mem = make([]byte, 0, total)
	}
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("data: %w", err)
		}
		cnt := int(sizes[i] / cifarRecord)
		br := bufio.NewReaderSize(f, 1<<16)
		var rec [cifarRecord]byte
		for r := range cnt {
			if _, err := io.ReadFull(br, rec[:]); err != nil {
				f.Close()
				closeAll()
				return nil, fmt.Errorf("%s: record %d at offset %d: %w", name, r, int64(r)*cifarRecord, err)
			}
			l := int64(rec[0])
			if l > 9 || (in.Classes > 0 && l >= int64(in.Classes)) {
				f.Close()
				closeAll()
				classes := 10
				if in.Classes > 0 {
					classes = min(10, in.Classes)
				}
				return nil, fmt.Errorf("%s: record %d (offset %d): label %d is out of range 0..%d (CIFAR-100 files, with two label bytes, are not supported)", name, r, int64(r)*cifarRecord, l, classes-1)
			}
			labels = append(labels, l)
			if inMem {
				mem = append(mem, rec[:]...)
			}
		}
		mr.first = append(mr.first, n)
		n += cnt
		if inMem {
			f.Close()
		} else {
			mr.parts = append(mr.parts, &records{name: name, ra: f, stride: cifarRecord, skip: 1, size: cifarPixels, n: cnt, closer: f})
		}
	}
	if inMem {
		src = &records{name: path, mem: mem, stride: cifarRecord, skip: 1, size: cifarPixels, n: n}
	} else {
		src = mr
	}
	return newImageSet(path, n, src, imageDims{c: 3, h: cifarSide, w: cifarSide, chw: true}, labels, in, o)
}
