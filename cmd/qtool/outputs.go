package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/urfave/cli/v2"
)

// namedPath is a file a command reads or writes, and the flag (or argument) naming it.
type namedPath struct{ flag, path string }

// checkOutputs refuses, before any work, an output that is one of the inputs (also through
// a symlink or another relative path), two outputs that are the same file, and an output
// whose folder is missing or read-only — which would otherwise fail only after training.
// keep lists input/output flag pairs that may name the same file (--resume and
// --checkpoint).
func checkOutputs(inputs, outputs []namedPath, keep map[[2]string]bool) error {
	for i, o := range outputs {
		for _, in := range inputs {
			if in.path != "" && !keep[[2]string{in.flag, o.flag}] && sameFile(o.path, in.path) {
				return usagef("%s %s is the %s file: writing it would destroy the input; choose another file", o.flag, o.path, in.flag)
			}
		}
		for _, p := range outputs[:i] {
			if sameFile(o.path, p.path) {
				return usagef("%s and %s both name %s: choose two files", p.flag, o.flag, o.path)
			}
		}
		if err := atomicfile.CheckWritable(o.path); err != nil {
			var ae *atomicfile.Error
			cause := err
			if errors.As(err, &ae) {
				cause = ae.Err
			}
			return usagef("%s %s: cannot write there: %v; create the folder, make it writable or choose another path", o.flag, o.path, cause)
		}
	}
	return nil
}

// sameFile reports whether a and b are one file: the same inode when both exist, the same
// absolute path otherwise.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ab
}

// fingerprintSkip lists the flags that do not change a run's trained weights or history:
// where outputs go, how they are written and shown, and the resource limits.
var fingerprintSkip = map[string]bool{
	"output": true, "report": true, "json": true, "checkpoint": true, "resume": true, "log-every": true,
	"quiet": true, "max-drop": true, "min-sqnr": true, "min-agreement": true, "format": true, "nbits-bits": true, "nbits-block": true, "opset": true, "max-memory": true,
	// Identified by content below, not by name.
	"data": true, "eval-data": true, "labels": true,
	// --budget refuses checkpoints: its flags never reach one.
	"budget": true, "target-size": true, "max-trials": true, "budget-grids": true,
}

// runFingerprint identifies everything that decides a binarize run's result, for its
// checkpoints: the model's bytes, the data files' identities, and the value of every
// flag that changes the training (defaults included, so that leaving a flag out and
// passing its default are the same run).
func runFingerprint(c *cli.Context, model string, batch int, method admmq.Method) (network.Fingerprint, error) {
	var fp network.Fingerprint
	h, err := fileHash(model)
	if err != nil {
		return nil, err
	}
	fp = append(fp, network.Setting{Name: "model", Value: h})
	for _, f := range []string{"data", "eval-data", "labels"} {
		p := c.String(f)
		if p == "" {
			continue
		}
		id, err := dataIdentity(p)
		if err != nil {
			return nil, err
		}
		fp = append(fp, network.Setting{Name: f, Value: id})
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if fingerprintSkip[name] {
			continue
		}
		v := fmt.Sprint(c.Value(name))
		switch name {
		case "batch-size":
			v = fmt.Sprint(batch) // binarize's own default differs from the flag's
		case "algo":
			v = string(method) // an alias resumes the run of the name it stands for
		}
		fp = append(fp, network.Setting{Name: "--" + name, Value: v})
	}
	return fp, nil
}

// fileHash is the SHA-256 of a file's bytes.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// dataIdentity identifies a data set: a file by its SHA-256, so that renaming or moving it
// does not matter; a folder or glob (image folders, CIFAR batches) by the relative names
// and sizes of its files, which is cheap for large image sets.
func dataIdentity(path string) (string, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return fileHash(path)
	}
	var lines []string
	add := func(root, p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			lines = append(lines, fmt.Sprintf("%s %d", filepath.ToSlash(rel), fi.Size()))
		}
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			return add(path, p)
		})
		if err != nil {
			return "", err
		}
	} else {
		matches, err := filepath.Glob(path)
		if err != nil || len(matches) == 0 {
			return "", fmt.Errorf("%s: no such file", path)
		}
		for _, m := range matches {
			if err := add(filepath.Dir(path), m); err != nil {
				return "", err
			}
		}
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("files:%d:%s", len(lines), hex.EncodeToString(sum[:])), nil
}
