//go:build cgo

package ortref

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/qtool/qtool/internal/testenv"
)

// EnvLib names the environment variable holding the path of
// libonnxruntime.so.1.
const EnvLib = "QTOOL_ORT_LIB"

// DefaultLib is the library's path relative to the module root.
const DefaultLib = ".cache/onnxruntime/libonnxruntime.so.1"

// InstallHint says how to fetch the library into DefaultLib.
const InstallHint = "fetch onnxruntime 1.30 from npm: in the module root run " +
	"`mkdir -p .cache/onnxruntime && cd .cache/onnxruntime && npm pack onnxruntime-node@1.30.0 && " +
	"tar xzf onnxruntime-node-1.30.0.tgz package/bin/napi-v6/linux/x64/libonnxruntime.so.1 && " +
	"mv package/bin/napi-v6/linux/x64/libonnxruntime.so.1 . && rm -rf package onnxruntime-node-1.30.0.tgz` (or set " + EnvLib + " to the library's path)"

// LibraryPath returns the onnxruntime library to load: $QTOOL_ORT_LIB if set,
// else DefaultLib under the module root. It fails if the file is missing.
func LibraryPath() (string, error) {
	if p := os.Getenv(EnvLib); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ortref: %s=%s: %w; %s", EnvLib, p, err, InstallHint)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("ortref: %w; set %s to the library's path", err, EnvLib)
	}
	p := filepath.Join(root, DefaultLib)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("ortref: onnxruntime library: %w; %s", err, InstallHint)
	}
	return p, nil
}

// moduleRoot walks up from the working directory to the folder holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("finding the module root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Require returns the library path and initialises onnxruntime, or skips t
// with install instructions when the library is missing (fails it instead
// when CI=true, since CI fetches the library). It also fails t when the
// library is present but cannot be initialised.
func Require(t testing.TB) string {
	t.Helper()
	p, err := LibraryPath()
	if err != nil {
		testenv.Missing(t, "onnxruntime not available: %v", err)
	}
	if err := initialize(); err != nil {
		t.Fatal(err)
	}
	return p
}

// env is the process-wide onnxruntime environment; see the package comment
// for why it is package state.
var env struct {
	once sync.Once
	path string
	err  error
}

// initialize loads the library and creates onnxruntime's environment on the
// first call; later calls return the first call's result.
func initialize() error {
	env.once.Do(func() {
		p, err := LibraryPath()
		if err != nil {
			env.err = err
			return
		}
		ort.SetSharedLibraryPath(p)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			env.err = fmt.Errorf("ortref: initialising onnxruntime from %s: %w", p, err)
			return
		}
		env.path = p
	})
	return env.err
}

// Version initialises onnxruntime if needed and returns the loaded library's
// version (e.g. "1.30.0") and path, for benchmark reports.
func Version() (version, path string, err error) {
	if err := initialize(); err != nil {
		return "", "", err
	}
	return ort.GetVersion(), env.path, nil
}

// Tensor is a named dense tensor in row-major order. Exactly one of Data
// (float32) and Int64 holds the elements; an empty tensor (a zero dimension)
// may leave both nil and is then float32.
type Tensor struct {
	Name  string
	Shape []int64
	Data  []float32
	Int64 []int64
}

// Len returns the number of elements Shape describes, or an error for a
// negative dimension.
func (t Tensor) Len() (int, error) {
	n := 1
	for _, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
		n *= int(d)
	}
	return n, nil
}

// Options configure a Session.
type Options struct {
	// IntraOpThreads is the number of threads onnxruntime may use inside
	// one operator; 0 keeps onnxruntime's default (one per physical core).
	IntraOpThreads int
	// NoSpinning stops idle intra-op threads from spin-waiting for work, so
	// that onnxruntime does not steal CPU time from code running after it in
	// the same process (for example qtool's engine in a comparison).
	NoSpinning bool
	// Config holds session configuration entries (AddSessionConfigEntry), such as
	// "session.qdq_matmulnbits_accuracy_level": "1", which keeps the MatMulNBits kernel
	// that onnxruntime fuses DequantizeLinear→MatMul into from quantizing its
	// activations to int8, so that a qdq file computes its float semantics.
	Config map[string]string
	// ProfilePrefix, when set, turns on onnxruntime's profiler: closing the session
	// writes a JSON trace of every node's kernel time (Chrome's trace format) to a file
	// whose path starts with ProfilePrefix.
	ProfilePrefix string
}

