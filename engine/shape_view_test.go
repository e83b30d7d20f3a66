package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestViewAliases: a view (Reshape, Flatten) whose input no later step reads takes the
// input's buffer instead of copying it; one whose input is read again copies. The outputs
// must be the element-wise definition's, over two runs of different inputs.
func TestViewAliases(t *testing.T) {
	nodes := []*onnxpb.NodeProto{
		gNode("Relu", []string{"x"}, []string{"a"}),
		gNode("Reshape", []string{"a", "s1"}, []string{"r"}), // a dies here: aliased
		gNode("Transpose", []string{"r"}, []string{"tr"}, attrInts("perm", 0, 2, 1)),
		gNode("Flatten", []string{"tr"}, []string{"f"}), // tr dies here: aliased
		gNode("Neg", []string{"x"}, []string{"b"}),
		gNode("Reshape", []string{"b", "s2"}, []string{"rb"}), // b is read again below: copied
		gNode("Flatten", []string{"b"}, []string{"fb"}),       // b's last reader: aliased
		gNode("Add", []string{"rb", "fb"}, []string{"y2"}),
	}
	m := gModel(14, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 2, 3, 4)}, []string{"f", "y2"},
		onnxio.Int64Tensor("s1", []int64{3}, []int64{2, 4, 3}), onnxio.Int64Tensor("s2", []int64{2}, []int64{2, 12}))
	g := mustBuild(t, m)
	r := rand.New(rand.NewPCG(2, 9))
	for run := range 2 {
		x := nntRand(r, []int{2, 3, 4}, -1, 1)
		out, err := g.Forward(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		// f[n][j·3 + i] = relu(x) viewed as [2, 4, 3] at [n][i][j].
		for n := range 2 {
			for j := range 3 {
				for i := range 4 {
					want := max(x.F[n*12+i*3+j], 0)
					if got := out[0].F[n*12+j*4+i]; got != want {
						t.Fatalf("run %d: f[%d][%d] = %v, want %v", run, n, j*4+i, got, want)
					}
				}
			}
		}
		for e, v := range x.F {
			if got := out[1].F[e]; got != -2*v {
				t.Fatalf("run %d: y2[%d] = %v, want %v", run, e, got, -2*v)
			}
		}
	}
	shared := map[string]bool{}
	for _, st := range g.last.steps {
		if _, ok := st.node.k.(*viewKernel); ok {
			shared[st.node.n.Name()] = sameData(st.in[0], st.out[0])
		}
	}
	if len(shared) != 4 {
		t.Fatalf("plan has views %v, want four", shared)
	}
	// b's last reader is the Flatten after the Reshape: that one takes its buffer.
	for name, want := range map[string]bool{"Reshape_r": true, "Flatten_f": true, "Reshape_rb": false, "Flatten_fb": true} {
		if got, ok := shared[name]; !ok || got != want {
			t.Errorf("view %s shares its input's buffer: %v (in the plan: %v), want %v", name, got, ok, want)
		}
	}
}
