package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels/papermlp"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestReportFMNISTMLP binarizes fmnist-mlp's weights with admmq's ±α per-channel
// projection, writes the packed file, and checks the report against the files on disk
// and the tensors themselves: the weights take 32× fewer bytes, the totals and the
// percentage saved are the real file sizes, biases and BatchNorm tensors are kept with
// their reasons.
func TestReportFMNISTMLP(t *testing.T) {
	origPath := filepath.Join("..", "testmodels", "fmnist-mlp.onnx")
	if _, err := os.Stat(origPath); err != nil {
		skipOrFail(t, fmt.Sprintf("%v: run testmodels/make.py", err))
	}
	orig, err := onnxio.Load(origPath)
	if err != nil {
		t.Fatal(err)
	}
	ws := quantize(t, orig, gridCases()[1])
	quantPath := filepath.Join(t.TempDir(), "mlp-1bit.onnx")
	if err := WriteFile(quantPath, orig, ws, Options{}); err != nil {
		t.Fatal(err)
	}
	quant, err := onnxio.Load(quantPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(orig, quant, origPath, quantPath, CompareOptions{Reasons: map[string]string{"bn4.weight": "excluded by --exclude bn4"}})
	if err != nil {
		t.Fatal(err)
	}
	tot := r.Totals
	if tot.FileBytesBefore != fileSize(t, origPath) || tot.FileBytesAfter != fileSize(t, quantPath) {
		t.Fatalf("file sizes %d → %d, disk has %d → %d", tot.FileBytesBefore, tot.FileBytesAfter, fileSize(t, origPath), fileSize(t, quantPath))
	}
	if want := 100 * (1 - float64(fileSize(t, quantPath))/float64(fileSize(t, origPath))); math.Abs(tot.SavedPercent-want) > 1e-9 {
		t.Fatalf("saved %.4f %%, the files say %.4f %%", tot.SavedPercent, want)
	}
	// Tensor bytes, summed independently from the raw data of each file.
	sumRaw := func(m *onnxio.Model) int64 {
		var n int64
		for _, p := range m.Params() {
			n += int64(len(p.Tensor.GetRawData()))
		}
		return n
	}
	if tot.TensorBytesBefore != sumRaw(orig) || tot.TensorBytesAfter != sumRaw(quant) {
		t.Fatalf("tensor bytes %d → %d, raw data %d → %d", tot.TensorBytesBefore, tot.TensorBytesAfter, sumRaw(orig), sumRaw(quant))
	}
	var wBefore, wAfter, scales int64
	byName := map[string]TensorReport{}
	for _, tr := range r.Tensors {
		byName[tr.Name] = tr
		if tr.Binarized {
			wBefore += tr.OriginalBytes
			wAfter += tr.StoredBytes
			scales += tr.ScaleBytes
			if tr.StoredBytes != (tr.Count+7)/8 || tr.Format != "packed" {
				t.Fatalf("%s: %d bytes stored (%s) for %d weights, want %d packed", tr.Name, tr.StoredBytes, tr.Format, tr.Count, (tr.Count+7)/8)
			}
			if tr.ScaleBytes != 4*tr.Shape[0] {
				t.Fatalf("%s: %d scale bytes, want one float32 per output row", tr.Name, tr.ScaleBytes)
			}
		}
	}
	ratio := float64(wBefore) / float64(wAfter)
	t.Logf("weights %d B → %d B (%.2f×), +%d B scales; file %d B → %d B (%.2f %% saved, %.2f×); 1-bit bound %d B", wBefore, wAfter, ratio, scales, tot.FileBytesBefore, tot.FileBytesAfter, tot.SavedPercent, tot.Ratio, tot.Theoretical1Bit)
	if ratio < 31.99 || ratio > 32 {
		t.Fatalf("weight bytes shrink %.3f×, want 32×", ratio)
	}
	if len(ws) != 4 || tot.BinarizedWeights != 256*784+2*256*256+10*256 {
		t.Fatalf("%d binarized weights", tot.BinarizedWeights)
	}
	for name, want := range map[string]string{"fc1.bias": "bias", "bn1.running_var": "normalisation", "bn4.weight": "excluded by --exclude bn4"} {
		if tr := byName[name]; tr.Binarized || !strings.Contains(tr.Reason, want) || tr.StoredBytes != tr.OriginalBytes {
			t.Fatalf("%s: %+v, want kept with a reason mentioning %q", name, tr, want)
		}
	}
	if tot.Overhead1Bit != tot.FileBytesAfter-tot.Theoretical1Bit || tot.Overhead1Bit <= 0 {
		t.Fatalf("overhead over the 1-bit bound %d", tot.Overhead1Bit)
	}
	var text, md, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), md.String()} {
		for _, want := range []string{RuntimeNote, fmt.Sprintf("%.2f %% saved", tot.SavedPercent), fmt.Sprint(tot.FileBytesAfter)} {
			if !strings.Contains(out, want) {
				t.Fatalf("report lacks %q:\n%s", want, out)
			}
		}
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Totals != r.Totals || len(back.Tensors) != len(r.Tensors) || back.Note != RuntimeNote {
		t.Fatal("JSON does not round-trip")
	}
	t.Log("\n" + text.String())
}

