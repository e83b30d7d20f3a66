package onnxio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// assertSameValues checks that two models hold the same parameters with bit-identical
// values.
func assertSameValues(t *testing.T, got, want *Model) {
	t.Helper()
	g, w := decodeAll(t, got), decodeAll(t, want)
	if len(g) != len(w) {
		t.Fatalf("%d parameters, want %d", len(g), len(w))
	}
	for name, wt := range w {
		gt, ok := g[name]
		if !ok {
			t.Fatalf("parameter %q is missing", name)
		}
		if !slices.Equal(gt.Dims, wt.Dims) || !sameBits(gt.Float, wt.Float) || !slices.Equal(gt.Int, wt.Int) {
			t.Errorf("parameter %q: got %v %v%v, want %v %v%v", name, gt.Dims, gt.Float, gt.Int, wt.Dims, wt.Float, wt.Int)
		}
	}
}

// TestExternalLoad reads a model whose tensors onnx's Python code wrote to one external
// file, and compares the values with the same model saved inline.
func TestExternalLoad(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "external", "model.onnx"))
	if !m.hasExternal() {
		t.Fatal("testdata/external/model.onnx has no external tensors")
	}
	assertSameValues(t, m, mustLoad(t, filepath.Join("testdata", "external-inline.onnx")))
}

// TestExternalSaveSameFolder saves next to the original: the model is written as it
// stands, the data file is not touched, and the result is the same protobuf.
func TestExternalSaveSameFolder(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "external"))
	m := mustLoad(t, filepath.Join(dir, "model.onnx"))
	before, _ := os.ReadFile(filepath.Join(dir, "weights.bin"))
	out := filepath.Join(dir, "copy.onnx")
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	back := mustLoad(t, out)
	if !proto.Equal(m.Proto, back.Proto) {
		t.Fatal("saving next to the model changed it")
	}
	after, _ := os.ReadFile(filepath.Join(dir, "weights.bin"))
	if !bytes.Equal(before, after) {
		t.Error("the data file changed")
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"copy.onnx", "model.onnx", "weights.bin"}) {
		t.Errorf("folder holds %v", names)
	}
}

// TestExternalSaveOtherFolder saves into another folder: the data file is copied to the
// same relative location, the saved model is the same protobuf, and it loads with the
// same values after the original folder is gone.
func TestExternalSaveOtherFolder(t *testing.T) {
	src := copyDir(t, filepath.Join("testdata", "external"))
	m := mustLoad(t, filepath.Join(src, "model.onnx"))
	dst := t.TempDir()
	out := filepath.Join(dst, "moved.onnx")
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	back := mustLoad(t, out)
	if !proto.Equal(m.Proto, back.Proto) {
		t.Fatal("saving into another folder changed the model")
	}
	assertSameValues(t, back, mustLoad(t, filepath.Join("testdata", "external-inline.onnx")))
	if names := listDir(t, dst); !slices.Equal(names, []string{"moved.onnx", "weights.bin"}) {
		t.Errorf("folder holds %v", names)
	}
}

// TestExternalSubfolderLocation checks a location inside a subfolder: it is resolved
// relative to the model, and recreated when the model is saved elsewhere.
func TestExternalSubfolderLocation(t *testing.T) {
	src := copyDir(t, filepath.Join("testdata", "external"))
	if err := os.Mkdir(filepath.Join(src, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "weights.bin"), filepath.Join(src, "data", "weights.bin")); err != nil {
		t.Fatal(err)
	}
	m := mustLoad(t, filepath.Join("testdata", "external", "model.onnx"))
	eachTensor(m.Proto, func(tp *onnxpb.TensorProto, _ string) error {
		for _, kv := range tp.ExternalData {
			if kv.GetKey() == "location" {
				kv.Value = proto.String("data/weights.bin")
			}
		}
		return nil
	})
	p := writeModel(t, src, "model.onnx", m.Proto)
	moved := mustLoad(t, p)
	want := mustLoad(t, filepath.Join("testdata", "external-inline.onnx"))
	assertSameValues(t, moved, want)
	out := filepath.Join(t.TempDir(), "elsewhere.onnx")
	if err := moved.Save(out); err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(filepath.Dir(out), "data", "weights.bin")) {
		t.Fatal("data/weights.bin was not recreated next to the saved model")
	}
	assertSameValues(t, mustLoad(t, out), want)
}

