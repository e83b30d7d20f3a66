// Package benchkit holds what the bench/ programs share: timing loops, a batch source that
// costs nothing to read, and the qtool training step they time against PyTorch.
package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	gblas "gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/benchrate"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// Median returns the median of v (the mean of the middle two for an even count; 0 for
// none). v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := append([]float64(nil), v...)
	sort.Float64s(w)
	if len(w)%2 == 1 {
		return w[len(w)/2]
	}
	return (w[len(w)/2-1] + w[len(w)/2]) / 2
}

// ModuleRoot returns the folder of go.mod at or above the working directory, or the
// working directory when there is none.
func ModuleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// Batches parses a comma-separated list of batch sizes.
func Batches(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		var b int
		if _, err := fmt.Sscan(s, &b); err != nil || b < 1 {
			return nil, fmt.Errorf("bad batch size %q", s)
		}
		out = append(out, b)
	}
	return out, nil
}

// Rate runs f until seconds have passed (after one warm-up call, and at least three
// calls) and returns calls per second.
func Rate(seconds float64, f func() error) (float64, error) {
	rate, _, err := RateCPU(seconds, f)
	return rate, err
}

// RateCPU is Rate that also returns the process's CPU seconds per timed call (see
// benchrate.RateCPU).
func RateCPU(seconds float64, f func() error) (rate, cpu float64, err error) {
	return benchrate.RateCPU(seconds, f)
}

// FixedBatches yields the same random batch (uniform [0,1) values, random labels below
// classes) a fixed number of times: a train.Batcher that costs nothing to read.
type FixedBatches struct {
	x        []float32
	y        []int64
	shape    []int64
	n, count int
}

// NewFixedBatches makes count batches of batch samples of shape sample.
func NewFixedBatches(batch int, sample []int64, classes, count int) *FixedBatches {
	r := rand.New(rand.NewPCG(1, 2))
	size := 1
	for _, d := range sample {
		size *= int(d)
	}
	b := &FixedBatches{x: make([]float32, batch*size), y: make([]int64, batch), count: count,
		shape: append([]int64{int64(batch)}, sample...)}
	for i := range b.x {
		b.x[i] = r.Float32()
	}
	for i := range b.y {
		b.y[i] = int64(r.IntN(classes))
	}
	return b
}

func (b *FixedBatches) Next() bool {
	if b.n >= b.count {
		return false
	}
	b.n++
	return true
}
func (b *FixedBatches) X() []float32   { return b.x }
func (b *FixedBatches) Y() []int64     { return b.y }
func (b *FixedBatches) Shape() []int64 { return b.shape }
func (b *FixedBatches) Reset()         { b.n = 0 }
func (b *FixedBatches) Err() error     { return nil }

// TrainableNames lists every float initializer except BatchNormalization's running
// statistics, as PyTorch's model.parameters() does.
func TrainableNames(m *onnxio.Model) []string {
	running := map[string]bool{}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" && len(n.GetInput()) >= 5 {
			running[n.GetInput()[3]], running[n.GetInput()[4]] = true, true
		}
	}
	var names []string
	for _, t := range m.Proto.GetGraph().GetInitializer() {
		if onnxio.IsFloat(onnxio.DataType(t.GetDataType())) && !running[t.GetName()] && len(t.GetDims()) > 0 {
			names = append(names, t.GetName())
		}
	}
	return names
}

// Step describes the timed training steps of one model.
type Step struct {
	Batch, Steps, Warmup int
	Classes              int // labels are drawn below this
	Sample               []int64
	BLAS                 gblas.Float32
	Threads              int
	Min                  bool // the fastest step instead of the median
}

// TimeSteps trains a graph of m (its float initializers but BatchNorm's statistics, as
// TrainableNames gives them) for Warmup+Steps steps of Adam through train.Fit and
// returns the median (or with Min the shortest) step time and the CPU time per step, in
// milliseconds. The graph is built before m is dropped by the caller, if it wants the
// memory back.
func TimeSteps(m *onnxio.Model, s Step) (ms, cpu float64, err error) {
	g, err := engine.Build(m, engine.Options{BLAS: s.BLAS, Workers: s.Threads})
	if err != nil {
		return 0, 0, err
	}
	if err := g.SetTrainable(TrainableNames(m)...); err != nil {
		return 0, 0, err
	}
	return TimeGraphSteps(g, s)
}

// TimeGraphSteps is TimeSteps on a graph whose trainable parameters are set.
func TimeGraphSteps(g *engine.Graph, s Step) (ms, cpu float64, err error) {
	data := NewFixedBatches(s.Batch, s.Sample, max(1, s.Classes), s.Warmup+s.Steps+1)
	var stamps []time.Time
	var cpus []time.Duration
	_, err = train.Fit(context.Background(), g, data, train.Options{
		Epochs: 1, Optimizer: train.NewAdam(train.AdamOptions{}), Schedule: train.Constant{LR: 1e-3},
		Engine: &engine.Context{BLAS: s.BLAS, Workers: s.Threads}, Seed: 1,
		// The hook runs at the same point of every step, between backward and update.
		GradHook: func(int) error {
			stamps = append(stamps, time.Now())
			cpus = append(cpus, CPUTime())
			return nil
		},
	})
	if err != nil {
		return 0, 0, err
	}
	var d []float64
	for i := s.Warmup + 1; i < len(stamps); i++ {
		d = append(d, float64(stamps[i].Sub(stamps[i-1]))/1e6)
	}
	sort.Float64s(d)
	if len(d) == 0 {
		return 0, 0, fmt.Errorf("no timed steps")
	}
	cpu = float64(cpus[len(cpus)-1]-cpus[s.Warmup]) / 1e6 / float64(len(d))
	if s.Min {
		return d[0], cpu, nil
	}
	// The median as Python's statistics.median takes it, for a like comparison.
	if len(d)%2 == 0 {
		return (d[len(d)/2-1] + d[len(d)/2]) / 2, cpu, nil
	}
	return d[len(d)/2], cpu, nil
}

// CPUTime returns the process's user and system CPU time so far.
func CPUTime() time.Duration { return benchrate.CPUTime() }

// ProcStatus reads a "kB" field of /proc/self/status (VmRSS, VmHWM, ...) in bytes; 0 where
// there is no such file or field (not Linux).
func ProcStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// CPUModel names the CPU for a benchmark's header, as /proc/cpuinfo gives it (model
// name, with family and model numbers, which tell apart CPUs that a virtual machine
// names alike, such as "Intel(R) Xeon(R) Processor"); "unknown CPU" elsewhere.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	return cpuModel(b)
}

// cpuModel reads the first processor's fields of a /proc/cpuinfo text.
func cpuModel(cpuinfo []byte) string {
	f := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := f[k]; !seen {
			f[k] = strings.TrimSpace(v)
		}
	}
	name := f["model name"]
	if name == "" {
		return "unknown CPU"
	}
	if f["cpu family"] != "" {
		name += fmt.Sprintf(" (family %s, model %s)", f["cpu family"], f["model"])
	}
	return name
}
