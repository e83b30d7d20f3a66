//go:build cgo

// Command nbits measures what each export format costs onnxruntime 1.30 at run time on
// the paper's 784-4096×3-10 MLP (testmodels/papermlp) binarized to ±α per output
// channel: the resident memory of a process after it created the session, and the
// latency of batch 1 and batch 256, for the full-precision model, the packed and qdq
// formats and the matmulnbits format at 4, 2 and 8 bits (each also at accuracy level 4,
// int8 activations), all in the same run; then the same for qtool's own engine
// (engine.Build and Graph.Forward, as qtool eval runs a file; -qtool=false skips it).
//
//	go run ./bench/nbits                    # width 4096, 2 threads, 3 rounds, 4-, 2- and 8-bit
//	go run ./bench/nbits -width 1024 -rounds 1 -seconds 1
//
// Memory is measured, not derived from file sizes: every format is loaded by a child
// process of its own (this program re-run with -child), which reads its VmRSS from
// /proc/self/status after initialising onnxruntime and again after creating the
// session, once the model's bytes are released to the operating system (Go's heap by
// debug.FreeOSMemory, the C heap by malloc_trim). The difference is what the session
// keeps: the weights as onnxruntime holds them, plus its own overhead. Rounds run the
// formats in turn, so that load from other jobs spreads over all of them; the table
// gives the median of the rounds. It needs cgo and onnxruntime's library (see
// internal/ortref).
package main

/*
#include <malloc.h>
*/
import "C"

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/engine/blas"
	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/internal/benchkit"
	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels/papermlp"
)

func main() {
	width := flag.Int("width", papermlp.PaperWidth, "hidden width of the paper's MLP")
	threads := flag.Int("threads", 2, "onnxruntime intra-op threads")
	seconds := flag.Float64("seconds", 2, "measuring time per batch size and round")
	rounds := flag.Int("rounds", 3, "rounds over the formats; the table gives the medians")
	block := flag.Int("block", export.DefaultBlockSize, "MatMulNBits block_size")
	bits := flag.String("bits", "4,2,8", "comma-separated MatMulNBits code widths to measure (export's MinBits)")
	int8 := flag.Bool("int8", true, "also measure the matmulnbits file at accuracy_level 4 (int8 activations: faster, not the file's float semantics)")
	withQtool := flag.Bool("qtool", true, "also measure qtool's own engine on every format (memory after building the graph, latency)")
	child := flag.String("child", "", "internal: measure this model file and print one JSON line")
	childEngine := flag.Bool("child-qtool", false, "internal: with -child, measure qtool's engine instead of onnxruntime")
	flag.Parse()
	var err error
	switch {
	case *child != "" && *childEngine:
		err = measureQtool(*child, *threads, *seconds)
	case *child != "":
		err = measure(*child, *threads, *seconds)
	default:
		err = run(*width, *threads, *seconds, *rounds, *block, strings.Split(*bits, ","), *int8, *withQtool)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nbits:", err)
		os.Exit(1)
	}
}

// result is what a child reports for one model file.
type result struct {
	// BaseRSS is the resident memory after initialising onnxruntime (or qtool's BLAS),
	// before the model.
	BaseRSS int64 `json:"base_rss"`
	// SessionRSS is the resident memory once the session (qtool: the built graph) exists
	// and the model's bytes are released; RunRSS after the measured runs; PeakRSS the high-water mark.
	SessionRSS int64 `json:"session_rss"`
	RunRSS     int64 `json:"run_rss"`
	PeakRSS    int64 `json:"peak_rss"`
	// Batch1 and Batch256 are seconds per run.
	Batch1   float64   `json:"batch1"`
	Batch256 float64   `json:"batch256"`
	Logits   []float32 `json:"logits"`         // batch 1, for the agreement check
	BLAS     string    `json:"blas,omitempty"` // qtool's engine: the BLAS it ran on
}

// format is one file the parent measures.
type format struct {
	name, path string
	res, qres  []result // onnxruntime's, qtool's engine's
}

