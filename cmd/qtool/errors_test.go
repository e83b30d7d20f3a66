package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
)

// writeRawNpy writes a little-endian float32 .npy of the given shape filled with zeros.
func writeRawNpy(t *testing.T, path string, shape ...int) {
	t.Helper()
	dims := make([]string, len(shape))
	n := 1
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
		n *= d
	}
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%s,), }", strings.Join(dims, ", "))
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	b = append(b, hdr...)
	for range n {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(0))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIErrorAdvice provokes each library error that carries a remedy, wraps it as a
// command would, and checks that cliError names the flag, keeps the context and the
// typed error, and sets the exit code.
func TestCLIErrorAdvice(t *testing.T) {
	dir := t.TempDir()
	nhwc := filepath.Join(dir, "nhwc.npy")
	writeRawNpy(t, nhwc, 2, 28, 28, 1)
	provoke := func(err error) error {
		t.Helper()
		if err == nil {
			t.Fatal("the library accepted what it should refuse")
		}
		return fmt.Errorf("ctx: %w", err)
	}
	open := func(path string, o calib.Options) error {
		d, err := calib.Open(path, o)
		if err == nil {
			d.Close()
		}
		return provoke(err)
	}
	cnn := calib.Input{Name: "input", Shape: []int64{-1, 1, 28, 28}}
	digits, err := onnxio.Load(digitsModel) // opset 9: no DequantizeLinear
	if err != nil {
		t.Fatal(err)
	}
	exportErr := func(o export.Options) error {
		_, err := export.Export(digits, nil, o)
		return provoke(err)
	}
	unseal := func(data []byte, fp network.Fingerprint) error {
		_, err := network.Unseal(data, fp)
		return provoke(err)
	}
	sealed := network.Seal([]byte("state"), network.Fingerprint{{Name: "--rho", Value: "1"}})
	cases := []struct {
		name   string
		err    error
		want   []string
		target any
		code   int
	}{
		{"layout", open(nhwc, calib.Options{Input: cnn}), []string{"use --layout nhwc", "nhwc.npy"}, new(*calib.ShapeError), exitInput},
		{"stretch", open(nhwc, calib.Options{Input: cnn, Stretch: true}), []string{"--stretch needs --resize"}, new(*calib.OptionError), exitInput},
		{"x key", open(fmnistCalib, calib.Options{Input: cnn, XKey: "nope"}), []string{"choose one with --x-key"}, new(*calib.OptionError), exitInput},
		{"labels", open(fmnistCalib, calib.Options{Input: cnn, Labels: "y.npy"}), []string{"(--labels)", "--y-key array"}, new(*calib.OptionError), exitInput},
		{"qdq opset", exportErr(export.Options{Format: export.QDQ}), []string{"pass --opset 10 or later"}, new(*export.OpsetError), exitInput},
		{"opset too high", exportErr(export.Options{Opset: 30}), []string{"--opset 30 is beyond"}, new(*export.OpsetError), exitUsage},
		{"memory", fmt.Errorf("ctx: %w", &engine.MemoryError{Model: "m", Node: "n", Op: "Gemm", Shape: []int{9}, Bytes: 1 << 30, Limit: 1 << 20}),
			[]string{"raise the memory limit (--max-memory)"}, new(*engine.MemoryError), exitInput},
		{"checkpoint settings", unseal(sealed, network.Fingerprint{{Name: "--rho", Value: "2"}}),
			[]string{"--rho: 1 there, 2 here", "start again without --resume"}, new(*network.MismatchError), exitInput},
		{"checkpoint algorithm", fmt.Errorf("--resume: %w", &network.MismatchError{Diffs: []network.SettingDiff{{Name: "Algo", Saved: "admm-q", Now: "pgd"}}}),
			[]string{"--algo: admm-q there, pgd here"}, new(*network.MismatchError), exitInput},
		{"corrupt checkpoint", unseal(sealed[:len(sealed)-1], nil), []string{"run again without --resume"}, &network.ErrCorrupt, exitInput},
		{"checkpoint version", fmt.Errorf("ctx: %w", &network.VersionError{Version: 1}), []string{"start again without --resume"}, new(*network.VersionError), exitInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := cliError(c.err)
			msg := got.Error()
			for _, w := range append(c.want, "ctx: ") {
				if w == "ctx: " && strings.HasPrefix(c.err.Error(), "--resume") {
					w = "--resume: "
				}
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "Options.") || strings.Contains(msg, "start a new run") {
				t.Errorf("%q still gives the library's advice", msg)
			}
			if e, ok := c.target.(*error); ok {
				if !errors.Is(got, *e) {
					t.Errorf("%v: errors.Is lost %v", got, *e)
				}
			} else if !errors.As(got, c.target) {
				t.Errorf("%v: errors.As lost %T", got, c.target)
			}
			if exitCode(got) != c.code {
				t.Errorf("%v: exit %d, want %d", got, exitCode(got), c.code)
			}
			if again := cliError(got); again.Error() != msg {
				t.Errorf("applied twice: %q, then %q", msg, again)
			}
		})
	}
	if err := errors.New("plain"); cliError(err) != err {
		t.Error("cliError changed an error without library advice")
	}
}

// TestEvalFlagAdvice runs qtool eval on data that need a flag and checks the advice
// reaches the user and the exit code is an input error.
func TestEvalFlagAdvice(t *testing.T) {
	dir := t.TempDir()
	nhwc := filepath.Join(dir, "nhwc.npy")
	writeRawNpy(t, nhwc, 2, 28, 28, 1)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "../../testmodels/fmnist-cnn.onnx", "--data", nhwc}, "use --layout nhwc"},
		{[]string{"eval", "../../testmodels/fmnist-cnn.onnx", "--data", fmnistCalib, "--x-key", "nope"}, "choose one with --x-key"},
		{[]string{"eval", digitsModel, "--data", digitsData, "--label-column", "label"}, "--label-column applies to CSV files only"},
	} {
		_, code, err := runArgs(t, c.args...)
		if code != exitInput || err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Options.") {
			t.Errorf("%v: exit %d, %v; want exit %d advising %q", c.args, code, err, exitInput, c.want)
		}
	}
}