// TestReportPaperNetwork builds the paper's MNIST network (784-4096×3-10 with BatchNorm,
// random weights), binarizes its weights to ±1 and checks that counting as the paper
// did reproduces its table: 140.55 MiB → 4.53 MiB, 96.78 % saved. The whole-file figures
// come from the files on disk.
func TestReportPaperNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 147 MB model")
	}
	orig := papermlp.New(papermlp.PaperWidth, 1)
	dir := t.TempDir()
	origPath := filepath.Join(dir, "paper.onnx")
	if err := orig.Save(origPath); err != nil {
		t.Fatal(err)
	}
	var ws []Weight
	roles := orig.ParamRoles()
	for _, p := range orig.Params() {
		if roles[p.Name].Role != onnxio.RoleWeight {
			continue
		}
		tt, err := orig.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(tt.Float))
		for i, x := range tt.Float {
			v[i] = 1
			if x < 0 {
				v[i] = -1
			}
		}
		ws = append(ws, Weight{Name: p.Name, Values: v, Grid: Grid{Levels: []int{-1, 1}}})
	}
	quantPath := filepath.Join(dir, "paper-1bit.onnx")
	if err := WriteFile(quantPath, orig, ws, Options{}); err != nil {
		t.Fatal(err)
	}
	quant, err := onnxio.Load(quantPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(orig, quant, origPath, quantPath, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Paper
	got := fmt.Sprintf("%.2f MiB → %.2f MiB, %.2f %%", p.MiBBefore, p.MiBAfter, p.SavedPercent)
	if want := "140.55 MiB → 4.53 MiB, 96.78 %"; got != want {
		t.Fatalf("paper count %s, the paper's table says %s", got, want)
	}
	// The count by hand: 36,806,656 weights, 12,298 biases, 24,596 BatchNorm scales and shifts.
	if p.Parameters != 36806656+12298+24596 || p.BytesAfter != 36806656/8+4*(12298+24596) {
		t.Fatalf("paper count %+v", p)
	}
	if r.Totals.FileBytesBefore != fileSize(t, origPath) || r.Totals.FileBytesAfter != fileSize(t, quantPath) {
		t.Fatal("file sizes differ from the disk")
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"140.55 MiB → 4.53 MiB, 96.78 % saved", "running statistics", "ONNX format itself"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("report lacks %q", want)
		}
	}
	t.Logf("whole files: %d B → %d B, %.2f %% saved", r.Totals.FileBytesBefore, r.Totals.FileBytesAfter, r.Totals.SavedPercent)
	for _, l := range r.summary() {
		t.Log(l)
	}
}

