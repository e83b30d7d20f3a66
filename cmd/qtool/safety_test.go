package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets a test run this binary as qtool itself (QTOOL_TEST_AS_QTOOL=1), for the
// tests that need a real process: signals.
func TestMain(m *testing.M) {
	if os.Getenv("QTOOL_TEST_AS_QTOOL") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// writeFile writes b to path with mode and fails the test on error.
func writeFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// assertFiles fails unless dir holds exactly names (no temporary files left over).
func assertFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// TestFailedCheckKeepsOldOutput: when the new file fails its read-back (here it is
// truncated on disk before the check), the existing -o file keeps its bytes and no
// temporary file is left; a run that passes replaces it and keeps its mode.
func TestFailedCheckKeepsOldOutput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.onnx")
	old := []byte("the user's previous model")
	writeFile(t, out, old, 0o640)
	testHookPending = func(tmp string) {
		if err := os.Truncate(tmp, 100); err != nil {
			t.Error(err)
		}
	}
	o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out)...)
	testHookPending = nil
	if code != exitInput || err == nil {
		t.Fatalf("a truncated new file: exit %d (%v), want 1\n%s", code, err, o)
	}
	if !strings.Contains(err.Error(), "unchanged") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line saying the previous file is unchanged", err)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, old) {
		t.Fatalf("the previous -o file was lost or changed: now %d bytes", len(b))
	}
	assertFiles(t, dir, "out.onnx")

	if o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out)...); code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, o)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); bytes.Equal(b, old) {
		t.Error("a successful run did not replace the output")
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("the replaced output has mode %v, want the previous 0640", fi.Mode().Perm())
	}
	assertFiles(t, dir, "out.onnx")
}

// TestOutputIsInput: -o naming the input model — the same path, another relative path, or
// a symlink to it — is a usage error and the model keeps its bytes; so are outputs naming
// the data, and two outputs naming one file.
func TestOutputIsInput(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	orig, err := os.ReadFile(digitsModel)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, model, orig, 0o644)
	link := filepath.Join(dir, "link.onnx")
	if err := os.Symlink(model, link); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "d.npz")
	if b, err := os.ReadFile(digitsData); err == nil {
		writeFile(t, data, b, 0o644)
	}
	rel := filepath.Join(dir, ".", "sub", "..", "m.onnx")
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for _, args := range [][]string{
		{"binarize", model, "--data", data, "-o", model},
		{"binarize", model, "--data", data, "-o", rel},
		{"binarize", model, "--data", data, "-o", link},
		{"binarize", link, "--data", data, "-o", model},
		{"binarize", model, "--data", data, "-o", filepath.Join(dir, "o.onnx"), "--checkpoint", data},
		{"binarize", model, "--data", data, "-o", data},
		{"binarize", model, "--data", data, "-o", filepath.Join(dir, "o.onnx"), "--report", filepath.Join(dir, "o.onnx.json"), "--checkpoint", filepath.Join(dir, "o.onnx.json")},
	} {
		o, code, err := runArgs(t, append(args, smallBudget...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want 2\n%s", args[2:], code, err, o)
		}
	}
	for _, p := range []string{model, data} {
		if b, _ := os.ReadFile(p); len(b) == 0 || (p == model && !bytes.Equal(b, orig)) {
			t.Errorf("%s was overwritten", p)
		}
	}
}

