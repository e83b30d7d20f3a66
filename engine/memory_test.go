package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// memErr checks that err is one line, a *MemoryError naming the node and op, and returns it.
func memErr(t *testing.T, err error, node, op string) *MemoryError {
	t.Helper()
	var me *MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a *MemoryError", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || strings.Contains(msg, "internal error") {
		t.Errorf("error is not one clean line: %q", msg)
	}
	for _, want := range []string{"test.onnx", `"` + node + `"`, "(" + op + ")"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %s", msg, want)
		}
	}
	if me.Node != node || me.Op != op {
		t.Errorf("MemoryError names node %q (%s), want %q (%s)", me.Node, me.Op, node, op)
	}
	return me
}

// constOfShape is a model with no input whose output is ConstantOfShape(shape).
func constOfShape(shape ...int64) *onnxio.Model {
	return gModel(13, []*onnxpb.NodeProto{gNode("ConstantOfShape", []string{"s"}, []string{"y"})}, nil, []string{"y"},
		onnxio.Int64Tensor("s", []int64{int64(len(shape))}, shape))
}

// TestHugeConstantOfShape is the hostile model of issue 12: ConstantOfShape to
// [2^20, 2^20] (4 TiB) passes onnx.checker and used to kill the process in planning.
func TestHugeConstantOfShape(t *testing.T) {
	g, err := Build(constOfShape(1<<20, 1<<20), Options{MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(nil)
	me := memErr(t, err, "ConstantOfShape_y", "ConstantOfShape")
	if me.Bytes != 4<<40 || me.Limit != 1<<30 || me.Total {
		t.Errorf("got %+v, want a 4 TiB tensor over a 1 GiB limit", me)
	}
	if !strings.Contains(err.Error(), "4 TiB") || !strings.Contains(err.Error(), "1 GiB") {
		t.Errorf("error %q does not give the sizes", err)
	}

	// The default limit, the machine's memory, refuses 256 PiB on any machine.
	g, err = Build(constOfShape(1<<20, 1<<20, 1<<16), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(nil)
	memErr(t, err, "ConstantOfShape_y", "ConstantOfShape")
	if DefaultMaxBytes() <= 0 {
		t.Errorf("DefaultMaxBytes() = %d", DefaultMaxBytes())
	}
}

// TestHugeExpand broadcasts a small input to [2^31, 1, 10] (80 GiB), which used to be
// allocated when the plan was made.
func TestHugeExpand(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{gNode("Expand", []string{"x", "s"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 1, 10)}, []string{"y"},
		onnxio.Int64Tensor("s", []int64{3}, []int64{1 << 31, 1, 10}))
	g, err := Build(m, Options{MaxBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	x := NewFloat([]int{1, 10}, make([]float32, 10))
	_, err = g.Forward(nil, x)
	me := memErr(t, err, "Expand_y", "Expand")
	if me.Bytes != 80<<30 {
		t.Errorf("Bytes = %d, want 80 GiB", me.Bytes)
	}
	if _, err := g.PlanBytes(nil, x); !errors.As(err, &me) {
		t.Errorf("PlanBytes: got %v, want the same *MemoryError", err)
	}
}

// TestShapeOverflow refuses shapes whose element count overflows: [2^62, 4] used to be
// taken for an empty tensor, [2^62, 3] to end in "internal error while planning:
// makeslice".
func TestShapeOverflow(t *testing.T) {
	for _, shape := range [][]int64{{1 << 62, 4}, {1 << 62, 3}, {1 << 62, 4, 0}, {1 << 31, 1 << 31, 1 << 31}} {
		g, err := Build(constOfShape(shape...), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Forward(nil)
		if me := memErr(t, err, "ConstantOfShape_y", "ConstantOfShape"); me.Bytes != -1 {
			t.Errorf("%v: Bytes = %d, want -1 (overflow)", shape, me.Bytes)
		}
	}
	// A graph input with such a shape and no data is refused the same way.
	m := gModel(13, []*onnxpb.NodeProto{gNode("Relu", []string{"x"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, -1)}, []string{"y"})
	g := mustBuild(t, m)
	_, err := g.Forward(nil, NewFloat([]int{1 << 62, 4}, nil))
	var me *MemoryError
	if !errors.As(err, &me) || me.Input != "x" || !strings.Contains(err.Error(), `input "x"`) {
		t.Errorf("got %v, want a *MemoryError naming input x", err)
	}
}

// reluChain is x → Relu → Relu → Relu, with the listed values as outputs.
func reluChain(outputs ...string) *onnxio.Model {
	return gModel(13, []*onnxpb.NodeProto{
		gNode("Relu", []string{"x"}, []string{"a"}),
		gNode("Relu", []string{"a"}, []string{"b"}),
		gNode("Relu", []string{"b"}, []string{"c"}),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 1024)}, outputs)
}

// TestPlanTotalLimit checks the total: each value fits, but the buffers together do not
// when every value is an output, and do when buffers can be reused.
func TestPlanTotalLimit(t *testing.T) {
	const mib = 1 << 20
	x := NewFloat([]int{256, 1024}, make([]float32, 256*1024)) // 1 MiB

	g, err := Build(reluChain("a", "b", "c"), Options{MaxBytes: 5 * mib / 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Forward(nil, x)
	me := memErr(t, err, "Relu_c", "Relu")
	if !me.Total || me.Bytes != 3*mib {
		t.Errorf("got %+v, want the plan's total of 3 MiB", me)
	}
	// Half the batch fits, and the graph is still usable.
	if _, err := g.Forward(nil, rows(x, 0, 128)); err != nil {
		t.Fatal(err)
	}

	// Only c is an output: a's buffer is free once b is computed, and c takes it.
	g, err = Build(reluChain("c"), Options{MaxBytes: 5 * mib / 2})
	if err != nil {
		t.Fatal(err)
	}
	n, err := g.PlanBytes(nil, NewFloat(x.Shape, nil))
	if err != nil || n != 2*mib {
		t.Fatalf("PlanBytes = %d, %v; want 2 MiB", n, err)
	}
	out, err := g.Forward(nil, x)
	if err != nil || len(out[0].F) != 256*1024 {
		t.Fatalf("Forward: %v", err)
	}
}

// TestPlanBytesTraining checks that recording plans count the gradient buffers: y = x·W
// keeps y and, for Backward, y's gradient.
func TestPlanBytesTraining(t *testing.T) {
	m := gModel(13, []*onnxpb.NodeProto{gNode("MatMul", []string{"x", "w"}, []string{"y"})},
		[]*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 8)}, []string{"y"},
		onnxio.FloatTensor("w", []int64{8, 16}, make([]float32, 128)))
	g := mustBuild(t, m)
	x := NewFloat([]int{100, 8}, nil)
	y := int64(100 * 16 * 4)
	if n, err := g.PlanBytes(nil, x); err != nil || n != y {
		t.Fatalf("inference PlanBytes = %d, %v; want %d", n, err, y)
	}
	if err := g.SetTrainable("w"); err != nil {
		t.Fatal(err)
	}
	if n, err := g.PlanBytes(&Context{Training: true}, x); err != nil || n != 2*y {
		t.Fatalf("training PlanBytes = %d, %v; want %d", n, err, 2*y)
	}
	if n, err := g.PlanBytes(&Context{Training: true, NoGrad: true}, x); err != nil || n != y {
		t.Fatalf("NoGrad PlanBytes = %d, %v; want %d", n, err, y)
	}
	// A limit between the two refuses training only, naming the node whose gradient
	// does not fit.
	g2, err := Build(m, Options{MaxBytes: 3 * y / 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.SetTrainable("w"); err != nil {
		t.Fatal(err)
	}
	x.F = make([]float32, 800)
	if _, err := g2.Forward(&Context{NoGrad: true}, x); err != nil {
		t.Fatal(err)
	}
	_, err = g2.Forward(&Context{Training: true}, x)
	if me := memErr(t, err, "MatMul_y", "MatMul"); !me.Total {
		t.Errorf("got %+v, want the total", me)
	}
}

// TestPlanCacheWithinLimit checks that the plans a graph keeps for several batch sizes
// stay within its limit together: a plan that does not fit beside the cached ones
// replaces them.
func TestPlanCacheWithinLimit(t *testing.T) {
	const mib = 1 << 20
	g, err := Build(reluChain("c"), Options{MaxBytes: 3 * mib})
	if err != nil {
		t.Fatal(err)
	}
	x := NewFloat([]int{256, 1024}, make([]float32, 256*1024))
	for _, n := range []int{64, 128, 256, 64} {
		if _, err := g.Forward(nil, rows(x, 0, n)); err != nil {
			t.Fatal(err)
		}
		if g.cached > 3*mib {
			t.Fatalf("after batch %d the cached plans hold %d bytes, over the 3 MiB limit", n, g.cached)
		}
	}
	// 64 and 128 (0.5 + 1 MiB) fit together; 256 (2 MiB) did not fit beside them.
	if len(g.plans) != 2 {
		t.Errorf("%d plans cached, want 2 (256 and 64)", len(g.plans))
	}
}

// TestBatchIndependentOutputs checks what qtool eval relies on when it lowers the batch
// size to fit the memory limit: in inference each sample's outputs do not depend on the
// batch it is in, for every shipped model, beyond float rounding (the matrix products
// block differently by batch size; measured at most 5e-6 on these logits, of magnitude
// up to 10): the same predicted class, and logits within 1e-5 relative.
func TestBatchIndependentOutputs(t *testing.T) {
	for _, name := range []string{"fmnist-mlp", "fmnist-cnn", "fmnist-resnet"} {
		t.Run(name, func(t *testing.T) {
			_, g, x, _ := loadTestModel(t, name, "fmnist-calib.npz")
			const n = 200
			x = rows(x, 0, n)
			out, err := g.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			all := slices.Clone(out[0].F)
			per := len(all) / n
			for _, bs := range []int{1, 7, 64} {
				for lo := 0; lo < n; lo += bs {
					hi := min(lo+bs, n)
					out, err := g.Forward(nil, rows(x, lo, hi))
					if err != nil {
						t.Fatal(err)
					}
					for i := range hi - lo {
						got, want := out[0].F[i*per:(i+1)*per], all[(lo+i)*per:(lo+i+1)*per]
						if argmax(got) != argmax(want) {
							t.Fatalf("batch size %d: sample %d predicts class %d, %d in the batch of %d", bs, lo+i, argmax(got), argmax(want), n)
						}
						for j, v := range got {
							if d := math.Abs(float64(v - want[j])); d > 1e-5*max(1, math.Abs(float64(want[j]))) {
								t.Fatalf("batch size %d: sample %d logit %d is %g, %g in the batch of %d", bs, lo+i, j, v, want[j], n)
							}
						}
					}
				}
			}
		})
	}
}

// TestPlanBytesFusedPool: an inference plan that fuses Conv → BatchNormalization → Relu →
// MaxPool counts what it allocates. The pool is 3×3 at stride 2, which the direct path
// cannot apply image by image, so the convolution's full output is written out on every
// CPU: into a buffer of the plan, counted, not one the kernel allocates on its first run.
// PlanBytes equals the plan's buffers, measured, and the first run allocates less than
// that output's size (only the kernels' scratch: im2col's matrix or the direct path's
// tiles), so no buffer of it.
func TestPlanBytesFusedPool(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const C = 64
	m := gModel(13, []*onnxpb.NodeProto{
		gNode("Conv", []string{"x", "w", "b"}, []string{"c"}, attrInts("kernel_shape", 3, 3)),
		gNode("BatchNormalization", []string{"c", "s", "sh", "mu", "v"}, []string{"n"}),
		gNode("Relu", []string{"n"}, []string{"a"}),
		gNode("MaxPool", []string{"a"}, []string{"y"}, attrInts("kernel_shape", 3, 3), attrInts("strides", 2, 2)),
	}, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, 1, 32, 32)}, []string{"y"},
		onnxio.FloatTensor("w", []int64{C, 1, 3, 3}, gFloats(r, C*9)), onnxio.FloatTensor("b", []int64{C}, gFloats(r, C)),
		onnxio.FloatTensor("s", []int64{C}, gFloats(r, C)), onnxio.FloatTensor("sh", []int64{C}, gFloats(r, C)),
		onnxio.FloatTensor("mu", []int64{C}, gFloats(r, C)), onnxio.FloatTensor("v", []int64{C}, slices.Repeat([]float32{1}, C)))
	g := mustBuild(t, m)
	// One image: the im2col path then writes the product in place, so that the kernels'
	// own scratch is an im2col matrix, far below the output, on every CPU.
	x := NewFloat([]int{1, 1, 32, 32}, gFloats(r, 32*32))
	counted, err := g.PlanBytes(nil, NewFloat(x.Shape, nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.makePlan([]*Tensor{x}, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.steps) != 1 || !strings.Contains(p.steps[0].node.op, "MaxPool") {
		t.Fatalf("the plan's steps are not one fused step: %d steps", len(p.steps))
	}
	seen := map[*float32]bool{}
	var held int64
	for id, v := range p.values {
		if t := p.vals[id]; v.kind == kindNode && t != nil && cap(t.F) > 0 && !seen[&t.F[:1][0]] {
			seen[&t.F[:1][0]] = true
			held += 4 * int64(cap(t.F))
		}
	}
	convOut := int64(4 * C * 30 * 30)
	if counted != p.bytes || held != counted || held < convOut {
		t.Errorf("PlanBytes %d, the plan counted %d and holds %d bytes of buffers; the convolution's output alone is %d", counted, p.bytes, held, convOut)
	}
	p.inVals[0].F = x.F
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var cur *step
	if err := forwardSteps(&Context{BLAS: g.opts.BLAS, Workers: 2}, p.steps, &cur); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew >= convOut {
		t.Errorf("the first run allocated %d bytes outside the plan; the convolution's output is %d", grew, convOut)
	}
}
