package calib

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/sbinet/npyio/npz"
)

// flagName matches a command-line flag such as --resize: calib is a library and its
// messages name Options fields instead, which callers map onto their own controls.
var flagName = regexp.MustCompile(`--[a-z]`)

// TestErrorsAreTypedAndNameNoFlag provokes each kind of error calib reports with a remedy
// and checks that errors.As finds the typed error with the right facts and that no message
// names a flag.
func TestErrorsAreTypedAndNameNoFlag(t *testing.T) {
	dir := t.TempDir()
	npy := writeNpy(t, dir, "x.npy", nchw(2, 3, 4, 5))
	nhwc := writeNpy(t, dir, "nhwc.npy", nhwcOf(nchw(2, 3, 4, 5)))
	csv := writeFile(t, dir, "d.csv", []byte("a,b,label\n1,2,0\n3,4,7\n"), false)
	cifar := writeFile(t, dir, "c.bin", cifarBatch(0, []byte{1, 2}), false)
	imgs := filepath.Join(dir, "imgs")
	savePNG(t, filepath.Join(imgs, "a.png"), grayImg(4, 4, func(x, y int) byte { return 1 }))
	savePNG(t, filepath.Join(imgs, "b.png"), grayImg(5, 4, func(x, y int) byte { return 1 }))
	npzPath := filepath.Join(dir, "d.npz")
	if err := npz.Write(npzPath, map[string]any{"x": toArrays(nchw(2, 3, 4, 5))}); err != nil {
		t.Fatal(err)
	}
	chw := Input{Name: "in", Shape: shape(-1, 3, 4, 5)}

	shapeErr := func(fix ...Setting) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var se *ShapeError
			if !errors.As(err, &se) {
				t.Fatalf("%v: not a *ShapeError", err)
			}
			if !slices.Equal(se.Fix, fix) || se.File == "" {
				t.Errorf("%v: file %q, fix %v; want fix %v", err, se.File, se.Fix, fix)
			}
		}
	}
	optionErr := func(option string) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Option != option {
				t.Fatalf("%v: want an *OptionError about %s, got %#v", err, option, oe)
			}
			// Errors about the data name them; only the options' own checks do not.
			if (oe.File == "") != (option == "Stretch" || option == "Limit" || option == "Mean") {
				t.Errorf("%v: File %q", err, oe.File)
			}
		}
	}
	cases := []struct {
		name  string
		path  string
		in    Input
		opts  Options
		check func(*testing.T, error)
	}{
		{"layout", nhwc, chw, Options{}, shapeErr(Setting{"Layout", NHWC})},
		{"array shape", npy, Input{Name: "in", Shape: shape(-1, 7)}, Options{}, shapeErr()},
		{"grayscale", cifar, Input{Name: "in", Shape: shape(-1, 1, 32, 32)}, Options{}, shapeErr(Setting{"Color", Grayscale})},
		{"rgb", imgs, Input{Name: "in", Shape: shape(-1, 3, 4, 4)}, Options{Resize: 4}, shapeErr(Setting{"Color", RGB})},
		{"resize", cifar, Input{Name: "in", Shape: shape(-1, 3, 28, 28)}, Options{}, shapeErr(Setting{"Resize", 28})},
		{"resize and colour", cifar, Input{Name: "in", Shape: shape(-1, 28*28)}, Options{}, shapeErr(Setting{"Resize", 28}, Setting{"Color", Grayscale})},
		{"folder sizes", imgs, Input{Name: "in", Shape: shape(-1, 1, 4, 4)}, Options{}, shapeErr(Setting{"Resize", 0})},
		{"mean per channel", npy, Input{Name: "in", Shape: shape(-1, 60)}, Options{Mean: []float64{1, 2}}, optionErr("Mean")},
		{"labels file", csv, Input{Shape: shape(-1, 2)}, Options{Labels: "y.npy"}, optionErr("Labels")},
		{"label column kind", npy, chw, Options{LabelColumn: "label"}, optionErr("LabelColumn")},
		{"label column", csv, Input{Shape: shape(-1, 2)}, Options{LabelColumn: "target"}, optionErr("LabelColumn")},
		{"x key", npzPath, chw, Options{XKey: "nope"}, optionErr("XKey")},
		{"y key", npzPath, chw, Options{YKey: "nope"}, optionErr("YKey")},
		{"stretch", npy, chw, Options{Stretch: true}, optionErr("Stretch")},
		{"limit", npy, chw, Options{Limit: -1}, optionErr("Limit")},
		{"fortran order", "testdata/numpy/x_fortran.npy", Input{Shape: shape(-1, 6)}, Options{MaxMemory: 10}, optionErr("MaxMemory")},
		{"label range", csv, Input{Shape: shape(-1, 2), Classes: 5}, Options{}, func(t *testing.T, err error) {
			var le *LabelError
			if !errors.As(err, &le) || le.Label != 7 || le.Classes != 5 || le.File != csv {
				t.Fatalf("%v: want a *LabelError for label 7 of 5 classes in %s, got %#v", err, csv, le)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Input = c.in
			d, err := Open(c.path, o)
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if flagName.MatchString(err.Error()) {
				t.Errorf("message names a flag: %v", err)
			}
			c.check(t, err)
		})
	}
}

// TestShapeErrorAdvice checks that the message carries the fix in Options' terms, so that
// a caller without a mapping still learns what to set.
func TestShapeErrorAdvice(t *testing.T) {
	e := &ShapeError{Reason: "r", Fix: []Setting{{"Resize", 28}, {"Color", Grayscale}}, Alt: []Setting{{"Resize", 28}, {"Stretch", true}}}
	want := "r: set Options.Resize to 28 and Options.Color to Grayscale (or Options.Resize to 28 and Options.Stretch to ignore the aspect ratio)"
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e, want)
	}
}
