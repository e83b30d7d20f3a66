// Command train times qtool training steps (forward, backward, Adam update through
// train.Fit) side by side with PyTorch on the same architectures, and measures the memory
// of training the paper's MLP.
//
// Models: mlp is the paper's MLP 784-4096-4096-4096-10 with BatchNorm and Dropout, built
// here with random weights; cnn and resnet are testmodels/fmnist-cnn.onnx and
// fmnist-resnet.onnx. Every float initializer except BatchNorm's running statistics is
// trained. PyTorch runs the same architectures (torch_step.py, which imports them from
// testmodels/make.py) with torch.set_num_threads(2) in the same run.
//
//	go run ./bench/train                            # table for all models, OpenBLAS and pure Go
//	go run ./bench/train -models mlp -blas openblas
//	/usr/bin/time -v go run ./bench/train -rss      # peak RSS of MLP training (see -rss)
//
// Step times are medians over -steps steps after -warmup steps (-stat min takes the fastest
// step instead, which is steadier on a machine shared with other jobs). -rounds N measures
// everything N times, PyTorch and qtool alternating, and prints the medians over the rounds
// with the range of the per-round speed-ups: on a virtual machine whose host is shared,
// either engine's own step time moves between runs minutes apart, and one pair of
// measurements can land on either side of a ratio of 1. CPU ms is the
// process's CPU time (user and system, all threads) per timed step: on a busy machine it is
// closer to the unloaded step time than the wall time is, as long as no thread spins while
// waiting (true with -threads 1; OpenMP and OpenBLAS threads spin, which inflates it). GFLOP/s counts 3× the
// forward multiply-adds ×2 of Conv and Gemm layers (the usual estimate of a training step),
// the same count for both engines. Speed-up is PyTorch's step time over qtool's: above 1,
// qtool is faster.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/internal/benchkit"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels/papermlp"
)

