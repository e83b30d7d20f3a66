package engine

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestMalformedNodesGiveErrors mutates the conformance models of supported ops — inputs
// dropped or swapped, integer attributes changed, lists shortened — and checks that Build and
// Forward answer with errors rather than panics. Kernel panics that the executor turned
// into "internal error" messages are reported as failures too: they are bugs.
func TestMalformedNodesGiveErrors(t *testing.T) {
	requireAsset(t, conformanceDir, "apt-get install libonnx-testdata")
	dirs, err := filepath.Glob(filepath.Join(conformanceDir, "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	supported := registry()
	r := rand.New(rand.NewPCG(42, 1))
	runs, errs := 0, 0
	for _, dir := range dirs {
		m, err := onnxio.Load(filepath.Join(dir, "model.onnx"))
		if err != nil || len(m.Proto.GetGraph().GetNode()) != 1 {
			continue
		}
		if _, ok := supported[m.Proto.GetGraph().GetNode()[0].GetOpType()]; !ok {
			continue
		}
		var inputs []*Tensor
		for i := range m.Proto.GetGraph().GetInput() {
			ot, err := onnxio.ReadTensorFile(filepath.Join(dir, "test_data_set_0", fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				break
			}
			inputs = append(inputs, fromONNX(ot))
		}
		for range 16 {
			mm := &onnxio.Model{Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto), Name: m.Name}
			mutate(r, mm.Proto.GetGraph().GetNode()[0])
			runs++
			g, err := Build(mm, Options{Workers: 2})
			if err == nil {
				_, err = g.Forward(nil, inputs...)
			}
			if err != nil {
				errs++
				if strings.Contains(err.Error(), "internal error") {
					t.Errorf("%s: %v", filepath.Base(dir), err)
				}
			}
		}
	}
	t.Logf("%d mutated models, %d refused with an error", runs, errs)
}

// mutate changes one thing about a node.
func mutate(r *rand.Rand, n *onnxpb.NodeProto) {
	switch r.IntN(4) {
	case 0:
		if len(n.Input) > 0 {
			n.Input[r.IntN(len(n.Input))] = ""
		}
	case 1:
		for _, a := range n.Attribute {
			if a.I != nil {
				a.I = proto.Int64(int64(r.IntN(9)) - 3)
			}
			for i := range a.Ints {
				a.Ints[i] = int64(r.IntN(9)) - 3
			}
		}
	case 2:
		for _, a := range n.Attribute {
			if len(a.Ints) > 0 {
				a.Ints = a.Ints[:r.IntN(len(a.Ints))]
			}
		}
	case 3:
		// Feed one input where another belongs: wrong shapes and types.
		if len(n.Input) > 1 {
			n.Input[r.IntN(len(n.Input))] = n.Input[r.IntN(len(n.Input))]
		}
	}
}
