package export

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"

	"github.com/qtool/qtool/internal/testenv"
)

// pythonONNX is the Debian interpreter that has python3-onnx.
const pythonONNX = "/usr/bin/python3"

// skipOrFail skips with msg, or fails under CI=true, where optional assets must exist.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	testenv.Missing(t, "%s", msg)
}

// requireChecker skips (fails under CI) when /usr/bin/python3 cannot import onnx.
func requireChecker(t testing.TB) {
	t.Helper()
	if err := exec.Command(pythonONNX, "-c", "import onnx").Run(); err != nil {
		skipOrFail(t, fmt.Sprintf("%s cannot import onnx (%v); install it with: apt-get install python3-onnx", pythonONNX, err))
	}
}

// checkerOpset is the newest opset the installed onnx package knows.
func checkerOpset(t testing.TB) int64 {
	t.Helper()
	out, err := exec.Command(pythonONNX, "-c", "import onnx; print(onnx.defs.onnx_opset_version())").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	if _, err := fmt.Sscan(string(out), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// onnxCheck runs onnx.checker with full_check (shape inference too) on the file.
func onnxCheck(t testing.TB, path string) {
	t.Helper()
	cmd := exec.Command(pythonONNX, "-c", "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("onnx.checker rejects %s: %v\n%s", path, err, out)
	}
}

// testModelPaths lists the ONNX models shipped in testmodels/.
func testModelPaths(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "testmodels", "*.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		skipOrFail(t, "no models in testmodels/; run testmodels/make.py (see testmodels/README.md)")
	}
	return paths
}

// samples returns the shipped samples for a model's input: the fmnist calibration
// images for image models (flattened for an MLP), or the digits test split for a
// 64-feature input, as a batch shaped for the model.
func samples(t testing.TB, m *onnxio.Model) (x []float32, shape []int) {
	t.Helper()
	ins := m.Inputs()
	if len(ins) != 1 || !ins[0].Ranked {
		t.Fatalf("%s: want one ranked input, have %v", m.Name, ins)
	}
	feat := 1
	for _, d := range ins[0].Shape[1:] {
		if !d.Fixed {
			t.Fatalf("%s: input %s has a free non-batch dimension", m.Name, ins[0].ShapeString())
		}
		feat *= int(d.Value)
	}
	file := "fmnist-calib.npz"
	if feat == 64 {
		file = "digits-test.npz"
	}
	r, err := npz.Open(filepath.Join("..", "testmodels", file))
	if err != nil {
		skipOrFail(t, fmt.Sprintf("%v: run testmodels/make.py", err))
	}
	defer r.Close()
	h := r.Header("x.npy")
	if h == nil {
		t.Fatalf("%s: no key x", file)
	}
	if err := r.Read("x.npy", &x); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n := h.Descr.Shape[0]
	if len(x) != n*feat {
		t.Fatalf("%s: x has %d values, %d samples of %d features expected", file, len(x), n, feat)
	}
	shape = []int{n}
	for _, d := range ins[0].Shape[1:] {
		shape = append(shape, int(d.Value))
	}
	return x, shape
}

// gridCase is a quantization set of admmq and the levels its values lie on.
type gridCase struct {
	name   string
	spec   admmq.Spec
	levels []int
	// tol bounds the normwise difference between onnxruntime and the engine.
	tol float64
}

func gridCases() []gridCase {
	int4 := make([]int, 0, 15)
	for l := -7; l <= 7; l++ {
		int4 = append(int4, l)
	}
	return []gridCase{
		// Plain ±1 weights run with BatchNorm statistics re-estimated (see recalibrated).
		{"binary", admmq.Spec{Kind: admmq.KindBinary}, []int{-1, 1}, 1e-4},
		{"binary-channel", admmq.Spec{Kind: admmq.KindScaledBinary, Scale: admmq.ScaleOptimal, PerChannel: true}, []int{-1, 1}, 1e-4},
		{"ternary-channel", admmq.Spec{Kind: admmq.KindTernary, Scale: admmq.ScaleOptimal, PerChannel: true}, []int{-1, 0, 1}, 1e-4},
		// α = 2⁻⁶ keeps level·α exact in float64 and float32 alike.
		{"int4", admmq.Spec{Kind: admmq.KindUniform, Bits: 4, Alpha: 1.0 / 64}, int4, 1e-4},
	}
}

// quantize projects every weight that binarization targets onto the grid with admmq's
// projector (GD+Proj's projection step) and returns the weights with their grids.
func quantize(t testing.TB, m *onnxio.Model, gc gridCase) []Weight {
	t.Helper()
	set, err := admmq.NewSet(gc.spec)
	if err != nil {
		t.Fatal(err)
	}
	roles := m.ParamRoles()
	var ws []Weight
	for _, p := range m.Params() {
		c := roles[p.Name]
		if c.Role != onnxio.RoleWeight {
			continue
		}
		tt, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		shape := make([]int, len(tt.Dims))
		for i, d := range tt.Dims {
			shape[i] = int(d)
		}
		axis, err := c.Use.ChannelAxis(tt.Dims)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float32, len(tt.Float))
		if err := set.Project32(vals, tt.Float, admmq.Layout{Shape: shape, Axis: axis}); err != nil {
			t.Fatal(err)
		}
		g := Grid{Levels: gc.levels, Axis: axis}
		switch {
		case gc.spec.Kind == admmq.KindUniform:
			g.Scales = []float32{float32(gc.spec.Alpha)}
		case gc.spec.PerChannel:
			g.Scales = ScalesFromValues(vals, tt.Dims, gc.levels, axis, true)
		}
		ws = append(ws, Weight{Name: p.Name, Values: vals, Grid: g})
	}
	if len(ws) == 0 {
		t.Fatalf("%s: no weights to quantize", m.Name)
	}
	return ws
}

