package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// formatSamples is how many samples each written file is evaluated on, in both runtimes.
const formatSamples = 64

// ortQDQConfig keeps onnxruntime computing a qdq file's float semantics: it fuses
// DequantizeLinear→MatMul into MatMulNBits, whose default accuracy level 4 quantizes the
// activations to int8 as well, and level 1 accumulates in float32 (README, export). The
// shipped models feed their weights to Gemm and Conv, which onnxruntime 1.30 leaves
// unfused (the comparison passes without the entry too); it is set so that the
// comparison stays one of float semantics should a MatMul model join them. It changes
// nothing for the packed and float files, which have no DequantizeLinear.
func ortQDQConfig() map[string]string {
	return map[string]string{"session.qdq_matmulnbits_accuracy_level": "1"}
}

// TestBinarizeFormatsGridsInOnnxruntime runs `binarize` with a tiny budget for every
// --format × --grid on every shipped model, plus qdq at --opset 21 (INT4 storage) for the
// grids that fit 4 bits. matmulnbits stores the Gemm weights of every model in
// MatMulNBits (the convolutions' stay packed), which onnxruntime runs at the accuracy
// level the file states, 1: float32 activations. Each written file must run in onnxruntime 1.30 to the logits
// qtool's engine computes for the same file, and the packed, qdq and float files of one
// seed — the same trained weights — must compute bit-identical logits in the engine.
// qdq on opset-9 digits-mlp is refused by design, with advice that the test follows.
func TestBinarizeFormatsGridsInOnnxruntime(t *testing.T) {
	ortref.Require(t)
	dir := t.TempDir()
	models := []struct {
		name, data string
		opset      int64
	}{
		{"digits-mlp", digitsData, 9},
		{"fmnist-mlp", fmnistCalib, 13},
		{"fmnist-cnn", fmnistCalib, 13},
		{"fmnist-resnet", fmnistCalib, 14},
	}
	formats := []export.Format{export.Packed, export.QDQ, export.Float, export.MatMulNBits}
	for _, m := range models {
		model := filepath.Join("../../testmodels", m.name+".onnx")
		for _, grid := range network.Grids() {
			t.Run(m.name+"/"+string(grid), func(t *testing.T) {
				run := func(format export.Format, extra ...string) (string, int, string) {
					out := filepath.Join(dir, fmt.Sprintf("%s-%s-%s%s.onnx", m.name, grid, format, strings.Join(extra, "")))
					args := append([]string{"binarize", model, "--data", m.data, "-o", out, "--format", string(format), "--grid", string(grid), "--keep", "none",
						"--iters", "1", "--inner-steps", "1", "--limit", "64", "--seed", "3", "-q"}, extra...)
					o, code, err := runArgs(t, args...)
					if err != nil {
						o += err.Error() // main prints the error; runArgs returns it
					}
					return out, code, o
				}
				type written struct {
					what   string
					logits []float32
				}
				var files []written
				check := func(what, path string, code int, out string) {
					if code != 0 {
						t.Fatalf("%s: exit %d\n%s", what, code, out)
					}
					logits, shape, x := engineLogits(t, path, m.data, formatSamples)
					compareWithORT(t, what, path, shape, x, logits)
					files = append(files, written{what, logits})
				}
				for _, f := range formats {
					path, code, out := run(f)
					if f == export.QDQ && m.opset < 10 {
						// By design: DequantizeLinear needs opset 10; the message says so.
						if code != 1 || !strings.Contains(out, "pass --opset 10") {
							t.Fatalf("qdq on opset %d: exit %d, want 1 with advice to pass --opset 10:\n%s", m.opset, code, out)
						}
						path, code, out = run(f, "--opset", "10")
						check("qdq --opset 10", path, code, out)
						continue
					}
					check(string(f), path, code, out)
					if f == export.MatMulNBits {
						checkNBitsLayout(t, path)
					}
				}
				if lv := grid.Levels(); lv[0] >= -8 && lv[len(lv)-1] <= 7 && m.opset >= 10 {
					path, code, out := run(export.QDQ, "--opset", "21")
					check("qdq --opset 21 (INT4)", path, code, out)
				}
				// packed and qdq both turn the weights into constants the engine folds
				// from integer levels and scales, so they must agree bit for bit. In the
				// float file the weights are parameters, which lets inference plans fold
				// a following BatchNormalization into a Conv (engine/fuse.go): the same
				// function up to float rounding, documented within 1e-5 relative. The
				// matmulnbits file holds the same weights too, but MatMulNBits adds its
				// bias after the product where Gemm starts the sum from it: float
				// rounding again.
				for _, w := range files[1:] {
					if w.what == string(export.Float) || w.what == string(export.MatMulNBits) {
						if err := closeLogits(w.logits, files[0].logits, 1e-5); err != nil {
							t.Errorf("float and %s files of the same run compute different functions: %v", files[0].what, err)
						}
						continue
					}
					if i := firstDifference(w.logits, files[0].logits); i >= 0 {
						t.Errorf("%s and %s files of the same run compute different logits: [%d] %v vs %v",
							w.what, files[0].what, i, w.logits[i], files[0].logits[i])
					}
				}
			})
		}
	}
}

