// Command paper reproduces the shape of the paper's experiments without pre-training
// (Huang et al., AISTATS 2021, §6.2 and Table 1) on Fashion-MNIST: every network starts
// from PyTorch's default random initialisation (binarize.RandomInit, seeded per seed),
// and each algorithm trains it from there on the 60 000 training images (binarize sets
// 10 % of them apart as its validation split, which picks the exported iterate);
// accuracy is measured on the 10 000 test images, which no choice reads. -validation
// reports the validation split's accuracy instead and never opens the test set: ρ and
// its schedule are chosen that way.
//
// Rows: FP (the same network trained in full precision by Adam, lr 1e-3, for the same
// number of epochs), gd-proj, pgd, ste, admm-q (I-ADMM-Q), admm-r, admm-s. Models: mlp is
// the paper's MLP (testmodels/papermlp, -width 4096 is the paper's; Table 1 is on MNIST,
// here Fashion-MNIST), resnet is testmodels/fmnist-resnet.onnx, the stand-in for the
// paper's CIFAR-10 ResNet-18 table.
//
// The paper's settings without pre-training, not qtool's defaults for pretrained models:
// every weight on the ±1 grid (keep none), ρ = 1e-5 absolute and constant, x starting at
// the random initialisation (its code's x⁰; qtool's default starts on the grid, where the
// Adam steps of 1e-2 never flip a ±1 weight and ADMM-Q equals PGD). -no-bn-recalib keeps
// the BatchNorm statistics gathered while training, as the paper's code does. -keep
// first,last keeps the first and last weights in float, qtool's practice and not the
// paper's, for the stand-in whose one-channel stem and unscaled ±1 classifier make every
// all-binary network poor. -project-x scores and exports sign(x), the projection of the
// trained weights, instead of ADMM's y: the paper's code measures that, never y.
//
//	go run ./bench/paper -model mlp -width 256 -seeds 5 -iters 4 -inner-epochs 1 -out docs/results/paper/mlp-256
//	go run ./bench/paper -model mlp -width 4096 -seeds 5 -iters 8 -inner-epochs 5 -out docs/results/paper/mlp
//	go run ./bench/paper -model resnet -seeds 3 -iters 8 -inner-epochs 5 -out docs/results/paper/resnet
//
// It writes OUT/results.json (every run) and OUT/summary.md (mean ± sample standard
// deviation over the seeds, with the command line and the budget).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/binarize"
	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels/papermlp"
	"github.com/qtool/qtool/train"
	gblas "gonum.org/v1/gonum/blas"
)

const fmnist = "/usr/share/datasets/fashion-mnist"

type run struct {
	Model    string  `json:"model"`
	Algo     string  `json:"algo"`
	Seed     uint64  `json:"seed"`
	Accuracy float64 `json:"accuracy"`
	Seconds  float64 `json:"seconds"`
}

