package onnxio

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// readTestModel loads one of the python-made files in testdata as a raw proto.
func readTestModel(t *testing.T, name string) *onnxpb.ModelProto {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	mp := &onnxpb.ModelProto{}
	if err := proto.Unmarshal(b, mp); err != nil {
		t.Fatal(err)
	}
	return mp
}

func TestLoadRefusesNonModels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00\x1f\xf3\xffa")
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty.onnx", nil, "empty file, not an ONNX model"},
		{"random.onnx", random, "not an ONNX model"},
		{"text.onnx", []byte("name,label\nshirt,6\ntrouser,1\n"), "not an ONNX model"},
		{"image.onnx", png, "not an ONNX model"},
		{"zeros.onnx", make([]byte, 64), "not an ONNX model"},
		// A valid protobuf, but of a tensor, not of a model.
		{"tensor.onnx", mustMarshal(t, FloatTensor("w", []int64{2}, []float32{1, 2})), "not an ONNX model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			checkOneLine(t, err, p, c.want)
			if err != nil && strings.Contains(err.Error(), "truncated") {
				t.Errorf("a file that is not a model is reported as truncated: %v", err)
			}
		})
	}
	_, err := Load(filepath.Join(t.TempDir(), "missing.onnx"))
	checkOneLine(t, err, "missing.onnx", "no such file")
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadTruncated cuts real models at every byte. A cut inside a field must be
// reported as a truncated file. A cut at a top-level field boundary cannot be seen in
// the protobuf itself; it must still be refused unless the graph, the opset imports and
// everything the checks need came before it.
func TestLoadTruncated(t *testing.T) {
	files := []string{filepath.Join("testdata", "mlp.onnx"), filepath.Join("testdata", "constants.onnx")}
	for _, f := range []string{"fmnist-mlp.onnx", "fmnist-cnn.onnx"} {
		if p := filepath.Join("..", "testmodels", f); fileExists(p) {
			files = append(files, p)
		}
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Top-level field boundaries, found independently of checkWire.
		boundary := map[int]bool{}
		for off := 0; off < len(data); {
			_, _, n := protowire.ConsumeField(data[off:])
			if n < 0 {
				t.Fatalf("%s is not valid wire format at %d", file, off)
			}
			off += n
			boundary[off] = true
		}
		dir := t.TempDir()
		name := filepath.Join(dir, "cut.onnx")
		step := 1
		if len(data) > 20000 {
			step = len(data)/5000 + 1 // large models: about 5000 cuts, plus every boundary
		}
		loaded, refused := 0, 0
		for cut := 1; cut < len(data); cut++ {
			if cut%step != 0 && !boundary[cut] && cut > 64 {
				continue
			}
			_, err := Parse(data[:cut], name, dir)
			if err == nil {
				if !boundary[cut] {
					t.Fatalf("%s cut at %d (inside a field) loaded", file, cut)
				}
				loaded++
				continue
			}
			refused++
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, name) {
				t.Fatalf("%s cut at %d: error is not one line naming the file: %q", file, cut, msg)
			}
			if !strings.Contains(msg, "truncated") {
				t.Errorf("%s cut at %d: error does not say the file is truncated: %q", file, cut, msg)
			}
		}
		t.Logf("%s: %d cuts refused as truncated, %d cuts at a field boundary after the last required field loaded", file, refused, loaded)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestLoadRangeAndStructure checks the IR-version and opset ranges, at and beyond each
// end, and the structural refusals.
func TestLoadRangeAndStructure(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(mp *onnxpb.ModelProto)
		want   string // "" means the model must load
		loaded bool
	}{
		{"ir2", func(mp *onnxpb.ModelProto) { mp.IrVersion = proto.Int64(2) }, "IR version 2 is outside the supported range 3 to 10", false},
		{"ir3", func(mp *onnxpb.ModelProto) { mp.IrVersion = proto.Int64(3) }, "", true},
		{"ir10", func(mp *onnxpb.ModelProto) { mp.IrVersion = proto.Int64(10) }, "", true},
		{"ir11", func(mp *onnxpb.ModelProto) { mp.IrVersion = proto.Int64(11) }, "IR version 11 is outside the supported range 3 to 10", false},
		{"opset6", func(mp *onnxpb.ModelProto) { mp.OpsetImport[0].Version = proto.Int64(6) }, "opset 6 is outside the supported range 7 to 21", false},
		{"opset7", func(mp *onnxpb.ModelProto) { mp.OpsetImport[0].Version = proto.Int64(7) }, "", true},
		{"opset21", func(mp *onnxpb.ModelProto) { mp.OpsetImport[0].Version = proto.Int64(21) }, "", true},
		{"opset22", func(mp *onnxpb.ModelProto) { mp.OpsetImport[0].Version = proto.Int64(22) }, "opset 22 is outside the supported range 7 to 21", false},
		{"opset-ai.onnx", func(mp *onnxpb.ModelProto) { mp.OpsetImport[0].Domain = proto.String("ai.onnx") }, "", true},
		{"no-default-opset", func(mp *onnxpb.ModelProto) { mp.OpsetImport = mp.OpsetImport[1:] }, "imports no default-domain (ai.onnx) opset", false},
		{"no-opset", func(mp *onnxpb.ModelProto) { mp.OpsetImport = nil }, "no opset_import", false},
		{"no-graph", func(mp *onnxpb.ModelProto) { mp.Graph = nil }, "has no graph", false},
		{"no-ir", func(mp *onnxpb.ModelProto) { mp.IrVersion = nil }, "not an ONNX model: it has no ir_version", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mp := readTestModel(t, "mlp.onnx")
			c.edit(mp)
			p := writeModel(t, t.TempDir(), c.name+".onnx", mp)
			m, err := Load(p)
			if c.loaded {
				if err != nil {
					t.Fatal(err)
				}
				if m.Opset("") != mp.OpsetImport[0].GetVersion() || m.Opset("ai.onnx") != m.Opset("") {
					t.Errorf("Opset = %d, want %d", m.Opset(""), mp.OpsetImport[0].GetVersion())
				}
				return
			}
			checkOneLine(t, err, p, c.want)
		})
	}
}