func main() {
	var (
		models  = flag.String("models", "mlp,cnn,resnet", "comma-separated models: mlp, cnn, resnet")
		modes   = flag.String("blas", "openblas,go", "comma-separated BLAS modes to time qtool with (openblas, go, auto)")
		batch   = flag.Int("batch", 256, "batch size")
		steps   = flag.Int("steps", 10, "timed steps per measurement")
		warmup  = flag.Int("warmup", 2, "untimed steps before timing (the first one plans the graph)")
		width   = flag.Int("width", 4096, "hidden width of the mlp")
		python  = flag.String("python", "/usr/bin/python3", "Python with PyTorch for the comparison; empty skips PyTorch")
		threads = flag.Int("threads", 2, "PyTorch threads (torch.set_num_threads) and qtool workers")
		dir     = flag.String("testmodels", "", "folder of fmnist-cnn.onnx and fmnist-resnet.onnx (default: testmodels next to this program's module)")
		cpuprof = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
		stat    = flag.String("stat", "median", "step-time statistic: median or min")
		rounds  = flag.Int("rounds", 1, "measure every configuration this many times, PyTorch and qtool alternating; print medians over the rounds and the speed-ups' range")
		rss     = flag.Bool("rss", false, "only train the mlp for -warmup+-steps steps with the first -blas mode and print the step times; run under /usr/bin/time -v to read the peak RSS")
	)
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/train:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench/train:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if *stat != "median" && *stat != "min" {
		fmt.Fprintln(os.Stderr, "bench/train: -stat must be median or min")
		os.Exit(2)
	}
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench/train: -rounds must be at least 1")
		os.Exit(2)
	}
	if err := run(*models, *modes, *batch, *steps, *warmup, *width, *python, *threads, *dir, *stat, *rss, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench/train:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(models, modes string, batch, steps, warmup, width int, python string, threads int, dir, stat string, rss bool, rounds int) error {
	// qtool gets as many cores as PyTorch gets threads: its workers, OpenBLAS's threads and
	// gonum's Sgemm goroutines.
	runtime.GOMAXPROCS(threads)
	if dir == "" {
		d, err := testmodelsDir()
		if err != nil {
			return err
		}
		dir = d
	}
	if rss {
		mode := strings.Split(modes, ",")[0]
		impl, info, err := blas.SelectWith(mode, blas.Options{Threads: threads})
		if err != nil {
			return err
		}
		ms, _, err := timeQtool("mlp", dir, width, batch, steps, warmup, impl, threads, stat)
		if err != nil {
			return err
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("mlp %d-%d×3-10 batch %d, %s: %.1f ms/step; Go heap in use %.0f MiB, obtained from the OS %.0f MiB\n",
			784, width, batch, info.Name, ms, float64(m.HeapInuse)/(1<<20), float64(m.Sys)/(1<<20))
		return nil
	}
	// One row per model and BLAS mode, with one entry per round in each slice.
	type row struct {
		model, blas    string
		ms, cpu        []float64
		torchMS        []float64
		torchCPU       []float64
		ratio, cpuRate []float64
		flops          float64
		flopsOK        bool
	}
	var rows []*row
	find := func(model, blas string) *row {
		for _, r := range rows {
			if r.model == model && r.blas == blas {
				return r
			}
		}
		r := &row{model: model, blas: blas}
		rows = append(rows, r)
		return r
	}
	for round := 1; round <= rounds; round++ {
		torch := map[string]torchResult{}
		if python != "" {
			var err error
			torch, err = runTorch(python, models, batch, steps, warmup, threads, width)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench/train: PyTorch comparison skipped:", err)
			}
		}
		for _, model := range strings.Split(models, ",") {
			for _, mode := range strings.Split(modes, ",") {
				impl, info, err := blas.SelectWith(mode, blas.Options{Threads: threads})
				if err != nil {
					return err
				}
				ms, cpu, err := timeQtool(model, dir, width, batch, steps, warmup, impl, threads, stat)
				if err != nil {
					return err
				}
				r := find(model, info.Name)
				r.ms, r.cpu = append(r.ms, ms), append(r.cpu, cpu)
				if t, ok := torch[model]; ok {
					tms := t.MS
					if stat == "min" {
						tms = t.MinMS
					}
					r.torchMS, r.torchCPU = append(r.torchMS, tms), append(r.torchCPU, t.CPUMS)
					r.ratio, r.cpuRate = append(r.ratio, tms/ms), append(r.cpuRate, t.CPUMS/cpu)
					r.flops, r.flopsOK = t.Flops, true
				}
				if model == "mlp" {
					r.flops, r.flopsOK = mlpFlops(width, batch), true
				}
				fmt.Fprintf(os.Stderr, "round %d: %s %s: %.1f ms/step\n", round, model, info.Name, ms)
			}
		}
	}
	over := ""
	if rounds > 1 {
		over = fmt.Sprintf(", medians of %d rounds", rounds)
	}
	fmt.Printf("training step (forward, backward, Adam), batch %d, %d threads, %s of %d steps%s, %s, GOMAXPROCS %d, %s\n", batch, threads, stat, steps, over, runtime.Version(), runtime.GOMAXPROCS(0), benchkit.CPUModel())
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := "model\tqtool BLAS\tqtool ms\tqtool CPU ms\tqtool GFLOP/s\tPyTorch ms\tPyTorch CPU ms\tPyTorch GFLOP/s\tspeed-up\tCPU speed-up\t"
	if rounds > 1 {
		cols += "speed-up range\t"
	}
	fmt.Fprintln(w, cols)
	med := benchkit.Median
	for _, r := range rows {
		gf := func(ms float64) string {
			if !r.flopsOK {
				return "-"
			}
			return fmt.Sprintf("%.1f", r.flops/ms/1e6)
		}
		tms, tcpu, tgf, ratio, cratio, span := "-", "-", "-", "-", "-", "-"
		if len(r.torchMS) > 0 {
			tms, tcpu, tgf = fmt.Sprintf("%.1f", med(r.torchMS)), fmt.Sprintf("%.1f", med(r.torchCPU)), gf(med(r.torchMS))
			// The speed-up is the median of the rounds' own ratios, each pair measured
			// back to back, not a ratio of medians from different rounds.
			ratio, cratio = fmt.Sprintf("%.2f", med(r.ratio)), fmt.Sprintf("%.2f", med(r.cpuRate))
			span = fmt.Sprintf("%.2f–%.2f", slices.Min(r.ratio), slices.Max(r.ratio))
		}
		line := fmt.Sprintf("%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t", r.model, r.blas, med(r.ms), med(r.cpu), gf(med(r.ms)), tms, tcpu, tgf, ratio, cratio)
		if rounds > 1 {
			line += span + "\t"
		}
		fmt.Fprintln(w, line)
	}
	return w.Flush()
}

// testmodelsDir finds the repository's testmodels folder from the working directory up.
func testmodelsDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "testmodels"), nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("no go.mod above the working directory: run from the qtool repository or pass -testmodels")
		}
		d = up
	}
}