func main() {
	model := flag.String("model", "mlp", "mlp (the paper's MLP at -width) or resnet (testmodels/fmnist-resnet.onnx)")
	width := flag.Int("width", papermlp.PaperWidth, "mlp: hidden width")
	seeds := flag.Int("seeds", 5, "seeds first-seed.. first-seed+N−1: each its own random initialisation, data order and masks")
	firstSeed := flag.Uint64("first-seed", 1, "the first seed (to split one table's seeds across processes)")
	trainN := flag.Int("train", 0, "training images (a seeded subset); 0 is all 60 000")
	testN := flag.Int("test", 0, "test images (a seeded subset); 0 is all 10 000")
	iters := flag.Int("iters", 8, "outer iterations")
	inner := flag.Int("inner-epochs", 5, "epochs per outer iteration; FP trains iters×inner-epochs epochs")
	algos := flag.String("algos", "fp,gd-proj,pgd,ste,admm-q,admm-r,admm-s", "comma-separated rows")
	out := flag.String("out", "docs/results/paper/mlp", "output directory")
	blasMode := flag.String("blas", "openblas", "BLAS: openblas or go")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "engine workers")
	var s scratch
	flag.Float64Var(&s.rho.Rho0, "rho", 1e-5, "ADMM: ρ at the first iteration, read as -rho-scale says")
	flag.Float64Var(&s.rho.Growth, "rho-growth", 1, "ADMM: ρ is multiplied by this every -rho-every iterations (1: constant, the paper's)")
	flag.IntVar(&s.rho.Every, "rho-every", 1, "ADMM: iterations between ρ's growth steps")
	rhoScale := flag.String("rho-scale", string(binarize.RhoAbsolute), "ADMM: absolute (the paper's), grid or gradient")
	start := flag.String("start", string(binarize.StartPretrained), "ADMM: x starts at the random init (pretrained, the paper's code) or on its projection (grid)")
	flag.BoolVar(&s.noBNRecalib, "no-bn-recalib", false, "keep the BatchNorm statistics gathered while training x, as the paper's code does, instead of re-estimating them with the exported weights")
	flag.BoolVar(&s.projectX, "project-x", false, "ADMM: score and export P(x), the projection of the trained weights, instead of y, as the paper's code reports (its test() replaces every weight by sign(x))")
	flag.BoolVar(&s.validation, "validation", false, "report the accuracy on the validation split (10 % of the training images) and never open the test set: for choosing -rho and its schedule")
	flag.BoolVar(&s.verbose, "v", false, "log each outer iteration of every run")
	grid := flag.String("grid", string(network.Binary), "grid of every binarized weight: binary (±1, the paper's) or binary-channel (±α per output channel, α refitted in every y-update)")
	flag.Float64Var(&s.lr, "lr", 0, "base learning rate of the binarized runs (0: binarize's default, 1e-2, the paper's MLP rate; its CIFAR-10 runs use 1e-3)")
	lrSchedule := flag.String("lr-schedule", string(binarize.StepLR), "learning-rate schedule of the binarized runs: step (×0.1 at half the epochs), constant or cosine")
	keep := flag.String("keep", binarize.KeepNone, "weights kept in float, as binarize's Selection.Keep: none (the paper's) or a comma-separated list of first, last, depthwise")
	flag.Parse()
	s.keep = strings.Split(*keep, ",")
	s.grid = network.Grid(*grid)
	if s.grid != network.Binary && s.grid != network.BinaryChannel {
		fmt.Fprintf(os.Stderr, "paper: -grid %s: want binary or binary-channel\n", *grid)
		os.Exit(2)
	}
	s.rhoScale, s.start = binarize.RhoScale(*rhoScale), binarize.Start(*start)
	s.lrSchedule = binarize.LRSchedule(*lrSchedule)
	if err := bench(*model, *width, *firstSeed, *seeds, *trainN, *testN, *iters, *inner, strings.Split(*algos, ","), *out, *blasMode, *workers, s); err != nil {
		fmt.Fprintln(os.Stderr, "paper:", err)
		os.Exit(1)
	}
}

// scratch holds the settings of the runs from random initialisation that qtool's defaults
// (made for pretrained models) do not fit.
type scratch struct {
	rho         admmq.Schedule
	rhoScale    binarize.RhoScale
	start       binarize.Start
	noBNRecalib bool
	projectX    bool
	lr          float64
	lrSchedule  binarize.LRSchedule
	keep        []string
	grid        network.Grid
	validation  bool
	verbose     bool
}

