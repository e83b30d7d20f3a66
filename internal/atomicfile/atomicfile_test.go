package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("new content")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "new content" {
		t.Fatalf("got %q", got)
	}
	assertOnlyFile(t, dir, "out.bin")
}

func TestFailedWriteLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("partial"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want wrapping %v", err, boom)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "old" {
		t.Fatalf("destination clobbered: %q", got)
	}
	assertOnlyFile(t, dir, "out.bin")
}

func TestUnwritableFolder(t *testing.T) {
	err := WriteBytes(filepath.Join(t.TempDir(), "missing", "out.bin"), []byte("x"))
	if err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
}

func assertOnlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("folder holds %v, want only %s", names, name)
	}
}

// TestReplaceKeepsMode: replacing a file keeps its permission bits, whatever they were.
func TestReplaceKeepsMode(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o755, 0o640} {
		p := filepath.Join(dir, "f"+mode.String())
		if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := WriteBytes(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("replaced a %v file: now %v", mode, fi.Mode().Perm())
		}
	}
}

// TestNewFileModeFollowsUmask: a new file gets 0644 less the umask, as os.Create's 0666
// would get 0666 less the umask — never the 0600 of a bare temporary file.
func TestNewFileModeFollowsUmask(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	f, err := os.OpenFile(ref, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, _ := os.Stat(ref)
	p := filepath.Join(dir, "new")
	if err := WriteBytes(p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.Stat(p)
	if got.Mode().Perm() != want.Mode().Perm() {
		t.Errorf("new file mode %v, want %v (0644 less the umask)", got.Mode().Perm(), want.Mode().Perm())
	}
}

// TestPendingAbortKeepsOld: content created but aborted never reaches the destination, and
// the destination reads as before while the new content is pending.
func TestPendingAbortKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	pend, err := Create(p, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err })
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(pend.TempPath()); string(b) != "new" {
		t.Fatalf("pending content %q", b)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("destination changed before Commit: %q", b)
	}
	pend.Abort()
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("destination after Abort: %q", b)
	}
	assertOnlyFile(t, dir, "out.bin")
	pend, err = Create(p, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err })
	if err != nil {
		t.Fatal(err)
	}
	if err := pend.Commit(); err != nil {
		t.Fatal(err)
	}
	pend.Abort() // deferred Aborts run after Commit: a no-op
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Fatalf("destination after Commit: %q", b)
	}
	assertOnlyFile(t, dir, "out.bin")
}

// TestErrorNamesPathOnce: the error names the destination once, and not the temporary file.
func TestErrorNamesPathOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing", "out.bin")
	for _, err := range []error{WriteBytes(p, []byte("x")), CheckWritable(p)} {
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("error %v is not an *Error", err)
		}
		msg := err.Error()
		if strings.Count(msg, p) != 1 || strings.Contains(msg, ".tmp") {
			t.Errorf("error %q: want the destination named once and no temporary file", msg)
		}
	}
}

// TestCheckWritable: a writable folder passes and is left as it was; a read-only folder and
// a folder given as the file fail.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := CheckWritable(filepath.Join(dir, "out.bin")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("CheckWritable left %d files", len(ents))
	}
	if err := CheckWritable(dir); err == nil {
		t.Error("a folder as the destination passed")
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if probe := filepath.Join(ro, "probe"); os.WriteFile(probe, nil, 0o644) == nil {
		os.Remove(probe)
		t.Skip("running as a user who can write into read-only folders (root)")
	}
	if err := CheckWritable(filepath.Join(ro, "out.bin")); err == nil {
		t.Error("a read-only folder passed")
	}
}

// TestFillErrorKept: an error of fill that names another file keeps that name.
func TestFillErrorKept(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.bin")
	src := filepath.Join(t.TempDir(), "weights.bin")
	err := Write(p, func(w io.Writer) error {
		_, err := os.Open(src)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), src) || !strings.Contains(err.Error(), p) {
		t.Errorf("error %v: want both %s and %s named", err, p, src)
	}
}
