//go:build cgo

// Command realnets measures qtool on real architectures against onnxruntime 1.30
// (inference) and PyTorch 1.13 (training steps), each comparison in the same run with the
// same thread count: torchvision ResNet-18 at 32 and 224 px, MobileNetV2,
// MobileNetV3-small, EfficientNet-B0, ShuffleNetV2 and SqueezeNet at 224 px, a
// 2-layer TransformerEncoder over 16 tokens and the MobileNetV3-style OCR classifier of
// bench/memory at 3×48×192. realnets.py exports them with /usr/bin/python3 (random
// weights, fixed seeds) into .cache/realnets/ once.
//
//	go run ./bench/realnets                          # inference, batch 1 and 32, every model
//	go run ./bench/realnets -models ocr,transformer -seconds 5
//	go run ./bench/realnets -rounds 5                # medians of 5 alternating rounds, on a shared machine
//	go run ./bench/realnets -train                   # training steps, batch 32, against PyTorch
//	go run ./bench/realnets -train -mem              # and each engine's memory, one process per model
//	go run ./bench/realnets -models ocr -ort=false -cpuprofile ocr.prof
//	go run ./bench/realnets -torch                   # PyTorch's inference too (traced, frozen)
//	GODEBUG=cpu.avx512f=off go run ./bench/realnets -torch -torch-avx2   # both on AVX2 kernels
//	GODEBUG=cpu.avx512f=off go run ./bench/realnets -ort-avx2   # onnxruntime on its AVX2 kernels too
//
// Inference prints samples/s and the ratio qtool/onnxruntime (above 1, qtool is faster);
// with -rounds N each configuration is measured N times, the two engines alternating,
// and the medians are printed with the range of the ratios: on a virtual machine whose
// neighbours load the host, onnxruntime's own rate moved by up to 1.5× between runs
// minutes apart, so that one measurement's ratio says little. With -torch PyTorch's
// inference rate and qtool/PyTorch are printed too: onnxruntime keeps its AVX-512 kernels
// when the engine's are turned off, but PyTorch can be held to AVX2 (-torch-avx2), which
// makes the AVX2 comparison that the machine allows; -ort-avx2 runs onnxruntime in
// child processes (bench/realnets/ortrate) to which CPUID shows no AVX-512
// (internal/cpuidmask, CPUID faulting), so that its own kernel choice falls on AVX2;
// training prints step times and PyTorch's step time over qtool's (above 1, qtool is
// faster). With -mem every model trains in a process of its own, for each engine, which
// reports its resident memory before building the model and its high-water mark after
// the steps: the difference is what the training step took (PyTorch's process holds
// ~300 MB of libraries before that, qtool's ~10 MB). It needs cgo and onnxruntime's
// library (see internal/ortref).
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/qtool/qtool/internal/benchrate"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/cpu"
	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/internal/benchkit"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
)

const allModels = "resnet18-32,resnet18-224,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,shufflenet_v2,squeezenet,transformer,ocr"

// The training default leaves out the 224 px nets but MobileNetV3-small: a step of
// ResNet-18 at 224 px and batch 32 takes seconds on two cores.
const trainModels = "resnet18-32,mobilenet_v2-96,mobilenet_v3_small,transformer,ocr"