// Session is a loaded model that can be run many times. It is not safe for
// concurrent use.
type Session struct {
	s       *ort.DynamicAdvancedSession
	inputs  []ort.InputOutputInfo
	outputs []ort.InputOutputInfo
}

// NewSession loads an ONNX model from its serialised bytes.
func NewSession(model []byte, opts Options) (*Session, error) {
	if err := initialize(); err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfoWithONNXData(model)
	if err != nil {
		return nil, fmt.Errorf("ortref: reading the model's inputs and outputs: %w", err)
	}
	so, err := sessionOptions(opts)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	s, err := ort.NewDynamicAdvancedSessionWithONNXData(model, names(ins), names(outs), so)
	if err != nil {
		return nil, fmt.Errorf("ortref: creating the session: %w", err)
	}
	return &Session{s: s, inputs: ins, outputs: outs}, nil
}

// NewSessionFile loads an ONNX model from a file.
func NewSessionFile(path string, opts Options) (*Session, error) {
	model, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ortref: %w", err)
	}
	s, err := NewSession(model, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func sessionOptions(opts Options) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("ortref: session options: %w", err)
	}
	if opts.IntraOpThreads < 0 {
		so.Destroy()
		return nil, fmt.Errorf("ortref: IntraOpThreads = %d, want >= 0", opts.IntraOpThreads)
	}
	if opts.IntraOpThreads > 0 {
		if err := so.SetIntraOpNumThreads(opts.IntraOpThreads); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("ortref: setting %d intra-op threads: %w", opts.IntraOpThreads, err)
		}
	}
	if opts.NoSpinning {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("ortref: disabling spinning: %w", err)
		}
	}
	if opts.ProfilePrefix != "" {
		if err := so.EnableProfiling(opts.ProfilePrefix); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("ortref: enabling the profiler: %w", err)
		}
	}
	// Sorted, so that a session is configured the same way on every run.
	for _, k := range slices.Sorted(maps.Keys(opts.Config)) {
		if err := so.AddSessionConfigEntry(k, opts.Config[k]); err != nil {
			so.Destroy()
			return nil, fmt.Errorf("ortref: session config %s=%s: %w", k, opts.Config[k], err)
		}
	}
	return so, nil
}

func names(infos []ort.InputOutputInfo) []string {
	s := make([]string, len(infos))
	for i, info := range infos {
		s[i] = info.Name
	}
	return s
}

// InputNames returns the model's graph inputs (initialisers excluded) in
// model order.
func (s *Session) InputNames() []string { return names(s.inputs) }

// OutputNames returns the model's graph outputs in model order.
func (s *Session) OutputNames() []string { return names(s.outputs) }

// Run feeds one tensor per model input, matched by name in any order, and
// returns every model output in model order. Outputs must be float32 or
// int64 tensors of rank at least 1: onnxruntime_go v1.27.0 cannot return
// rank-0 outputs it allocated itself.
func (s *Session) Run(inputs []Tensor) ([]Tensor, error) {
	if len(inputs) != len(s.inputs) {
		return nil, fmt.Errorf("ortref: %d inputs given, the model has %d: %v", len(inputs), len(s.inputs), s.InputNames())
	}
	vals := make([]ort.Value, len(s.inputs))
	defer destroyAll(vals)
	for _, in := range inputs {
		i := slices.IndexFunc(s.inputs, func(info ort.InputOutputInfo) bool { return info.Name == in.Name })
		if i < 0 {
			return nil, fmt.Errorf("ortref: input %q is not a model input; the inputs are %v", in.Name, s.InputNames())
		}
		if vals[i] != nil {
			return nil, fmt.Errorf("ortref: input %q given twice", in.Name)
		}
		v, err := toValue(in)
		if err != nil {
			return nil, fmt.Errorf("ortref: %w", err)
		}
		vals[i] = v
	}
	outs := make([]ort.Value, len(s.outputs))
	defer destroyAll(outs)
	if err := s.s.Run(vals, outs); err != nil {
		return nil, fmt.Errorf("ortref: run: %w", err)
	}
	res := make([]Tensor, len(outs))
	for i, v := range outs {
		t, err := fromValue(s.outputs[i].Name, v)
		if err != nil {
			return nil, fmt.Errorf("ortref: %w", err)
		}
		res[i] = t
	}
	return res, nil
}

