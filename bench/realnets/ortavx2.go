//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/qtool/qtool/internal/benchkit"
	"github.com/qtool/qtool/internal/benchrate"
	"github.com/qtool/qtool/internal/cpuidmask"
)

// ortMasked runs onnxruntime in ortrate child processes under internal/cpuidmask
// (-ort-avx2), which hides AVX-512 from CPUID so that onnxruntime takes the kernels it
// runs on an AVX2 machine: the comparison the engine's AVX2 path
// (GODEBUG=cpu.avx512f=off) is meant for. The child cannot run inside this process:
// the mask must be on before the Go runtime starts, and this program links
// golang.org/x/sys/cpu, whose detection would then fault.
type ortMasked struct {
	bin string // the built ortrate
	dir string // its temporary folder
}

// newORTMasked builds ortrate into a temporary folder.
func newORTMasked() (*ortMasked, error) {
	dir, err := os.MkdirTemp("", "realnets-ortrate-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "ortrate")
	cmd := exec.Command("go", "build", "-o", bin, "./bench/realnets/ortrate")
	cmd.Dir = benchkit.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("-ort-avx2: building bench/realnets/ortrate: %w: %s", err, bytes.TrimSpace(out))
	}
	return &ortMasked{bin: bin, dir: dir}, nil
}

func (o *ortMasked) close() { os.RemoveAll(o.dir) }

// ortChild is one running ortrate: one model at one input shape.
type ortChild struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

// start runs ortrate on model at shape, its inputs drawn from in, and checks that onnxruntime sees no AVX-512.
func (o *ortMasked) start(model string, shape []int64, threads int, in benchrate.Range) (*ortChild, error) {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	c := &ortChild{cmd: exec.Command(o.bin, "-model", model, "-shape", strings.Join(dims, ","), "-threads", fmt.Sprint(threads), "-range", in.String())}
	c.cmd.Env = append(os.Environ(), cpuidmask.EnvVar+"=avx2")
	c.cmd.Stderr = &c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewScanner(stdout)
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	var ready struct {
		Masked  bool `json:"masked"`
		AVX512F bool `json:"avx512f"`
	}
	if err := c.read(&ready); err != nil {
		return nil, err
	}
	if !ready.Masked || ready.AVX512F {
		c.close()
		return nil, fmt.Errorf("-ort-avx2: ortrate runs with masked=%v, AVX512F visible=%v", ready.Masked, ready.AVX512F)
	}
	return c, nil
}

func (c *ortChild) read(v any) error {
	if !c.out.Scan() {
		c.close()
		return fmt.Errorf("ortrate: %s", strings.TrimSpace(c.stderr.String()))
	}
	return json.Unmarshal(c.out.Bytes(), v)
}

// rate runs the model for seconds and returns runs per second and CPU seconds per run.
func (c *ortChild) rate(seconds float64) (float64, float64, error) {
	if _, err := fmt.Fprintln(c.in, seconds); err != nil {
		return 0, 0, fmt.Errorf("ortrate: %w: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	var r struct {
		Rate float64 `json:"runs_per_s"`
		CPU  float64 `json:"cpu_s_per_run"`
	}
	if err := c.read(&r); err != nil {
		return 0, 0, err
	}
	return r.Rate, r.CPU, nil
}

func (c *ortChild) close() {
	c.in.Close()
	c.cmd.Wait()
}

// profile has the child run the model for seconds under onnxruntime's profiler, the
// trace written into dir, and returns the trace's path and the number of runs.
func (c *ortChild) profile(seconds float64, dir string) (string, int, error) {
	if _, err := fmt.Fprintf(c.in, "profile %g %s\n", seconds, dir); err != nil {
		return "", 0, fmt.Errorf("ortrate: %w: %s", err, strings.TrimSpace(c.stderr.String()))
	}
	var p struct {
		Trace string `json:"trace"`
		Runs  int    `json:"runs"`
	}
	if err := c.read(&p); err != nil {
		return "", 0, err
	}
	return p.Trace, p.Runs, nil
}