func main() {
	var (
		models  = flag.String("models", "", "comma-separated models (default: "+allModels+"; with -train "+trainModels+")")
		batches = flag.String("batches", "1,32", "comma-separated batch sizes (inference)")
		seconds = flag.Float64("seconds", 2, "measuring time per configuration and round (inference)")
		rounds  = flag.Int("rounds", 1, "rounds per configuration, the engines alternating; medians printed (inference)")
		threads = flag.Int("threads", 2, "threads of every engine")
		mode    = flag.String("blas", "openblas", "qtool's BLAS: openblas, go or auto")
		ort     = flag.Bool("ort", true, "measure onnxruntime too (inference)")
		doTrain = flag.Bool("train", false, "time training steps (forward, backward, Adam) against PyTorch instead")
		batch   = flag.Int("batch", 32, "batch size (training)")
		steps   = flag.Int("steps", 5, "timed steps (training; median)")
		python  = flag.String("python", "/usr/bin/python3", "Python with PyTorch and torchvision; exports the models, and times PyTorch's steps (empty: skip those, models must be cached)")
		cache   = flag.String("cache", "", "folder of the exported models (default .cache/realnets/ under the module root)")
		cpuprof = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		torchF  = flag.Bool("torch", false, "inference: time PyTorch's too (torchinfer.py: the model traced and frozen, -python's PyTorch) and print qtool/PyTorch")
		ortAVX2 = flag.Bool("ort-avx2", false, "inference: run onnxruntime in child processes that see no AVX-512 in CPUID (internal/cpuidmask), so that it takes its AVX2 kernels; with GODEBUG=cpu.avx512f=off both engines run their AVX2 paths")
		torch2  = flag.Bool("torch-avx2", false, "with -torch: keep PyTorch to its AVX2 kernels (ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2), to compare with the engine's AVX2 path (GODEBUG=cpu.avx512f=off)")
		inputs  = flag.String("inputs", "0,1", "inference: draw the input values uniformly from lo,hi (onnxruntime's child processes too); \"-2,2\" reaches a normalised image's range, where the models' random weights make subnormal values")
		layers  = flag.Int("layers", 0, "after each model and batch (inference), time every node of both engines and print the time a run of each op and of this many nodes, the largest first")
		mem     = flag.Bool("mem", false, "with -train: run every model in processes of their own and report each engine's memory")
		child   = flag.Bool("mem-child", false, "internal: the qtool side of -mem, one model, printing one JSON line")
	)
	flag.Parse()
	if *models == "" {
		*models = allModels
		if *doTrain {
			*models = trainModels
		}
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "realnets:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	runtime.GOMAXPROCS(*threads)
	names := strings.Split(*models, ",")
	dir, err := ensureExported(*python, *cache, names)
	if err == nil {
		switch {
		case *child:
			err = memChild(dir, names[0], *mode, *batch, *steps, *threads)
		case *doTrain && *mem:
			err = runTrainMem(dir, *cache, names, *mode, *python, *batch, *steps, *threads)
		case *doTrain:
			err = runTrain(dir, names, *mode, *python, *batch, *steps, *threads)
		default:
			var tc *torchConf
			if *torchF {
				if *python == "" {
					err = fmt.Errorf("-torch times PyTorch: -python must name it")
					break
				}
				tc = &torchConf{python: *python, avx2: *torch2}
			}
			var in benchrate.Range
			if in, err = benchrate.ParseRange(*inputs); err != nil {
				break
			}
			if tc != nil && in != (benchrate.Range{Lo: 0, Hi: 1}) {
				err = fmt.Errorf("-inputs %s: PyTorch's side (-torch) draws from 0,1 only", in)
				break
			}
			if *ortAVX2 && !*ort {
				err = fmt.Errorf("-ort-avx2 times onnxruntime: it needs -ort")
				break
			}
			err = runInfer(dir, names, *mode, *batches, *seconds, max(*rounds, 1), *threads, *ort, *ortAVX2, *layers, tc, in)
		}
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "realnets:", err)
		os.Exit(1)
	}
}