func run(width, threads int, seconds float64, rounds, block int, bits []string, int8, withQtool bool) error {
	ver, lib, err := ortref.Version()
	if err != nil {
		return fmt.Errorf("onnxruntime: %w (%s)", err, ortref.InstallHint)
	}
	dir, err := os.MkdirTemp("", "qtool-nbits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m := papermlp.New(width, 1)
	ws, err := binarize(m)
	if err != nil {
		return err
	}
	// The same graph at width 16 holds 13 k weights: its session is onnxruntime's overhead
	// for this graph, which the weights' column subtracts.
	graph := &format{name: "graph only (width 16)", path: filepath.Join(dir, "graph.onnx")}
	if err := papermlp.New(16, 1).Save(graph.path); err != nil {
		return err
	}
	formats := []*format{{name: "float (full precision)", path: filepath.Join(dir, "float.onnx")},
		{name: "packed", path: filepath.Join(dir, "packed.onnx")}, {name: "qdq", path: filepath.Join(dir, "qdq.onnx")}}
	if err := m.Save(formats[0].path); err != nil {
		return err
	}
	if err := export.WriteFile(formats[1].path, m, ws, export.Options{Format: export.Packed}); err != nil {
		return err
	}
	if err := export.WriteFile(formats[2].path, m, ws, export.Options{Format: export.QDQ}); err != nil {
		return err
	}
	for _, b := range bits {
		n, err := strconv.Atoi(b)
		if err != nil {
			return fmt.Errorf("-bits: %w", err)
		}
		f := &format{name: fmt.Sprintf("matmulnbits, %d-bit", n), path: filepath.Join(dir, "matmulnbits"+b+".onnx")}
		if err := export.WriteFile(f.path, m, ws, export.Options{Format: export.MatMulNBits, BlockSize: block, MinBits: n}); err != nil {
			return err
		}
		formats = append(formats, f)
		if int8 {
			f8 := &format{name: f.name + ", accuracy_level 4", path: filepath.Join(dir, "matmulnbits"+b+"-int8.onnx")}
			if err := withAccuracyLevel(f.path, f8.path, 4); err != nil {
				return err
			}
			formats = append(formats, f8)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("onnxruntime %s (%s), paper MLP 784-%d×3-10, ±α per channel, %d threads, block_size %d, %d rounds of %.1f s per batch size, GOMAXPROCS %d (shared machine: medians)\n\n",
		ver, lib, width, threads, block, rounds, seconds, runtime.GOMAXPROCS(0))
	child := func(f *format, engine bool) (result, error) {
		args := []string{"-child", f.path, "-threads", strconv.Itoa(threads), "-seconds", fmt.Sprint(seconds)}
		if engine {
			args = append(args, "-child-qtool")
		}
		var res result
		out, err := exec.Command(self, args...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return res, fmt.Errorf("%s: %v\n%s", f.name, err, ee.Stderr)
			}
			return res, err
		}
		if err := json.Unmarshal(out, &res); err != nil {
			return res, fmt.Errorf("%s: child output %q: %w", f.name, out, err)
		}
		return res, nil
	}
	for r := range rounds {
		for _, f := range append([]*format{graph}, formats...) {
			res, err := child(f, false)
			if err != nil {
				return err
			}
			f.res = append(f.res, res)
			fmt.Fprintf(os.Stderr, "round %d %s: session %+.1f MiB, batch 1 %.3f ms, batch 256 %.2f ms\n", r+1, f.name,
				mib(res.SessionRSS-res.BaseRSS), res.Batch1*1e3, res.Batch256*1e3)
			// qtool's engine has one semantics for every accuracy_level: float32
			// activations, as the file states at level 1.
			if !withQtool || strings.Contains(f.name, "accuracy_level 4") {
				continue
			}
			if res, err = child(f, true); err != nil {
				return err
			}
			f.qres = append(f.qres, res)
			fmt.Fprintf(os.Stderr, "round %d %s, qtool's engine: graph %+.1f MiB, batch 1 %.3f ms, batch 256 %.2f ms\n", r+1, f.name,
				mib(res.SessionRSS-res.BaseRSS), res.Batch1*1e3, res.Batch256*1e3)
		}
	}
	// packed, qdq and matmulnbits at accuracy level 1 hold the same weights: the same
	// logits up to summation order.
	for _, f := range formats[2:] {
		if strings.Contains(f.name, "accuracy_level 4") {
			continue
		}
		if d := maxRelDiff(formats[1].res[0].Logits, f.res[0].Logits); !(d <= 1e-4) {
			return fmt.Errorf("packed and %s logits differ by %.3g of the largest", f.name, d)
		}
	}
	var weightBytes int64
	for _, w := range ws {
		weightBytes += 4 * int64(len(w.Values))
	}
	fl := formats[0]
	fmt.Printf("float32 weights of the binarized layers: %.1f MiB; file sizes: ", mib(weightBytes))
	for _, f := range formats {
		st, err := os.Stat(f.path)
		if err != nil {
			return err
		}
		fmt.Printf("%s %.2f MiB; ", f.name, mib(st.Size()))
	}
	fmt.Print("\n\n")
	sess := func(r result) float64 { return float64(r.SessionRSS - r.BaseRSS) }
	over := median(graph.res, sess)
	fmt.Printf("onnxruntime's session of the graph alone (width 16): %.1f MiB; the weights' column subtracts it.\n\n", over/(1<<20))
	fmt.Println("| format | session RSS − base (MiB) | weights (MiB) | vs float | RSS after runs − base (MiB) | peak RSS (MiB) | batch 1 (ms) | vs float | batch 256 (ms) | vs float |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	after := func(r result) float64 { return float64(r.RunRSS - r.BaseRSS) }
	peak := func(r result) float64 { return float64(r.PeakRSS) }
	b1 := func(r result) float64 { return r.Batch1 }
	b256 := func(r result) float64 { return r.Batch256 }
	for _, f := range formats {
		fmt.Printf("| %s | %.1f | %.1f | %.2f× less | %.1f | %.1f | %.3f | %.2f× faster | %.2f | %.2f× faster |\n", f.name,
			median(f.res, sess)/(1<<20), (median(f.res, sess)-over)/(1<<20), (median(fl.res, sess)-over)/(median(f.res, sess)-over),
			median(f.res, after)/(1<<20), median(f.res, peak)/(1<<20),
			median(f.res, b1)*1e3, median(fl.res, b1)/median(f.res, b1), median(f.res, b256)*1e3, median(fl.res, b256)/median(f.res, b256))
	}
	if !withQtool {
		return nil
	}
	// qtool's engine: the same files, the same measurements. Its own agreement check:
	// every format's logits against the float model's run of the same engine would
	// differ by the binarization, so the packed file is the reference again.
	for _, f := range formats[2:] {
		if len(f.qres) == 0 {
			continue
		}
		if d := maxRelDiff(formats[1].qres[0].Logits, f.qres[0].Logits); !(d <= 1e-4) {
			return fmt.Errorf("qtool's engine: packed and %s logits differ by %.3g of the largest", f.name, d)
		}
	}
	qover := median(graph.qres, sess)
	fmt.Printf("\nqtool's engine (engine.Build, then Graph.Forward; %s), the same files; its graph alone (width 16): %.1f MiB.\n\n", fl.qres[0].BLAS, qover/(1<<20))
	fmt.Println("| format | graph RSS − base (MiB) | weights (MiB) | vs float | RSS after runs − base (MiB) | peak RSS (MiB) | batch 1 (ms) | vs float | batch 256 (ms) | vs float |")
	fmt.Println("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, f := range formats {
		if len(f.qres) == 0 {
			continue
		}
		fmt.Printf("| %s | %.1f | %.1f | %.2f× less | %.1f | %.1f | %.3f | %.2f× faster | %.2f | %.2f× faster |\n", f.name,
			median(f.qres, sess)/(1<<20), (median(f.qres, sess)-qover)/(1<<20), (median(fl.qres, sess)-qover)/(median(f.qres, sess)-qover),
			median(f.qres, after)/(1<<20), median(f.qres, peak)/(1<<20),
			median(f.qres, b1)*1e3, median(fl.qres, b1)/median(f.qres, b1), median(f.qres, b256)*1e3, median(fl.qres, b256)/median(f.qres, b256))
	}
	return nil
}

// binarize projects every Gemm weight onto ±α per output channel, α = mean|w| of the
// row: the grid binary-channel gives, without training (the costs measured here do not
// depend on which signs the training chose).
func binarize(m *onnxio.Model) ([]export.Weight, error) {
	set, err := admmq.NewSet(admmq.Spec{Kind: admmq.KindScaledBinary, Scale: admmq.ScaleOptimal, PerChannel: true})
	if err != nil {
		return nil, err
	}
	var ws []export.Weight
	for _, p := range m.Params() {
		dims := p.Tensor.GetDims()
		if len(dims) != 2 {
			continue
		}
		t, err := m.Tensor(p.Tensor)
		if err != nil {
			return nil, err
		}
		vals := make([]float32, len(t.Float))
		if err := set.Project32(vals, t.Float, admmq.Layout{Shape: []int{int(dims[0]), int(dims[1])}, Axis: 0}); err != nil {
			return nil, err
		}
		ws = append(ws, export.Weight{Name: p.Name, Values: vals, Grid: export.Grid{Levels: []int{-1, 1}, Axis: 0,
			Scales: export.ScalesFromValues(vals, dims, []int{-1, 1}, 0, true)}})
	}
	return ws, nil
}

// withAccuracyLevel copies a model file with every MatMulNBits node's accuracy_level set.
func withAccuracyLevel(src, dst string, level int64) error {
	m, err := onnxio.Load(src)
	if err != nil {
		return err
	}
	for _, n := range m.Proto.GetGraph().GetNode() {
		for _, a := range n.GetAttribute() {
			if n.GetOpType() == "MatMulNBits" && a.GetName() == "accuracy_level" {
				a.I = proto.Int64(level)
			}
		}
	}
	return m.Save(dst)
}

// measure is the child: load one model, report memory and latency as JSON on stdout.
func measure(path string, threads int, seconds float64) error {
	if _, _, err := ortref.Version(); err != nil {
		return err
	}
	var res result
	res.BaseRSS = settledRSS()
	s, err := ortref.NewSessionFile(path, ortref.Options{IntraOpThreads: threads})
	if err != nil {
		return err
	}
	defer s.Close()
	res.SessionRSS = settledRSS()
	r := rand.New(rand.NewPCG(1, 2))
	for _, batch := range []int{1, 256} {
		x := make([]float32, batch*784)
		for i := range x {
			x[i] = float32(r.Float64())
		}
		in := []ortref.Tensor{{Name: s.InputNames()[0], Shape: []int64{int64(batch), 784}, Data: x}}
		out, err := s.Run(in) // warm-up
		if err != nil {
			return err
		}
		if batch == 1 {
			res.Logits = out[0].Data
		}
		if err := res.timeRuns(batch, seconds, func() error { _, err := s.Run(in); return err }); err != nil {
			return err
		}
	}
	res.RunRSS = settledRSS()
	res.PeakRSS = benchkit.ProcStatus("VmHWM")
	return json.NewEncoder(os.Stdout).Encode(res)
}

// measureQtool is measure for qtool's own engine: the model is parsed, built into a
// graph and released, so that what the process holds is the graph's parameters and
// kernels; the runs are Graph.Forward without gradients, as qtool eval runs them.
func measureQtool(path string, threads int, seconds float64) error {
	impl, info, err := blas.SelectWith(blas.ModeFromEnv(), blas.Options{Threads: threads})
	if err != nil {
		return err
	}
	res := result{BLAS: info.String()}
	res.BaseRSS = settledRSS()
	m, err := onnxio.Load(path)
	if err != nil {
		return err
	}
	g, err := engine.Build(m, engine.Options{BLAS: impl, Workers: threads})
	if err != nil {
		return err
	}
	m = nil
	res.SessionRSS = settledRSS()
	ctx := &engine.Context{BLAS: impl, Workers: threads, NoGrad: true}
	r := rand.New(rand.NewPCG(1, 2))
	for _, batch := range []int{1, 256} {
		x := make([]float32, batch*784)
		for i := range x {
			x[i] = float32(r.Float64())
		}
		in := engine.NewFloat([]int{batch, 784}, x)
		out, err := g.Forward(ctx, in) // warm-up, and the plan for this batch
		if err != nil {
			return err
		}
		if batch == 1 {
			res.Logits = slices.Clone(out[0].F)
		}
		if err := res.timeRuns(batch, seconds, func() error { _, err := g.Forward(ctx, in); return err }); err != nil {
			return err
		}
	}
	res.RunRSS = settledRSS()
	res.PeakRSS = benchkit.ProcStatus("VmHWM")
	runtime.KeepAlive(g)
	return json.NewEncoder(os.Stdout).Encode(res)
}

// timeRuns runs run for at least seconds and three times, and stores the mean time a
// run as the batch's latency.
func (res *result) timeRuns(batch int, seconds float64, run func() error) error {
	n, start := 0, time.Now()
	for time.Since(start).Seconds() < seconds || n < 3 {
		if err := run(); err != nil {
			return err
		}
		n++
	}
	per := time.Since(start).Seconds() / float64(n)
	if batch == 1 {
		res.Batch1 = per
	} else {
		res.Batch256 = per
	}
	return nil
}

// settledRSS returns VmRSS after handing freed memory back to the operating system,
// so that what it counts is what the process still holds.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	C.malloc_trim(0)
	return benchkit.ProcStatus("VmRSS")
}

func median(rs []result, f func(result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func maxRelDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	norm, d := 1.0, 0.0
	for i := range a {
		norm = max(norm, math.Abs(float64(a[i])))
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d / norm
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