// withWeights returns a copy of m whose weights hold the quantized float values: the
// model qtool's engine runs as the reference.
func withWeights(t testing.TB, m *onnxio.Model, ws []Weight) *onnxio.Model {
	t.Helper()
	out := cloneModel(m)
	for _, w := range ws {
		p, _ := out.Param(w.Name)
		if err := out.SetParam(w.Name, onnxio.FloatTensor(w.Name, p.Tensor.GetDims(), w.Values)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runEngine runs the model in qtool's engine and returns its first output.
func runEngine(t testing.TB, m *onnxio.Model, x []float32, shape []int) []float32 {
	t.Helper()
	g, err := engine.Build(m, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := g.Forward(nil, engine.NewFloat(shape, x))
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(outs[0].F)
}

// runORT runs the file in onnxruntime and returns its first output. With fp32Matmul,
// the session asks for float32 accumulation in the MatMulNBits nodes onnxruntime fuses
// DequantizeLinear→MatMul into: by default (accuracy_level 4) they quantize the
// activations to int8, which is QDQ's quantized execution, not the exported weights'
// float semantics.
func runORT(t testing.TB, path string, input string, x []float32, shape []int, fp32Matmul bool) []float32 {
	t.Helper()
	s := make([]int64, len(shape))
	for i, d := range shape {
		s[i] = int64(d)
	}
	if !fp32Matmul {
		outs, err := ortref.RunFile(path, []ortref.Tensor{{Name: input, Shape: s, Data: x}})
		if err != nil {
			t.Fatal(err)
		}
		return outs[0].Data
	}
	// ortref.Options has no session config entries: build the session here, on the
	// environment ortref.Require initialised.
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	if err := so.AddSessionConfigEntry("session.qdq_matmulnbits_accuracy_level", "1"); err != nil {
		t.Fatal(err)
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := ort.NewDynamicAdvancedSession(path, []string{ins[0].Name}, []string{outs[0].Name}, so)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	in, err := ort.NewTensor(ort.NewShape(s...), slices.Clone(x))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy()
	res := []ort.Value{nil}
	if err := sess.Run([]ort.Value{in}, res); err != nil {
		t.Fatal(err)
	}
	defer res[0].Destroy()
	return slices.Clone(res[0].(*ort.Tensor[float32]).GetData())
}

// compareLogits checks each sample's outputs normwise: |got−want| ≤ tol·max(1, ‖want‖∞)
// with the ∞-norm over the sample's outputs, which is 1e-4 absolute for ordinary logits
// and relative where ±1 weights without a scale give logits in the tens of thousands,
// whose float32 spacing alone exceeds 1e-4 and whose sums runtimes order differently.
// Every sample's arg-max must agree.
func compareLogits(t testing.TB, what string, got, want []float32, rows int, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	cols := len(got) / rows
	worst, agree := 0.0, 0
	for r := range rows {
		g, w := got[r*cols:(r+1)*cols], want[r*cols:(r+1)*cols]
		norm := 1.0
		for _, v := range w {
			norm = max(norm, math.Abs(float64(v)))
		}
		for i := range g {
			d := math.Abs(float64(g[i]) - float64(w[i]))
			if d != d || d > tol*norm {
				t.Fatalf("%s: sample %d output %d is %v, engine gives %v (|diff| %g > %g·%g)", what, r, i, g[i], w[i], d, tol, norm)
			}
			worst = max(worst, d/norm)
		}
		if argmax(g) == argmax(w) {
			agree++
		}
	}
	if agree != rows {
		t.Fatalf("%s: top-1 agrees on %d of %d samples, want all", what, agree, rows)
	}
	t.Logf("%s: max |diff|/max(1,‖want‖∞) %.3g over %d samples, top-1 agrees on all", what, worst, rows)
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func shortName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".onnx")
}
