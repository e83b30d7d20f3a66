package calib

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// Input describes the model input the data must feed.
type Input struct {
	// Name is the ONNX input name, used in messages.
	Name string
	// Shape is the input shape including the batch dimension; -1 marks a free dimension.
	// Shape[0] (the batch) is ignored.
	Shape []int64
	// Classes is the number of classes the model outputs; 0 means unknown, and then labels are
	// only checked to be non-negative.
	Classes int
	// Batch is the batch size the model declares for this input, 0 when it is free. It
	// does not limit the data (qtool runs a fixed-batch model in chunks of it); it tells
	// the batch axis of the other inputs (Options.Inputs) apart from their other axes.
	Batch int64
	// Int64 reports an input of int64 values (such as a sample rate); only the inputs of
	// Options.Inputs may be int64.
	Int64 bool
}

// Color selects the channels images are decoded to.
type Color int

const (
	// ColorAuto keeps grayscale images grayscale (one channel) and decodes all others to RGB;
	// a folder holding any colour image is read as RGB.
	ColorAuto Color = iota
	// Grayscale converts images to one channel with the ITU-R BT.601 luma weights.
	Grayscale
	// RGB converts images to three channels, repeating grayscale values.
	RGB
)

// Layout names the order of the channel axis in 4-D image tensors.
type Layout int

const (
	// NCHW puts channels before height and width (PyTorch's default).
	NCHW Layout = iota
	// NHWC puts channels last (TensorFlow's default).
	NHWC
)

func (l Layout) String() string {
	if l == NHWC {
		return "nhwc"
	}
	return "nchw"
}

// DefaultMaxMemory is the MaxMemory used when Options.MaxMemory is 0.
const DefaultMaxMemory = 2 << 30

// Options controls how Open reads and converts a data set. The zero value reads the file with
// the defaults the command-line flags document.
type Options struct {
	// Input is the model input the data must feed. Without a shape, samples keep the data's
	// own shape (images as CHW).
	Input Input

	// Labels is a labels file: a .npy for .npy data, an idx file for idx data. For idx data
	// the default is the labels-idx1 file next to the images-idx3 file, when it exists.
	Labels string
	// XKey and YKey name the arrays of a .npz archive; empty means "x" and "y". A missing
	// YKey array means no labels.
	XKey, YKey string
	// IgnoreLabels are the label values that mark a position to leave out of the loss and
	// the accuracy, such as the padding of variable-length sequences; they are read as
	// IgnoredLabel. nil means −1 and −100 (PyTorch's ignore_index) in [N, T] labels and
	// nothing in [N] labels, where a negative label is an error; a non-nil empty slice
	// ignores nothing. The values apply to .npy and .npz labels.
	IgnoreLabels []int64
	// LabelColumn names the CSV label column: a header name, or, for files without a header,
	// a 0-based column index or "last". Empty means the column named "label" if the header
	// has one, else no labels.
	LabelColumn string
	// Limit keeps a seeded random subset of this many samples (in file order); 0 keeps all.
	Limit int
	// Seed seeds Limit's subset.
	Seed uint64

	// Resize scales images (idx, CIFAR, image folders) so that the shorter side is Resize
	// pixels, then crops the centre Resize×Resize square; 0 keeps the decoded size.
	Resize int
	// Stretch makes Resize scale both sides to Resize pixels, ignoring the aspect ratio.
	Stretch bool
	// Color chooses grayscale or RGB decoding of images.
	Color Color
	// NoScale keeps uint8 values in [0,255] instead of dividing them by 255.
	NoScale bool
	// Mean and Std normalise each channel after scaling: x = (x-Mean[c])/Std[c]. One value
	// applies to every channel.
	Mean, Std []float64
	// Layout is the layout of 4-D arrays in .npy and .npz files (NCHW unless set); calib
	// transposes them to the model's layout when the two differ.
	Layout Layout
	// MaxMemory bounds, in bytes, the decoded data held in memory; larger data sets are read
	// from disk batch by batch. 0 means DefaultMaxMemory.
	MaxMemory int64

	// Inputs are the model's inputs after Input, for models with several: each is read
	// from the .npz array named after it (Input itself from the array named after it when
	// there is one, else from XKey). Shape is the declared shape, batch included, -1 for
	// symbolic dimensions. See ExtraInputs for the batch axis rule.
	Inputs []Input
	// BatchAxes overrides the batch axis of inputs of Inputs, by name; -1 means the input
	// has no batch axis and goes unchanged to every batch.
	BatchAxes map[string]int
}