// TestOutputFoldersCheckedFirst: -o, --report and --checkpoint into a missing (or, for a
// non-root user, read-only) folder fail as usage errors before anything is loaded: the
// data file does not exist, so a check made after loading would report that instead.
func TestOutputFoldersCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	folders := []string{missing}
	if os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644) != nil {
		folders = append(folders, ro) // root writes into read-only folders anyway
	}
	noData := filepath.Join(dir, "no-such-data.npz")
	good := filepath.Join(dir, "o.onnx")
	for _, folder := range folders {
		for _, extra := range [][]string{
			{"-o", filepath.Join(folder, "o.onnx")},
			{"-o", good, "--report", filepath.Join(folder, "rep")},
			{"-o", good, "--checkpoint", filepath.Join(folder, "ck")},
		} {
			args := append([]string{"binarize", digitsModel, "--data", noData}, extra...)
			_, code, err := runArgs(t, append(args, smallBudget...)...)
			if code != exitUsage || err == nil {
				t.Errorf("%v: exit %d (%v), want 2 before loading", extra, code, err)
				continue
			}
			bad := extra[len(extra)-1]
			if msg := err.Error(); strings.Count(msg, bad) != 1 || strings.Contains(msg, "no-such-data") {
				t.Errorf("%v: error %q: want %s named once, and no word of the data", extra, msg, bad)
			}
		}
	}
	if _, err := os.Stat(good); !os.IsNotExist(err) {
		t.Error("a refused run wrote the output")
	}
	if _, code, err := runArgs(t, "compare", "--out", filepath.Join(ro, "sub"), "--data", noData, digitsModel); len(folders) > 1 && code != exitUsage {
		t.Errorf("compare --out into a read-only folder: exit %d (%v), want 2", code, err)
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"binarise"}, {"help", "binarise"}} {
		_, code, err := runArgs(t, args...)
		if code != exitUsage || err == nil {
			t.Fatalf("%v: exit %d (%v), want 2", args, code, err)
		}
		for _, want := range []string{"binarise", "binarize", "compare", "eval", "inspect"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error %q does not list %s", args, err, want)
			}
		}
	}
}

// TestNonFiniteAndOpsetUsage: NaN and infinite float flags, and an opset export cannot
// write, are usage errors found before any work.
func TestNonFiniteAndOpsetUsage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o.onnx")
	for _, extra := range [][]string{
		{"--lr", "NaN"}, {"--rho", "Inf"}, {"--rho", "-Inf"}, {"--beta", "nan"}, {"--max-drop", "NaN"},
		{"--criterion", "+Inf"}, {"--opset", "99"}, {"--opset", "3"}, {"--opset", "-1"},
	} {
		o, code, err := runArgs(t, binArgs(digitsModel, digitsData, out, extra...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d (%v), want 2\n%s", extra, code, err, o)
		}
	}
	if _, code, _ := runArgs(t, "compare", "--rho", "NaN", "--seeds", "1"); code != exitUsage {
		t.Errorf("compare --rho NaN: exit %d, want 2", code)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a usage error wrote the output")
	}
}

// TestCheckpointRefusals: a run's checkpoint file has the same bytes every time; a
// flipped byte, or a run with another --rho, --limit, --grid, --batch-size or data,
// is refused with a one-line message naming what differs; the matching run resumes.
func TestCheckpointRefusals(t *testing.T) {
	dir := t.TempDir()
	ck1, ck2 := filepath.Join(dir, "ck1"), filepath.Join(dir, "ck2")
	out := filepath.Join(dir, "o.onnx")
	base := binArgs(digitsModel, digitsData, out, "--limit", "300")
	for _, ck := range []string{ck1, ck2} {
		if o, code, err := runArgs(t, append(base, "--checkpoint", ck)...); code != 0 {
			t.Fatalf("exit %d: %v\n%s", code, err, o)
		}
	}
	b1, _ := os.ReadFile(ck1)
	b2, _ := os.ReadFile(ck2)
	if len(b1) == 0 || !bytes.Equal(b1, b2) {
		t.Fatalf("two identical runs wrote different checkpoints (%d and %d bytes)", len(b1), len(b2))
	}
	if o, code, err := runArgs(t, append(base, "--resume", ck1)...); code != 0 {
		t.Fatalf("resume with the same settings: exit %d: %v\n%s", code, err, o)
	}
	otherData := filepath.Join(dir, "d.csv")
	if b, err := os.ReadFile("../../testmodels/digits-test.csv"); err == nil {
		writeFile(t, otherData, b, 0o644)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(base, "--rho", "0.5"), "--rho"},
		{append(base[:len(base):len(base)], "--grid", "binary-channel"), "--grid"},
		{binArgs(digitsModel, digitsData, out, "--limit", "200"), "--limit"},
		{append(base[:len(base):len(base)], "--batch-size", "32"), "--batch-size"},
		{binArgs(digitsModel, otherData, out, "--limit", "300"), "data"},
	} {
		_, code, err := runArgs(t, append(tc.args, "--resume", ck1)...)
		if code != exitInput || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("resume with another %s: exit %d, error %v; want exit 1 naming %s", tc.want, code, err, tc.want)
		}
	}
	bad := bytes.Clone(b1)
	bad[len(bad)/2] ^= 0x10
	writeFile(t, ck2, bad, 0o644)
	_, code, err := runArgs(t, append(base, "--resume", ck2)...)
	if code != exitInput || err == nil || !strings.Contains(err.Error(), "corrupted") || !strings.Contains(err.Error(), ck2) {
		t.Errorf("a corrupted checkpoint: exit %d, error %v; want exit 1 saying %s is corrupted", code, err, ck2)
	}
}

