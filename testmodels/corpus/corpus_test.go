//go:build cgo

package corpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbinet/npyio/npz"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/internal/testenv"
	"github.com/qtool/qtool/onnxio"
)

// setup is the corpus and the qtool binary, made once per test binary: generation takes
// tens of seconds and every test needs the same files.
var setup struct {
	once    sync.Once
	dir     string
	m       *Manifest
	missing string // why the generator cannot run here (an optional asset is absent)
	err     error
	took    time.Duration
	regen   bool

	qtoolOnce sync.Once
	qtool     string
	qtoolErr  error
}

// corpus returns the manifest and its folder, generating the corpus if it is stale. It
// skips (fails under CI=true) when onnxruntime or the generator's Python packages are
// missing, and fails with make.py's output when the generator itself fails.
func corpus(t *testing.T) (*Manifest, string) {
	t.Helper()
	ortref.Require(t)
	setup.once.Do(func() {
		root, err := ModuleRoot(".")
		if err != nil {
			setup.err = err
			return
		}
		setup.dir = filepath.Join(root, CacheDir)
		want, err := ScriptHash(".")
		if err != nil {
			setup.err = err
			return
		}
		if m, err := Load(setup.dir); err == nil && m.ScriptSHA256 == want {
			setup.m = m
			return
		}
		// Only a stale corpus needs Python; a fresh one is usable without it.
		if msg := generatorMissing(); msg != "" {
			setup.missing = msg
			return
		}
		start := time.Now()
		setup.m, setup.regen, _, setup.err = Ensure(".", setup.dir)
		setup.took = time.Since(start)
	})
	if setup.missing != "" {
		testenv.Missing(t, "the corpus generator cannot run: %s; install it with: %s", setup.missing, InstallHint)
	}
	if setup.err != nil {
		t.Fatalf("generating the corpus into %s: %v", setup.dir, setup.err)
	}
	if setup.regen {
		t.Logf("generated the corpus into %s with make.py in %.1f s", setup.dir, setup.took.Seconds())
	}
	return setup.m, setup.dir
}

// generatorMissing says what make.py lacks on this machine, or "".
func generatorMissing() string {
	if _, err := os.Stat(Python); err != nil {
		return Python + " is missing"
	}
	out, err := exec.Command(Python, "-c", "import torch, torchvision, onnx").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s cannot import torch, torchvision and onnx: %s", Python, tail(string(out), 1))
	}
	if _, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
		return "Fashion-MNIST (/usr/share/datasets/fashion-mnist) is missing"
	}
	return ""
}

// qtoolBinary builds cmd/qtool once per test binary, so that the tests run the product as
// users do: its flags, its one-line errors and its exit codes.
func qtoolBinary(t *testing.T) string {
	t.Helper()
	setup.qtoolOnce.Do(func() {
		dir, err := os.MkdirTemp("", "corpus-qtool-")
		if err != nil {
			setup.qtoolErr = err
			return
		}
		setup.qtool = filepath.Join(dir, "qtool")
		out, err := exec.Command("go", "build", "-o", setup.qtool, "github.com/qtool/qtool/cmd/qtool").CombinedOutput()
		if err != nil {
			setup.qtoolErr = fmt.Errorf("go build ./cmd/qtool: %v\n%s", err, out)
		}
	})
	if setup.qtoolErr != nil {
		t.Fatal(setup.qtoolErr)
	}
	return setup.qtool
}

func TestMain(m *testing.M) {
	code := m.Run()
	if setup.qtool != "" {
		os.RemoveAll(filepath.Dir(setup.qtool))
	}
	os.Exit(code)
}

// array is one npz entry: float32 values and their shape.
type array struct {
	shape []int
	data  []float32
}

func readNPZ(path string) (map[string]array, error) {
	r, err := npz.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := map[string]array{}
	for _, k := range r.Keys() {
		h := r.Header(k)
		var v []float32
		if err := r.Read(k, &v); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		out[strings.TrimSuffix(k, ".npy")] = array{shape: slices.Clone(h.Descr.Shape), data: v}
	}
	return out, nil
}

