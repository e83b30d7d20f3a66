package engine

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// legacySSE returns the lines of one assembly function that touch an X, Y or Z register
// with a legacy (non-VEX) SSE encoding, when the function also uses VEX or EVEX
// instructions. Such a mix makes the CPU merge the upper halves of the vector registers
// on every legacy instruction, or switch state: on the Intel Emerald Rapids of the
// README, five `MOVL BX, Xn` in ewAVX2's prologue cost about 1 µs a call (45× the
// whole call on a 48-value row), so an assembly function with AVX in it is VEX only.
func legacySSE(body string) []string {
	reg := regexp.MustCompile(`\b[XYZ]([0-9]|[12][0-9]|3[01])\b`)
	var bad []string
	vex := false
	for _, line := range strings.Split(body, "\n") {
		code, _, _ := strings.Cut(line, "//")
		f := strings.Fields(code)
		// Labels, #define lines and macro invocations (whose bodies are checked where
		// they are defined).
		if len(f) == 0 || strings.HasSuffix(f[0], ":") || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "(") {
			continue
		}
		if strings.HasPrefix(f[0], "V") {
			vex = true
			continue
		}
		if reg.MatchString(strings.Join(f[1:], " ")) {
			bad = append(bad, strings.TrimSpace(code))
		}
	}
	if !vex {
		return nil
	}
	return bad
}

// TestAsmVEXOnly checks every amd64 assembly function of the engine with legacySSE,
// and the macros, which are checked with the function they precede (or, before the
// first function, on their own).
func TestAsmVEXOnly(t *testing.T) {
	// The control: the prologue that was slow, and a VEX-only version of it.
	if got := legacySSE("\tVBROADCASTSS c0+40(FP), Y8\n\tMOVL BX, X12 // 3\n\tVPBROADCASTD X12, Y12\n"); len(got) != 1 {
		t.Fatalf("legacySSE missed a MOVL into X12: %q", got)
	}
	if got := legacySSE("\tVBROADCASTSS c0+40(FP), Y8\n\tVMOVD BX, X12\n\tVPBROADCASTD X12, Y12\n\tMOVQ x+0(FP), AX\n"); len(got) != 0 {
		t.Fatalf("legacySSE flagged VEX-only code: %q", got)
	}
	files, err := filepath.Glob("*_amd64.s")
	if err != nil || len(files) == 0 {
		t.Fatalf("no assembly files (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, fn := range strings.Split(string(b), "\nTEXT ") {
			name, _, _ := strings.Cut(fn, "(")
			if i == 0 {
				name = "before the first TEXT"
			}
			for _, l := range legacySSE(fn) {
				t.Errorf("%s: %s: legacy SSE in an AVX function: %s (use the V form)", f, name, l)
			}
		}
	}
}
