package onnxio

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/testenv"
)

const conformanceDir = "/usr/share/libonnx-testdata/data"

// requireAsset skips when an optional external asset is missing, except under CI, where
// every asset must be installed.
func requireAsset(t *testing.T, path, install string) {
	t.Helper()
	testenv.RequireFile(t, path, install)
}

// roundTrip saves m into dir twice, checks both saves are byte-identical, decodes the
// result without the loader's checks when checked is false, and reports whether the
// model came back protobuf-equal and whether the save reproduced the original bytes.
func roundTrip(t *testing.T, m *Model, original []byte, dir string, checked bool) (equal, sameBytes bool) {
	t.Helper()
	out := filepath.Join(dir, "model.onnx")
	if err := m.Save(out); err != nil {
		t.Errorf("%s: save: %v", m.Name, err)
		return false, false
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(out); err != nil {
		t.Errorf("%s: second save: %v", m.Name, err)
		return false, false
	}
	second, _ := os.ReadFile(out)
	if !bytes.Equal(first, second) {
		t.Errorf("%s: two saves of the same model differ", m.Name)
	}
	var back *Model
	if checked {
		back, err = Load(out)
	} else {
		back, err = Decode(second, out, dir)
	}
	if err != nil {
		t.Errorf("%s: reload: %v", m.Name, err)
		return false, false
	}
	if !proto.Equal(m.Proto, back.Proto) {
		t.Errorf("%s: round trip changed the model", m.Name)
		return false, false
	}
	return true, bytes.Equal(first, original)
}

// TestRoundTripConformance loads and saves every model of the ONNX conformance data and
// checks that the saved model decodes to a protobuf equal to the original. Models whose
// IR version or opset qtool does not execute must be refused by Load with a range
// message; they still go through Decode and Save, which must carry them unchanged.
func TestRoundTripConformance(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	paths, err := filepath.Glob(filepath.Join(conformanceDir, "*", "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	checked, outside, sameBytes := 0, 0, 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Load(p)
		inRange := err == nil
		if !inRange {
			if msg := err.Error(); !strings.Contains(msg, "outside the supported range") && !strings.Contains(msg, "imports no default-domain") {
				t.Errorf("%s: refused for another reason than its version: %v", p, err)
				continue
			}
			if m, err = Decode(data, p, filepath.Dir(p)); err != nil {
				t.Errorf("%s: decode: %v", p, err)
				continue
			}
		}
		eq, same := roundTrip(t, m, data, dir, inRange)
		if !eq {
			continue
		}
		if inRange {
			checked++
		} else {
			outside++
		}
		if same {
			sameBytes++
		}
	}
	t.Logf("round trip: %d conformance models checked protobuf-equal (%d loaded and checked, %d outside the supported IR/opset range carried through Decode); %d saves byte-identical to the original file",
		checked+outside, checked, outside, sameBytes)
	if checked+outside != len(paths) || checked == 0 {
		t.Fatalf("%d of %d conformance models round-tripped", checked+outside, len(paths))
	}
}

// TestRoundTripTestModels round-trips every committed model under testmodels/ and the
// python-made files of testdata/.
func TestRoundTripTestModels(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testmodels", "*.onnx"))
	local, _ := filepath.Glob(filepath.Join("testdata", "*.onnx"))
	local = append(local, filepath.Join("testdata", "external", "model.onnx"))
	dir := t.TempDir()
	n := 0
	for _, p := range append(paths, local...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := mustLoad(t, p)
		if eq, _ := roundTrip(t, m, data, dir, true); eq {
			n++
		}
	}
	t.Logf("round trip: %d models of testmodels/ and %d of onnxio/testdata checked protobuf-equal", len(paths), len(local))
	if n != len(paths)+len(local) {
		t.Fatalf("%d of %d models round-tripped", n, len(paths)+len(local))
	}
	if len(paths) == 0 {
		requireAsset(t, filepath.Join("..", "testmodels", "fmnist-mlp.onnx"), "run testmodels/make.py")
	}
}
