package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/export"
	"github.com/urfave/cli/v2"
)

// optionFlags maps binarize.Options fields to the flags that set them, to turn the
// library's *binarize.OptionError into flag advice.
var optionFlags = map[string]string{
	"Method": "--algo", "Grid": "--grid", "Selection": "--keep/--only", "SensitiveShare": "--sensitive-share", "Rho": "--rho", "P": "--p",
	"Beta": "--beta", "Iters": "--iters", "InnerEpochs": "--inner-epochs", "InnerSteps": "--inner-steps",
	"Gamma": "--criterion", "RhoScale": "--rho-scale", "LR": "--lr", "Temperature": "--temperature", "Augment": "--augment", "Optimizer": "--optimizer",
	"Schedule": "--lr-schedule", "Loss": "--loss", "Start": "--start", "Format": "--format", "Opset": "--opset",
	"StatSamples": "--stat-samples", "BatchSize": "--batch-size", "Workers": "--max-memory",
	"ClassAxis": "--class-axis", "OutputWeights": "--output-weights", "Validation": "--validation",
	"Grids": "--budget-grids", "MaxTrials": "--max-trials", "Constraint.MaxDrop": "--max-drop",
}

// flagError turns the library's typed errors into flag advice: usage errors naming the
// flag to change. Other errors pass unchanged.
func flagError(err error, c *cli.Context, model string) error {
	var oe *binarize.OptionError
	var se *network.SelectionError
	var le *binarize.LabelsError
	var pe *binarize.OpsetError
	var re *binarize.ResumeError
	switch {
	case errors.As(err, &oe):
		if oe.Field == "Selection" {
			return usagef("--keep and --only exclude each other")
		}
		return usagef("%s %v: %s", optionFlags[oe.Field], oe.Value, oe.Reason)
	case errors.As(err, &se):
		if se.Name == "" {
			return usagef("%s: --keep/--only leave no weight to binarize", se.Model)
		}
		return usagef("%s: --%s %s: no weight of that name (weights: %s)", se.Model, strings.ToLower(se.List), se.Name, strings.Join(se.Weights, ", "))
	case errors.As(err, &le):
		return fmt.Errorf("%s: --loss %s needs labels, but the data have none: use --loss distill (the default without labels)", c.String("data"), c.String("loss"))
	case errors.As(err, &pe):
		return usagef("--opset %d is below %s's opset %d; export never lowers an opset: leave --opset out or raise it", pe.Want, model, pe.Has)
	case errors.As(err, &re):
		return fmt.Errorf("--resume: %w", re.Err)
	}
	return err
}

