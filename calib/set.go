package calib

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// source yields the stored bytes of one sample.
type source interface {
	read(i int, dst []byte) error
	close() error
}

// set is a data set read by one of the readers: stored samples, their conversion plan to the
// model's input and the labels.
type set struct {
	name   string // file or folder, for messages
	n      int
	src    source
	sbytes int // bytes per stored sample
	dt     dtype
	bo     binary.ByteOrder
	labels []int64  // nil without labels; lwidth per sample
	lwidth int      // labels per sample: T for [N, T] sequence labels; 0 means 1
	extras []*extra // the model's other inputs (Options.Inputs)
	plan

	raw    []byte
	tmp    []float32
	closed bool
}

// plan converts a stored sample to the model's layout: out[j] = f(stored[perm[j]]) where f
// scales and normalises with the constants of channel chans[j].
type plan struct {
	shape []int64 // model sample shape
	perm  []int32 // nil: identity
	chans []int32 // channel of each output element; nil: all channel 0
	// lut maps uint8 values of channel c to outputs: lut[c*256+v]. Only for uint8 data.
	lut []float32
	// mean and std per channel for non-uint8 data; nil when the data pass unchanged.
	mean, std []float32
}

func (s *set) Len() int             { return s.n }
func (s *set) HasLabels() bool      { return s.labels != nil }
func (s *set) LabelsPerSample() int { return max(s.lwidth, 1) }
func (s *set) SampleShape() []int64 { return s.shape }
func (s *set) sampleSize() int      { return prod64(s.shape) }
func (s *set) Close() error         { s.closed = true; return s.src.close() }
func (s *set) String() string       { return s.name }
func prod64(sh []int64) int {
	n := 1
	for _, v := range sh {
		n *= int(v)
	}
	return n
}

func (s *set) Read(idx []int, x []float32, y []int64) error {
	if s.closed {
		return fmt.Errorf("%s: read after close", s.name)
	}
	size := s.sampleSize()
	if len(x) < len(idx)*size {
		return fmt.Errorf("%s: x holds %d values, %d samples need %d", s.name, len(x), len(idx), len(idx)*size)
	}
	w := s.LabelsPerSample()
	if y != nil && len(y) < len(idx)*w {
		return fmt.Errorf("%s: y holds %d labels, want %d (%d per sample)", s.name, len(y), len(idx)*w, w)
	}
	if s.raw == nil {
		s.raw = make([]byte, s.sbytes)
		if s.dt != u8 {
			s.tmp = make([]float32, s.sbytes/s.dt.size())
		}
	}
	for k, i := range idx {
		if i < 0 || i >= s.n {
			return fmt.Errorf("%s: sample %d out of range [0,%d)", s.name, i, s.n)
		}
		if err := s.src.read(i, s.raw); err != nil {
			return err
		}
		if err := s.convert(i, x[k*size:(k+1)*size]); err != nil {
			return err
		}
		if y != nil {
			if s.labels != nil {
				copy(y[k*w:(k+1)*w], s.labels[i*w:(i+1)*w])
			} else {
				y[k] = -1
			}
		}
	}
	return nil
}

// convert turns the stored sample i in s.raw into out.
func (s *set) convert(i int, out []float32) error {
	p := &s.plan
	if s.dt == u8 {
		raw := s.raw
		switch {
		case p.perm == nil && p.chans == nil:
			lut := p.lut[:256]
			for j, v := range raw[:len(out)] {
				out[j] = lut[v]
			}
		case p.chans == nil:
			lut := p.lut[:256]
			for j, q := range p.perm {
				out[j] = lut[raw[q]]
			}
		default:
			for j := range out {
				q := j
				if p.perm != nil {
					q = int(p.perm[j])
				}
				out[j] = p.lut[int(p.chans[j])<<8|int(raw[q])]
			}
		}
		return nil
	}
	vals := s.tmp
	if p.perm == nil {
		vals = out // no reordering: decode in place
	}
	decode(vals, s.raw, s.dt, s.bo)
	if s.dt.isFloat() {
		for e, v := range vals {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%s: sample %d, element %d is %v: remove or impute non-finite values", s.name, i, e, v)
			}
		}
	}
	if p.perm != nil {
		for j, q := range p.perm {
			out[j] = s.tmp[q]
		}
	}
	if p.mean != nil {
		for j, v := range out {
			c := 0
			if p.chans != nil {
				c = int(p.chans[j])
			}
			out[j] = (v - p.mean[c]) / p.std[c]
		}
	}
	return nil
}

// checkFinite scans float data held in memory so that NaNs are reported when the data are
// opened rather than in the middle of training.
func (s *set) checkFinite(mem []byte, stride, skip int) error {
	if !s.dt.isFloat() {
		return nil
	}
	es := s.dt.size()
	for i := 0; i < s.n; i++ {
		rec := mem[i*stride+skip : i*stride+skip+s.sbytes]
		for e := 0; e < len(rec); e += es {
			var v float64
			if s.dt == f32 {
				v = float64(math.Float32frombits(s.bo.Uint32(rec[e:])))
			} else {
				v = math.Float64frombits(s.bo.Uint64(rec[e:]))
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: sample %d, element %d is %v: remove or impute non-finite values", s.name, i, e/es, v)
			}
		}
	}
	return nil
}

