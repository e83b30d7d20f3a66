package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/qtool/qtool/calib"
	"github.com/urfave/cli/v2"
)

// defaultBatchSize is the --batch-size default of every command that reads data.
const defaultBatchSize = 256

// dataFlags returns the flags of every command that reads calibration or evaluation data
// (eval, binarize, compare), so that data are selected the same way everywhere.
func dataFlags() []cli.Flag {
	const cat = "Data"
	return []cli.Flag{
		&cli.StringFlag{Name: "data", Category: cat, Usage: "data `FILE`: .npy, .npz, idx (MNIST, .gz or not), CIFAR-10 .bin (a file, a quoted glob, or a folder of data_batch_*.bin), a folder of PNG/JPEG images (one subfolder per class, or none), or .csv"},
		&cli.StringFlag{Name: "labels", Category: cat, Usage: "labels `FILE` for .npy or idx data (idx default: the labels-idx1 file next to the images-idx3 file)"},
		&cli.StringFlag{Name: "x-key", Category: cat, Value: "x", Usage: "`NAME` of the input array in a .npz file"},
		&cli.StringFlag{Name: "y-key", Category: cat, Value: "y", Usage: "`NAME` of the labels array in a .npz file; without it the data have no labels"},
		&cli.StringFlag{Name: "ignore-label", Category: cat, Usage: "label `VALUES` (comma-separated) that mark positions left out of the loss and the accuracy, such as sequence padding (default: -1 and -100 in [N, T] labels, none in [N] labels; \"none\": ignore nothing)"},
		&cli.StringFlag{Name: "label-column", Category: cat, Usage: "CSV label column: a header `NAME`, or a 0-based index or \"last\" without header (default: the column named label, if any)"},
		&cli.IntFlag{Name: "limit", Category: cat, Usage: "use a seeded random subset of `N` samples (0: all)"},
		&cli.StringFlag{Name: "split", Category: cat, Usage: "hold out an evaluation set: `CALIB:EVAL` proportions of the data, such as 0.8:0.2 (seeded by --seed)"},
		&cli.IntFlag{Name: "batch-size", Category: cat, Value: defaultBatchSize, Usage: "samples per mini-batch"},
		&cli.IntFlag{Name: "resize", Category: cat, Usage: "resize images so the shorter side is `N` pixels, then crop the centre N×N"},
		&cli.BoolFlag{Name: "stretch", Category: cat, Usage: "with --resize, scale both sides to N, ignoring the aspect ratio, instead of cropping"},
		&cli.BoolFlag{Name: "grayscale", Category: cat, Usage: "convert images to one channel (ITU-R BT.601 luma)"},
		&cli.BoolFlag{Name: "rgb", Category: cat, Usage: "convert images to three channels"},
		&cli.BoolFlag{Name: "no-scale", Category: cat, Usage: "keep uint8 data in [0,255] instead of dividing by 255"},
		&cli.StringFlag{Name: "mean", Category: cat, Usage: "per-channel `a,b,c` subtracted after scaling (one value: every channel)"},
		&cli.StringFlag{Name: "std", Category: cat, Usage: "per-channel `a,b,c` divided by after --mean (one value: every channel)"},
		&cli.StringFlag{Name: "layout", Category: cat, Value: "nchw", Usage: "layout of 4-D arrays in .npy/.npz files: nchw or nhwc (images are always put in the model's layout)"},
		&cli.StringFlag{Name: "max-memory", Category: cat, Value: "2GiB", Usage: "`BYTES` of memory (e.g. 512MiB, 4GB) for the decoded data kept in memory (larger data sets are read from disk batch by batch) and, separately, for the engine: a batch plus the model's buffers; eval lowers a --batch-size that does not fit, binarize and compare refuse it"},
	}
}