// binarizeOptions maps the flags onto binarize.Options and checks them before any work.
// A flag set to 0 is refused here where the library reads 0 as "the default".
func binarizeOptions(c *cli.Context, be backend, method admmq.Method) (binarize.Options, error) {
	for _, f := range []string{"iters", "inner-epochs", "lr", "rho", "temperature", "rho-growth-unnormalized"} {
		if c.IsSet(f) && c.Float64(f) == 0 && c.Int(f) == 0 {
			return binarize.Options{}, usagef("--%s 0: want a positive number", f)
		}
	}
	if c.IsSet("keep") && c.IsSet("only") {
		return binarize.Options{}, usagef("--keep and --only exclude each other")
	}
	o := binarize.Options{
		Method: method, Grid: network.Grid(strings.ToLower(c.String("grid"))),
		Selection:      network.Selection{Keep: splitList(c.String("keep")), Only: splitList(c.String("only"))},
		SensitiveShare: c.Float64("sensitive-share"),
		Rho:            admmq.Schedule{Rho0: c.Float64("rho"), Growth: c.Float64("rho-growth"), Every: c.Int("rho-every")},
		P:              c.Float64("p"), Beta: c.Float64("beta"),
		Iters: c.Int("iters"), InnerEpochs: c.Int("inner-epochs"), InnerSteps: c.Int("inner-steps"),
		Gamma: c.Float64("criterion"), Epochs: c.Int("epochs"),
		Optimizer: binarize.Optimizer(c.String("optimizer")), LR: c.Float64("lr"), Schedule: binarize.LRSchedule(c.String("lr-schedule")),
		Loss: binarize.Loss(c.String("loss")), Temperature: c.Float64("temperature"), Start: binarize.Start(c.String("start")),
		NoRescale: c.Bool("no-rescale"), NoBNRecalib: c.Bool("no-bn-recalib"), LastIterate: c.Bool("last-iterate"),
		AbsoluteRho: c.Bool("absolute-rho"), BalanceRho: c.Bool("balance-rho"), RemeasureRho: c.Bool("rho-remeasure"), StatSamples: c.Int("stat-samples"),
		Seed: c.Uint64("seed"), Version: version,
		BLAS: be.BLAS, Workers: be.Workers, MaxMemory: be.MaxMemory,
	}
	// Unset, the library's default applies, which depends on --rho-scale.
	if c.IsSet("rho-growth-unnormalized") {
		o.UnnormalizedGrowth = c.Float64("rho-growth-unnormalized")
	}
	// --validation 0 means none; the library reads 0 as its default.
	if o.Validation = c.Float64("validation"); o.Validation == 0 {
		o.Validation = -1
	}
	if c.Bool("budget") && !c.IsSet("validation") {
		o.Validation = binarize.BudgetValidation
	}
	if k := o.Selection.Keep; len(k) == 1 && strings.EqualFold(k[0], binarize.KeepNone) {
		k[0] = binarize.KeepNone
	}
	if c.IsSet("rho-scale") {
		if c.Bool("absolute-rho") && c.String("rho-scale") != string(binarize.RhoAbsolute) {
			return o, usagef("--absolute-rho and --rho-scale %s contradict each other", c.String("rho-scale"))
		}
		o.RhoScale = binarize.RhoScale(strings.ToLower(c.String("rho-scale")))
	}
	if c.Command.Name == "binarize" {
		o.Format, o.Opset = export.Format(c.String("format")), c.Int64("opset")
		o.NBitsMinBits, o.NBitsBlockSize = c.Int("nbits-bits"), c.Int("nbits-block")
		if (o.NBitsMinBits != 0 || o.NBitsBlockSize != 0) && o.Format != export.MatMulNBits {
			return o, usagef("--nbits-bits and --nbits-block apply to --format matmulnbits only")
		}
	}
	var err error
	if o.Augment, err = parseAugment(c.String("augment")); err != nil {
		return o, err
	}
	if o.ClassAxis, err = parseClassAxis(c.String("class-axis")); err != nil {
		return o, err
	}
	if o.OutputWeights, err = parseWeights(c.String("output-weights")); err != nil {
		return o, err
	}
	return o, flagError(o.Validate(), c, "")
}

// initModel applies --init: the model as loaded, or re-initialised by binarize.RandomInit
// with --seed (compare's runs then share the one random network of its first seed).
func initModel(c *cli.Context, l *loaded, be backend, seed uint64) (*loaded, error) {
	switch binarize.Init(strings.ToLower(c.String("init"))) {
	case binarize.InitModel, "":
		return l, nil
	case binarize.InitRandom:
		m, _, err := binarize.RandomInit(l.Model, seed)
		if err != nil {
			return nil, err
		}
		return buildModel(m, l.Path, be, seed)
	}
	return nil, usagef("--init %s: want model or random", c.String("init"))
}

// parseAugment reads --augment: none, or a comma-separated list of shift, shift=N and
// flip.
func parseAugment(v string) (calib.Augment, error) {
	var a calib.Augment
	for _, p := range splitList(v) {
		switch name, arg, hasArg := strings.Cut(strings.ToLower(p), "="); {
		case name == "none" && !hasArg && len(splitList(v)) == 1:
		case name == "flip" && !hasArg:
			a.Flip = true
		case name == "shift" && !hasArg:
			a.Shift = 2
		case name == "shift":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return a, usagef("--augment %s: want shift=N with N a whole number of pixels, at least 1", p)
			}
			a.Shift = n
		default:
			return a, usagef("--augment %s: want none, or shift, shift=N and flip, comma-separated", v)
		}
	}
	return a, nil
}
