package engine

import (
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestParallelCarriesWorkerPanic checks that a panic in one of Context.Parallel's worker
// goroutines reaches the caller as a *WorkerPanic, after every other chunk has finished,
// instead of ending the process.
func TestParallelCarriesWorkerPanic(t *testing.T) {
	pool := newWorkerPool(3)
	defer pool.close()
	for _, ctx := range []*Context{{Workers: 4}, {Workers: 4, pool: pool}} {
		parallelCarriesPanic(t, ctx)
	}
}

func parallelCarriesPanic(t *testing.T, ctx *Context) {
	done := make([]bool, 8)
	var got any
	func() {
		defer func() { got = recover() }()
		ctx.Parallel(len(done), 1, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				done[i] = true
			}
			if hi == len(done) {
				var s []float32
				_ = s[hi] // a runtime error, as an out-of-range kernel index would raise
			}
		})
	}()
	p, ok := got.(*WorkerPanic)
	if !ok {
		t.Fatalf("Parallel panicked with %T %v, want *WorkerPanic", got, got)
	}
	for i, d := range done {
		if !d {
			t.Errorf("chunk of index %d did not run to its end before the panic was raised", i)
		}
	}
	msg := p.Error()
	for _, want := range []string{"index out of range [8] with length 0", "worker goroutine", "parallelCarriesPanic", "worker_panic_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("panic message %q does not contain %q", msg, want)
		}
	}
	if !strings.Contains(string(p.Stack), "worker_panic_test.go") {
		t.Errorf("the stack does not show the panicking function:\n%s", p.Stack)
	}
}

// panicKernel wraps a node's kernel and panics inside a worker goroutine of
// Context.Parallel in Forward (onForward) or Backward.
type panicKernel struct {
	Kernel
	onForward bool
}

func (k *panicKernel) boom(ctx *Context) {
	ctx.Parallel(64, 1, func(lo, hi int) {
		if hi == 64 {
			panic("injected kernel failure")
		}
	})
}

func (k *panicKernel) Forward(ctx *Context, in, out []*Tensor) error {
	if k.onForward {
		k.boom(ctx)
	}
	return k.Kernel.Forward(ctx, in, out)
}

func (k *panicKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	k.boom(ctx)
	return k.Kernel.(Differentiable).Backward(ctx, in, out, gout, gin)
}

// TestWorkerPanicBecomesNodeError injects a kernel whose worker goroutine panics and
// checks that Forward and Backward return an error naming the node, and that the graph
// keeps working once the kernel behaves.
func TestWorkerPanicBecomesNodeError(t *testing.T) {
	for _, onForward := range []bool{true, false} {
		pass := "backward"
		if onForward {
			pass = "forward"
		}
		t.Run(pass, func(t *testing.T) {
			m := gModel(13, []*onnxpb.NodeProto{
				gNode("Mul", []string{"x", "w"}, []string{"h"}),
				gNode("Relu", []string{"h"}, []string{"y"}),
			}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 3)}, []string{"y"},
				onnxio.FloatTensor("w", []int64{3}, []float32{1, -2, 3}))
			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetTrainable("w"); err != nil {
				t.Fatal(err)
			}
			i := len(g.nodes) - 1
			orig := g.nodes[i].k
			if g.nodes[i].op != "Relu" {
				t.Fatalf("last node is %s, want Relu", g.nodes[i].op)
			}
			g.nodes[i].k = &panicKernel{Kernel: orig, onForward: onForward}
			x := NewFloat([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
			gy := NewFloat([]int{2, 3}, []float32{1, 1, 1, 1, 1, 1})
			_, err = g.Forward(nil, x)
			if err == nil {
				err = g.Backward(nil, gy)
			}
			if err == nil {
				t.Fatalf("%s: no error from a kernel that panicked in a worker goroutine", pass)
			}
			msg := err.Error()
			for _, want := range []string{`node "Relu_y" (Relu)`, "internal error in " + pass + " pass", "injected kernel failure", "worker goroutine", "panicKernel"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("the error is not one line: %q", msg)
			}
			t.Logf("%s", msg)
			g.nodes[i].k = orig
			if _, err := g.Forward(nil, x); err != nil {
				t.Fatalf("Forward after the failure: %v", err)
			}
			if err := g.Backward(nil, gy); err != nil {
				t.Fatalf("Backward after the failure: %v", err)
			}
		})
	}
}