func bench(model string, width int, firstSeed uint64, seeds int, trainN, testN, iters, inner int, algos []string, out, blasMode string, workers int, sc scratch) error {
	impl, _, err := blas.Select(blasMode)
	if err != nil {
		return err
	}
	arch := func() (*onnxio.Model, error) {
		switch model {
		case "mlp":
			// papermlp.New's own draw is replaced by RandomInit's, the path `--init random` takes.
			return papermlp.New(width, 0), nil
		case "resnet":
			return onnxio.Load("testmodels/fmnist-resnet.onnx")
		}
		return nil, fmt.Errorf("-model %s: want mlp or resnet", model)
	}
	base, err := arch()
	if err != nil {
		return err
	}
	g0, err := binarize.Build(base, binarize.Options{Workers: workers, BLAS: impl})
	if err != nil {
		return err
	}
	in := binarize.InputOf(g0)
	open := func(file string, limit int) (calib.Dataset, error) {
		return calib.Open(filepath.Join(fmnist, file), calib.Options{Input: in, Limit: limit, Seed: 1})
	}
	trainSet, err := open("train-images-idx3-ubyte.gz", trainN)
	if err != nil {
		return err
	}
	defer trainSet.Close()
	var testSet calib.Dataset
	nTest := 0
	if sc.validation {
		for _, a := range algos {
			if a == "fp" {
				return fmt.Errorf("-validation: the fp row has no validation split; leave it out of -algos")
			}
		}
	} else {
		if testSet, err = open("t10k-images-idx3-ubyte.gz", testN); err != nil {
			return err
		}
		defer testSet.Close()
		nTest = testSet.Len()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := model
	if model == "mlp" {
		name = fmt.Sprintf("mlp-%d", width)
	}
	var runs []run
	ctx := context.Background()
	for seed := firstSeed; seed < firstSeed+uint64(seeds); seed++ {
		m, _, err := binarize.RandomInit(base, seed)
		if err != nil {
			return err
		}
		for _, a := range algos {
			t0 := time.Now()
			var acc float64
			if a == "fp" {
				acc, err = trainFP(ctx, m, trainSet, testSet, iters*inner, seed, impl, workers)
			} else {
				acc, err = binarizeRun(ctx, m, trainSet, testSet, a, iters, inner, seed, impl, workers, sc)
			}
			if err != nil {
				return fmt.Errorf("%s seed %d: %w", a, seed, err)
			}
			r := run{Model: name, Algo: a, Seed: seed, Accuracy: acc, Seconds: time.Since(t0).Seconds()}
			fmt.Fprintf(os.Stderr, "%s seed %d %-8s %.2f %%  %.0f s\n", name, seed, a, 100*acc, r.Seconds)
			runs = append(runs, r)
			if err := write(out, runs, algos, name, trainSet.Len(), nTest, iters, inner, sc); err != nil {
				return err
			}
		}
	}
	return nil
}

// lrText names the binarized runs' base learning rate; 0 leaves binarize's default.
func lrText(lr float64) string {
	if lr == 0 {
		return "1e-2 (binarize's default)"
	}
	return fmt.Sprintf("%g", lr)
}

// binarizeRun returns the accuracy of algo's exported model on te, or on the validation
// split when te is nil.
func binarizeRun(ctx context.Context, m *onnxio.Model, tr, te calib.Dataset, algo string, iters, inner int, seed uint64, impl gblas.Float32, workers int, sc scratch) (float64, error) {
	method, err := binarize.ParseMethod(algo)
	if err != nil {
		return 0, err
	}
	// The paper binarizes every layer to ±1 (keep none, binary grid); -keep can differ.
	res, err := binarize.Run(ctx, m, binarize.Data{Calib: tr, Eval: te}, binarize.Options{
		Method: method, Iters: iters, InnerEpochs: inner, Seed: seed, BLAS: impl, Workers: workers,
		Selection: network.Selection{Keep: sc.keep}, Grid: sc.grid,
		Rho: sc.rho, RhoScale: sc.rhoScale, Start: sc.start, NoBNRecalib: sc.noBNRecalib,
		ProjectX: sc.projectX, LR: sc.lr, Schedule: sc.lrSchedule,
	})
	if err != nil {
		return 0, err
	}
	if sc.verbose {
		for _, h := range res.History {
			fmt.Fprintf(os.Stderr, "  %s iter %d ρ %.3g f(x) %.4f f(y) %.4f ‖x−y‖ %.4g flipped %.2f %% validation %.2f %%\n", algo, h.Iter, h.Rho, h.FX, h.FY, h.Residual, 100*h.Flipped, 100*h.Accuracy)
		}
		fmt.Fprintf(os.Stderr, "  %s exported iteration %d\n", algo, res.Exported)
	}
	a := res.Accuracy()
	if a == nil {
		return 0, fmt.Errorf("no labels")
	}
	return *a, nil
}

// trainFP trains every weight, bias and normalisation parameter of m in full precision
// (Adam, lr 1e-3, batch 512 as binarize's default) and returns the test accuracy.
func trainFP(ctx context.Context, m *onnxio.Model, tr, te calib.Dataset, epochs int, seed uint64, impl gblas.Float32, workers int) (float64, error) {
	m = m.Clone()
	if _, err := train.SeparateBNStats(m); err != nil {
		return 0, err
	}
	g, err := engine.Build(m, engine.Options{BLAS: impl, Workers: workers, Seed: seed})
	if err != nil {
		return 0, err
	}
	roles := m.ParamRoles()
	var names []string
	for _, p := range g.Params() {
		c := roles[p.Name]
		bnStat := c.Role == onnxio.RoleNorm && c.Use.Node.GetOpType() == "BatchNormalization" && c.Use.Input >= 3
		if p.Value.DType == engine.Float32 && (c.Role == onnxio.RoleWeight || c.Role == onnxio.RoleBias || c.Role == onnxio.RoleNorm) && !bnStat {
			names = append(names, p.Name)
		}
	}
	if err := g.SetTrainable(names...); err != nil {
		return 0, err
	}
	trb, err := calib.NewBatches(tr, calib.BatchOptions{Size: 512, Shuffle: true, Seed: seed})
	if err != nil {
		return 0, err
	}
	teb, err := calib.NewBatches(te, calib.BatchOptions{Size: 512})
	if err != nil {
		return 0, err
	}
	eng := &engine.Context{BLAS: impl, Workers: workers}
	if _, err := train.Fit(ctx, g, trb, train.Options{Epochs: epochs, Optimizer: train.NewAdam(train.AdamOptions{}),
		Schedule: train.Constant{LR: 1e-3}, Engine: eng, Seed: seed}); err != nil {
		return 0, err
	}
	met, err := train.Evaluate(ctx, g, teb, train.EvalOptions{Engine: eng})
	return met.Accuracy, err
}

func write(out string, runs []run, algos []string, name string, nTrain, nTest, iters, inner int, sc scratch) error {
	b, err := json.MarshalIndent(runs, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var s strings.Builder
	fmt.Fprintf(&s, "# %s from random initialisation (Fashion-MNIST)\n\n", name)
	fmt.Fprintf(&s, "Command: `go run ./bench/paper %s`\n\n", strings.Join(os.Args[1:], " "))
	split := fmt.Sprintf("%d test images (held out: no choice reads them)", nTest)
	if sc.validation {
		split = "accuracy on the validation split (10 % of the training images, not trained on); the test set was not opened"
	}
	// binarize calls the given weights "pretrained"; here they are the random initialisation.
	start := "the random initialisation"
	if sc.start == binarize.StartGrid {
		start = "its projection on the grid"
	}
	iterate := "y"
	if sc.projectX {
		iterate = "P(x) (the paper's code's measure)"
	}
	fmt.Fprintf(&s, "Budget: %d training images (10 %% of them binarize's validation split), %s, %d outer iterations × %d epochs (FP: %d epochs of Adam, lr 1e-3). Grid: %s. ADMM: ρ %+v read as %s, x starts at %s, %s scored and exported; BatchNorm statistics re-estimated: %v; kept in float: %s; learning rate %s, %s schedule; every other setting is qtool's default.\n\n",
		nTrain, split, iters, inner, iters*inner, sc.grid, sc.rho, sc.rhoScale, start, iterate, !sc.noBNRecalib, strings.Join(sc.keep, ","), lrText(sc.lr), sc.lrSchedule)
	what := "test"
	if sc.validation {
		what = "validation"
	}
	fmt.Fprintf(&s, "| algorithm | %s accuracy, mean ± sd | seeds | per seed | seconds per run |\n|---|---|---|---|---|\n", what)
	for _, a := range algos {
		var accs []float64
		var secs float64
		for _, r := range runs {
			if r.Algo == a {
				accs = append(accs, 100*r.Accuracy)
				secs += r.Seconds
			}
		}
		if len(accs) == 0 {
			continue
		}
		var mean, sd float64
		for _, v := range accs {
			mean += v
		}
		mean /= float64(len(accs))
		for _, v := range accs {
			sd += (v - mean) * (v - mean)
		}
		if len(accs) > 1 {
			sd = math.Sqrt(sd / float64(len(accs)-1))
		}
		var per []string
		for _, v := range accs {
			per = append(per, fmt.Sprintf("%.2f", v))
		}
		fmt.Fprintf(&s, "| %s | %.2f ± %.2f %% | %d | %s | %.0f |\n", a, mean, sd, len(accs), strings.Join(per, ", "), secs/float64(len(accs)))
	}
	return os.WriteFile(filepath.Join(out, "summary.md"), []byte(s.String()), 0o644)
}
