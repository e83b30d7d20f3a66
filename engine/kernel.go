package engine

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// DType is the element type of a Tensor. The engine computes in float32; every integer
// and boolean ONNX type is carried as int64, which is what shape arithmetic needs.
type DType uint8

const (
	Float32 DType = iota + 1
	Int64
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Tensor is a dense row-major tensor. Exactly one of F and I holds the data, as DType
// says. During shape inference a Tensor may carry only Shape and DType (data nil), which
// means its value is known only at run time.
type Tensor struct {
	DType DType
	Shape []int
	F     []float32
	I     []int64

	// u8 holds, in place of I, the values of a UINT8 (or, with s8, INT8) initializer that
	// only kernels that read bytes take (MatMulNBits' codes and zero points, the codes
	// that Cast and DequantizeLinear unpack), one byte each: I would take eight. No other
	// kernel sees such a tensor (Build checks every reader), and Params' users see an
	// integer tensor whose I is nil.
	u8 []byte
	s8 bool

	param *Param // the parameter this tensor is the Value of, nil for every other tensor
}

// NewFloat returns a float32 tensor over data (not copied).
func NewFloat(shape []int, data []float32) *Tensor {
	return &Tensor{DType: Float32, Shape: shape, F: data}
}

// NewInt returns an int64 tensor over data (not copied).
func NewInt(shape []int, data []int64) *Tensor {
	return &Tensor{DType: Int64, Shape: shape, I: data}
}

// Len returns the number of elements the shape describes.
func (t *Tensor) Len() int { return numel(t.Shape) }

// Known reports whether the tensor carries its values, not only its shape.
func (t *Tensor) Known() bool {
	if t.DType == Int64 {
		return t.I != nil || t.u8 != nil
	}
	return t.F != nil
}

// intValues returns an integer tensor's values: I, or u8 widened into a new slice.
func (t *Tensor) intValues() []int64 {
	if t.u8 == nil {
		return t.I
	}
	v := make([]int64, len(t.u8))
	for i, b := range t.u8 {
		if t.s8 {
			v[i] = int64(int8(b))
		} else {
			v[i] = int64(b)
		}
	}
	return v
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Kernel is the executable form of one ONNX node.
//
// The executor calls Infer once per input signature (the batch size is free) with
// tensors that always carry Shape and DType, and carry values when those are known
// before running: initializers, constants and whatever was folded from them. Infer
// returns the outputs' shapes and types; it may also return outputs with values when it
// can compute them from what is known (Shape does, from its input's shape alone), and the
// executor then treats them as constants. When every input is known the executor folds
// the node by running Forward at plan time.
//
// Forward writes into out, whose buffers the executor allocated to the inferred shapes
// and reuses from step to step; a kernel must not keep references to in or out between
// calls, and must fully overwrite out.
type Kernel interface {
	Infer(in []*Tensor) ([]*Tensor, error)
	Forward(ctx *Context, in, out []*Tensor) error
}

// Differentiable is implemented by kernels with a vector-Jacobian product. Backward
// receives the forward pass's inputs and outputs and the loss gradients of the outputs
// (gout[j] may be nil when no gradient flows into output j), and ADDS the gradients of
// the inputs into gin[i] for every i with gin[i] != nil; the executor zeroes gin buffers
// and sums contributions from several consumers this way.
type Differentiable interface {
	Backward(ctx *Context, in, out, gout, gin []*Tensor) error
}

// Retainer is implemented by differentiable kernels whose Backward reads only some of
// the forward values, so that the executor can reuse the others' memory. Without it the
// executor keeps every input and output of the node for the backward pass. Shapes and
// the values of constants (parameters, folded values) stay available either way; only
// the data of values computed at run time is released.
type Retainer interface {
	Retains() (inputs, outputs []bool)
}

// Builder makes the kernel of one node. It validates every attribute and returns an
// error naming the unsupported attribute or value; the graph builder collects the errors
// of all nodes into one report before any work begins.
type Builder func(n *Node) (Kernel, error)

// Node is what a Builder sees of an ONNX node.
type Node struct {
	Proto *onnxpb.NodeProto
	// Opset is the version of the node's domain that the model imports; kernels use it
	// for the semantics that changed between opsets (axes as inputs since 13, Softmax's
	// axis since 13, and so on).
	Opset int64
	// InputTypes holds the ONNX element type of each input where the graph states it (an
	// initializer's or Constant's stored type, a declared graph input, output or
	// value_info, the target of a Cast) and UNDEFINED elsewhere. The engine carries every
	// integer type as int64, so ops whose result depends on the width, such as
	// QuantizeLinear's saturation range, read it from here.
	InputTypes []onnxpb.TensorProto_DataType
}

// InputType returns the declared element type of input i, or UNDEFINED.
func (n *Node) InputType(i int) onnxpb.TensorProto_DataType {
	if i < len(n.InputTypes) {
		return n.InputTypes[i]
	}
	return onnxpb.TensorProto_UNDEFINED
}

// Name returns the node's name, or a description when the exporter left it empty.
func (n *Node) Name() string {
	if s := n.Proto.GetName(); s != "" {
		return s
	}
	if outs := n.Proto.GetOutput(); len(outs) > 0 {
		return n.Proto.GetOpType() + "→" + outs[0]
	}
	return n.Proto.GetOpType()
}

// NumInputs counts the node's inputs, ignoring trailing optional inputs left empty.
func (n *Node) NumInputs() int {
	in := n.Proto.GetInput()
	k := len(in)
	for k > 0 && in[k-1] == "" {
		k--
	}
	return k
}

// HasInput reports whether optional input i is given.
func (n *Node) HasInput(i int) bool {
	in := n.Proto.GetInput()
	return i < len(in) && in[i] != ""
}

// Optional returns in[i] when the node gives optional input i, and nil otherwise.
func (n *Node) Optional(in []*Tensor, i int) *Tensor {
	if i < len(in) && in[i] != nil && n.HasInput(i) {
		return in[i]
	}
	return nil
}

func (n *Node) attr(name string) *onnxpb.AttributeProto {
	for _, a := range n.Proto.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// Has reports whether the node sets the attribute.
func (n *Node) Has(name string) bool { return n.attr(name) != nil }

// Int returns an integer attribute, or def when it is absent.
func (n *Node) Int(name string, def int64) int64 {
	if a := n.attr(name); a != nil {
		return a.GetI()
	}
	return def
}

// Float returns a float attribute, or def when it is absent.
func (n *Node) Float(name string, def float32) float32 {
	if a := n.attr(name); a != nil {
		return a.GetF()
	}
	return def
}

// String returns a string attribute, or def when it is absent.
func (n *Node) String(name, def string) string {
	if a := n.attr(name); a != nil {
		return string(a.GetS())
	}
	return def
}

// Ints returns an integer-list attribute, or def when it is absent.
func (n *Node) Ints(name string, def []int64) []int64 {
	if a := n.attr(name); a != nil {
		return a.GetInts()
	}
	return def
}

// Floats returns a float-list attribute, or def when it is absent.
func (n *Node) Floats(name string, def []float32) []float32 {
	if a := n.attr(name); a != nil {
		return a.GetFloats()
	}
	return def
}

// TensorAttr returns a tensor attribute, or nil when it is absent.
func (n *Node) TensorAttr(name string) *onnxpb.TensorProto {
	if a := n.attr(name); a != nil {
		return a.GetT()
	}
	return nil
}

// Errorf returns an error that names the node and its op type.
func (n *Node) Errorf(format string, args ...any) error {
	return fmt.Errorf("node %q (%s): %s", n.Name(), n.Proto.GetOpType(), fmt.Sprintf(format, args...))
}

// Context carries what kernels need at run time. One Context serves one executor; it is
// not safe for concurrent graph runs. Graph.Forward and Graph.Backward fill a nil Rand or
// BLAS and a Workers below 1 from the graph's Options.
type Context struct {
	// Training selects training behaviour: BatchNormalization uses batch statistics and
	// updates its running statistics, Dropout drops.
	Training bool
	// Rand is the seeded stream Dropout draws from in training mode.
	Rand *rand.Rand
	// BLAS does all matrix products.
	BLAS blas.Float32
	// Workers is how many goroutines element-wise, pooling and im2col kernels split
	// their work over; values below 1 mean 1.
	Workers int
	// NoGrad tells Graph.Forward not to keep what Backward needs even though some
	// parameters are trainable, as for evaluation during training; it saves memory.
	NoGrad bool
	// NodeTime, when set, is called after each node's forward pass with the node's
	// name, its op (a fused node's ops joined by "+", as Conv+Relu) and the wall time
	// it took: per-node profiles to set beside onnxruntime's (bench/realnets -layers).
	// The nodes of a Loop's or If's body are reported as they run, within their
	// node's own time.
	NodeTime func(name, op string, d time.Duration)

	pool  *workerPool   // the graph's workers (pool.go); nil: a goroutine per chunk
	arena *scratchArena // the graph's shared scratch (scratch.go); nil: kernels keep their own
	zero  *gradZeroer   // the graph's clearing of gradient buffers over the workers; nil: the caller's thread
}

// Parallel calls fn over [0, n) split into at most ctx.Workers contiguous chunks and
// waits for all of them. Chunks are never smaller than grain elements, so that small
// tensors are not split at a loss. The split depends only on n, grain and Workers, so
// results are deterministic for a fixed Workers value.
//
// A panic in fn does not take the process down from a worker goroutine, where nothing
// could recover it: Parallel waits for every chunk and then panics in the calling
// goroutine with a *WorkerPanic holding the first one, which Graph.Forward and
// Graph.Backward turn into an error naming the node.
func (ctx *Context) Parallel(n, grain int, fn func(lo, hi int)) {
	if ctx == nil { // constant folding runs kernels without a context
		if n > 0 {
			fn(0, n)
		}
		return
	}
	w := ctx.Workers
	if grain < 1 {
		grain = 1
	}
	if max := (n + grain - 1) / grain; w > max {
		w = max
	}
	if w <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	chunk := (n + w - 1) / w
	if ctx.pool != nil && ctx.pool.parallel(n, w, chunk, fn) {
		return
	}
	// One allocation holds the wait group and the panic slot that the goroutines share.
	st := &struct {
		wg  sync.WaitGroup
		mu  sync.Mutex
		err *WorkerPanic
	}{}
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		st.wg.Add(1)
		go func() {
			defer st.wg.Done()
			defer func() {
				if r := recover(); r != nil {
					p := newWorkerPanic(r)
					st.mu.Lock()
					if st.err == nil {
						st.err = p
					}
					st.mu.Unlock()
				}
			}()
			fn(lo, hi)
		}()
	}
	st.wg.Wait()
	if st.err != nil {
		panic(st.err)
	}
}

// WorkerPanic is a panic raised in one of Context.Parallel's worker goroutines, carried
// to the goroutine that called Parallel: the panic's value and where it happened.
type WorkerPanic struct {
	Value any    // what the worker panicked with
	Where string // the innermost function outside the runtime, with file and line
	Stack []byte // the worker's stack trace at the panic
}

func (p *WorkerPanic) Error() string {
	if p.Where == "" {
		return fmt.Sprintf("%v (in a worker goroutine)", p.Value)
	}
	return fmt.Sprintf("%v (in a worker goroutine, at %s)", p.Value, p.Where)
}

// newWorkerPanic records the panic r from inside the deferred function that recovered
// it, while the panicking frames are still on the stack.
func newWorkerPanic(r any) *WorkerPanic {
	if p, ok := r.(*WorkerPanic); ok {
		return p // a nested Parallel's panic, already located
	}
	p := &WorkerPanic{Value: r, Stack: debug.Stack()}
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	// Below the deferred function: runtime.gopanic, then the runtime's own helpers for
	// a failed check (panicIndex, …), then the function that panicked.
	inPanic := false
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			inPanic = true
		} else if inPanic && !strings.HasPrefix(f.Function, "runtime.") {
			p.Where = fmt.Sprintf("%s (%s:%d)", strings.TrimPrefix(f.Function, "github.com/qtool/qtool/"), filepath.Base(f.File), f.Line)
			break
		}
		if !more {
			break
		}
	}
	return p
}
