package main

import (
	"strings"
	"testing"

	"github.com/qtool/qtool/calib"
)

// TestParseAugment checks --augment's forms and that a bad value names the flag.
func TestParseAugment(t *testing.T) {
	for in, want := range map[string]calib.Augment{
		"": {}, "none": {}, "shift": {Shift: 2}, "flip": {Flip: true}, "shift=3": {Shift: 3},
		"Shift=1,FLIP": {Shift: 1, Flip: true}, "flip, shift": {Shift: 2, Flip: true},
	} {
		got, err := parseAugment(in)
		if err != nil || got != want {
			t.Errorf("--augment %q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"shift=0", "shift=-1", "shift=x", "none,flip", "rotate", "flip=2"} {
		if _, err := parseAugment(in); err == nil || !strings.Contains(err.Error(), "--augment") {
			t.Errorf("--augment %q: error %v, want one naming --augment", in, err)
		}
	}
}