// TestCancelledBeforeWork: a run cancelled while it loads removes the embedded default's
// temporary folder, exits 130, and mentions --resume only when the checkpoint exists.
func TestCancelledBeforeWork(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ck := filepath.Join(dir, "ck")
	_, code, err := runArgsCtx(ctx, "binarize", "-o", filepath.Join(dir, "o.onnx"), "--checkpoint", ck, "-q")
	if code != exitCancelled {
		t.Fatalf("exit %d (%v), want 130", code, err)
	}
	if strings.Contains(err.Error(), "--resume") {
		t.Errorf("error %q suggests --resume %s, which does not exist", err, ck)
	}
	assertFiles(t, tmp)
	assertFiles(t, dir)
}

// TestSIGTERM runs qtool as a process on the embedded default and sends SIGTERM, once as
// soon as its temporary folder exists (during loading) and once during training: qtool
// must exit 143, remove its qtool-default-* folder and keep the previous -o file.
func TestSIGTERM(t *testing.T) {
	for _, when := range []string{"loading", "training"} {
		t.Run(when, func(t *testing.T) {
			tmp, dir := t.TempDir(), t.TempDir()
			out := filepath.Join(dir, "o.onnx")
			writeFile(t, out, []byte("old"), 0o644)
			cmd := exec.Command(os.Args[0], "binarize", "-o", out, "--iters", "100", "--log-every", "0s")
			cmd.Env = append(os.Environ(), "QTOOL_TEST_AS_QTOOL=1", "TMPDIR="+tmp)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stderr)
			var log strings.Builder
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
				// The folder is made after the first log line, so the first test signals
				// during loading or the full-precision evaluation.
				ents, _ := os.ReadDir(tmp)
				if (when == "loading" && len(ents) > 0) || (when == "training" && strings.Contains(sc.Text(), " epoch ")) {
					break
				}
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitTerminated {
				t.Fatalf("exit %v, want 143\n%s", err, log.String())
			}
			assertFiles(t, tmp)
			if b, _ := os.ReadFile(out); string(b) != "old" {
				t.Errorf("the previous -o file now holds %d bytes", len(b))
			}
			assertFiles(t, dir, "o.onnx")
		})
	}
}

// TestPercentRounding: a drop that float arithmetic makes 0.5000000000000004 pp is
// reported, and gated, as 0.5.
func TestPercentRounding(t *testing.T) {
	fp, bin := 0.9, 0.895
	if d := toPct(fp - bin); d != 0.5 {
		t.Errorf("toPct(%v − %v) = %v, want 0.5", fp, bin, d)
	}
	if a := toPct(0.8123456); a != 81.2346 {
		t.Errorf("toPct(0.8123456) = %v, want 81.2346", a)
	}
}
