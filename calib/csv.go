package calib

import (
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// openCSV reads a CSV file of numeric feature columns and an optional integer label column.
// The first row is a header when any of its fields is not a number.
func openCSV(path string, in Input, o *Options) (*set, error) {
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
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true

	var (
		header   []string
		labelCol = -1
		ncol     int
		data     []byte
		labels   []int64
		n        int
	)
	line := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line++
		for c := range rec {
			rec[c] = strings.TrimSpace(rec[c])
		}
		if line == 1 {
			rec[0] = strings.TrimPrefix(rec[0], "\ufeff") // byte-order mark of files saved by Excel
			ncol = len(rec)
			if !allNumbers(rec) {
				header = append([]string(nil), rec...)
			}
			labelCol, err = csvLabelColumn(path, header, ncol, o.LabelColumn)
			if err != nil {
				return nil, err
			}
			if header != nil {
				continue
			}
		}
		for c, field := range rec {
			if c == labelCol {
				v, err := strconv.ParseFloat(field, 64)
				if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
					return nil, fmt.Errorf("%s: line %d, column %d: label %q is not an integer", path, line, c+1, field)
				}
				if v < 0 || (in.Classes > 0 && v >= float64(in.Classes)) {
					return nil, &LabelError{File: path, Where: fmt.Sprintf("line %d, column %d", line, c+1), Label: int64(v), Classes: in.Classes}
				}
				labels = append(labels, int64(v))
				continue
			}
			v, err := strconv.ParseFloat(field, 32)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Errorf("%s: line %d, column %d%s: %q is not a number", path, line, c+1, colName(header, c), field)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: line %d, column %d%s is %v: remove or impute non-finite values", path, line, c+1, colName(header, c), float32(v))
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no data rows", path)
	}
	feat := ncol
	if labelCol >= 0 {
		feat--
	}
	if feat == 0 {
		return nil, fmt.Errorf("%s has no feature columns besides the label", path)
	}
	rec := &records{name: path, mem: data, n: n, size: 4 * feat, stride: int64(4 * feat)}
	return newArraySet(path, rec, f32, binary.LittleEndian, []int{feat}, labels, in, o)
}

func colName(header []string, c int) string {
	if header == nil {
		return ""
	}
	return fmt.Sprintf(" (%s)", header[c])
}

func allNumbers(rec []string) bool {
	for _, f := range rec {
		if _, err := strconv.ParseFloat(f, 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return false
		}
	}
	return true
}

// csvLabelColumn finds the label column: by name in the header, by 0-based index or "last";
// by default the header column named "label", if any.
func csvLabelColumn(path string, header []string, ncol int, want string) (int, error) {
	if want == "" {
		for i, h := range header {
			if strings.EqualFold(strings.TrimSpace(h), "label") {
				return i, nil
			}
		}
		return -1, nil
	}
	for i, h := range header {
		if strings.TrimSpace(h) == want {
			return i, nil
		}
	}
	for i, h := range header {
		if strings.EqualFold(strings.TrimSpace(h), want) {
			return i, nil
		}
	}
	if strings.EqualFold(want, "last") {
		return ncol - 1, nil
	}
	if i, err := strconv.Atoi(want); err == nil && i >= 0 && i < ncol {
		return i, nil
	}
	if header != nil {
		return -1, &OptionError{Option: "LabelColumn", File: path, Reason: fmt.Sprintf("no column %q (columns: %s): fix Options.LabelColumn", want, strings.Join(header, ", "))}
	}
	return -1, &OptionError{Option: "LabelColumn", File: path, Reason: fmt.Sprintf("no header row and %d columns: give Options.LabelColumn as a 0-based index or \"last\", not %q", ncol, want)}
}