// TestReportFormats checks the bits per weight the report reads back from each format's
// structure: 1, 2 and 4 bits packed, INT8 and INT4 for qdq, 32 for float.
func TestReportFormats(t *testing.T) {
	orig := smallNet(10, 21, 1)
	dir := t.TempDir()
	origPath := filepath.Join(dir, "small.onnx")
	if err := orig.Save(origPath); err != nil {
		t.Fatal(err)
	}
	levels := func(n int) []int {
		l := make([]int, n)
		for i := range l {
			l[i] = i - n/2
		}
		return l
	}
	cases := []struct {
		format Format
		levels int
		scaled bool
		bits   int // code width
	}{
		{Packed, 2, false, 1}, {Packed, 3, true, 2}, {Packed, 15, true, 4}, {Packed, 200, true, 8},
		{QDQ, 15, true, 4}, {QDQ, 200, true, 8}, {Float, 2, true, 32},
	}
	for _, c := range cases {
		g := Grid{Levels: levels(c.levels)}
		if c.scaled {
			g.Scales = []float32{0.125}
		}
		var ws []Weight
		for _, name := range []string{"conv.w", "fc.w", "mm.w"} {
			p, _ := orig.Param(name)
			codes := make([]uint8, count(p.Tensor.GetDims()))
			for i := range codes {
				codes[i] = uint8(i % c.levels)
			}
			ws = append(ws, Weight{Name: name, Values: g.Values(codes, p.Tensor.GetDims()), Grid: g})
		}
		quantPath := filepath.Join(dir, fmt.Sprintf("q-%s-%d.onnx", c.format, c.levels))
		if err := WriteFile(quantPath, orig, ws, Options{Format: c.format}); err != nil {
			t.Fatal(err)
		}
		quant, err := onnxio.Load(quantPath)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Compare(orig, quant, origPath, quantPath, CompareOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range r.Tensors {
			if tr.Name != "fc.w" {
				continue
			}
			// 108 weights: the last byte is padded at 1 bit.
			want := float64((108*c.bits+7)/8*8) / 108
			if !tr.Binarized || tr.Format != string(c.format) || tr.BitsPerWeight != want {
				t.Errorf("%s, %d levels: %+v, want %s at %g bits", c.format, c.levels, tr, c.format, want)
			}
			wantScale := int64(0)
			if c.scaled && c.format != Float {
				wantScale = 4
			}
			if tr.ScaleBytes != wantScale {
				t.Errorf("%s, %d levels: %d scale bytes, want %d", c.format, c.levels, tr.ScaleBytes, wantScale)
			}
		}
		if r.Totals.FileBytesAfter != fileSize(t, quantPath) {
			t.Errorf("%s: file size %d, disk %d", c.format, r.Totals.FileBytesAfter, fileSize(t, quantPath))
		}
	}
}

// TestReportFineTunedKept exports in the float format from a model whose bias was
// fine-tuned: the bias is reported kept and changed, the weights binarized.
func TestReportFineTunedKept(t *testing.T) {
	orig := smallNet(7, 13, 1)
	dir := t.TempDir()
	origPath := filepath.Join(dir, "small.onnx")
	if err := orig.Save(origPath); err != nil {
		t.Fatal(err)
	}
	tuned := cloneModel(orig)
	if err := tuned.SetParam("conv.b", onnxio.FloatTensor("conv.b", []int64{3}, []float32{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	p, _ := orig.Param("mm.w")
	g := Grid{Levels: []int{-1, 1}, Scales: []float32{0.5}}
	ws := []Weight{{Name: "mm.w", Values: g.Values(make([]uint8, count(p.Tensor.GetDims())), p.Tensor.GetDims()), Grid: g}}
	quantPath := filepath.Join(dir, "q.onnx")
	if err := WriteFile(quantPath, tuned, ws, Options{Format: Float}); err != nil {
		t.Fatal(err)
	}
	quant, err := onnxio.Load(quantPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(orig, quant, origPath, quantPath, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range r.Tensors {
		switch tr.Name {
		case "mm.w":
			if !tr.Binarized || tr.Format != "float" {
				t.Errorf("mm.w: %+v, want binarized, float format", tr)
			}
		case "conv.b":
			if tr.Binarized || !tr.Changed || !strings.Contains(tr.Reason, "bias") {
				t.Errorf("conv.b: %+v, want kept, changed, a bias", tr)
			}
		default:
			if tr.Binarized || tr.Changed {
				t.Errorf("%s: %+v, want kept unchanged", tr.Name, tr)
			}
		}
	}
}

// TestExportExternalData exports fmnist-mlp saved with its tensors in an external data
// file: the export is self-contained, byte-identical to the export of the inline model,
// and the report counts the original's data file.
func TestExportExternalData(t *testing.T) {
	inline := filepath.Join("..", "testmodels", "fmnist-mlp.onnx")
	if _, err := os.Stat(inline); err != nil {
		skipOrFail(t, fmt.Sprintf("%v: run testmodels/make.py", err))
	}
	m, err := onnxio.Load(inline)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "mlp.onnx")
	if err := m.SaveWith(src, onnxio.SaveOptions{ExternalThreshold: 1, MinExternalBytes: 512}); err != nil {
		t.Fatal(err)
	}
	ext, err := onnxio.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	ws := quantize(t, m, gridCases()[1])
	outDir := t.TempDir()
	a, b := filepath.Join(outDir, "from-inline.onnx"), filepath.Join(outDir, "from-external.onnx")
	if err := WriteFile(a, m, ws, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(b, ext, ws, Options{}); err != nil {
		t.Fatal(err)
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if string(ba) != string(bb) {
		t.Fatal("the export of the external-data model differs from the export of the inline one")
	}
	entries, _ := os.ReadDir(outDir)
	if len(entries) != 2 {
		t.Fatalf("export folder holds %d files, want the two models only", len(entries))
	}
	q, err := onnxio.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compare(ext, q, src, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fileSize(t, src) + fileSize(t, src+".data")
	if r.Totals.FileBytesBefore != want {
		t.Fatalf("size before %d, model and data file hold %d", r.Totals.FileBytesBefore, want)
	}
}
