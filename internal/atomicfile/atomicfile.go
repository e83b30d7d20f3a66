// Package atomicfile writes files so that readers see either the old content or the
// complete new content, never a partial file: the data goes to a temporary file in the
// same folder, is synced, and is renamed over the destination only when every byte is
// down. A failed write — a full disk, a cancelled run — leaves the destination untouched
// and no temporary file behind.
//
// Replacing a file keeps its permission bits; a new file gets 0644 less the umask, as
// os.Create would give it.
package atomicfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Error is the error of every function of the package: what was being written and why it
// failed.
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return "writing " + e.Path + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// wrap names path once: an error of the temporary file names that file, which the user
// never sees and which no longer exists. Errors of fill (which may name its own source
// files) pass unchanged.
func wrap(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && strings.HasPrefix(filepath.Base(pe.Path), "."+filepath.Base(path)+".tmp"):
		err = pe.Err
	case errors.As(err, &le) && strings.HasPrefix(filepath.Base(le.Old), "."+filepath.Base(path)+".tmp"):
		err = le.Err
	}
	return &Error{Path: path, Err: err}
}

// Pending is a new version of a file that is fully written to a temporary file next to
// the destination but not yet in place: the caller can read it back and check it before
// Commit renames it over the destination, or Abort it, which leaves the destination as it
// was.
type Pending struct {
	path, tmp string
	done      bool
}

// Create writes what fill writes to a temporary file in path's folder, synced to disk,
// with path's current permission bits if path exists.
func Create(path string, fill func(w io.Writer) error) (*Pending, error) {
	f, tmp, err := createTemp(path)
	if err != nil {
		return nil, wrap(path, err)
	}
	p := &Pending{path: path, tmp: tmp}
	err = func() error {
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := fill(bw); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			if err := f.Chmod(fi.Mode().Perm()); err != nil {
				return err
			}
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return nil, wrap(path, err)
	}
	return p, nil
}

// TempPath is where the new content is until Commit.
func (p *Pending) TempPath() string { return p.tmp }

// Commit renames the new content over the destination.
func (p *Pending) Commit() error {
	if p.done {
		return &Error{Path: p.path, Err: errors.New("already committed or aborted")}
	}
	p.done = true
	if err := os.Rename(p.tmp, p.path); err != nil {
		os.Remove(p.tmp)
		return wrap(p.path, err)
	}
	return nil
}

// Abort removes the new content; the destination is untouched. Abort after Commit does
// nothing, so it can be deferred.
func (p *Pending) Abort() {
	if !p.done {
		p.done = true
		os.Remove(p.tmp)
	}
}

// Write creates or replaces path with what fill writes.
func Write(path string, fill func(w io.Writer) error) error {
	p, err := Create(path, fill)
	if err != nil {
		return err
	}
	return p.Commit()
}

// WriteBytes creates or replaces path with data.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// CheckWritable reports whether a file can be created in path's folder, by creating and
// removing a temporary file there: a missing or read-only folder fails now rather than at
// the end of a long run. It does not touch path itself.
func CheckWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return &Error{Path: path, Err: errors.New("is a folder, not a file")}
	}
	f, tmp, err := createTemp(path)
	if err != nil {
		return wrap(path, err)
	}
	f.Close()
	return os.Remove(tmp)
}

// createTemp creates an empty temporary file next to path. os.CreateTemp would make it
// 0600 whatever the umask; os.OpenFile with 0644 lets the kernel apply the umask, so that
// a new destination gets the mode os.Create would give it.
func createTemp(path string) (*os.File, string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var rnd [6]byte
	for range 100 {
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, "", err
		}
		tmp := filepath.Join(dir, "."+base+".tmp"+hex.EncodeToString(rnd[:]))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, tmp, err
	}
	return nil, "", fmt.Errorf("no free temporary name in %s", dir)
}
