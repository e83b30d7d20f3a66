package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

const calibData = "../../testmodels/fmnist-calib.npz"

// runSplit runs qtool in-process as main does, with stdout and stderr kept apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	app := newApp()
	var out, errOut strings.Builder
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(interspersed(app, append([]string{"qtool"}, args...)))
	if err != nil {
		// As main prints it.
		fmt.Fprintln(&errOut, "qtool:", err)
	}
	return out.String(), errOut.String(), exitCode(err)
}

// hostileModel writes a model that takes the calibration images ([N, 784]) and whose
// output is the given node's, to a temporary folder.
func hostileModel(t *testing.T, node *onnxpb.NodeProto, inits ...*onnxpb.TensorProto) string {
	t.Helper()
	dims := &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
		{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}},
		{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 784}},
	}}
	x := &onnxpb.ValueInfoProto{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: dims}}}}
	mp := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("hostile"),
			Node:        []*onnxpb.NodeProto{node},
			Input:       []*onnxpb.ValueInfoProto{x},
			Output:      []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
			Initializer: inits,
		},
	}
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "hostile.onnx")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalHostileModels runs qtool eval on models that pass onnx.checker but ask for
// huge or overflowing tensors at run time: one line naming the node, exit 1, no crash.
func TestEvalHostileModels(t *testing.T) {
	requireFile(t, calibData, "check out the committed testmodels/")
	cases := []struct {
		name string
		node *onnxpb.NodeProto
		init *onnxpb.TensorProto
		want string
	}{
		{"constant-of-shape", &onnxpb.NodeProto{Name: proto.String("huge_fill"), OpType: proto.String("ConstantOfShape"), Input: []string{"s"}, Output: []string{"y"}},
			onnxio.Int64Tensor("s", []int64{2}, []int64{1 << 20, 1 << 20}), "over the memory limit of 2 GiB"},
		{"expand", &onnxpb.NodeProto{Name: proto.String("huge_expand"), OpType: proto.String("Expand"), Input: []string{"x", "s"}, Output: []string{"y"}},
			onnxio.Int64Tensor("s", []int64{3}, []int64{1 << 31, 1, 784}), "over the memory limit of 2 GiB"},
		{"overflow", &onnxpb.NodeProto{Name: proto.String("wrapping_fill"), OpType: proto.String("ConstantOfShape"), Input: []string{"s"}, Output: []string{"y"}},
			onnxio.Int64Tensor("s", []int64{2}, []int64{1 << 62, 4}), "more elements than any memory holds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := hostileModel(t, c.node, c.init)
			_, stderr, code := runSplit(t, "eval", p, "--data", calibData)
			if code != exitInput {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitInput, stderr)
			}
			if strings.Count(stderr, "\n") != 1 {
				t.Errorf("want one line on stderr, got %q", stderr)
			}
			for _, want := range []string{p, fmt.Sprintf("node %q (%s)", c.node.GetName(), c.node.GetOpType()), c.want} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not say %q", stderr, want)
				}
			}
		})
	}
}

// TestEvalLowersBatchToFit asks eval for a batch far over --max-memory: it evaluates in
// the largest batch that fits, says so in one line, and reports the same result.
func TestEvalLowersBatchToFit(t *testing.T) {
	requireFile(t, calibData, "check out the committed testmodels/")
	// The pure-Go BLAS, so that the comparison does not depend on the machine's kernels.
	t.Setenv("QTOOL_BLAS", "go")
	model := "../../testmodels/fmnist-mlp.onnx"
	ref, _, code := runSplit(t, "eval", model, "--data", calibData, "--json")
	if code != 0 {
		t.Fatalf("reference run: exit %d", code)
	}
	out, stderr, code := runSplit(t, "eval", model, "--data", calibData, "--json", "--batch-size", "1000000", "--max-memory", "1MiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`^qtool: note: --batch-size 1000000 does not fit in --max-memory 1MiB; evaluating in batches of (\d+)\n$`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr %q is not the one-line note", stderr)
	}
	if n, _ := strconv.Atoi(m[1]); n < 1 || n >= 1000 {
		t.Errorf("lowered to %d, want a batch below the 1000 samples", n)
	}
	var a, b evalResult
	if err := json.Unmarshal([]byte(ref), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if a.Samples != 1000 || b.Samples != a.Samples || b.Correct != a.Correct {
		t.Errorf("lowered batch: %d/%d correct, default batch: %d/%d", b.Correct, b.Samples, a.Correct, a.Samples)
	}
}

// TestTrainMicroBatchesOverMemory asks binarize for a batch over --max-memory: it trains
// in the largest micro-batch that fits, saying so in one line, while a limit that one
// sample does not fit in is a usage error.
func TestTrainMicroBatchesOverMemory(t *testing.T) {
	requireFile(t, calibData, "check out the committed testmodels/")
	model := "../../testmodels/fmnist-cnn.onnx"
	args := func(mem string) []string {
		return []string{"binarize", model, "--data", calibData, "--max-memory", mem, "--batch-size", "1000",
			"--iters", "1", "--inner-steps", "1", "-q", "-o", filepath.Join(t.TempDir(), "out.onnx")}
	}
	_, stderr, code := runSplit(t, args("16MiB")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`qtool: note: --batch-size 1000 does not fit in --max-memory 16MiB for training; training in micro-batches of (\d+) with gradient accumulation`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr %q has no micro-batch note", stderr)
	}
	if micro, _ := strconv.Atoi(m[1]); micro < 1 || micro >= 1000 {
		t.Fatalf("micro-batch %d", micro)
	}
	_, stderr, code = runSplit(t, args("4MiB")...)
	if code != exitUsage || !strings.Contains(stderr, "for a single sample; raise --max-memory") {
		t.Fatalf("4MiB: exit %d: %s", code, stderr)
	}
}
