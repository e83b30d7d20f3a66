package corpus

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/admmq/network"
	"github.com/qtool/qtool/onnxio"
)

// TestCorpusKeepFirstLast: "first" and "last" on PyTorch's exports of control flow. In
// if_branch the head is an If whose branches each hold a Gemm (a.weight, b.weight) on the
// trunk's activation: both are last, where graph order named only b.weight, so keeping
// first and last leaves nothing to binarize. In while_loop (the control: both readings
// agree) the Loop's shared layer is neither first nor last: every path reaches it through
// fc and leaves it through head, also when the loop runs zero times.
func TestCorpusKeepFirstLast(t *testing.T) {
	man, dir := corpus(t)
	cases := []struct {
		model string
		keep  []string
		want  []string
	}{
		{"if_branch", []string{"last"}, []string{"fc.weight"}},
		{"if_branch", []string{"first"}, []string{"a.weight", "b.weight"}},
		{"while_loop", []string{"first", "last"}, []string{"step.weight"}},
	}
	for _, c := range cases {
		i := slices.IndexFunc(man.Models, func(m Model) bool { return m.Name == c.model })
		if i < 0 {
			t.Fatalf("no %s in the corpus", c.model)
		}
		m, err := onnxio.Load(filepath.Join(dir, man.Models[i].File))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := network.Targets(m, network.Binary, network.Selection{Keep: c.keep})
		if err != nil {
			t.Fatalf("%s, keep %v: %v", c.model, c.keep, err)
		}
		var got []string
		for _, tg := range ts {
			got = append(got, tg.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s, keep %v: targets %v, want %v", c.model, c.keep, got, c.want)
		}
	}
	i := slices.IndexFunc(man.Models, func(m Model) bool { return m.Name == "if_branch" })
	m, err := onnxio.Load(filepath.Join(dir, man.Models[i].File))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := network.Targets(m, network.Binary, network.Selection{Keep: []string{"first", "last"}}); err == nil {
		t.Error("if_branch, keep first and last: no error, want one saying nothing is left to binarize")
	}
}
