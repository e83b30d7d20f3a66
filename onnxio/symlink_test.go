package onnxio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// relocate points every external tensor of the model in dir at location and returns the
// model's path.
func relocate(t *testing.T, dir, location string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		t.Fatal(err)
	}
	eachTensor(mp, func(tp *onnxpb.TensorProto, _ string) error {
		for _, kv := range tp.ExternalData {
			if kv.GetKey() == "location" {
				kv.Value = proto.String(location)
			}
		}
		return nil
	})
	return writeModel(t, dir, "model.onnx", mp)
}

// secret writes a file outside every model folder, as /etc/passwd would be.
func secret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret.bin")
	// The size of weights.bin, so that nothing but the link check can refuse it.
	st, err := os.Stat(filepath.Join("testdata", "external", "weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{0x42}, int(st.Size())), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExternalSymlinkOutside refuses external data reached through a link to a file
// outside the model's folder, when loading and when decoding a tensor directly.
func TestExternalSymlinkOutside(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "external"))
	if err := os.Symlink(secret(t), filepath.Join(dir, "link.bin")); err != nil {
		t.Skipf("symbolic links unavailable: %v", err)
	}
	p := relocate(t, dir, "link.bin")
	_, err := Load(p)
	checkOneLine(t, err, p, "link.bin links to ")
	checkOneLine(t, err, p, `"W1"`)
	checkOneLine(t, err, p, "outside the model's folder")

	// DecodeTensor does not go through Load's check.
	b, _ := os.ReadFile(p)
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		t.Fatal(err)
	}
	_, err = DecodeTensor(mp.Graph.Initializer[0], dir)
	checkOneLine(t, err, "link.bin", `tensor "W1": external data file`)
	checkOneLine(t, err, "link.bin", "outside the model's folder")
}

// TestExternalSymlinkInside accepts a link that stays inside the folder.
func TestExternalSymlinkInside(t *testing.T) {
	dir := copyDir(t, filepath.Join("testdata", "external"))
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "weights.bin"), filepath.Join(dir, "data", "weights.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("data", "weights.bin"), filepath.Join(dir, "link.bin")); err != nil {
		t.Skipf("symbolic links unavailable: %v", err)
	}
	m := mustLoad(t, relocate(t, dir, "link.bin"))
	want := mustLoad(t, filepath.Join("testdata", "external-inline.onnx"))
	assertSameValues(t, m, want)
	// Saved elsewhere, the link's target is copied under the link's name.
	out := filepath.Join(t.TempDir(), "copy.onnx")
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	assertSameValues(t, mustLoad(t, out), want)
}

// TestExternalSaveSymlinkTricks checks that saving elsewhere, which copies the external
// data, neither copies a file outside the model's folder that a link was swapped to
// after loading, nor writes through a linked subfolder of the destination.
func TestExternalSaveSymlinkTricks(t *testing.T) {
	t.Run("source", func(t *testing.T) {
		dir := copyDir(t, filepath.Join("testdata", "external"))
		m := mustLoad(t, filepath.Join(dir, "model.onnx"))
		w := filepath.Join(dir, "weights.bin")
		if err := os.Remove(w); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret(t), w); err != nil {
			t.Skipf("symbolic links unavailable: %v", err)
		}
		dst := t.TempDir()
		err := m.Save(filepath.Join(dst, "out.onnx"))
		checkOneLine(t, err, "weights.bin", "outside the model's folder")
		if names := listDir(t, dst); len(names) != 0 {
			t.Errorf("the refused save left %v behind", names)
		}
	})
	t.Run("destination", func(t *testing.T) {
		dir := copyDir(t, filepath.Join("testdata", "external"))
		if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "weights.bin"), filepath.Join(dir, "data", "weights.bin")); err != nil {
			t.Fatal(err)
		}
		m := mustLoad(t, relocate(t, dir, "data/weights.bin"))
		dst, elsewhere := t.TempDir(), t.TempDir()
		if err := os.Symlink(elsewhere, filepath.Join(dst, "data")); err != nil {
			t.Skipf("symbolic links unavailable: %v", err)
		}
		err := m.Save(filepath.Join(dst, "out.onnx"))
		checkOneLine(t, err, "data", "outside the model's folder")
		if names := listDir(t, elsewhere); len(names) != 0 {
			t.Errorf("the save wrote %v through the linked folder", names)
		}
	})
}
