package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
	"github.com/qtool/qtool/train"
	"github.com/urfave/cli/v2"
)

// seedFlag is the --seed flag of every command with randomness: data splits, shuffling,
// dropout and the ADMM-R masks all derive from it.
func seedFlag() cli.Flag {
	return &cli.Uint64Flag{Name: "seed", Value: 1, Usage: "`SEED` for every random choice; the same inputs and seed give bit-identical outputs"}
}

// backend is the BLAS, worker and memory configuration a command runs with.
type backend struct {
	BLAS    gblas.Float32
	Info    blas.Info
	Workers int
	// MaxMemory is --max-memory: it bounds the engine's plans of every graph the command
	// builds, as well as the decoded data kept in memory.
	MaxMemory int64
}

// selectBackend chooses the BLAS from QTOOL_BLAS and reads --max-memory, where the command
// has it. An unknown mode or a bad size is a usage error.
func selectBackend(c *cli.Context) (backend, error) {
	impl, info, err := blas.Select(blas.ModeFromEnv())
	if err != nil {
		return backend{}, usagef("%s: %v", blas.EnvVar, err)
	}
	be := backend{BLAS: impl, Info: info, Workers: runtime.GOMAXPROCS(0), MaxMemory: calib.DefaultMaxMemory}
	if s := c.String("max-memory"); s != "" {
		if be.MaxMemory, err = calib.ParseSize(s); err != nil {
			return backend{}, usagef("--max-memory: %v", err)
		}
	}
	return be, nil
}

// options are the engine options of a graph run with be and seed.
func (be backend) options(seed uint64) engine.Options {
	return engine.Options{BLAS: be.BLAS, Workers: be.Workers, Seed: seed, MaxBytes: be.MaxMemory}
}

// loaded is a model ready to run.
type loaded struct {
	Path  string
	Model *onnxio.Model
	Graph *engine.Graph
}

// loadModel reads path and builds its graph.
func loadModel(path string, be backend, seed uint64) (*loaded, error) {
	m, err := onnxio.Load(path)
	if err != nil {
		return nil, err
	}
	return buildModel(m, path, be, seed)
}

func buildModel(m *onnxio.Model, path string, be backend, seed uint64) (*loaded, error) {
	g, err := binarize.Build(m, binarize.Options{BLAS: be.BLAS, Workers: be.Workers, MaxMemory: be.MaxMemory, Seed: seed})
	if err != nil {
		return nil, err
	}
	return &loaded{Path: path, Model: m, Graph: g}, nil
}

// modelInput is what calib needs to know of a model's inputs: the data input
// (binarize.InputOf) and the others (binarize.InputsOf), read from .npz arrays named after
// them.
type modelInput struct {
	calib.Input
	Others []calib.Input
}

// input describes the model's inputs for calib.
func (l *loaded) input() modelInput {
	return modelInput{Input: binarize.InputOf(l.Graph), Others: binarize.InputsOf(l.Graph)}
}

// setOn makes o read the data for the inputs in.
func (in modelInput) setOn(o *calib.Options) {
	o.Input, o.Inputs = in.Input, in.Others
}

// declaredBatchNoted remembers the models whose declared batch was already reported.
var declaredBatchNoted sync.Map

// noteDeclaredBatch tells the user, once per model, that a model declaring a fixed batch
// runs in chunks of it whatever --batch-size is.
func noteDeclaredBatch(c *cli.Context, models ...*loaded) {
	for _, m := range models {
		if m == nil {
			continue
		}
		b := train.DeclaredBatch(m.Graph)
		if b == 0 {
			continue
		}
		if _, seen := declaredBatchNoted.LoadOrStore(m.Path, true); seen {
			continue
		}
		w := c.App.ErrWriter
		if w == nil {
			w = os.Stderr
		}
		fmt.Fprintf(w, "qtool: note: %s declares a fixed batch of %d: running it %d sample(s) at a time (--batch-size still sets the batch of each optimizer step)\n", m.Path, b, b)
	}
}

// batchNeed is the memory a batch size takes: the batch buffer calib allocates (samples
// and labels) plus the engine's plans, from plans(b) for the b samples a batch holds.
type batchNeed struct {
	d     calib.Dataset
	plans func(b int) (int64, error)
}