// Close releases the session.
func (s *Session) Close() error {
	if err := s.s.Destroy(); err != nil {
		return fmt.Errorf("ortref: closing the session: %w", err)
	}
	return nil
}

// Run loads model (serialised ONNX bytes), runs it once on inputs with
// onnxruntime's default options and returns every output in model order.
func Run(model []byte, inputs []Tensor) ([]Tensor, error) {
	s, err := NewSession(model, Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Run(inputs)
}

// RunFile is Run for a model file.
func RunFile(path string, inputs []Tensor) ([]Tensor, error) {
	s, err := NewSessionFile(path, Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out, err := s.Run(inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func destroyAll(vals []ort.Value) {
	for _, v := range vals {
		if v != nil {
			v.Destroy()
		}
	}
}

// toValue copies t into an onnxruntime tensor after checking that its shape
// and data agree.
func toValue(t Tensor) (ort.Value, error) {
	n, err := t.Len()
	if err != nil {
		return nil, err
	}
	shape := ort.NewShape(t.Shape...)
	switch {
	case t.Data != nil && t.Int64 != nil:
		return nil, fmt.Errorf("input %q: both Data and Int64 are set", t.Name)
	case len(t.Shape) == 0:
		// onnxruntime_go's NewTensor rejects rank 0; scalars have their own type.
		var v ort.Value
		switch {
		case len(t.Int64) == 1:
			v, err = ort.NewScalar(t.Int64[0])
		case len(t.Data) == 1:
			v, err = ort.NewScalar(t.Data[0])
		default:
			return nil, fmt.Errorf("input %q: a scalar (empty shape) needs exactly one element", t.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		return v, nil
	case t.Int64 != nil:
		if len(t.Int64) != n {
			return nil, fmt.Errorf("input %q: shape %v holds %d elements but Int64 has %d", t.Name, t.Shape, n, len(t.Int64))
		}
		v, err := ort.NewTensor(shape, slices.Clone(t.Int64))
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		return v, nil
	default:
		if len(t.Data) != n {
			return nil, fmt.Errorf("input %q: shape %v holds %d elements but Data has %d", t.Name, t.Shape, n, len(t.Data))
		}
		// onnxruntime reads the Go slice in place; clone it so the caller's
		// slice is never aliased by a C-side value.
		data := slices.Clone(t.Data)
		if data == nil {
			data = []float32{}
		}
		v, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", t.Name, err)
		}
		return v, nil
	}
}

// fromValue copies an output tensor into a Tensor.
func fromValue(name string, v ort.Value) (Tensor, error) {
	t := Tensor{Name: name, Shape: slices.Clone([]int64(v.GetShape()))}
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		t.Data = slices.Clone(x.GetData())
	case *ort.Tensor[int64]:
		t.Int64 = slices.Clone(x.GetData())
	default:
		return Tensor{}, fmt.Errorf("output %q: element type %v is not supported (want float32 or int64)", name, v.DataType())
	}
	return t, nil
}

// Profile runs model (serialised ONNX bytes) on inputs for about seconds in a session
// of its own with onnxruntime's profiler on (intra-op threads as opts says; its
// ProfilePrefix is set to dir/ort), and returns the trace file the profiler wrote into
// dir and the number of runs.
func Profile(model []byte, opts Options, inputs []Tensor, seconds float64, dir string) (trace string, runs int, err error) {
	opts.ProfilePrefix = filepath.Join(dir, "ort")
	s, err := NewSession(model, opts)
	if err != nil {
		return "", 0, err
	}
	for start := time.Now(); time.Since(start).Seconds() < seconds; runs++ {
		if _, err := s.Run(inputs); err != nil {
			s.Close()
			return "", 0, err
		}
	}
	if err := s.Close(); err != nil {
		return "", 0, err
	}
	files, err := filepath.Glob(opts.ProfilePrefix + "*.json")
	if err != nil || len(files) != 1 {
		return "", 0, fmt.Errorf("ortref: onnxruntime's profile: %d trace files in %s (%v)", len(files), dir, err)
	}
	return files[0], runs, nil
}
