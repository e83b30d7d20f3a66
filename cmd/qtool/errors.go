package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/train"
)

// The libraries' errors name the Options fields that fix them; qtool's users know flags.
// cliError is the one place that translates, so that every command gives flag advice
// without each call site knowing which library error it may see.

// calibFlags maps calib.Options fields to the data flags that set them.
var calibFlags = map[string]string{
	"Labels":       "--labels",
	"XKey":         "--x-key",
	"YKey":         "--y-key",
	"LabelColumn":  "--label-column",
	"IgnoreLabels": "--ignore-label",
	"Limit":        "--limit",
	"Seed":         "--seed",
	"Resize":       "--resize",
	"Stretch":      "--stretch",
	"Color":        "--grayscale/--rgb",
	"NoScale":      "--no-scale",
	"Mean":         "--mean",
	"Std":          "--std",
	"Layout":       "--layout",
	"MaxMemory":    "--max-memory",
}

// runFlags maps the run settings a checkpoint records (network.Config fields) to flags.
var runFlags = map[string]string{
	"Algo":    "--algo",
	"Seed":    "--seed",
	"Targets": "target weights (model, --keep/--only)",
}

var optionRef = regexp.MustCompile(`Options\.([A-Za-z]+)`)

// withFlags replaces each "Options.Field" in s by its flag in flags; fields without a
// flag keep the library's name, which is still accurate.
func withFlags(s string, flags map[string]string) string {
	return optionRef.ReplaceAllStringFunc(s, func(ref string) string {
		if f, ok := flags[strings.TrimPrefix(ref, "Options.")]; ok {
			return f
		}
		return ref
	})
}

// advised is an error whose message cliError rewrote; errors.As, errors.Is and the exit
// code still see the library's error.
type advised struct {
	err error
	msg string
}

func (a *advised) Error() string { return a.msg }
func (a *advised) Unwrap() error { return a.err }

// cliError rewrites the library errors in err's chain into flag advice, keeping the
// context that wraps them, and makes an explicitly requested opset export cannot write a
// usage error. Errors without a library advice are returned unchanged; applying it twice
// changes nothing more.
func cliError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	rewrite := func(lib error, cli string) {
		msg = strings.Replace(msg, lib.Error(), cli, 1)
	}
	var se *calib.ShapeError
	if errors.As(err, &se) {
		rewrite(se, shapeAdvice(se))
	}
	var oe *calib.OptionError
	if errors.As(err, &oe) {
		rewrite(oe, withFlags(oe.Error(), calibFlags))
	}
	var ope *export.OpsetError
	if errors.As(err, &ope) {
		s := strings.ReplaceAll(ope.Error(), "set Options.Opset to ", "pass --opset ")
		rewrite(ope, withFlags(s, map[string]string{"Opset": "--opset"}))
	}
	var me *engine.MemoryError
	if errors.As(err, &me) {
		rewrite(me, withFlags(me.Error(), map[string]string{"MaxBytes": "--max-memory"}))
	}
	var mm *network.MismatchError
	if errors.As(err, &mm) {
		rewrite(mm, mismatchAdvice(mm))
	}
	var ve *network.VersionError
	if errors.As(err, &ve) {
		rewrite(ve, strings.Replace(ve.Error(), "start a new run", "start again without --resume", 1))
	}
	if errors.Is(err, network.ErrCorrupt) {
		rewrite(network.ErrCorrupt, strings.Replace(network.ErrCorrupt.Error(), "start a new run", "run again without --resume", 1))
	}
	var ile *train.IgnoredLabelError
	if errors.As(err, &ile) {
		rewrite(ile, strings.Replace(ile.Error(), "train with an Objective", "use --loss objective", 1))
	}
	var out error = err
	if msg != err.Error() {
		out = &advised{err: err, msg: msg}
	}
	var ue usageError
	if ope != nil && ope.Requested && !errors.As(err, &ue) {
		out = usageError{out}
	}
	return out
}

// shapeAdvice is a calib.ShapeError's message with its fix given as flags.
func shapeAdvice(e *calib.ShapeError) string {
	s := e.Reason
	if len(e.Fix) > 0 {
		s += ": use " + settingFlags(e.Fix)
	}
	if len(e.Alt) > 0 {
		s += " (or " + settingFlags(e.Alt) + " to ignore the aspect ratio)"
	}
	return s
}

// settingFlags writes calib settings as the flags that make them.
func settingFlags(ss []calib.Setting) string {
	var parts []string
	for _, s := range ss {
		flag := withFlags("Options."+s.Option, calibFlags)
		switch {
		case s.Option == "Color":
			parts = append(parts, map[any]string{calib.Grayscale: "--grayscale", calib.RGB: "--rgb"}[s.Value])
		case s.Option == "Resize" && s.Value == 0:
			parts = append(parts, "--resize N to bring all images to N×N")
		case s.Value == true:
			parts = append(parts, flag)
		default:
			parts = append(parts, fmt.Sprintf("%s %v", flag, s.Value))
		}
	}
	return strings.Join(parts, " ")
}

// mismatchAdvice is a network.MismatchError's message in flags: the checkpoint's own
// settings are already named as flags by runFingerprint; the run's fields are mapped.
func mismatchAdvice(e *network.MismatchError) string {
	var b strings.Builder
	b.WriteString("checkpoint was saved by a run with other settings (")
	for i, d := range e.Diffs {
		if i > 0 {
			b.WriteString("; ")
		}
		name := d.Name
		if f, ok := runFlags[name]; ok {
			name = f
		}
		fmt.Fprintf(&b, "%s: %s there, %s here", name, orNone(d.Saved), orNone(d.Now))
	}
	b.WriteString("): resume with the same model, data and flags, or start again without --resume")
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