// externalEntries returns the external_data entries of the named tensor.
func externalEntries(t *testing.T, m *Model, name string) map[string]string {
	t.Helper()
	p, ok := m.Param(name)
	if !ok {
		t.Fatalf("no parameter %q", name)
	}
	kv := map[string]string{}
	for _, e := range p.Tensor.GetExternalData() {
		kv[e.GetKey()] = e.GetValue()
	}
	return kv
}

// TestSaveOverThreshold exercises the >2 GiB rule with a small threshold: tensors of at
// least MinExternalBytes go to path+".data" at 4 KiB-aligned offsets, smaller ones stay
// inline, the in-memory model is unchanged, and the saved model reloads with the same
// values.
func TestSaveOverThreshold(t *testing.T) {
	for _, src := range []string{"mlp.onnx", "constants.onnx", filepath.Join("external", "model.onnx")} {
		t.Run(src, func(t *testing.T) {
			m := mustLoad(t, filepath.Join("testdata", src))
			orig := proto.Clone(m.Proto)
			dir := t.TempDir()
			out := filepath.Join(dir, "big.onnx")
			if err := m.SaveWith(out, SaveOptions{ExternalThreshold: 100, MinExternalBytes: 40}); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(orig, m.Proto) {
				t.Fatal("SaveWith changed the in-memory model")
			}
			back := mustLoad(t, out)
			assertSameValues(t, back, m)
			// W1 (96 bytes) and W2 (48 bytes) move; b1 (16) and b2 (12) stay inline
			// unless they were external already.
			wasExternal := src != "mlp.onnx" && src != "constants.onnx"
			for _, name := range []string{"W1", "W2", "b1", "b2"} {
				kv := externalEntries(t, back, name)
				moved := name[0] == 'W' || wasExternal
				if moved != (len(kv) > 0) {
					t.Errorf("%s: external entries %v, want moved=%v", name, kv, moved)
					continue
				}
				if !moved {
					continue
				}
				if kv["location"] != "big.onnx.data" {
					t.Errorf("%s: location %q", name, kv["location"])
				}
				off, _ := strconv.Atoi(kv["offset"])
				if off%4096 != 0 {
					t.Errorf("%s: offset %d is not 4 KiB-aligned", name, off)
				}
			}
			if names := listDir(t, dir); !slices.Equal(names, []string{"big.onnx", "big.onnx.data"}) {
				t.Errorf("folder holds %v", names)
			}
			// Saving the reloaded model next to itself keeps it as it is.
			out2 := filepath.Join(dir, "again.onnx")
			if err := back.Save(out2); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(mustLoad(t, out2).Proto, back.Proto) {
				t.Error("re-saving the externalized model changed it")
			}
		})
	}
}

// TestSaveThresholdBoundary shows that the threshold is one comparison of the
// serialized size, the same code the default 2 GiB limit goes through.
func TestSaveThresholdBoundary(t *testing.T) {
	if DefaultExternalThreshold >= 1<<31 || DefaultExternalThreshold < 1<<31-1<<21 {
		t.Fatalf("DefaultExternalThreshold = %d, want just under 2 GiB", DefaultExternalThreshold)
	}
	if got := (SaveOptions{}).threshold(); got != DefaultExternalThreshold {
		t.Fatalf("zero SaveOptions threshold = %d, want %d", got, DefaultExternalThreshold)
	}
	m := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	size := int64(proto.Size(m.Proto))
	dir := t.TempDir()
	for _, c := range []struct {
		threshold int64
		external  bool
	}{{size, false}, {size - 1, true}, {0, false}} {
		out := filepath.Join(dir, "m.onnx")
		os.Remove(out + ".data")
		if err := m.SaveWith(out, SaveOptions{ExternalThreshold: c.threshold, MinExternalBytes: 1}); err != nil {
			t.Fatal(err)
		}
		if got := fileExists(out + ".data"); got != c.external {
			t.Errorf("threshold %d for a %d-byte model: external data written = %v, want %v", c.threshold, size, got, c.external)
		}
	}
}