func (o *Options) maxMemory() int64 {
	if o.MaxMemory <= 0 {
		return DefaultMaxMemory
	}
	return o.MaxMemory
}

func (o *Options) check() error {
	if o.Limit < 0 {
		return &OptionError{Option: "Limit", Reason: fmt.Sprintf("Options.Limit %d is negative", o.Limit)}
	}
	if o.Resize < 0 {
		return &OptionError{Option: "Resize", Reason: fmt.Sprintf("Options.Resize %d is negative", o.Resize)}
	}
	if o.Stretch && o.Resize == 0 {
		return &OptionError{Option: "Stretch", Reason: "Options.Stretch needs Options.Resize"}
	}
	if len(o.Mean) > 0 && len(o.Std) > 0 && len(o.Mean) != len(o.Std) && len(o.Mean) != 1 && len(o.Std) != 1 {
		return &OptionError{Option: "Std", Reason: fmt.Sprintf("Options.Mean has %d values but Options.Std has %d", len(o.Mean), len(o.Std))}
	}
	for _, s := range o.Std {
		if s == 0 || s != s {
			return &OptionError{Option: "Std", Reason: fmt.Sprintf("Options.Std %v: every value must be non-zero", o.Std)}
		}
	}
	return nil
}

// Dataset is a data set of samples already converted to the model's input layout.
type Dataset interface {
	// Len returns the number of samples.
	Len() int
	// HasLabels reports whether the samples carry integer labels.
	HasLabels() bool
	// SampleShape returns the shape of one sample in the model's layout, without the batch
	// dimension; free dimensions of the model input are resolved from the data. The caller
	// must not modify it.
	SampleShape() []int64
	// Read stores samples idx[0], idx[1], ... into x, one after the other, and their labels
	// into y. x must hold len(idx) samples; y must hold len(idx)·LabelsPerSample(d) labels,
	// or be nil; without labels y is filled with -1. Reading indices in increasing order is fastest for data read
	// from disk.
	Read(idx []int, x []float32, y []int64) error
	// Close releases the files behind the data set.
	Close() error
}

// IgnoredLabel is the label a Dataset gives a position to leave out of the loss and the
// accuracy (Options.IgnoreLabels): train.IgnoreLabel, PyTorch's ignore_index.
const IgnoredLabel = -100

// ignored returns the label values read as IgnoredLabel, for sequence labels ([N, T]) or
// one label per sample.
func (o *Options) ignored(sequence bool) []int64 {
	switch {
	case o.IgnoreLabels != nil:
		return o.IgnoreLabels
	case sequence:
		return []int64{-1, IgnoredLabel}
	}
	return nil
}

// LabelsPerSample returns the number of labels each sample of d carries: T for labels of
// shape [N, T], one per position of a sequence model's [N, T, C] output, and 1 otherwise
// (also for data sets that do not say). Read and Batches.Y give that many per sample.
func LabelsPerSample(d Dataset) int {
	if l, ok := d.(interface{ LabelsPerSample() int }); ok {
		return max(l.LabelsPerSample(), 1)
	}
	return 1
}

// SampleSize returns the number of float32 values in one sample of d.
func SampleSize(d Dataset) int {
	n := 1
	for _, s := range d.SampleShape() {
		n *= int(s)
	}
	return n
}

// Open opens the data set at path for the model input opts.Input, choosing the reader from
// the extension and the content. path is a file, a folder (image folder, or CIFAR folder
// holding data_batch_*.bin) or a glob pattern matching CIFAR .bin files.
func Open(path string, opts Options) (Dataset, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	in := opts.Input
	var s *set
	kind, err := detect(path)
	if err != nil {
		return nil, err
	}
	if opts.Labels != "" && kind != kindNpy && kind != kindIdx {
		return nil, &OptionError{Option: "Labels", File: path, Reason: "a labels file (Options.Labels) goes with .npy or idx data; " + labelsHint[kind]}
	}
	if opts.LabelColumn != "" && kind != kindCSV {
		return nil, &OptionError{Option: "LabelColumn", File: path, Reason: "Options.LabelColumn applies to CSV files only; " + labelsHint[kind]}
	}
	switch {
	case kind == kindNpy:
		s, err = openNpy(path, in, &opts)
	case kind == kindNpz:
		s, err = openNpz(path, in, &opts)
	case kind == kindIdx:
		s, err = openIdx(path, in, &opts)
	case kind == kindCIFAR:
		s, err = openCIFAR(path, in, &opts)
	case kind == kindFolder:
		s, err = openFolder(path, in, &opts)
	case kind == kindCSV:
		s, err = openCSV(path, in, &opts)
	}
	if err != nil {
		return nil, err
	}
	if len(opts.Inputs) > 0 && kind != kindNpz {
		s.Close()
		names := make([]string, len(opts.Inputs))
		for i, in := range opts.Inputs {
			names[i] = fmt.Sprintf("%q", in.Name)
		}
		return nil, &InputError{File: path, Input: opts.Inputs[0].Name, Reason: fmt.Sprintf("the model also takes %s: give the data as an .npz holding an array named after each input", strings.Join(names, ", "))}
	}
	if opts.Limit > 0 && opts.Limit < s.Len() {
		return limit(s, opts.Limit, opts.Seed), nil
	}
	return s, nil
}