// TestLoadBadTensors checks that tensors whose stored data cannot fill their shape are
// refused at load, before anything decodes them, with the tensor named.
func TestLoadBadTensors(t *testing.T) {
	w1 := func(mp *onnxpb.ModelProto) *onnxpb.TensorProto { return mp.Graph.Initializer[0] } // "W1", [4 6] FLOAT raw
	cases := []struct {
		name string
		edit func(mp *onnxpb.ModelProto)
		want string
	}{
		{"raw-short", func(mp *onnxpb.ModelProto) { w1(mp).RawData = w1(mp).RawData[:92] },
			`tensor "W1": raw_data holds 92 bytes, but shape [4 6] of FLOAT needs 96`},
		{"raw-long", func(mp *onnxpb.ModelProto) { w1(mp).RawData = append(w1(mp).RawData, 0, 0, 0, 0) },
			`tensor "W1": raw_data holds 100 bytes, but shape [4 6] of FLOAT needs 96`},
		{"raw-wrong-dims", func(mp *onnxpb.ModelProto) { w1(mp).Dims = []int64{5, 6} },
			`tensor "W1": raw_data holds 96 bytes, but shape [5 6] of FLOAT needs 120`},
		{"typed-short", func(mp *onnxpb.ModelProto) {
			w1(mp).RawData = nil
			w1(mp).FloatData = seq(0, 23)
		}, `tensor "W1": float_data holds 23 values, but shape [4 6] of FLOAT needs 24`},
		{"typed-missing", func(mp *onnxpb.ModelProto) { w1(mp).RawData = nil },
			`tensor "W1": float_data holds 0 values, but shape [4 6] of FLOAT needs 24`},
		{"typed-int64", func(mp *onnxpb.ModelProto) {
			mp.Graph.Initializer = append(mp.Graph.Initializer, &onnxpb.TensorProto{Name: proto.String("shape"), Dims: []int64{3},
				DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{1, 2}})
		}, `tensor "shape": int64_data holds 2 values, but shape [3] of INT64 needs 3`},
		{"typed-float16", func(mp *onnxpb.ModelProto) {
			mp.Graph.Initializer = append(mp.Graph.Initializer, &onnxpb.TensorProto{Name: proto.String("h"), Dims: []int64{2, 2},
				DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT16)), Int32Data: []int32{1, 2, 3}})
		}, `tensor "h": int32_data holds 3 values, but shape [2 2] of FLOAT16 needs 4`},
		{"raw-int4", func(mp *onnxpb.ModelProto) {
			mp.Graph.Initializer = append(mp.Graph.Initializer, &onnxpb.TensorProto{Name: proto.String("q"), Dims: []int64{5},
				DataType: proto.Int32(int32(onnxpb.TensorProto_INT4)), RawData: []byte{1, 2}})
		}, `tensor "q": raw_data holds 2 bytes, but shape [5] of INT4 needs 3`},
		{"constant-node", func(mp *onnxpb.ModelProto) {
			mp.Graph.Node = append(mp.Graph.Node, constantNode("c", &onnxpb.TensorProto{Dims: []int64{3},
				DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: []byte{0, 0, 0, 0}}))
		}, `tensor in attribute "value" of node "c/Constant": raw_data holds 4 bytes, but shape [3] of FLOAT needs 12`},
		{"negative-dim", func(mp *onnxpb.ModelProto) { w1(mp).Dims = []int64{-4, -6} },
			`tensor "W1": negative dimension -4 in shape [-4 -6]`},
		{"overflowing-dims", func(mp *onnxpb.ModelProto) { w1(mp).Dims = []int64{1 << 40, 1 << 40} },
			`tensor "W1": shape [1099511627776 1099511627776] is too large`},
		{"overflowing-product", func(mp *onnxpb.ModelProto) { w1(mp).Dims = []int64{1 << 31, 1 << 31, 1 << 31, 0} },
			`is too large`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mp := readTestModel(t, "mlp.onnx")
			c.edit(mp)
			p := writeModel(t, t.TempDir(), c.name+".onnx", mp)
			_, err := Load(p)
			checkOneLine(t, err, p, c.want)
			// The same tensor handed to DecodeTensor directly is refused the same way.
			bad := w1(mp)
			switch c.name {
			case "typed-int64", "typed-float16", "raw-int4":
				bad = mp.Graph.Initializer[len(mp.Graph.Initializer)-1]
			case "constant-node":
				bad = mp.Graph.Node[len(mp.Graph.Node)-1].Attribute[0].T
			}
			if _, err := DecodeTensor(bad, ""); err == nil {
				t.Errorf("DecodeTensor accepted the tensor Load refused")
			}
		})
	}
}