// batches returns the input sets to run: all samples at once, or one sample per run for a
// model that declares a fixed batch of 1 on its first input.
func batches(m Model, data map[string]array) ([][]ortref.Tensor, error) {
	fixed := fixedBatch(m)
	var runs [][]ortref.Tensor
	n := 1
	if fixed {
		first, ok := data[m.Inputs[0].Name]
		if !ok || len(first.shape) == 0 {
			return nil, fmt.Errorf("no batched array %q for the first input", m.Inputs[0].Name)
		}
		n = first.shape[0]
	}
	for s := range n {
		var run []ortref.Tensor
		for _, in := range m.Inputs {
			a, ok := data[in.Name]
			if !ok {
				return nil, fmt.Errorf("no array %q for input %q", in.Name, in.Name)
			}
			t := ortref.Tensor{Name: in.Name, Data: a.data}
			for _, d := range a.shape {
				t.Shape = append(t.Shape, int64(d))
			}
			if fixed {
				per := len(a.data) / a.shape[0]
				t.Data = a.data[s*per : (s+1)*per]
				t.Shape[0] = 1
			}
			run = append(run, t)
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// runEngine runs g on one input set; inputs are matched to the graph's inputs by name.
func runEngine(g *engine.Graph, run []ortref.Tensor) ([]*engine.Tensor, error) {
	var ins []*engine.Tensor
	for _, info := range g.Inputs() {
		i := slices.IndexFunc(run, func(t ortref.Tensor) bool { return t.Name == info.Name })
		if i < 0 {
			return nil, fmt.Errorf("no data for input %q", info.Name)
		}
		shape := make([]int, len(run[i].Shape))
		for j, d := range run[i].Shape {
			shape[j] = int(d)
		}
		ins = append(ins, engine.NewFloat(shape, run[i].Data))
	}
	outs, err := g.Forward(nil, ins...)
	if err != nil {
		return nil, err
	}
	// The outputs belong to the graph until the next Forward: copy them.
	cp := make([]*engine.Tensor, len(outs))
	for i, o := range outs {
		cp[i] = engine.NewFloat(slices.Clone(o.Shape), slices.Clone(o.F))
	}
	return cp, nil
}

// comparison is what one model's engine-vs-onnxruntime check measured.
type comparison struct {
	problems []string // what exceeded the tolerances
	maxErr   float64  // largest |engine − ort| over the output's scale, over all outputs
	torchErr float64  // the same for onnxruntime vs PyTorch (the exporter's own fidelity)
	agree    int      // top-1 agreements per position
	total    int
}

// outputs are one model's outputs over a data set, in the model's output order: values and
// shape, batches concatenated.
type outputs struct {
	vals   [][]float32
	shapes [][]int
}

// collect runs every input set of runs through run and concatenates the outputs; a model
// run one sample at a time gets batch = samples on the first axis.
func collect(m Model, runs [][]ortref.Tensor, run func([]ortref.Tensor) ([][]float32, [][]int, error)) (outputs, error) {
	o := outputs{vals: make([][]float32, len(m.Outputs)), shapes: make([][]int, len(m.Outputs))}
	for _, r := range runs {
		vals, shapes, err := run(r)
		if err != nil {
			return o, err
		}
		if len(vals) != len(m.Outputs) {
			return o, fmt.Errorf("%d outputs, the manifest lists %d", len(vals), len(m.Outputs))
		}
		for i := range vals {
			o.vals[i] = append(o.vals[i], vals[i]...)
			o.shapes[i] = shapes[i]
		}
	}
	if len(runs) > 1 {
		for i := range o.shapes {
			o.shapes[i] = append([]int{len(runs)}, o.shapes[i][1:]...)
		}
	}
	return o, nil
}

// ortOutputs runs the model file in onnxruntime (one thread) on data.
func ortOutputs(t *testing.T, m Model, path string, data map[string]array) outputs {
	t.Helper()
	sess, err := ortref.NewSessionFile(path, ortref.Options{IntraOpThreads: 1, NoSpinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	runs, err := batches(m, data)
	if err != nil {
		t.Fatal(err)
	}
	o, err := collect(m, runs, func(r []ortref.Tensor) ([][]float32, [][]int, error) {
		ref, err := sess.Run(r)
		if err != nil {
			return nil, nil, err
		}
		var vals [][]float32
		var shapes [][]int
		for _, y := range ref {
			s := make([]int, len(y.Shape))
			for j, d := range y.Shape {
				s[j] = int(d)
			}
			vals, shapes = append(vals, y.Data), append(shapes, s)
		}
		return vals, shapes, nil
	})
	if err != nil {
		t.Fatalf("onnxruntime on %s: %v", filepath.Base(path), err)
	}
	return o
}

// engineOutputs runs the model file in qtool's engine, in this process, on data.
func engineOutputs(t *testing.T, m Model, path string, data map[string]array) outputs {
	t.Helper()
	model, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := engine.Build(model, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := batches(m, data)
	if err != nil {
		t.Fatal(err)
	}
	o, err := collect(m, runs, func(r []ortref.Tensor) ([][]float32, [][]int, error) {
		outs, err := runEngine(g, r)
		if err != nil {
			return nil, nil, err
		}
		var vals [][]float32
		var shapes [][]int
		for _, y := range outs {
			vals, shapes = append(vals, y.F), append(shapes, y.Shape)
		}
		return vals, shapes, nil
	})
	if err != nil {
		t.Fatalf("engine on %s: %v", filepath.Base(path), err)
	}
	return o
}

// compare checks the engine's outputs got against onnxruntime's want on every output: max
// |engine − ort| ≤ 1e-4 × the output's scale (its largest |ort| value), and top-1 agreement
// on every position where the model has a class axis. With strict unset it only reports the
// problems in the result.
func compare(t *testing.T, m Model, got, want outputs, torch map[string]array, strict bool) comparison {
	t.Helper()
	var c comparison
	defer func() {
		for _, p := range c.problems {
			if strict {
				t.Error(p)
			}
		}
	}()
	for i, out := range m.Outputs {
		if !slices.Equal(got.shapes[i], want.shapes[i]) {
			c.problems = append(c.problems, fmt.Sprintf("output %q: engine shape %v, onnxruntime %v", out.Name, got.shapes[i], want.shapes[i]))
			c.maxErr = math.Inf(1)
			continue
		}
		e, at := scaledMaxErr(got.vals[i], want.vals[i])
		if e > 1e-4 {
			c.problems = append(c.problems, fmt.Sprintf("output %q: engine and onnxruntime differ by %.3g of the output's scale at element %d (%g vs %g); want ≤ 1e-4",
				out.Name, e, at, got.vals[i][at], want.vals[i][at]))
		}
		c.maxErr = max(c.maxErr, e)
		if tv, ok := torch[out.Name]; ok && len(tv.data) == len(want.vals[i]) {
			te, _ := scaledMaxErr(want.vals[i], tv.data)
			c.torchErr = max(c.torchErr, te)
		}
		if axis, ok := classAxis(m, i, len(want.shapes[i])); ok {
			a, n := top1Agreement(got.vals[i], want.vals[i], want.shapes[i], axis)
			c.agree += a
			c.total += n
			if a != n {
				c.problems = append(c.problems, fmt.Sprintf("output %q: top-1 agrees with onnxruntime on %d of %d positions; want all", out.Name, a, n))
			}
		}
	}
	return c
}

// scaledMaxErr returns max |got − want| / max |want| (the absolute error when want is all
// zero) and where it occurs.
func scaledMaxErr(got, want []float32) (float64, int) {
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	if scale == 0 {
		scale = 1
	}
	worst, at := 0.0, 0
	for i := range want {
		d := math.Abs(float64(got[i])-float64(want[i])) / scale
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
			if math.IsNaN(d) {
				return math.Inf(1), i
			}
		}
	}
	return worst, at
}

// classAxis returns the class axis of output i: the last axis of a classifier's first
// output, the manifest's class_axis for a sequence model's first output; none otherwise.
func classAxis(m Model, i, rank int) (int, bool) {
	if i != 0 {
		return 0, false
	}
	switch m.Kind {
	case "classifier":
		return rank - 1, true
	case "sequence":
		if m.ClassAxis != nil {
			return *m.ClassAxis, true
		}
	}
	return 0, false
}

// top1Agreement counts the positions (every index but the class axis) where got and want
// have the same argmax along axis.
func top1Agreement(got, want []float32, shape []int, axis int) (agree, total int) {
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	c := shape[axis]
	for o := range outer {
		for in := range inner {
			ga, wa := 0, 0
			for k := 1; k < c; k++ {
				idx := (o*c+k)*inner + in
				if got[idx] > got[(o*c+ga)*inner+in] {
					ga = k
				}
				if want[idx] > want[(o*c+wa)*inner+in] {
					wa = k
				}
			}
			total++
			if ga == wa {
				agree++
			}
		}
	}
	return agree, total
}

// statusRow is one line of the corpus status table.
type statusRow struct {
	model, params, engine, binarize, reported, measured string
}

var status struct {
	sync.Mutex
	rows map[string]*statusRow
}

func row(m Model) *statusRow {
	status.Lock()
	defer status.Unlock()
	if status.rows == nil {
		status.rows = map[string]*statusRow{}
	}
	r, ok := status.rows[m.Name]
	if !ok {
		r = &statusRow{model: m.Name, params: fmt.Sprintf("%d", m.Params), engine: "-", binarize: "-", reported: "-", measured: "-"}
		status.rows[m.Name] = r
	}
	return r
}

// TestCorpusForward checks every model of the corpus in qtool's engine against onnxruntime
// on its input set, every output. A model with a crash in its needs must crash with that
// signature (in a child process), so that it is checked numerically as soon as the fix
// lands and the need is removed from make.py.
func TestCorpusForward(t *testing.T) {
	man, dir := corpus(t)
	for _, m := range man.Models {
		t.Run(m.Name, func(t *testing.T) {
			r := row(m)
			knownNeeds(t, m)
			if bug := crashNeed(m); bug != "" {
				expectCrash(t, bug, probe(t, m.Name))
				r.engine = "crashes: " + bug
				return
			}
			path := filepath.Join(dir, m.File)
			data := load(t, filepath.Join(dir, m.Data))
			torch := load(t, filepath.Join(dir, m.TorchOutputs))
			c := compare(t, m, engineOutputs(t, m, path, data), ortOutputs(t, m, path, data), torch, true)
			r.engine = fmt.Sprintf("%.1e (ort vs torch %.1e)", c.maxErr, c.torchErr)
			if c.total > 0 {
				r.engine += fmt.Sprintf(", top-1 %d/%d", c.agree, c.total)
			}
		})
	}
}

func load(t *testing.T, path string) map[string]array {
	t.Helper()
	a, err := readNPZ(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// crashBlock are engine bugs that the corpus found and that crash the process (a panic in
// a worker goroutine, which no recover in Forward can catch): the test asserts the crash's
// signature in a child process, so that the fix flips the expectation.
var crashBlock = map[string]*regexp.Regexp{
	"depthwise-small-map": regexp.MustCompile(`panic: runtime error: slice bounds out of range \[:-\d+\](?s:.*)nnDepthwiseRow`),
}

// binarizedMismatch is the need of a model whose binarized file computes differently in
// qtool's engine and in onnxruntime (the full-precision file agrees).
const binarizedMismatch = "binarized-mismatch"

// mismatchSetting is where a binarized-mismatch need shows: every weight on ±1 without a
// scale (the paper's setting). qtool's defaults (binary-channel where no BatchNorm follows,
// first and last layers kept) give MobileNetV2 a well-conditioned file that onnxruntime and
// the engine compute alike (3.2e-06 of scale), so those models run in the setting that
// still exhibits the defect their need records.
func mismatchSetting(m Model) []string {
	if _, ok := m.Needs[binarizedMismatch]; ok {
		return []string{"--grid", "binary", "--keep", "none"}
	}
	return nil
}

// knownNeeds fails on a need this test cannot check: every need must show as a crash or a
// binarized-file mismatch, or it would silently excuse the model.
func knownNeeds(t *testing.T, m Model) {
	t.Helper()
	for k := range m.Needs {
		if crashBlock[k] == nil && k != binarizedMismatch {
			t.Fatalf("make.py lists need %q, which this test does not know how to recognise", k)
		}
	}
}

// crashNeed returns the model's crash need, if any.
func crashNeed(m Model) string {
	for k := range m.Needs {
		if crashBlock[k] != nil {
			return k
		}
	}
	return ""
}

// expectCrash asserts that output shows the crash of bug.
func expectCrash(t *testing.T, bug, output string) {
	t.Helper()
	if !crashBlock[bug].MatchString(output) {
		t.Fatalf("make.py says the model hits engine bug %q, but the run did not crash with its signature (fixed? then remove the need from make.py); output ends:\n%s", bug, tail(output, 15))
	}
}

// probeEnv names the model that TestCorpusProbe runs in a child process.
const probeEnv = "QTOOL_CORPUS_PROBE"

// probe runs the engine-vs-onnxruntime comparison of one model in a child test process and
// returns its output, so that a crash there cannot take the whole test binary down.
func probe(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCorpusProbe$", "-test.count=1")
	cmd.Env = append(os.Environ(), probeEnv+"="+name)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestCorpusProbe is the child process of probe; it does nothing unless QTOOL_CORPUS_PROBE
// names a model.
func TestCorpusProbe(t *testing.T) {
	name := os.Getenv(probeEnv)
	if name == "" {
		t.Skip("only run as a child of TestCorpusForward")
	}
	man, dir := corpus(t)
	i := slices.IndexFunc(man.Models, func(m Model) bool { return m.Name == name })
	if i < 0 {
		t.Fatalf("no model %q in the corpus", name)
	}
	m := man.Models[i]
	path := filepath.Join(dir, m.File)
	data := load(t, filepath.Join(dir, m.Data))
	c := compare(t, m, engineOutputs(t, m, path, data), ortOutputs(t, m, path, data), nil, true)
	t.Logf("max error %.2g of scale, top-1 %d/%d", c.maxErr, c.agree, c.total)
}

// heavy are the models binarized only without -short: their binarization takes most of the
// run's time and exercises nothing the others do not.
var heavy = []string{"resnet18"}

// fidelityRecord is one output of `qtool binarize --json`'s "outputs".
type fidelityRecord struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	SQNRdB       *float64 `json:"sqnr_db"`
	Identical    bool     `json:"identical"`
	AgreementPct *float64 `json:"agreement_pct"`
	Positions    int      `json:"positions"`
}

// TestCorpusBinarize runs `qtool binarize` with a tiny budget on every model (the heavy ones
// only without -short), holding out the model's held-out set as --eval-data, and checks:
//   - the run succeeds (a model with a crash need must crash with its signature instead);
//   - faithfulness: the written file computes the same in qtool's engine (`qtool eval
//     --outputs` where it can feed the model, else the engine in process) as in onnxruntime,
//     within the forward check's bounds;
//   - fidelity is reported truthfully: per output, the SQNR and agreement that qtool reports
//     against the full-precision model equal those computed from onnxruntime runs of both
//     files on the held-out set, within what the engine-vs-onnxruntime bound allows. Their
//     values depend on ADMM's defaults and the tiny budget, so they are logged, not gated.
func TestCorpusBinarize(t *testing.T) {
	man, dir := corpus(t)
	qtool := qtoolBinary(t)
	for _, m := range man.Models {
		t.Run(m.Name, func(t *testing.T) {
			if testing.Short() && slices.Contains(heavy, m.Name) {
				t.Skip("-short: " + strings.Join(heavy, ", ") + " are binarized only in the full run")
			}
			knownNeeds(t, m)
			r := row(m)
			fp := filepath.Join(dir, m.File)
			heldoutPath := filepath.Join(dir, m.Heldout)
			out := filepath.Join(t.TempDir(), m.Name+"-1bit.onnx")
			args := []string{"binarize", fp, "--data", filepath.Join(dir, m.Data), "--eval-data", heldoutPath,
				"--iters", "1", "--inner-steps", "2", "--limit", "64", "--seed", "1", "-o", out, "--json"}
			args = append(append(args, dataFlags(m)...), mismatchSetting(m)...)
			if m.ClassAxis != nil && !slices.Contains(m.Ops, "Softmax") && !slices.Contains(m.Ops, "LogSoftmax") {
				// No Softmax marks the class axis of per-pixel logits (the U-Net): declare
				// it, as a user would, so that qtool reports per-position agreement.
				args = append(args, "--class-axis", fmt.Sprintf("%s=%d", m.Outputs[0].Name, *m.ClassAxis))
			}
			start := time.Now()
			cmd := exec.Command(qtool, args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			took := time.Since(start)
			if bug := crashNeed(m); bug != "" {
				expectCrash(t, bug, stderr.String())
				r.binarize = "crashes: " + bug
				return
			}
			if err != nil {
				t.Fatalf("qtool %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			var sum struct {
				Targets []string         `json:"targets"`
				Outputs []fidelityRecord `json:"outputs"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
				t.Fatalf("qtool binarize --json: %v\n%s", err, stdout.String())
			}
			heldout := load(t, heldoutPath)
			binOrt := ortOutputs(t, m, out, heldout)

			// Faithfulness of the written file.
			_, mismatch := m.Needs[binarizedMismatch]
			c := compare(t, m, qtoolOutputs(t, qtool, m, out, heldoutPath), binOrt, nil, !mismatch)
			if mismatch && len(c.problems) == 0 {
				t.Fatalf("make.py says the binarized file computes differently in onnxruntime and the engine, but they agree within 1e-4 (%.2g of scale): remove %s from the model's needs in make.py", c.maxErr, binarizedMismatch)
			}

			// Fidelity: qtool's report against onnxruntime's runs of both files.
			fpOrt := ortOutputs(t, m, fp, heldout)
			var reported, measured []string
			for i, o := range m.Outputs {
				j := slices.IndexFunc(sum.Outputs, func(f fidelityRecord) bool { return f.Name == o.Name })
				if j < 0 {
					t.Fatalf("qtool binarize --json reports no fidelity for output %q", o.Name)
				}
				rec := sum.Outputs[j]
				f := measure(m, i, fpOrt.vals[i], binOrt.vals[i], fpOrt.shapes[i])
				reported = append(reported, rec.String())
				measured = append(measured, f.String())
				if !mismatch {
					checkFidelity(t, m, i, rec, f)
				}
				if m.Kind == "sigmoid" && i == 0 {
					checkSigmoid(t, o.Name, rec, fpOrt.vals[i], binOrt.vals[i])
				}
			}
			r.binarize = fmt.Sprintf("%.0f s, %d targets, file ort vs engine %.1e", took.Seconds(), len(sum.Targets), c.maxErr)
			if mismatch {
				r.binarize = fmt.Sprintf("**file ort vs engine %.2f of scale** (%s), top-1 %d/%d", c.maxErr, binarizedMismatch, c.agree, c.total)
				t.Logf("known mismatch (%s in make.py): %s", binarizedMismatch, strings.Join(c.problems, "; "))
			}
			r.reported, r.measured = strings.Join(reported, "; "), strings.Join(measured, "; ")
			t.Logf("binarized %d targets in %.1f s; file: onnxruntime vs engine %.2g of scale; fidelity on %d held-out samples: qtool %s, onnxruntime %s",
				len(sum.Targets), took.Seconds(), c.maxErr, m.HeldoutSamples, r.reported, r.measured)
		})
	}
}

// dataFlags are the data flags a model's npz files need. qtool reads a multi-input model's
// arrays by input name, but a single-input model's from --x-key (default "x"), so the
// corpus's arrays, named after the input, need the key.
func dataFlags(m Model) []string {
	if len(m.Inputs) == 1 {
		return []string{"--x-key", m.Inputs[0].Name}
	}
	return nil
}

// qtoolOutputs returns the model file's outputs on the npz at data as qtool's engine computes
// them, through `qtool eval --outputs`, the path users compare runtimes with: every input
// fed from its array, a fixed-batch model run in chunks of its declared batch.
func qtoolOutputs(t *testing.T, qtool string, m Model, path, data string) outputs {
	t.Helper()
	npzPath := filepath.Join(t.TempDir(), "outputs.npz")
	args := append([]string{"eval", path, "--data", data, "--outputs", npzPath}, dataFlags(m)...)
	if b, err := exec.Command(qtool, args...).CombinedOutput(); err != nil {
		t.Fatalf("qtool %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	got := load(t, npzPath)
	var o outputs
	for _, out := range m.Outputs {
		a, ok := got[out.Name]
		if !ok {
			t.Fatalf("qtool eval --outputs wrote no array %q", out.Name)
		}
		o.vals, o.shapes = append(o.vals, a.data), append(o.shapes, a.shape)
	}
	return o
}

func fixedBatch(m Model) bool {
	return len(m.Inputs[0].Shape) > 0 && m.Inputs[0].Shape[0] == 1
}

// fidelity is one output's fidelity of the binarized model to the full-precision one,
// computed here from onnxruntime's outputs, with the bounds that an engine within 1e-4 of
// the output's scale per element (the forward check's bound) could report.
type fidelity struct {
	sqnr, sqnrLo, sqnrHi float64 // the SQNR, and its range under the engine's error bound
	hasAgreement         bool
	agree, positions     int
	ties                 int // positions whose decision the engine's error bound could flip
}

func (f fidelity) String() string {
	s := fmt.Sprintf("%.2f dB", f.sqnr)
	if math.IsInf(f.sqnr, 1) {
		s = "identical"
	}
	if f.hasAgreement {
		s += fmt.Sprintf(", %.1f %%", 100*float64(f.agree)/float64(f.positions))
	}
	return s
}

func (r fidelityRecord) String() string {
	s := "identical"
	if r.SQNRdB != nil {
		s = fmt.Sprintf("%.2f dB", *r.SQNRdB)
	}
	if r.AgreementPct != nil {
		s += fmt.Sprintf(", %.1f %%", *r.AgreementPct)
	}
	return s
}

// engineTol is the forward check's bound: the engine may differ from onnxruntime by this
// fraction of an output's scale per element.
const engineTol = 1e-4

// measure computes output i's fidelity from onnxruntime's full-precision outputs fp and
// binarized outputs bin: SQNR 10·log10(Σt²/Σ(t−s)²) and the agreement qtool defines, with
// the output's kind from the manifest, not from qtool: top-1 along the class axis, or the
// decision at probability 0.5 for a sigmoid model's first output.
func measure(m Model, i int, fp, bin []float32, shape []int) fidelity {
	scale := 0.0
	for _, v := range fp {
		scale = max(scale, math.Abs(float64(v)))
	}
	var tt, dd float64
	for k, v := range fp {
		d := float64(bin[k]) - float64(v)
		tt += float64(v) * float64(v)
		dd += d * d
	}
	f := fidelity{sqnr: 10 * math.Log10(tt/dd)}
	// qtool's engine computes t and s each within engineTol·scale per element (of their own
	// scales; the binarized file's is taken as the same, its outputs are compared to t's),
	// so ‖t‖ may be off by δ and ‖t − s‖ by 2δ, δ = engineTol·scale·√n.
	delta := engineTol * scale * math.Sqrt(float64(len(fp)))
	sig, noise := math.Sqrt(tt), math.Sqrt(dd)
	f.sqnrLo = 20 * math.Log10(max(sig-delta, 0)/(noise+2*delta))
	f.sqnrHi = math.Inf(1)
	if noise > 2*delta {
		f.sqnrHi = 20 * math.Log10((sig+delta)/(noise-2*delta))
	}
	switch {
	case m.Kind == "sigmoid" && i == 0:
		const at = 0.5
		f.hasAgreement = true
		for k, v := range fp {
			f.positions++
			if (float64(v) >= at) == (float64(bin[k]) >= at) {
				f.agree++
			}
			if math.Abs(float64(v)-at) <= engineTol*scale || math.Abs(float64(bin[k])-at) <= engineTol*scale {
				f.ties++
			}
		}
	default:
		axis, ok := classAxis(m, i, len(shape))
		if !ok {
			break
		}
		f.hasAgreement = true
		f.agree, f.positions = top1Agreement(bin, fp, shape, axis)
		f.ties = nearTies(fp, shape, axis, engineTol*scale) + nearTies(bin, shape, axis, engineTol*scale)
	}
	return f
}

// nearTies counts the positions whose top-1 class leads the runner-up by at most tol.
func nearTies(x []float32, shape []int, axis int, tol float64) int {
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	c, n := shape[axis], 0
	for o := range outer {
		for in := range inner {
			first, second := math.Inf(-1), math.Inf(-1)
			for k := range c {
				v := float64(x[(o*c+k)*inner+in])
				if v > first {
					first, second = v, first
				} else if v > second {
					second = v
				}
			}
			if first-second <= 2*tol { // each of the two may be off by tol
				n++
			}
		}
	}
	return n
}

// checkFidelity asserts that qtool's report rec for output i is what onnxruntime measured.
func checkFidelity(t *testing.T, m Model, i int, rec fidelityRecord, f fidelity) {
	t.Helper()
	name := m.Outputs[i].Name
	// The JSON rounds the SQNR to 3 decimals.
	const rounding = 5e-4
	switch {
	case rec.SQNRdB == nil:
		if !rec.Identical {
			t.Errorf("output %q: qtool reports no SQNR and does not say the outputs are identical", name)
		}
		if !math.IsInf(f.sqnrHi, 1) {
			t.Errorf("output %q: qtool reports the binarized output identical to the full-precision one, onnxruntime measures %.3f dB (at most %.3f dB within the engine's error bound)", name, f.sqnr, f.sqnrHi)
		}
	case *rec.SQNRdB < f.sqnrLo-rounding || *rec.SQNRdB > f.sqnrHi+rounding:
		t.Errorf("output %q: qtool reports SQNR %.3f dB, onnxruntime measures %.3f dB (%.3f to %.3f within the engine's error bound)", name, *rec.SQNRdB, f.sqnr, f.sqnrLo, f.sqnrHi)
	}
	if !f.hasAgreement {
		if rec.AgreementPct != nil {
			t.Errorf("output %q (%s): qtool reports an agreement, but the manifest gives it no class axis or decision", name, rec.Kind)
		}
		return
	}
	if rec.AgreementPct == nil {
		t.Errorf("output %q (%s): qtool reports no agreement; onnxruntime measures %d/%d", name, rec.Kind, f.agree, f.positions)
		return
	}
	if rec.Positions != f.positions {
		t.Errorf("output %q: qtool counts %d positions, onnxruntime's outputs have %d", name, rec.Positions, f.positions)
		return
	}
	got := int(math.Round(*rec.AgreementPct / 100 * float64(rec.Positions)))
	if d := got - f.agree; d < -f.ties || d > f.ties {
		t.Errorf("output %q: qtool reports agreement %d/%d, onnxruntime measures %d/%d (%d near ties)", name, got, rec.Positions, f.agree, f.positions, f.ties)
	}
}

// checkSigmoid guards against issue 14's sigmoid defect, where distillation through a
// 1-class softmax was identically 0 and qtool reported "agreement 100 %" however far the
// probability moved: the probability must have moved in onnxruntime (else this check would
// be vacuous), and qtool must then report a finite SQNR (checkFidelity has matched it with
// onnxruntime's).
func checkSigmoid(t *testing.T, name string, rec fidelityRecord, fp, bin []float32) {
	t.Helper()
	moved := 0.0
	for k, v := range fp {
		moved = max(moved, math.Abs(float64(bin[k])-float64(v)))
	}
	if moved <= engineTol {
		t.Fatalf("output %q: the binarized probability moved by only %.2g in onnxruntime: the sigmoid check is vacuous", name, moved)
	}
	if rec.SQNRdB == nil || math.IsInf(*rec.SQNRdB, 0) {
		t.Errorf("output %q: the probability moved by up to %.3g in onnxruntime, yet qtool reports no finite SQNR (%s)", name, moved, rec)
	}
}

// TestZCorpusStatus logs the corpus status table after the other tests (Go runs tests in
// source order; the Z keeps it last should files be split). It re-runs nothing.
func TestZCorpusStatus(t *testing.T) {
	man, _ := corpus(t)
	var b strings.Builder
	b.WriteString("\n| model | params | engine vs onnxruntime (max err / scale) | qtool binarize | fidelity reported by qtool (SQNR, agreement per output) | measured with onnxruntime |\n|---|---:|---|---|---|---|\n")
	for _, m := range man.Models {
		r := row(m)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.model, r.params, r.engine, r.binarize, r.reported, r.measured)
	}
	t.Log(b.String())
}