func (n batchNeed) bytes(bs int) (int64, error) {
	data := int64(bs) * int64(calib.SampleSize(n.d)) * 4
	if n.d.HasLabels() {
		data += int64(bs) * 8 * int64(calib.LabelsPerSample(n.d))
	}
	p, err := n.plans(min(bs, n.d.Len()))
	return data + p, err
}

// largest returns the largest batch size up to bs whose need fits in limit, or 0 when
// none does. Plans grow with the batch, so a bisection finds it. An error planning one
// sample is the model's and is returned as it is; above one sample a *engine.MemoryError
// only means that the batch is too large.
func (n batchNeed) largest(bs int, limit int64) (int, error) {
	b, err := n.bytes(1)
	if err != nil {
		return 0, err
	}
	if b > limit {
		return 0, nil
	}
	lo, hi := 1, bs // need(lo) fits; find the largest that does
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		b, err := n.bytes(mid)
		var me *engine.MemoryError
		switch {
		case errors.As(err, &me) || (err == nil && b > limit):
			hi = mid - 1
		case err != nil:
			return 0, err
		default:
			lo = mid
		}
	}
	return lo, nil
}

// sampleInputs are shape-only inputs of g for a batch of b samples of d: what one pass of
// the engine sees, so at most the batch g declares when it is fixed (train.Feed runs it in
// chunks of it).
func sampleInputs(g *engine.Graph, d calib.Dataset, b int) []*engine.Tensor {
	if db := train.DeclaredBatch(g); db > 0 {
		b = db
	}
	shape := []int{b}
	for _, s := range d.SampleShape() {
		shape = append(shape, int(s))
	}
	ins := []*engine.Tensor{engine.NewFloat(shape, nil)}
	extras := calib.ExtraInputs(d)
	for _, in := range g.Inputs()[1:] {
		for _, e := range extras {
			if e.Name != in.Name {
				continue
			}
			sh := make([]int, len(e.Shape))
			for i, v := range e.Shape {
				sh[i] = int(v)
			}
			if e.Axis >= 0 {
				sh[e.Axis] = b
			}
			if e.Int64 {
				// int64 inputs may set shapes, so the planner needs values; zeros stand in.
				n := 1
				for _, v := range sh {
					n *= v
				}
				ins = append(ins, engine.NewInt(sh, make([]int64, n)))
			} else {
				ins = append(ins, engine.NewFloat(sh, nil))
			}
		}
	}
	return ins
}

// fitEvalBatch lowers data.BatchSize for evaluating the models on data.Eval to the largest
// batch whose data and inference plans fit in be.MaxMemory, with a one-line note on
// stderr. In inference each sample's outputs do not depend on the batch it is in, so only
// the speed changes. A batch larger than the data set is lowered to it silently.
func fitEvalBatch(c *cli.Context, data *dataSets, be backend, models ...*loaded) error {
	noteDeclaredBatch(c, models...)
	need := batchNeed{d: data.Eval, plans: func(b int) (int64, error) {
		var sum int64
		for _, m := range models {
			if m == nil {
				continue
			}
			// Engine errors name the model file already.
			n, err := m.Graph.PlanBytes(&engine.Context{NoGrad: true}, sampleInputs(m.Graph, data.Eval, b)...)
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	}}
	bs := min(data.BatchSize, max(data.Eval.Len(), 1))
	want, err := need.bytes(bs)
	var me *engine.MemoryError
	if err == nil && want <= be.MaxMemory {
		data.BatchSize = bs
		return nil
	}
	if err != nil && !errors.As(err, &me) {
		return err
	}
	fit, err := need.largest(bs, be.MaxMemory)
	if err != nil {
		return err
	}
	if fit == 0 {
		return fmt.Errorf("%s: one sample needs more than --max-memory %s for the data and the engine; raise --max-memory", models[0].Path, sizeString(be.MaxMemory))
	}
	w := c.App.ErrWriter
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "qtool: note: --batch-size %d does not fit in --max-memory %s; evaluating in batches of %d\n", data.BatchSize, sizeString(be.MaxMemory), fit)
	data.BatchSize = fit
	return nil
}

