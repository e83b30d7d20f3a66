package calib

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeFile writes data to name under dir, gzipped when gz.
func writeFile(t testing.TB, dir, name string, data []byte, gz bool) string {
	t.Helper()
	if gz {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write(data)
		z.Close()
		data = b.Bytes()
	}
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// idxBytes builds an idx file by hand: magic 0 0 type ndim, big-endian dims, data.
func idxBytes(typ byte, dims []int, data []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}

// readAll reads every sample of d in order.
func readAll(t testing.TB, d Dataset) ([]float32, []int64) {
	t.Helper()
	idx := make([]int, d.Len())
	for i := range idx {
		idx[i] = i
	}
	x := make([]float32, d.Len()*SampleSize(d))
	var y []int64
	if d.HasLabels() {
		y = make([]int64, d.Len()*LabelsPerSample(d))
	}
	if err := d.Read(idx, x, y); err != nil {
		t.Fatal(err)
	}
	return x, y
}

func mustOpen(t testing.TB, path string, in Input, o Options) Dataset {
	t.Helper()
	o.Input = in
	d, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !bytes.Contains([]byte(err.Error()), []byte(p)) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

// wantFix checks that err is a *ShapeError whose fix is exactly fix.
func wantFix(t *testing.T, err error, fix ...Setting) {
	t.Helper()
	var se *ShapeError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *ShapeError", err)
	}
	if !slices.Equal(se.Fix, fix) {
		t.Errorf("error %q: fix %v, want %v", err, se.Fix, fix)
	}
}

// wantOption checks that err is an *OptionError about the Options field option.
func wantOption(t *testing.T, err error, option string) {
	t.Helper()
	var oe *OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v is not an *OptionError", err)
	}
	if oe.Option != option {
		t.Errorf("error %q: option %q, want %q", err, oe.Option, option)
	}
}

func shape(v ...int64) []int64 { return v }

// openIn opens path for the model input in.
func openIn(path string, in Input, o Options) (Dataset, error) {
	o.Input = in
	return Open(path, o)
}