// compareWithORT runs a written file in onnxruntime on x and checks its logits against
// the engine's, sample by sample, within 1e-4·max(1, ‖engine logits‖∞): ±1 weights
// without a scale give logits in the thousands, where float32 sums in another order
// differ by more than 1e-4 absolute.
func compareWithORT(t *testing.T, what, path string, shape []int64, x, want []float32) {
	t.Helper()
	s, err := ortref.NewSessionFile(path, ortref.Options{IntraOpThreads: 1, NoSpinning: true, Config: ortQDQConfig()})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer s.Close()
	res, err := s.Run([]ortref.Tensor{{Name: s.InputNames()[0], Shape: shape, Data: x}})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := closeLogits(res[0].Data, want, 1e-4); err != nil {
		t.Fatalf("%s: onnxruntime against the engine: %v", what, err)
	}
}

// closeLogits checks got against want sample by sample (formatSamples samples)
// within tol·max(1, ‖want‖∞).
func closeLogits(got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d logits, want %d", len(got), len(want))
	}
	k := len(want) / formatSamples
	for i := 0; i < len(want); i += k {
		scale := 1.0
		for _, v := range want[i : i+k] {
			scale = max(scale, math.Abs(float64(v)))
		}
		for j := i; j < i+k; j++ {
			if d := math.Abs(float64(got[j]) - float64(want[j])); !(d <= tol*scale) {
				return fmt.Errorf("sample %d: logit %v, want %v (|diff| %.3g > %g·%.3g)", i/k, got[j], want[j], d, tol, scale)
			}
		}
	}
	return nil
}

// firstDifference returns the first index where a and b differ in value or length, or -1.
func firstDifference(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// checkNBitsLayout checks what a matmulnbits file holds: no MatMul or Gemm left (every
// shipped model's are binarized, with transA = 0 and alpha = beta = 1), MatMulNBits in
// onnxruntime's domain instead, and every Conv's weight computed by the packed format's
// unpacking nodes rather than stored in float.
func checkNBitsLayout(t *testing.T, path string) {
	t.Helper()
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		ops[n.GetOpType()]++
		if n.GetOpType() == "Conv" {
			if _, stored := m.Param(n.GetInput()[1]); stored {
				t.Errorf("%s: Conv %q reads its weight %q as a stored tensor, not unpacked", path, n.GetName(), n.GetInput()[1])
			}
		}
		if n.GetOpType() == "MatMulNBits" && n.GetDomain() != export.MSDomain {
			t.Errorf("%s: MatMulNBits %q in domain %q", path, n.GetName(), n.GetDomain())
		}
	}
	if ops["MatMul"]+ops["Gemm"] != 0 || ops["MatMulNBits"] == 0 {
		t.Errorf("%s: nodes %v: want every MatMul and Gemm replaced by MatMulNBits", path, ops)
	}
}

