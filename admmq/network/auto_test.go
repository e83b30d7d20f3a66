package network

import (
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// TestAutoGridPerTensor: under Auto a weight that a normalisation follows gets the binary
// grid and the others binary-channel, each with its own set; an explicit grid is used for
// every weight.
func TestAutoGridPerTensor(t *testing.T) {
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		t.Fatal(err)
	}
	// Cut the last normalisation's input off: fc4's weight then has none after it.
	m = m.Clone()
	for _, n := range m.Proto.GetGraph().GetNode() {
		if n.GetOpType() == "BatchNormalization" && n.GetName() == "/bn4/BatchNormalization" {
			id := "Identity"
			n.OpType = &id
			n.Input = n.Input[:1]
			n.Attribute = nil
		}
	}
	ts, err := Targets(m, Auto, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Grid]int{}
	for _, tg := range ts {
		want := BinaryChannel
		if tg.Normalized {
			want = Binary
		}
		if tg.Grid != want || tg.Set.Spec() != want.Spec() {
			t.Errorf("%s (normalised %v): grid %s, set %+v, want %s", tg.Name, tg.Normalized, tg.Grid, tg.Set.Spec(), want)
		}
		kinds[tg.Grid]++
	}
	if kinds[Binary] == 0 || kinds[BinaryChannel] == 0 {
		t.Fatalf("fmnist-mlp should have weights of both kinds: %v", kinds)
	}
	ts, _ = Targets(m, Binary, Selection{})
	for _, tg := range ts {
		if tg.Grid != Binary {
			t.Errorf("--grid binary: %s on %s", tg.Name, tg.Grid)
		}
	}
}
