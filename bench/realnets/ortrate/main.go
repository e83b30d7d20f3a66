//go:build cgo && linux && amd64

// Command ortrate times onnxruntime on one model and input shape in a process of its
// own, for realnets -ort-avx2: started with QTOOL_CPUID_MASK=avx2 it runs under
// internal/cpuidmask, which hides AVX-512 from CPUID, so that onnxruntime's MLAS
// picks the kernels it runs on an AVX2 machine (it has no switch of its own).
//
//	QTOOL_CPUID_MASK=avx2 ortrate -model m.onnx -shape 32,3,224,224 -threads 2
//
// It creates the session, prints one JSON line saying what CPUID shows, then for each
// line read on stdin (a number of seconds) runs the model that long after one
// warm-up run and prints one JSON line: runs per second and CPU seconds per run. A
// line "profile SECONDS DIR" runs it that long in a session with onnxruntime's
// profiler on and prints the trace file's path and the number of runs. The
// input is realnets's: uniform values of -range from PCG(1, 2). It must not link
// golang.org/x/sys/cpu (see internal/cpuidmask), which is why it is a program of its
// own and shares only engine-free packages with realnets.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/qtool/qtool/internal/benchrate"
	"github.com/qtool/qtool/internal/cpuidmask"
	"github.com/qtool/qtool/internal/ortref"
)

// Ready is the first line ortrate prints.
type Ready struct {
	Masked  bool   `json:"masked"`  // the process runs under the mask
	AVX512F bool   `json:"avx512f"` // CPUID leaf 7 shows AVX512F, as onnxruntime sees it
	Version string `json:"onnxruntime"`
}

// Rate is the line printed for each request.
type Rate struct {
	RunsPerSec float64 `json:"runs_per_s"`
	CPUPerRun  float64 `json:"cpu_s_per_run"`
}

func main() {
	model := flag.String("model", "", "ONNX model")
	shape := flag.String("shape", "", "input shape, comma-separated")
	threads := flag.Int("threads", 2, "intra-op threads")
	inputs := flag.String("range", "0,1", "draw the input values uniformly from lo,hi")
	flag.Parse()
	in, err := benchrate.ParseRange(*inputs)
	if err == nil {
		err = run(*model, *shape, *threads, in)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ortrate:", err)
		os.Exit(1)
	}
}

func run(model, shapeList string, threads int, in benchrate.Range) error {
	masked, err := cpuidmask.Active()
	if err != nil {
		return err
	}
	var shape []int64
	n := 1
	for _, f := range strings.Split(shapeList, ",") {
		d, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || d <= 0 {
			return fmt.Errorf("-shape %q: want positive integers", shapeList)
		}
		shape, n = append(shape, d), n*int(d)
	}
	x := in.Inputs(n)
	s, err := ortref.NewSessionFile(model, ortref.Options{IntraOpThreads: threads, NoSpinning: true})
	if err != nil {
		return err
	}
	defer s.Close()
	ver, _, err := ortref.Version()
	if err != nil {
		return err
	}
	ins := []ortref.Tensor{{Name: s.InputNames()[0], Shape: shape, Data: x}}
	out := json.NewEncoder(os.Stdout)
	// Bit 16 of leaf 7's EBX is AVX512F.
	if err := out.Encode(Ready{Masked: masked, AVX512F: cpuidmask.CPUID(7, 0)[1]&(1<<16) != 0, Version: ver}); err != nil {
		return err
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "profile" {
			secs, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return fmt.Errorf("request %q: %w", sc.Text(), err)
			}
			p, err := profile(model, f[2], threads, secs, ins)
			if err != nil {
				return err
			}
			if err := out.Encode(p); err != nil {
				return err
			}
			continue
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
		if err != nil {
			return fmt.Errorf("request %q: %w", sc.Text(), err)
		}
		rate, cpu, err := benchrate.RateCPU(secs, func() error { _, err := s.Run(ins); return err })
		if err != nil {
			return err
		}
		if err := out.Encode(Rate{RunsPerSec: rate, CPUPerRun: cpu}); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Profile is the line printed for a request "profile SECONDS DIR": onnxruntime's
// profiler's trace of Runs runs, written into DIR.
type Profile struct {
	Trace string `json:"trace"`
	Runs  int    `json:"runs"`
}

// profile runs the model for seconds in a session of its own with onnxruntime's
// profiler on, for realnets -layers.
func profile(model, dir string, threads int, seconds float64, ins []ortref.Tensor) (Profile, error) {
	raw, err := os.ReadFile(model)
	if err != nil {
		return Profile{}, err
	}
	trace, runs, err := ortref.Profile(raw, ortref.Options{IntraOpThreads: threads, NoSpinning: true}, ins, seconds, dir)
	return Profile{Trace: trace, Runs: runs}, err
}
