package calib

import (
	"slices"
	"testing"
)

func TestCSV(t *testing.T) {
	dir := t.TempDir()
	body := "f0,f1,f2,f3,label\n1,2,3,4,0\n5,6,7,8.5,2\n-1,0,1e2,0.25,1\n"
	for _, gz := range []bool{false, true} {
		name := "d.csv"
		if gz {
			name += ".gz"
		}
		p := writeFile(t, dir, name, []byte(body), gz)
		for _, in := range [][]int64{{-1, 4}, {-1, 1, 2, 2}} {
			d := mustOpen(t, p, Input{Shape: in, Classes: 3}, Options{})
			x, y := readAll(t, d)
			if !slices.Equal(x, []float32{1, 2, 3, 4, 5, 6, 7, 8.5, -1, 0, 100, 0.25}) || !slices.Equal(y, []int64{0, 2, 1}) {
				t.Errorf("%v: x %v y %v", in, x, y)
			}
		}
	}
	// Another column as label; the column named label then is a feature.
	r := writeFile(t, dir, "f0.csv", []byte("f0,f1,label\n1,2,0\n3,4,1\n"), false)
	d := mustOpen(t, r, Input{Shape: shape(-1, 2)}, Options{LabelColumn: "f0"})
	x, y := readAll(t, d)
	if !slices.Equal(y, []int64{1, 3}) || !slices.Equal(x, []float32{2, 0, 4, 1}) {
		t.Errorf("x %v y %v", x, y)
	}

	// No header: labels by index or "last".
	q := writeFile(t, dir, "nohdr.csv", []byte("1,2,3\n4,5,6\n"), false)
	for _, col := range []string{"last", "2"} {
		d := mustOpen(t, q, Input{Shape: shape(-1, 2), Classes: 7}, Options{LabelColumn: col})
		x, y := readAll(t, d)
		if !slices.Equal(x, []float32{1, 2, 4, 5}) || !slices.Equal(y, []int64{3, 6}) {
			t.Errorf("%s: x %v y %v", col, x, y)
		}
	}
	// A byte-order mark and spaces around fields are tolerated.
	bom := writeFile(t, dir, "bom.csv", []byte("\ufeffa, b ,label\n 1 , 2,1\n"), false)
	d = mustOpen(t, bom, Input{Shape: shape(-1, 2), Classes: 3}, Options{LabelColumn: "b"})
	if x, y := readAll(t, d); !slices.Equal(x, []float32{1, 1}) || !slices.Equal(y, []int64{2}) {
		t.Errorf("bom.csv: x %v y %v", x, y)
	}
	d = mustOpen(t, q, Input{Shape: shape(-1, 3)}, Options{})
	if d.HasLabels() {
		t.Error("labels without a label column")
	}
}

func TestCSVErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		body string
		opts Options
		want []string
	}{
		{"a,b,label\n1,2,0\n1,x,1\n", Options{}, []string{"line 3", "column 2 (b)", `"x"`}},
		{"a,b,label\n1,2,0\n1,nan,1\n", Options{}, []string{"line 3", "column 2 (b)", "NaN"}},
		{"a,b,label\n1,2,0\n1,2,10\n", Options{}, []string{"line 3", "column 3", "label 10", "10 classes"}},
		{"a,b,label\n1,2,0\n1,2,1.5\n", Options{}, []string{"line 3", "not an integer"}},
		{"a,b,label\n1,2,0\n1,2\n", Options{}, []string{"line 3", "wrong number of fields"}},
		{"a,b,label\n1,2,0\n", Options{LabelColumn: "target"}, []string{`"target"`, "a, b, label", "Options.LabelColumn"}},
		{"1,2,0\n", Options{LabelColumn: "target"}, []string{"no header", `"target"`}},
		{"a,b,label\n", Options{}, []string{"no data rows"}},
	}
	for i, c := range cases {
		p := writeFile(t, dir, "e.csv", []byte(c.body), false)
		_, err := openIn(p, Input{Shape: shape(-1, 2), Classes: 10}, c.opts)
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		wantErr(t, err, append(c.want, "e.csv")...)
	}
}

func TestMisplacedLabelFlags(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "d.csv", []byte("a,label\n1,0\n"), false)
	_, err := openIn(p, Input{Shape: shape(-1, 1)}, Options{Labels: "y.npy"})
	wantErr(t, err, "d.csv", "Options.Labels", "Options.LabelColumn")
	wantOption(t, err, "Labels")
	q := writeNpy(t, dir, "x.npy", []float32{1, 2})
	_, err = openIn(q, Input{Shape: shape(-1, 1)}, Options{LabelColumn: "label"})
	wantErr(t, err, "x.npy", "Options.LabelColumn", "CSV")
	wantOption(t, err, "LabelColumn")
}