type kind int

var labelsHint = map[kind]string{
	kindNpz:    "an .npz holds its labels as the Options.YKey array",
	kindCIFAR:  "CIFAR files hold their labels",
	kindFolder: "an image folder takes its labels from its class subfolders",
	kindCSV:    "a CSV holds its labels in a column (Options.LabelColumn)",
	kindNpy:    "give .npy labels with Options.Labels",
	kindIdx:    "give idx labels with Options.Labels",
}

const (
	kindNpy kind = iota
	kindNpz
	kindIdx
	kindCIFAR
	kindFolder
	kindCSV
)

var (
	npyMagic = []byte("\x93NUMPY")
	zipMagic = []byte("PK\x03\x04")
)

// detect chooses the reader for path from its kind, its content and its extension, in that
// order of trust.
func detect(path string) (kind, error) {
	if path == "" {
		return 0, errors.New("no data file given")
	}
	if strings.ContainsAny(path, "*?[") {
		if _, err := os.Stat(path); err != nil {
			return kindCIFAR, nil
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("data: %w", err)
	}
	if st.IsDir() {
		m, err := filepath.Glob(filepath.Join(globEscape(path), "data_batch_*.bin"))
		if err != nil {
			return 0, fmt.Errorf("data %s: %w", path, err)
		}
		if len(m) > 0 {
			return kindCIFAR, nil
		}
		return kindFolder, nil
	}
	head, err := peek(path, 8)
	if err != nil {
		return 0, err
	}
	lower := strings.ToLower(path)
	switch {
	case hasPrefix(head, npyMagic):
		return kindNpy, nil
	case hasPrefix(head, zipMagic):
		return kindNpz, nil
	case len(head) >= 4 && head[0] == 0 && head[1] == 0 && validIdxType(head[2]) && head[3] >= 1:
		return kindIdx, nil
	case strings.HasSuffix(lower, ".csv") || strings.HasSuffix(lower, ".csv.gz"):
		return kindCSV, nil
	case strings.HasSuffix(lower, ".bin"):
		return kindCIFAR, nil
	case strings.HasSuffix(lower, ".npy"):
		return kindNpy, nil
	case strings.HasSuffix(lower, ".npz"):
		return kindNpz, nil
	case strings.Contains(lower, "idx") || strings.Contains(lower, "ubyte"):
		return kindIdx, nil
	}
	if isText(head) {
		return kindCSV, nil
	}
	return 0, fmt.Errorf("data %s: unknown format: expected .npy, .npz, idx (MNIST), CIFAR .bin, .csv or a folder of images", path)
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

func isText(b []byte) bool {
	for _, c := range string(b) {
		if c == unicode.ReplacementChar || (c < 32 && c != '\n' && c != '\r' && c != '\t') {
			return false
		}
	}
	return len(b) > 0
}

// peek returns the first n bytes of path, looking inside gzip files.
func peek(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	r, closeZ, err := maybeGunzip(f, path)
	if err != nil {
		return nil, err
	}
	defer closeZ()
	buf := make([]byte, n)
	k, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data %s: %w", path, err)
	}
	return buf[:k], nil
}

func globEscape(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune("*?[\\", c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ParseSize parses a byte count such as 512MiB, 2GiB, 1.5G or 1000000. Decimal suffixes (k,
// M, G, T, with or without B) are powers of 1000, binary suffixes (KiB, MiB, GiB, TiB) powers
// of 1024.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, suf := t, ""
	if i >= 0 {
		num, suf = t[:i], strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 512MiB or 2GB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[strings.ToLower(suf)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, kB, MB, GB, KiB, MiB, GiB)", s, suf)
	}
	b := v * mult
	if b >= 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(b), nil
}