// checkLabels reports the first label outside [0, classes), other than IgnoredLabel, as a
// *LabelError; where(i) places label i in file.
func checkLabels(labels []int64, classes int, file string, where func(i int) string) error {
	for i, l := range labels {
		if l == IgnoredLabel {
			continue
		}
		if l < 0 || (classes > 0 && l >= int64(classes)) {
			return &LabelError{File: file, Where: where(i), Label: l, Classes: classes}
		}
	}
	return nil
}

// view is a subset of another data set, sharing its reader.
type view struct {
	d      Dataset
	idx    []int
	buf    []int
	own    *owner
	closed bool
}

// owner closes a data set once every view of it is closed.
type owner struct {
	d    Dataset
	refs int
}

func (v *view) Len() int             { return len(v.idx) }
func (v *view) HasLabels() bool      { return v.d.HasLabels() }
func (v *view) LabelsPerSample() int { return LabelsPerSample(v.d) }
func (v *view) SampleShape() []int64 { return v.d.SampleShape() }

func (v *view) Read(idx []int, x []float32, y []int64) error {
	if cap(v.buf) < len(idx) {
		v.buf = make([]int, len(idx))
	}
	b := v.buf[:len(idx)]
	for k, i := range idx {
		if i < 0 || i >= len(v.idx) {
			return fmt.Errorf("sample %d out of range [0,%d)", i, len(v.idx))
		}
		b[k] = v.idx[i]
	}
	return v.d.Read(b, x, y)
}

func (v *view) Close() error {
	if v.closed {
		return nil
	}
	v.closed = true
	v.own.refs--
	if v.own.refs == 0 {
		return v.own.d.Close()
	}
	return nil
}

// limit returns a view of n samples of d chosen at random with seed, kept in file order.
func limit(d Dataset, n int, seed uint64) Dataset {
	rng := rand.New(rand.NewPCG(seed, 0x6c696d6974)) // stream "limit"
	idx := rng.Perm(d.Len())[:n]
	slices.Sort(idx)
	return &view{d: d, idx: idx, own: &owner{d: d, refs: 1}}
}

// Split divides d at random into two disjoint views holding the fractions calib and eval of
// its samples (calib+eval ≤ 1), each in file order. The same seed gives the same split. Split
// takes ownership of d: it is closed when both views are closed.
func Split(d Dataset, calib, eval float64, seed uint64) (Dataset, Dataset, error) {
	if !(calib > 0 && eval > 0 && calib+eval <= 1+1e-9) {
		return nil, nil, fmt.Errorf("split %g:%g: want two positive fractions summing to at most 1", calib, eval)
	}
	n := d.Len()
	nc := int(math.Round(calib * float64(n)))
	ne := int(math.Round(eval * float64(n)))
	if nc+ne > n {
		ne = n - nc
	}
	if nc == 0 || ne <= 0 {
		return nil, nil, fmt.Errorf("split %g:%g of %d samples leaves a part empty", calib, eval, n)
	}
	rng := rand.New(rand.NewPCG(seed, 0x73706c6974)) // stream "split"
	perm := rng.Perm(n)
	a, b := perm[:nc:nc], perm[nc:nc+ne]
	slices.Sort(a)
	slices.Sort(b)
	own := &owner{d: d, refs: 2}
	return &view{d: d, idx: a, own: own}, &view{d: d, idx: b, own: own}, nil
}

// ParseSplit parses a split "calib:eval" such as 0.8:0.2 or 4:1. Proportions summing
// to more than 1 are normalised; smaller ones are fractions of the data, the rest unused.
func ParseSplit(s string) (calib, eval float64, err error) {
	as, bs, ok := strings.Cut(s, ":")
	a, err1 := strconv.ParseFloat(strings.TrimSpace(as), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(bs), 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("split %q: want calib:eval proportions such as 0.8:0.2", s)
	}
	if !(a > 0 && b > 0) || math.IsInf(a+b, 0) {
		return 0, 0, fmt.Errorf("split %q: both proportions must be positive", s)
	}
	if a+b > 1 {
		a, b = a/(a+b), b/(a+b)
	}
	return a, b, nil
}

// Hold sets n samples of d apart at random with seed and returns the rest and them, two
// disjoint views in file order. Unlike Split it does not take ownership of d: closing the
// views is not needed and does not close d, which stays the caller's to close. It is how a
// validation split is carved from calibration data without touching the caller's set.
func Hold(d Dataset, n int, seed uint64) (rest, held Dataset, err error) {
	total := d.Len()
	if n <= 0 || n >= total {
		return nil, nil, fmt.Errorf("holding %d of %d samples apart leaves a part empty", n, total)
	}
	rng := rand.New(rand.NewPCG(seed, 0x76616c6964)) // stream "valid", apart from Split's and limit's
	perm := rng.Perm(total)
	a, b := perm[n:], perm[:n:n]
	slices.Sort(a)
	slices.Sort(b)
	// refs 3: the caller's close of d is not counted here, so the views never reach 0
	// between them and never close d.
	own := &owner{d: d, refs: 3}
	return &view{d: d, idx: a, own: own}, &view{d: d, idx: b, own: own}, nil
}