// TestMatMulNBitsGemmAlpha: a Gemm with alpha ≠ 1 among the binarized weights (which
// MatMulNBits lacks) is written as MatMulNBits followed by a Mul, and the file runs in
// onnxruntime to the engine's logits, the same function as the packed file of the same
// run.
func TestMatMulNBitsGemmAlpha(t *testing.T) {
	ortref.Require(t)
	m, err := onnxio.Load("../../testmodels/fmnist-mlp.onnx")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "Gemm" {
			// PyTorch states alpha = 1: replace it.
			n.Attribute = slices.DeleteFunc(n.Attribute, func(a *onnxpb.AttributeProto) bool { return a.GetName() == "alpha" })
			n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: proto.String("alpha"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(2)})
			break
		}
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "alpha.onnx")
	if err := m.Save(model); err != nil {
		t.Fatal(err)
	}
	var logits [2][]float32
	for i, format := range []string{"packed", "matmulnbits"} {
		out := filepath.Join(dir, format+".onnx")
		args := []string{"binarize", model, "--data", fmnistCalib, "-o", out, "--format", format, "--keep", "none", "--iters", "1", "--inner-steps", "1", "--limit", "64", "--seed", "2", "-q"}
		msg, code, err := runArgs(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d, %v\n%s", format, code, err, msg)
		}
		var shape []int64
		var x []float32
		logits[i], shape, x = engineLogits(t, out, fmnistCalib, formatSamples)
		if format == "matmulnbits" {
			checkNBitsLayout(t, out)
			compareWithORT(t, format, out, shape, x, logits[i])
		}
	}
	if err := closeLogits(logits[1], logits[0], 1e-5); err != nil {
		t.Errorf("matmulnbits and packed files of the same run compute different functions: %v", err)
	}
}

// TestMatMulNBitsWidthAndBlockFlags: --nbits-bits and --nbits-block reach every
// MatMulNBits node of the file, which onnxruntime then runs to the engine's logits and
// which computes the same function as the packed file of the same run (same seed, so
// the same trained weights); outside --format matmulnbits the flags are a usage error.
func TestMatMulNBitsWidthAndBlockFlags(t *testing.T) {
	ortref.Require(t)
	dir := t.TempDir()
	model := "../../testmodels/fmnist-mlp.onnx"
	run := func(out string, extra ...string) (string, int) {
		args := append([]string{"binarize", model, "--data", fmnistCalib, "-o", out, "--keep", "none",
			"--iters", "1", "--inner-steps", "1", "--limit", "64", "--seed", "5", "-q"}, extra...)
		msg, code, err := runArgs(t, args...)
		if err != nil {
			msg += err.Error()
		}
		return msg, code
	}
	packed, nbits := filepath.Join(dir, "packed.onnx"), filepath.Join(dir, "nbits.onnx")
	if msg, code := run(packed); code != 0 {
		t.Fatalf("packed: exit %d\n%s", code, msg)
	}
	if msg, code := run(nbits, "--format", "matmulnbits", "--nbits-bits", "8", "--nbits-block", "32"); code != 0 {
		t.Fatalf("matmulnbits: exit %d\n%s", code, msg)
	}
	checkNBitsLayout(t, nbits)
	m, err := onnxio.Load(nbits)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() != "MatMulNBits" {
			continue
		}
		got := map[string]int64{}
		for _, a := range n.GetAttribute() {
			got[a.GetName()] = a.GetI()
		}
		if got["bits"] != 8 || got["block_size"] != 32 {
			t.Errorf("%s: bits %d, block_size %d; want 8 and 32 from the flags", n.GetName(), got["bits"], got["block_size"])
		}
	}
	want, _, _ := engineLogits(t, packed, fmnistCalib, formatSamples)
	logits, shape, x := engineLogits(t, nbits, fmnistCalib, formatSamples)
	compareWithORT(t, "matmulnbits 8-bit, block 32", nbits, shape, x, logits)
	if err := closeLogits(logits, want, 1e-5); err != nil {
		t.Errorf("matmulnbits and packed files of the same run compute different functions: %v", err)
	}
	if msg, code := run(filepath.Join(dir, "bad.onnx"), "--nbits-bits", "2"); code != exitUsage || !strings.Contains(msg, "--format matmulnbits only") {
		t.Errorf("--nbits-bits without --format matmulnbits: exit %d, want %d with a usage message:\n%s", code, exitUsage, msg)
	}
	if msg, code := run(filepath.Join(dir, "bad.onnx"), "--format", "matmulnbits", "--nbits-block", "24"); code != exitUsage || !strings.Contains(msg, "power of two") {
		t.Errorf("--nbits-block 24: exit %d, want %d naming the rule:\n%s", code, exitUsage, msg)
	}
}