// checkTrainBatch chooses the micro-batch binarize trains with: the batch size itself
// when its data, training plan (every float parameter trainable, as binarization trains
// weights, biases and normalisation parameters), gradients, optimizer state and the
// teacher's inference plan fit in be.MaxMemory (binarize.TrainNeed), else the largest
// micro-batch that does, with a one-line note on stderr. The optimizer still steps once
// per batch on the gradient of its mean loss (gradient accumulation); only BatchNorm's
// batch statistics become the micro-batches'. A model that does not fit one sample at a
// time is a usage error.
func checkTrainBatch(c *cli.Context, data *dataSets, teacher *loaded, be backend) (int, error) {
	noteDeclaredBatch(c, teacher)
	if len(teacher.Graph.Inputs()) > 1 || train.DeclaredBatch(teacher.Graph) > 0 {
		// binarize.TrainNeed plans the single data input at a free batch; a model with other
		// inputs or a fixed batch runs in train.Feed's chunks of its declared batch, and the
		// engine bounds each of its plans by --max-memory when it is made.
		return 0, nil
	}
	// A graph of its own, so that the teacher stays frozen.
	student, err := engine.Build(teacher.Model, be.options(0))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", teacher.Path, err)
	}
	var names []string
	for _, p := range student.Params() {
		if p.Value.DType == engine.Float32 {
			names = append(names, p.Name)
		}
	}
	if err := student.SetTrainable(names...); err != nil {
		return 0, fmt.Errorf("%s: %w", teacher.Path, err)
	}
	var sample []int
	for _, d := range data.Calib.SampleShape() {
		sample = append(sample, int(d))
	}
	bs := min(data.BatchSize, max(data.Calib.Len(), 1))
	resident := binarize.ResidentBytes(data.Calib, data.Eval, be.MaxMemory)
	sh, _, err := binarize.MicroBatchFor(student, teacher.Graph, sample, bs, max(data.Calib.Len(), 1), resident, be.MaxMemory, teacher.Path)
	micro := sh.Micro
	var me *binarize.MemoryError
	if errors.As(err, &me) {
		return 0, usagef("--max-memory %s: training %s needs %s for a single sample; raise --max-memory", sizeString(be.MaxMemory), teacher.Path, sizeString(me.Need))
	}
	if err != nil {
		return 0, err
	}
	if micro < bs {
		w := c.App.ErrWriter
		if w == nil {
			w = os.Stderr
		}
		fmt.Fprintf(w, "qtool: note: --batch-size %d does not fit in --max-memory %s for training; training in micro-batches of %d with gradient accumulation (one optimizer step per batch of %d)\n", data.BatchSize, sizeString(be.MaxMemory), micro, data.BatchSize)
		return micro, nil
	}
	return 0, nil
}

