package onnxio

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzParse feeds arbitrary bytes to the loader. No input may panic or allocate beyond
// what its own bytes justify; every refusal must be one line; and whatever is accepted
// must decode its parameters, classify them, and re-encode to bytes that load back as an
// equal model. The seed corpus in testdata/fuzz/FuzzParse holds small real models
// (qtool's test files and ONNX conformance models) and truncations of them.
func FuzzParse(f *testing.F) {
	dir := f.TempDir() // empty: external data always resolves to a missing file
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "fuzz.onnx", dir)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "fuzz.onnx") {
				t.Fatalf("error is not one line naming the file: %q", msg)
			}
			return
		}
		for _, p := range m.Params() {
			if _, err := m.Tensor(p.Tensor); err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("tensor error is not one line: %q", err)
			}
		}
		m.ParamRoles()
		for _, v := range append(m.Inputs(), m.Outputs()...) {
			_ = v.ShapeString()
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatalf("marshal of an accepted model: %v", err)
		}
		back, err := Parse(b, "fuzz.onnx", dir)
		if err != nil {
			t.Fatalf("re-encoded model does not load: %v", err)
		}
		if !proto.Equal(m.Proto, back.Proto) {
			t.Fatal("re-encoded model differs")
		}
	})
}
