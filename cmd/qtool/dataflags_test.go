package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qtool/qtool/calib"
	"github.com/urfave/cli/v2"
)

// runData runs a command with the data flags and returns what openData gave.
func runData(t *testing.T, in calib.Input, args ...string) (*dataSets, calib.Options, error) {
	t.Helper()
	var (
		ds   *dataSets
		opts calib.Options
	)
	app := &cli.App{
		Name:           "qtool",
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{
			Name:  "eval",
			Flags: dataFlags(),
			Action: func(c *cli.Context) error {
				var err error
				if opts, err = dataOptions(c, 42); err != nil {
					return err
				}
				ds, err = openData(c, modelInput{Input: in}, 42)
				return err
			},
		}},
	}
	err := app.Run(append([]string{"qtool", "eval"}, args...))
	if ds != nil {
		t.Cleanup(func() { ds.Close() })
	}
	return ds, opts, err
}

func writeIdx(t *testing.T, dir string, n int) string {
	t.Helper()
	img := []byte{0, 0, 8, 3}
	for _, d := range []int{n, 2, 2} {
		img = binary.BigEndian.AppendUint32(img, uint32(d))
	}
	lab := []byte{0, 0, 8, 1}
	lab = binary.BigEndian.AppendUint32(lab, uint32(n))
	for i := range n {
		img = append(img, byte(i), 1, 2, 3)
		lab = append(lab, byte(i%3))
	}
	p := filepath.Join(dir, "t-images-idx3-ubyte")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t-labels-idx1-ubyte"), lab, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDataFlags(t *testing.T) {
	p := writeIdx(t, t.TempDir(), 20)
	in := calib.Input{Name: "x", Shape: []int64{-1, 4}, Classes: 3}
	ds, o, err := runData(t, in, "--data", p, "--split", "3:1", "--batch-size", "8", "--max-memory", "512MiB",
		"--mean", "0.5", "--std", "0.25", "--grayscale", "--layout", "NHWC", "--limit", "0")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Calib.Len() != 15 || ds.Eval.Len() != 5 || !ds.Split || ds.BatchSize != 8 {
		t.Errorf("split 3:1 of 20 gave %d and %d, batch %d", ds.Calib.Len(), ds.Eval.Len(), ds.BatchSize)
	}
	if o.MaxMemory != 512<<20 || !slices.Equal(o.Mean, []float64{0.5}) || o.Color != calib.Grayscale || o.Layout != calib.NHWC || o.Seed != 42 || o.XKey != "x" || o.YKey != "" {
		t.Errorf("options %+v", o)
	}
	x := make([]float32, 4)
	if err := ds.Calib.Read([]int{0}, x, nil); err != nil || x[1] != (1.0/255-0.5)/0.25 {
		t.Errorf("read %v %v", x, err)
	}

	ds, _, err = runData(t, in, "--data", p, "--limit", "7")
	if err != nil || ds.Calib != ds.Eval || ds.Calib.Len() != 7 || ds.Split {
		t.Errorf("limit 7: %v", err)
	}
}

func TestDataFlagErrors(t *testing.T) {
	p := writeIdx(t, t.TempDir(), 10)
	in := calib.Input{Name: "x", Shape: []int64{-1, 4}, Classes: 3}
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{}, "--data", exitUsage},
		{[]string{"--data", p, "--split", "0.8"}, "--split", exitUsage},
		{[]string{"--data", p, "--layout", "chw"}, "--layout", exitUsage},
		{[]string{"--data", p, "--mean", "0.1,x"}, "--mean", exitUsage},
		{[]string{"--data", p, "--std", "0"}, "--std", exitUsage},
		{[]string{"--data", p, "--grayscale", "--rgb"}, "--grayscale", exitUsage},
		{[]string{"--data", p, "--max-memory", "lots"}, "--max-memory", exitUsage},
		{[]string{"--data", p, "--batch-size", "0"}, "--batch-size", exitUsage},
		{[]string{"--data", p, "--stretch"}, "--stretch", exitUsage},
		{[]string{"--data", p, "--limit", "-1"}, "--limit", exitUsage},
		{[]string{"--data", p + ".missing"}, "missing", exitInput},
		{[]string{"--data", p, "--y-key", "lab"}, "", exitOK}, // --y-key only matters for .npz
	} {
		_, _, err := runData(t, in, c.args...)
		if exitCode(err) != c.code || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: exit %d, error %v; want exit %d mentioning %q", c.args, exitCode(err), err, c.code, c.want)
		}
	}
	// A model that does not fit the data: an input error naming the fixing flag.
	_, _, err := runData(t, calib.Input{Name: "x", Shape: []int64{-1, 3, 2, 2}}, "--data", p)
	if exitCode(err) != exitInput || !strings.Contains(err.Error(), "--rgb") {
		t.Errorf("3-channel model: exit %d, %v", exitCode(err), err)
	}
}