// TestLoadExternalErrors covers external data that is missing, escapes the model's
// folder, is too short, or declares a length that does not fit the shape.
func TestLoadExternalErrors(t *testing.T) {
	entry := func(mp *onnxpb.ModelProto, key, value string) {
		for _, kv := range mp.Graph.Initializer[0].ExternalData {
			if kv.GetKey() == key {
				kv.Value = proto.String(value)
			}
		}
	}
	cases := []struct {
		name   string
		noData bool
		edit   func(mp *onnxpb.ModelProto)
		want   string
	}{
		{"missing-file", true, func(*onnxpb.ModelProto) {}, `tensor "W1": external data file`},
		{"parent", false, func(mp *onnxpb.ModelProto) { entry(mp, "location", "../weights.bin") }, `tensor "W1": external data location "../weights.bin" must be a path inside the model's folder`},
		{"absolute", false, func(mp *onnxpb.ModelProto) { entry(mp, "location", "/etc/passwd") }, `external data location "/etc/passwd" must be a path inside the model's folder`},
		{"sneaky", false, func(mp *onnxpb.ModelProto) { entry(mp, "location", "sub/../../weights.bin") }, `must be a path inside the model's folder`},
		{"empty-location", false, func(mp *onnxpb.ModelProto) { entry(mp, "location", "") }, `external data has no location`},
		{"offset-past-end", false, func(mp *onnxpb.ModelProto) { entry(mp, "offset", "1000") }, `external data`},
		{"huge-offset", false, func(mp *onnxpb.ModelProto) { entry(mp, "offset", "9223372036854775000") }, `bytes from offset 9223372036854775000`},
		{"bad-offset", false, func(mp *onnxpb.ModelProto) { entry(mp, "offset", "-8") }, `external data offset "-8" is not a byte count`},
		{"wrong-length", false, func(mp *onnxpb.ModelProto) { entry(mp, "length", "92") }, `external data length is 92 bytes, but shape [4 6] of FLOAT needs 96`},
		{"folder", false, func(mp *onnxpb.ModelProto) { entry(mp, "location", ".") }, `is not a regular file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, filepath.Join("testdata", "external"))
			if c.noData {
				os.Remove(filepath.Join(dir, "weights.bin"))
			}
			b, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			mp := &onnxpb.ModelProto{}
			if err := proto.Unmarshal(b, mp); err != nil {
				t.Fatal(err)
			}
			c.edit(mp)
			p := writeModel(t, dir, "model.onnx", mp)
			_, err = Load(p)
			checkOneLine(t, err, p, c.want)
			if c.noData {
				checkOneLine(t, err, p, "weights.bin is missing; keep it next to the model")
			}
		})
	}
}

// TestReadNamesTheSource checks the io.Reader entry point: errors carry the given name.
func TestReadNamesTheSource(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Read(bytes.NewReader(b), "stdin", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params()) != 4 {
		t.Errorf("Read gave %d params, want 4", len(m.Params()))
	}
	_, err = Read(bytes.NewReader(b[:len(b)/2]), "<stdin>", "")
	checkOneLine(t, err, "<stdin>", "truncated file")
}
