package network

import (
	"slices"
	"testing"

	"github.com/qtool/qtool/onnxio"
)

// targetNames returns the names Targets targets in m under sel.
func targetNames(t *testing.T, m *onnxio.Model, sel Selection) []string {
	t.Helper()
	ts, err := Targets(m, Binary, sel)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range ts {
		names = append(names, tg.Name)
	}
	return names
}

// TestKeepFirstLast: "first" and "last" follow the paths of PyTorch exports
// (testdata/ends.py), not graph order. On a network with two inputs and two heads both
// encoders are first and both heads last, where graph order would name one of each; on a
// plain chain (the negative control) only the end layers are kept and the middle one stays
// targeted.
func TestKeepFirstLast(t *testing.T) {
	cases := []struct {
		path string
		keep []string
		want []string
	}{
		{"testdata/two_heads.onnx", []string{"first"}, []string{"trunk.weight", "head_a.weight", "head_b.weight"}},
		{"testdata/two_heads.onnx", []string{"last"}, []string{"enc_a.weight", "enc_b.weight", "trunk.weight"}},
		{"testdata/two_heads.onnx", []string{"first", "last"}, []string{"trunk.weight"}},
		{"testdata/chain.onnx", []string{"first"}, []string{"fc2.weight", "fc3.weight"}},
		{"testdata/chain.onnx", []string{"last"}, []string{"fc1.weight", "fc2.weight"}},
		{"testdata/chain.onnx", []string{"first", "last"}, []string{"fc2.weight"}},
	}
	for _, c := range cases {
		m, err := onnxio.Load(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := targetNames(t, m, Selection{Keep: c.keep}); !slices.Equal(got, c.want) {
			t.Errorf("%s, keep %v: targets %v, want %v", c.path, c.keep, got, c.want)
		}
	}
}

// TestEndsRewired: a layer that reads the graph input directly is first even when graph
// order puts another before it, and a layer whose output reaches no graph output is not
// last. chain.onnx with fc2 rewired to read x: x → fc2 → fc3 → y, fc1's output unused.
func TestEndsRewired(t *testing.T) {
	m, err := onnxio.Load("testdata/chain.onnx")
	if err != nil {
		t.Fatal(err)
	}
	// fc2 reads 8 features and x has 6: only the structure matters here.
	g := m.Proto.GetGraph()
	for _, n := range g.GetNode() {
		if slices.Contains(n.GetInput(), "fc2.weight") {
			n.Input[0] = "x"
		}
	}
	first, last := ends(m, []string{"fc1.weight", "fc2.weight", "fc3.weight"})
	if want := []string{"fc1.weight", "fc2.weight"}; !slices.Equal(first, want) {
		t.Errorf("first %v, want %v", first, want)
	}
	if want := []string{"fc3.weight"}; !slices.Equal(last, want) {
		// fc1 would be last if the walk went on past unused values.
		t.Errorf("last %v, want %v", last, want)
	}
}

// TestKeepDepthwise: "depthwise" keeps the weights of the convolutions PyTorch built with
// groups = in_channels (testdata/grouped.py: dw, and dw_mult with two outputs per input
// channel) and nothing else; the grouped convolution with two input channels per group
// (the negative control) stays targeted, as do the ungrouped ones, and "first"/"last"
// combine with it.
func TestKeepDepthwise(t *testing.T) {
	m, err := onnxio.Load("testdata/grouped.onnx")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		keep []string
		want []string
	}{
		{[]string{"depthwise"}, []string{"stem.weight", "grouped.weight", "pw.weight", "fc.weight"}},
		{[]string{"first", "last", "depthwise"}, []string{"grouped.weight", "pw.weight"}},
		{nil, []string{"stem.weight", "dw.weight", "grouped.weight", "dw_mult.weight", "pw.weight", "fc.weight"}},
	}
	for _, c := range cases {
		if got := targetNames(t, m, Selection{Keep: c.keep}); !slices.Equal(got, c.want) {
			t.Errorf("keep %v: targets %v, want %v", c.keep, got, c.want)
		}
	}
}