// dataOptions builds calib.Options from the data flags. seed is the global --seed.
func dataOptions(c *cli.Context, seed uint64) (calib.Options, error) {
	o := calib.Options{
		Labels:      c.String("labels"),
		XKey:        c.String("x-key"),
		LabelColumn: c.String("label-column"),
		Limit:       c.Int("limit"),
		Seed:        seed,
		Resize:      c.Int("resize"),
		Stretch:     c.Bool("stretch"),
		NoScale:     c.Bool("no-scale"),
	}
	// An explicit --y-key must exist; the default y is optional.
	if c.IsSet("y-key") {
		o.YKey = c.String("y-key")
	}
	if c.IsSet("ignore-label") {
		v := strings.TrimSpace(c.String("ignore-label"))
		o.IgnoreLabels = []int64{}
		if !strings.EqualFold(v, "none") {
			for _, f := range strings.Split(v, ",") {
				l, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
				if err != nil {
					return o, usagef("--ignore-label %s: want integer labels, comma-separated, or none", v)
				}
				o.IgnoreLabels = append(o.IgnoreLabels, l)
			}
		}
	}
	if o.Limit < 0 {
		return o, usagef("--limit %d: want 0 (all) or a positive count", o.Limit)
	}
	if o.Resize < 0 {
		return o, usagef("--resize %d: want a positive size in pixels", o.Resize)
	}
	if o.Stretch && o.Resize == 0 {
		return o, usagef("--stretch needs --resize N")
	}
	switch {
	case c.Bool("grayscale") && c.Bool("rgb"):
		return o, usagef("--grayscale and --rgb exclude each other")
	case c.Bool("grayscale"):
		o.Color = calib.Grayscale
	case c.Bool("rgb"):
		o.Color = calib.RGB
	}
	switch l := strings.ToLower(c.String("layout")); l {
	case "nchw":
		o.Layout = calib.NCHW
	case "nhwc":
		o.Layout = calib.NHWC
	default:
		return o, usagef("--layout %q: want nchw or nhwc", l)
	}
	var err error
	if o.Mean, err = parseFloats(c.String("mean")); err != nil {
		return o, usagef("--mean: %v", err)
	}
	if o.Std, err = parseFloats(c.String("std")); err != nil {
		return o, usagef("--std: %v", err)
	}
	for _, s := range o.Std {
		if s == 0 {
			return o, usagef("--std %s: every value must be non-zero", c.String("std"))
		}
	}
	if len(o.Mean) > 1 && len(o.Std) > 1 && len(o.Mean) != len(o.Std) {
		return o, usagef("--mean has %d values but --std has %d", len(o.Mean), len(o.Std))
	}
	if o.MaxMemory, err = calib.ParseSize(c.String("max-memory")); err != nil {
		return o, usagef("--max-memory: %v", err)
	}
	return o, nil
}

func parseFloats(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var r []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v != v {
			return nil, fmt.Errorf("%q is not a comma-separated list of numbers such as 0.485,0.456,0.406", s)
		}
		r = append(r, v)
	}
	return r, nil
}

// dataSets holds the data the flags select.
type dataSets struct {
	// Calib and Eval are the two parts of --split, or both the whole data set without it.
	Calib, Eval calib.Dataset
	// Split reports whether --split divided the data.
	Split bool
	// BatchSize is --batch-size.
	BatchSize int
}

// Close closes the data sets.
func (d *dataSets) Close() error {
	err := d.Calib.Close()
	if d.Eval != d.Calib {
		err = errors.Join(err, d.Eval.Close())
	}
	return err
}

// openData opens --data for the model inputs in, applying --limit and --split with seed (the
// global --seed). Bad flag values are usage errors; unreadable or ill-fitting data are input
// errors whose messages name the file and the flag that fixes them.
func openData(c *cli.Context, in modelInput, seed uint64) (*dataSets, error) {
	path := c.String("data")
	if path == "" {
		return nil, usagef("--data FILE is required (see \"qtool help %s\" for the formats)", c.Command.Name)
	}
	bs := c.Int("batch-size")
	if bs <= 0 {
		return nil, usagef("--batch-size %d: want at least 1", bs)
	}
	o, err := dataOptions(c, seed)
	if err != nil {
		return nil, err
	}
	var ca, ev float64
	split := c.String("split")
	if split != "" {
		if ca, ev, err = calib.ParseSplit(split); err != nil {
			return nil, usagef("--split: %v", err)
		}
	}
	in.setOn(&o)
	d, err := calib.Open(path, o)
	if err != nil {
		return nil, cliError(err)
	}
	if split == "" {
		return &dataSets{Calib: d, Eval: d, BatchSize: bs}, nil
	}
	a, b, err := calib.Split(d, ca, ev, seed)
	if err != nil {
		d.Close()
		return nil, usagef("--split %s: %v", split, err)
	}
	return &dataSets{Calib: a, Eval: b, Split: true, BatchSize: bs}, nil
}
