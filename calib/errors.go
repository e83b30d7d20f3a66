package calib

import (
	"fmt"
	"strings"
)

// calib's errors name settings as fields of Options ("Options.Resize"), never as the
// flags of a command line: a program maps the typed errors below onto its own controls.

// A Setting is a value of one field of Options.
type Setting struct {
	// Option is the field's name in Options: "Resize", "Stretch", "Color" or "Layout".
	Option string
	// Value is the field's value: an int for Resize (0 when any size that makes the images
	// agree will do), true for Stretch, a Color, a Layout.
	Value any
}

func (s Setting) String() string {
	if s.Option == "Resize" && s.Value == 0 {
		return "Options.Resize"
	}
	if s.Option == "Stretch" {
		return "Options.Stretch"
	}
	return fmt.Sprintf("Options.%s to %v", s.Option, s.Value)
}

func settingsString(ss []Setting) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return strings.Join(parts, " and ")
}

// A ShapeError reports data whose samples do not fit the model input, and the settings of
// Options that make them fit when some do.
type ShapeError struct {
	// File is the data file, folder or image.
	File string
	// Input is the model input's name and Want its shape, batch included (-1 marks a free
	// dimension); both are empty when images of a folder disagree among themselves.
	Input string
	Want  []int64
	// Got is the shape of one sample as stored, or as decoded for images (channels, height,
	// width); when images of a folder disagree, the odd image's height and width.
	Got []int
	// Reason says what does not fit, without the remedy.
	Reason string
	// Fix holds the settings that together make the data fit; nil when none does.
	Fix []Setting
	// Alt is another fix, which ignores the images' aspect ratio (Options.Stretch).
	Alt []Setting
}

func (e *ShapeError) Error() string {
	s := e.Reason
	if len(e.Fix) > 0 {
		s += ": set " + settingsString(e.Fix)
	}
	if len(e.Alt) > 0 {
		s += " (or " + settingsString(e.Alt) + " to ignore the aspect ratio)"
	}
	return s
}

// An OptionError reports a field of Options whose value is invalid, does not apply to the
// data, or must change for the data to be read.
type OptionError struct {
	// Option is the field's name in Options, such as "LabelColumn" or "MaxMemory".
	Option string
	// File is the data the error concerns; "" when the options alone are at fault.
	File string
	// Reason says what is wrong and what to do; it names fields as Options.Name.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *OptionError) Error() string {
	s := e.Reason
	if e.File != "" {
		s = e.File + ": " + s
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *OptionError) Unwrap() error { return e.Err }

// An InputError reports a model input the data do not feed.
type InputError struct {
	// File is the data file and Input the model input's name.
	File, Input string
	// Reason says what is missing and how to provide it.
	Reason string
}

func (e *InputError) Error() string { return e.File + ": " + e.Reason }

// A LabelError reports a label outside the model's classes.
type LabelError struct {
	// File is the file holding the label and Where its place in it, such as "line 3,
	// column 5"; Where is empty when unknown.
	File, Where string
	// Label is the offending label and Classes the model's number of classes (0: unknown,
	// when only negative labels are refused).
	Label   int64
	Classes int
}

func (e *LabelError) Error() string {
	s := e.File + ": "
	if e.Where != "" {
		s += e.Where + ": "
	}
	if e.Classes > 0 {
		return s + fmt.Sprintf("label %d is out of range for a model with %d classes (0..%d)", e.Label, e.Classes, e.Classes-1)
	}
	return s + fmt.Sprintf("label %d is negative", e.Label)
}

// String names c as the constants do.
func (c Color) String() string {
	switch c {
	case Grayscale:
		return "Grayscale"
	case RGB:
		return "RGB"
	}
	return "ColorAuto"
}
