package onnxio

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/internal/testenv"
)

// pythonONNX is the Debian interpreter that has python3-onnx and numpy.
const pythonONNX = "/usr/bin/python3"

// readByONNX is run by onnx's Python package: it checks each model given on the command
// line with onnx.checker, loads it with its external data, and prints every initializer
// and Constant value as float32 bit patterns.
const readByONNX = `
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
out = {}
for path in sys.argv[1:]:
    onnx.checker.check_model(path)
    m = onnx.load(path)
    vals = {}
    for t in m.graph.initializer:
        vals[t.name] = numpy_helper.to_array(t).astype(np.float32).ravel().view(np.uint32).tolist()
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    vals[n.output[0]] = numpy_helper.to_array(a.t).astype(np.float32).ravel().view(np.uint32).tolist()
    out[path] = vals
print(json.dumps(out))
`

// TestSavedModelsReadByONNX checks what Save writes — plain, with external data over the
// threshold, and moved into another folder with its data file — with the reference
// implementation: onnx.checker accepts every file, and onnx.load gives bit-identical
// values to the ones onnxio decodes.
func TestSavedModelsReadByONNX(t *testing.T) {
	if err := exec.Command(pythonONNX, "-c", "import onnx, numpy").Run(); err != nil {
		msg := fmt.Sprintf("%s cannot import onnx and numpy (%v); install them with: apt-get install python3-onnx python3-numpy", pythonONNX, err)
		testenv.Missing(t, "%s", msg)
	}
	dir := t.TempDir()
	var paths []string
	want := map[string]*Model{}
	save := func(src, name string, opts SaveOptions) {
		m := mustLoad(t, filepath.Join("testdata", src))
		p := filepath.Join(dir, name)
		if err := m.SaveWith(p, opts); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		want[p] = m
	}
	save("mlp.onnx", "plain.onnx", SaveOptions{})
	save("constants.onnx", "constants.onnx", SaveOptions{})
	save("halfs.onnx", "halfs.onnx", SaveOptions{})
	save("mlp.onnx", "split.onnx", SaveOptions{ExternalThreshold: 1, MinExternalBytes: 1})
	save("halfs.onnx", "halfs-split.onnx", SaveOptions{ExternalThreshold: 1, MinExternalBytes: 1})
	save(filepath.Join("external", "model.onnx"), "moved.onnx", SaveOptions{})

	cmd := exec.Command(pythonONNX, append([]string{"-c", readByONNX}, paths...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("onnx rejected a saved model: %s", ee.Stderr)
		}
		t.Fatal(err)
	}
	var got map[string]map[string][]uint32
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		vals := decodeAll(t, want[p])
		if len(got[p]) != len(vals) {
			t.Errorf("%s: onnx sees %d tensors, onnxio %d", p, len(got[p]), len(vals))
		}
		for name, v := range vals {
			ref := got[p][name]
			if len(ref) != len(v.Float) {
				t.Errorf("%s %s: onnx gives %d values, onnxio %d", p, name, len(ref), len(v.Float))
				continue
			}
			for i := range ref {
				if ref[i] != math.Float32bits(v.Float[i]) {
					t.Errorf("%s %s[%d]: onnx %#08x, onnxio %#08x", p, name, i, ref[i], math.Float32bits(v.Float[i]))
					break
				}
			}
		}
	}
	t.Logf("onnx %s checked and loaded %d saved models with identical values", pythonONNX, len(paths))
}
