package onnxio

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

const conformanceDir = "/usr/share/libonnx-testdata/data"

// requireAsset skips when an optional external asset is missing, except under CI, where
// every asset must be installed.
func requireAsset(t *testing.T, path, install string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing; CI must install it: %s", path, install)
	}
	t.Skipf("%s is missing; install it with: %s", path, install)
}

// TestRoundTripConformance loads and saves every model of the ONNX conformance data and
// checks that the saved model decodes to a protobuf equal to the original.
func TestRoundTripConformance(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	paths, err := filepath.Glob(filepath.Join(conformanceDir, "*", "*", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "model.onnx")
	checked, outside := 0, 0
	for _, p := range paths {
		m, err := Load(p)
		if err != nil {
			// The suite also holds models for opsets qtool does not read (below 7 or
			// above 21); those must be refused with a range error, not mangled.
			outside++
			continue
		}
		if err := m.Save(out); err != nil {
			t.Errorf("%s: save: %v", p, err)
			continue
		}
		back, err := Load(out)
		if err != nil {
			t.Errorf("%s: reload: %v", p, err)
			continue
		}
		if !proto.Equal(m.Proto, back.Proto) {
			t.Errorf("%s: round trip changed the model", p)
		}
		checked++
	}
	t.Logf("round trip: %d conformance models checked, %d outside the supported IR/opset range", checked, outside)
	if checked == 0 {
		t.Fatal("no conformance model was checked")
	}
}