// TestSaveDeterministic saves the same model twice, and checks the bytes are identical;
// for python-made files they are also identical to the original file.
func TestSaveDeterministic(t *testing.T) {
	for _, name := range []string{"mlp.onnx", "constants.onnx", "halfs.onnx"} {
		m := mustLoad(t, filepath.Join("testdata", name))
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx")
		if err := m.Save(a); err != nil {
			t.Fatal(err)
		}
		if err := m.Save(b); err != nil {
			t.Fatal(err)
		}
		ba, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(b)
		orig, _ := os.ReadFile(filepath.Join("testdata", name))
		if !bytes.Equal(ba, bb) {
			t.Errorf("%s: two saves differ", name)
		}
		if !bytes.Equal(ba, orig) {
			t.Errorf("%s: the save differs from the file onnx wrote", name)
		}
		var buf bytes.Buffer
		if err := m.Write(&buf); err != nil || !bytes.Equal(buf.Bytes(), ba) {
			t.Errorf("%s: Write differs from Save (%v)", name, err)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestWriteError(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	err := m.Write(failingWriter{})
	checkOneLine(t, err, m.Name, "no space left on device")
}

// TestSaveUnwritable saves into a missing folder and an unwritable one: the error names
// the path and nothing is left behind.
func TestSaveUnwritable(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	missing := filepath.Join(t.TempDir(), "no", "such", "model.onnx")
	checkOneLine(t, m.Save(missing), missing, "no such file or directory")

	// Root ignores permission bits, so as root use a folder the kernel refuses files in.
	ro := "/proc"
	if os.Geteuid() != 0 {
		ro = t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ro, 0o755)
	}
	before := listDirNames(ro)
	out := filepath.Join(ro, "model.onnx")
	checkOneLine(t, m.Save(out), out, "writing "+out)
	checkOneLine(t, m.SaveWith(out, SaveOptions{ExternalThreshold: 1, MinExternalBytes: 1}), out+".data", "writing "+out+".data")
	if after := listDirNames(ro); !slices.Equal(before, after) && ro != "/proc" {
		t.Errorf("the folder changed from %v to %v", before, after)
	}
}

func listDirNames(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestSaveDiskFull lowers the file-size limit (RLIMIT_FSIZE) below the model's size, so
// that writes fail with EFBIG as they would on a full disk (Go ignores SIGXFSZ). The
// save must fail with the path named, leave the previous file intact and no temporary
// file behind, for the model file and for the external data file.
func TestSaveDiskFull(t *testing.T) {
	m := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	dir := t.TempDir()
	out := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(out, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("cannot read RLIMIT_FSIZE: %v", err)
	}
	lim := old
	lim.Cur = 256 // below the model's 516 bytes and the data file's 4 KiB
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot lower RLIMIT_FSIZE: %v", err)
	}
	errPlain := m.Save(out)
	errData := m.SaveWith(filepath.Join(dir, "big.onnx"), SaveOptions{ExternalThreshold: 1, MinExternalBytes: 1})
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatalf("restoring RLIMIT_FSIZE: %v", err)
	}
	checkOneLine(t, errPlain, out, "file too large")
	checkOneLine(t, errData, filepath.Join(dir, "big.onnx.data"), "file too large")
	if got, _ := os.ReadFile(out); string(got) != "previous" {
		t.Errorf("the previous file was clobbered: %q", got)
	}
	if names := listDir(t, dir); !slices.Equal(names, []string{"model.onnx"}) {
		t.Errorf("folder holds %v, want only the previous model.onnx", names)
	}
}

// TestSaveCopyFailureLeavesNothing makes the external data file unreadable at save time
// (it is removed after load): saving elsewhere must fail naming it and write nothing.
func TestSaveCopyFailureLeavesNothing(t *testing.T) {
	src := copyDir(t, filepath.Join("testdata", "external"))
	m := mustLoad(t, filepath.Join(src, "model.onnx"))
	os.Remove(filepath.Join(src, "weights.bin"))
	dst := t.TempDir()
	err := m.Save(filepath.Join(dst, "model.onnx"))
	checkOneLine(t, err, filepath.Join(src, "weights.bin"), "cannot be opened")
	if names := listDir(t, dst); len(names) != 0 {
		t.Errorf("folder holds %v after a failed save", names)
	}
	err = m.SaveWith(filepath.Join(dst, "model.onnx"), SaveOptions{ExternalThreshold: 1})
	checkOneLine(t, err, filepath.Join(src, "weights.bin"), "W1")
	// A model with nothing large enough to move is written whole, with no data file.
	small := mustLoad(t, filepath.Join("testdata", "mlp.onnx"))
	if err := small.SaveWith(filepath.Join(dst, "small.onnx"), SaveOptions{ExternalThreshold: 1}); err != nil {
		t.Fatal(err)
	}
	if names := listDir(t, dst); !slices.Equal(names, []string{"small.onnx"}) {
		t.Errorf("folder holds %v, want only small.onnx", names)
	}
}