// sizeString writes n in the largest binary unit that keeps it at or above one, in the
// form --max-memory accepts.
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return fmt.Sprintf("%.3g%s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// binSetup is what every algorithm run of binarize and compare shares.
type binSetup struct {
	be        backend
	path      string
	teacher   *loaded // the model as loaded; binarize.Run never modifies it
	data      *dataSets
	opts      binarize.Options
	cleanup   func()
	evalFrom  string
	calibFrom string
}

func (s *binSetup) Close() {
	if s.data != nil {
		s.data.Close()
	}
	if s.cleanup != nil {
		s.cleanup()
	}
}

// setupBinarize checks the flags, loads the model and data and prints the warnings
// about the targets. Flag problems are usage errors, detected before anything is read.
func setupBinarize(c *cli.Context, stderr io.Writer, method admmq.Method) (*binSetup, error) {
	seed := c.Uint64("seed")
	be, err := selectBackend(c)
	if err != nil {
		return nil, err
	}
	opts, err := binarizeOptions(c, be, method)
	if err != nil {
		return nil, err
	}
	s := &binSetup{be: be, opts: opts}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	switch c.NArg() {
	case 0:
		if c.IsSet("data") {
			return nil, usagef("--data needs a MODEL.onnx argument")
		}
		dir, err := os.MkdirTemp("", "qtool-default-")
		if err != nil {
			return nil, err
		}
		s.cleanup = func() { os.RemoveAll(dir) }
		s.path = filepath.Join(dir, defaultModelName+".onnx")
		calibPath := filepath.Join(dir, "fmnist-calib.npz")
		if err := os.WriteFile(s.path, testmodels.FMNISTMLP, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(calibPath, testmodels.FMNISTCalib, 0o644); err != nil {
			return nil, err
		}
		if err := c.Set("data", calibPath); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "qtool: no model given: binarizing the embedded %s on its %s calibration subset\n", defaultModelName, "1000-image Fashion-MNIST")
	case 1:
		s.path = c.Args().First()
	default:
		return nil, usagef("%s takes one MODEL.onnx argument, got %d", c.Command.Name, c.NArg())
	}
	// analyze's --data is the calibration data as binarize's is beside --eval-data: its
	// validation split is the one binarize carves from it.
	if !c.IsSet("split") && c.String("eval-data") == "" && c.Command.Name != "analyze" {
		if err := c.Set("split", defaultSplit); err != nil {
			return nil, err
		}
	}
	if c.IsSet("split") && c.String("eval-data") != "" {
		return nil, usagef("--split and --eval-data exclude each other")
	}
	if s.teacher, err = loadModel(s.path, be, seed); err != nil {
		return nil, err
	}
	if s.teacher, err = initModel(c, s.teacher, be, seed); err != nil {
		return nil, err
	}
	if o := opts.Opset; o != 0 && o < s.teacher.Model.Opset("") {
		return nil, flagError(&binarize.OpsetError{Want: o, Has: s.teacher.Model.Opset("")}, c, s.path)
	}
	if s.data, err = openData(c, s.teacher.input(), seed); err != nil {
		return nil, err
	}
	if !c.IsSet("batch-size") {
		s.data.BatchSize = binarize.Defaults().BatchSize
	}
	s.opts.BatchSize = s.data.BatchSize
	if s.opts.MicroBatch, err = checkTrainBatch(c, s.data, s.teacher, be); err != nil {
		return nil, err
	}
	s.calibFrom, s.evalFrom = c.String("data"), c.String("data")
	if p := c.String("eval-data"); p != "" {
		o, err := dataOptions(c, seed)
		if err != nil {
			return nil, err
		}
		s.teacher.input().setOn(&o)
		if s.data.Eval, err = calib.Open(p, o); err != nil {
			return nil, err
		}
		s.data.Split, s.evalFrom = true, p
	}
	_, warnings, err := binarize.Targets(s.teacher.Model, s.opts)
	if err != nil {
		return nil, flagError(err, c, s.path)
	}
	for _, w := range warnings {
		if c.Command.Name == "analyze" {
			break // about --grid, which analyze does not take
		}
		fmt.Fprintln(stderr, "qtool:", "warning: "+warningText(w))
	}
	ok = true
	return s, nil
}

// warningText is a binarize warning with flag advice.
func warningText(w binarize.Warning) string {
	if u, ok := w.(binarize.UnnormalizedWeight); ok {
		return fmt.Sprintf("%s (%s) has no normalisation after it: with --grid binary its weights become ±1 with no scale and accuracy will suffer; --grid binary-channel learns a scale per output channel", u.Weight, u.Node)
	}
	if s, ok := w.(binarize.SmallSplit); ok {
		advice := "more calibration data or a larger --validation"
		if s.Split == binarize.SplitHeldOut {
			advice = "a larger --eval-data, or a larger held-out part of --split"
		}
		return fmt.Sprintf("%s; %s would narrow it", s, advice)
	}
	return w.String()
}

// run runs binarize.Run on the setup's model and data with o.
func (s *binSetup) run(ctx context.Context, c *cli.Context, o binarize.Options) (*binarize.Result, error) {
	res, err := binarize.Run(ctx, s.teacher.Model, binarize.Data{Calib: s.data.Calib, Eval: s.data.Eval}, o)
	return res, flagError(err, c, s.path)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