// ensureExported returns the folder holding the exported models, keyed by the scripts
// that make them so that a changed script exports again, running realnets.py for the
// models not there yet.
func ensureExported(python, cache string, names []string) (string, error) {
	root := benchkit.ModuleRoot()
	script := filepath.Join(root, "bench", "realnets", "realnets.py")
	h := sha256.New()
	for _, p := range []string{script, filepath.Join(root, "bench", "memory", "make.py"), filepath.Join(root, "testmodels", "corpus", "make.py")} {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	if cache == "" {
		cache = filepath.Join(root, ".cache", "realnets")
	}
	dir := filepath.Join(cache, hex.EncodeToString(h.Sum(nil))[:12])
	var missing []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n+".json")); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return dir, nil
	}
	if python == "" {
		return "", fmt.Errorf("%s not exported in %s and -python is empty", strings.Join(missing, ","), dir)
	}
	fmt.Fprintf(os.Stderr, "exporting %s into %s\n", strings.Join(missing, ","), dir)
	cmd := exec.Command(python, append([]string{script, "export", dir}, missing...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s export: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	return dir, nil
}

type info struct {
	Shape   []int64 `json:"shape"`
	Classes int     `json:"classes"`
	Params  int     `json:"params"`
}

func readInfo(dir, name string) (info, error) {
	var in info
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	return in, err
}

func header(threads int, what string) {
	// Without AVX-512 the engine takes its AVX2+FMA kernels where the CPU has those.
	fmt.Printf("%s; %d threads, %d CPUs (%s), AVX-512 kernels %v, AVX2+FMA kernels %v, %s\n\n", what, threads, runtime.NumCPU(),
		benchkit.CPUModel(), cpu.X86.HasAVX512F, !cpu.X86.HasAVX512F && cpu.X86.HasAVX2 && cpu.X86.HasFMA, runtime.Version())
}

// torchConf says how runInfer times PyTorch (-torch).
type torchConf struct {
	python string
	avx2   bool
}

// rates runs torchinfer.py for one model and returns its samples per second by batch
// size, and PyTorch's version.
func (tc *torchConf) rates(name, batchList string, seconds float64, rounds, threads int) (map[int]float64, string, error) {
	script := filepath.Join(benchkit.ModuleRoot(), "bench", "realnets", "torchinfer.py")
	cmd := exec.Command(tc.python, script, name, "--batches", batchList, "--seconds", fmt.Sprint(seconds),
		"--rounds", fmt.Sprint(rounds), "--threads", fmt.Sprint(threads))
	// Passive OpenMP threads, as for the training steps (runTrain).
	cmd.Env = os.Environ()
	if os.Getenv("OMP_WAIT_POLICY") == "" {
		cmd.Env = append(cmd.Env, "OMP_WAIT_POLICY=PASSIVE")
	}
	if tc.avx2 {
		cmd.Env = append(cmd.Env, "ONEDNN_MAX_CPU_ISA=AVX2", "ATEN_CPU_CAPABILITY=avx2")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	rates := map[int]float64{}
	ver := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Batch int     `json:"batch"`
			Rate  float64 `json:"samples_per_s"`
			Torch string  `json:"torch"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, "", fmt.Errorf("%s: bad output line %q: %w", script, sc.Text(), err)
		}
		rates[r.Batch], ver = r.Rate, r.Torch
	}
	return rates, ver, nil
}

func runInfer(dir string, names []string, mode, batchList string, seconds float64, rounds, threads int, withORT, ortAVX2 bool, layers int, tc *torchConf, inRange benchrate.Range) error {
	batches, err := benchkit.Batches(batchList)
	if err != nil {
		return err
	}
	impl, binfo, err := blas.Select(mode)
	if err != nil {
		return err
	}
	what := "inference, qtool BLAS " + binfo.Name
	if withORT {
		ver, lib, err := ortref.Version()
		if err != nil {
			return fmt.Errorf("onnxruntime: %w (%s)", err, ortref.InstallHint)
		}
		what += fmt.Sprintf(", onnxruntime %s (%s)", ver, lib)
		if ortAVX2 {
			what += " on its AVX2 kernels (AVX-512 hidden from its CPUID)"
		}
	}
	var masked *ortMasked
	if ortAVX2 {
		if masked, err = newORTMasked(); err != nil {
			return err
		}
		defer masked.close()
	}
	if tc != nil {
		what += ", PyTorch"
		if tc.avx2 {
			what += " (AVX2 kernels only)"
		}
	}
	header(threads, what)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := "model\tbatch\tonnxruntime samples/s\tqtool samples/s\tqtool/onnxruntime\tby CPU time\t"
	if rounds > 1 {
		cols += fmt.Sprintf("ratio range (%d rounds)\t", rounds)
	}
	if tc != nil {
		cols += "PyTorch samples/s\tqtool/PyTorch\t"
	}
	fmt.Fprintln(tw, cols)
	for _, name := range names {
		in, err := readInfo(dir, name)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".onnx")
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m, err := onnxio.Load(path)
		if err != nil {
			return err
		}
		g, err := engine.Build(m, engine.Options{BLAS: impl, Workers: threads})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// PyTorch runs in a process of its own, right before the two engines' rounds of
		// the same model.
		var torchRates map[int]float64
		if tc != nil {
			if torchRates, _, err = tc.rates(name, batchList, seconds, rounds, threads); err != nil {
				return fmt.Errorf("%s: PyTorch: %w", name, err)
			}
		}
		for _, b := range batches {
			shape := append([]int64{int64(b)}, in.Shape...)
			ishape := make([]int, len(shape))
			n := 1
			for i, d := range shape {
				ishape[i] = int(d)
				n *= int(d)
			}
			x := inRange.Inputs(n)
			var s *ortref.Session
			var ins []ortref.Tensor
			var child *ortChild
			if masked != nil {
				if child, err = masked.start(path, shape, threads, inRange); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			} else if withORT {
				if s, err = ortref.NewSession(raw, ortref.Options{IntraOpThreads: threads, NoSpinning: true}); err != nil {
					return fmt.Errorf("%s: onnxruntime: %w", name, err)
				}
				ins = []ortref.Tensor{{Name: s.InputNames()[0], Shape: shape, Data: x}}
			}
			t := engine.NewFloat(ishape, x)
			ctx := &engine.Context{BLAS: impl, Workers: threads, NoGrad: true}
			var ortRates, rates, ratios, cpuRatios []float64
			for range rounds {
				ortRate, ortCPU := 0.0, 0.0
				switch {
				case child != nil:
					if ortRate, ortCPU, err = child.rate(seconds); err != nil {
						return fmt.Errorf("%s: onnxruntime: %w", name, err)
					}
					ortRate *= float64(b)
				case withORT:
					if ortRate, ortCPU, err = benchkit.RateCPU(seconds, func() error { _, err := s.Run(ins); return err }); err != nil {
						s.Close()
						return fmt.Errorf("%s: onnxruntime: %w", name, err)
					}
					ortRate *= float64(b)
				}
				rate, cpu, err := benchkit.RateCPU(seconds, func() error { _, err := g.Forward(ctx, t); return err })
				if err != nil {
					return fmt.Errorf("%s: qtool: %w", name, err)
				}
				rate *= float64(b)
				ortRates, rates = append(ortRates, ortRate), append(rates, rate)
				// The CPU-time ratio (onnxruntime's CPU seconds per run over qtool's) is
				// the steadier one when other jobs share the cores.
				if withORT {
					ratios, cpuRatios = append(ratios, rate/ortRate), append(cpuRatios, ortCPU/cpu)
				}
			}
			if s != nil {
				s.Close()
			}
			if layers > 0 {
				fmt.Fprintf(os.Stderr, "%s batch %d, time a run in each node:\n", name, b)
				if err := profileLayers(os.Stderr, raw, g, *ctx, t, ins, child, threads, seconds, layers); err != nil {
					return fmt.Errorf("%s: -layers: %w", name, err)
				}
			}
			if child != nil {
				child.close()
			}
			ratio, cpuRatio, span := "-", "-", ""
			if withORT {
				ratio = fmt.Sprintf("%.2f×", benchkit.Median(ratios))
				cpuRatio = fmt.Sprintf("%.2f×", benchkit.Median(cpuRatios))
				if rounds > 1 {
					span = fmt.Sprintf("%.2f–%.2f\t", slices.Min(ratios), slices.Max(ratios))
				}
			}
			tcols := ""
			if tc != nil {
				tcols = "-\t-\t"
				if tr, ok := torchRates[b]; ok && tr > 0 {
					tcols = fmt.Sprintf("%.1f\t%.2f×\t", tr, benchkit.Median(rates)/tr)
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%s\t%s%s\n", name, b, benchkit.Median(ortRates), benchkit.Median(rates), ratio, cpuRatio, span, tcols)
			fmt.Fprintf(os.Stderr, "%s batch %d: %s\n", name, b, ratio)
		}
	}
	return tw.Flush()
}

type torchStep struct {
	Model string  `json:"model"`
	MS    float64 `json:"ms"`
	Torch string  `json:"torch"`
	// BaseRSS and PeakRSS (bytes) come with -mem: see runTrainMem.
	BaseRSS int64 `json:"base_rss"`
	PeakRSS int64 `json:"peak_rss"`
}

func runTrain(dir string, names []string, mode, python string, batch, steps, threads int) error {
	impl, binfo, err := blas.SelectWith(mode, blas.Options{Threads: threads})
	if err != nil {
		return err
	}
	torch := map[string]torchStep{}
	if python != "" {
		script := filepath.Join(benchkit.ModuleRoot(), "bench", "realnets", "realnets.py")
		args := append([]string{script, "train"}, names...)
		args = append(args, "--batch", fmt.Sprint(batch), "--steps", fmt.Sprint(steps), "--threads", fmt.Sprint(threads))
		cmd := exec.Command(python, args...)
		// OpenMP threads spin while they wait for work; on a machine shared with other
		// jobs that made PyTorch's steps 10-40 times slower (the transformer: 426 ms
		// against 11 ms). qtool's workers and onnxruntime's (NoSpinning) sleep too.
		cmd.Env = os.Environ()
		if os.Getenv("OMP_WAIT_POLICY") == "" {
			cmd.Env = append(cmd.Env, "OMP_WAIT_POLICY=PASSIVE")
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("%s train: %w: %s", script, err, strings.TrimSpace(stderr.String()))
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var t torchStep
			if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
				return fmt.Errorf("%s: bad output line %q: %w", script, sc.Text(), err)
			}
			torch[t.Model] = t
		}
	}
	header(threads, fmt.Sprintf("training step (forward, backward, Adam), batch %d, median of %d steps, qtool BLAS %s", batch, steps, binfo.Name))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tPyTorch ms\tqtool ms\tPyTorch/qtool\t")
	for _, name := range names {
		ms, err := qtoolStep(dir, name, impl, batch, steps, threads)
		if err != nil {
			return err
		}
		tms, ratio := "-", "-"
		if t, ok := torch[name]; ok {
			tms, ratio = fmt.Sprintf("%.1f", t.MS), fmt.Sprintf("%.2f×", t.MS/ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t\n", name, tms, ms, ratio)
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, ratio)
	}
	return tw.Flush()
}

// qtoolStep returns the median time of qtool's training step on a model's training file.
func qtoolStep(dir, name string, impl gblas.Float32, batch, steps, threads int) (float64, error) {
	in, err := readInfo(dir, name)
	if err != nil {
		return 0, err
	}
	m, err := onnxio.Load(filepath.Join(dir, name+"-train.onnx"))
	if err != nil {
		return 0, err
	}
	ms, _, err := benchkit.TimeSteps(m, benchkit.Step{Batch: batch, Steps: steps, Warmup: 2, Classes: in.Classes,
		Sample: in.Shape, BLAS: impl, Threads: threads})
	if err != nil {
		return 0, fmt.Errorf("%s: qtool: %w", name, err)
	}
	return ms, nil
}

// memChild trains one model in this process and prints its step time and memory as one
// JSON line, the same record realnets.py prints for PyTorch.
func memChild(dir, name, mode string, batch, steps, threads int) error {
	base := benchkit.ProcStatus("VmRSS")
	impl, _, err := blas.SelectWith(mode, blas.Options{Threads: threads})
	if err != nil {
		return err
	}
	ms, err := qtoolStep(dir, name, impl, batch, steps, threads)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(torchStep{Model: name, MS: ms, BaseRSS: base, PeakRSS: benchkit.ProcStatus("VmHWM")})
}

// runTrainMem is runTrain with every model trained in a process of its own for each
// engine, so that each high-water mark is that model's alone.
func runTrainMem(dir, cache string, names []string, mode, python string, batch, steps, threads int) error {
	if python == "" {
		return fmt.Errorf("-mem compares with PyTorch: -python must name it")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	script := filepath.Join(benchkit.ModuleRoot(), "bench", "realnets", "realnets.py")
	run := func(name string, env []string, args ...string) (torchStep, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var t torchStep
		if err == nil {
			err = json.Unmarshal(bytes.TrimSpace(out), &t)
		}
		if err != nil {
			return t, fmt.Errorf("%s: %s: %w: %s", name, filepath.Base(args[0]), err, strings.TrimSpace(stderr.String()))
		}
		return t, nil
	}
	header(threads, fmt.Sprintf("training step (forward, backward, Adam), batch %d, median of %d steps, one process per model and engine, qtool BLAS %s", batch, steps, mode))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tPyTorch ms\tqtool ms\tPyTorch/qtool\tPyTorch peak MB\tqtool peak MB\tPyTorch step MB\tqtool step MB\tPyTorch/qtool memory\t")
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	for _, name := range names {
		// OMP_WAIT_POLICY: see runTrain.
		pt, err := run(name, []string{"OMP_WAIT_POLICY=PASSIVE"}, python, script, "train", name, "--mem",
			"--batch", fmt.Sprint(batch), "--steps", fmt.Sprint(steps), "--threads", fmt.Sprint(threads))
		if err != nil {
			return err
		}
		qt, err := run(name, nil, self, "-mem-child", "-models", name, "-blas", mode, "-batch", fmt.Sprint(batch),
			"-steps", fmt.Sprint(steps), "-threads", fmt.Sprint(threads), "-python", "", "-cache", cache)
		if err != nil {
			return err
		}
		ps, qs := pt.PeakRSS-pt.BaseRSS, qt.PeakRSS-qt.BaseRSS
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f×\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f×\t\n", name, pt.MS, qt.MS, pt.MS/qt.MS,
			mb(pt.PeakRSS), mb(qt.PeakRSS), mb(ps), mb(qs), float64(ps)/float64(qs))
		fmt.Fprintf(os.Stderr, "%s: time %.2f×, memory %.2f×\n", name, pt.MS/qt.MS, float64(ps)/float64(qs))
	}
	return tw.Flush()
}