// mlpFlops is 3 × 2 × the multiply-adds of the MLP's four Gemms.
func mlpFlops(width, batch int) float64 {
	macs := 784*width + 2*width*width + width*10
	return 3 * 2 * float64(batch) * float64(macs)
}

type torchResult struct {
	Model string  `json:"model"`
	MS    float64 `json:"ms"`
	MinMS float64 `json:"min_ms"`
	CPUMS float64 `json:"cpu_ms"`
	Flops float64 `json:"flops"`
	Torch string  `json:"torch"`
}

func runTorch(python, models string, batch, steps, warmup, threads, width int) (map[string]torchResult, error) {
	script, err := filepath.Abs(filepath.Join(filepath.Dir(must(testmodelsDir())), "bench", "train", "torch_step.py"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(python, script, "--model", models, "--batch", fmt.Sprint(batch),
		"--steps", fmt.Sprint(steps), "--warmup", fmt.Sprint(warmup), "--threads", fmt.Sprint(threads), "--width", fmt.Sprint(width))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", python, script, err, strings.TrimSpace(stderr.String()))
	}
	res := map[string]torchResult{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r torchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: bad output line %q: %w", script, sc.Text(), err)
		}
		res[r.Model] = r
		fmt.Fprintf(os.Stderr, "%s PyTorch %s: %.1f ms/step\n", r.Model, r.Torch, r.MS)
	}
	return res, nil
}

func must(s string, err error) string {
	if err != nil {
		return "."
	}
	return s
}

// loadModel returns the model to train and the shape of one sample.
func loadModel(name, dir string, width int) (*onnxio.Model, []int64, error) {
	switch name {
	case "mlp":
		return papermlp.New(width, 7), []int64{784}, nil
	case "cnn", "resnet":
		path := filepath.Join(dir, "fmnist-"+name+".onnx")
		m, err := onnxio.Load(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (make it with testmodels/make.py)", err)
		}
		return m, []int64{1, 28, 28}, nil
	}
	return nil, nil, fmt.Errorf("unknown model %q: use mlp, cnn or resnet", name)
}

// timeQtool trains model for warmup+steps steps through train.Fit and returns the median
// (or with stat "min" the shortest) step time and the CPU time per step, in milliseconds.
func timeQtool(name, dir string, width, batch, steps, warmup int, impl gblas.Float32, threads int, stat string) (ms, cpu float64, err error) {
	m, sample, err := loadModel(name, dir, width)
	if err != nil {
		return 0, 0, err
	}
	g, err := engine.Build(m, engine.Options{BLAS: impl, Workers: threads})
	if err != nil {
		return 0, 0, err
	}
	if err := g.SetTrainable(benchkit.TrainableNames(m)...); err != nil {
		return 0, 0, err
	}
	// The graph holds its own copy of the weights; drop the model's so that peak memory is
	// that of training.
	m = nil
	runtime.GC()
	return benchkit.TimeGraphSteps(g, benchkit.Step{Batch: batch, Steps: steps, Warmup: warmup, Classes: 10,
		Sample: sample, BLAS: impl, Threads: threads, Min: stat == "min"})
}
