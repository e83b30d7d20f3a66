package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --out, bench quadratic must refuse to run rather than pick a folder: its old
// default, docs/quadratic, is where the committed results live.
func TestBenchQuadraticNeedsOut(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{{"bench", "quadratic", "--quick"}, {"bench", "quadratic"}} {
		out, code, err := runArgs(t, args...)
		if code != exitUsage {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, exitUsage, out)
		}
		if err == nil || !strings.Contains(err.Error(), "--out") {
			t.Errorf("%v: the error does not mention --out: %v", args, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("bench quadratic without --out wrote %s", ents[0].Name())
	}
}

// The committed quick results (docs/quadratic/quick) must be what the command makes today,
// on this CPU, whichever kernels it picks (CI runs this under GODEBUG=cpu.avx512f=off too):
// every file byte for byte, except summary.md's "Made with" line, which records the
// wall time and the output folder.
func TestBenchQuadraticQuickReproducesCommitted(t *testing.T) {
	committed := filepath.Join("..", "..", "docs", "quadratic", "quick")
	want, err := os.ReadDir(committed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, code, err := runArgs(t, "bench", "quadratic", "--quick", "--seed", "1", "--out", dir); code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	got, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("wrote %d files, docs/quadratic/quick has %d", len(got), len(want))
	}
	for _, e := range want {
		a, err1 := os.ReadFile(filepath.Join(committed, e.Name()))
		b, err2 := os.ReadFile(filepath.Join(dir, e.Name()))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", e.Name(), err1, err2)
		}
		if e.Name() == "summary.md" {
			a, b = dropMadeWith(a), dropMadeWith(b)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from docs/quadratic/quick/%s", filepath.Join(dir, e.Name()), e.Name())
		}
	}
}

func dropMadeWith(b []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("Made with `")) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}
