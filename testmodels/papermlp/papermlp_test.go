package papermlp

import (
	"testing"

	"github.com/qtool/qtool/onnxio"
)

// TestParameterCount checks the network against the paper's count: 36.8 M parameters at
// width 4096, of which 36 806 656 are Gemm weights.
func TestParameterCount(t *testing.T) {
	m := New(PaperWidth, 1)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	var weights, all int
	for _, p := range m.Params() {
		tt, err := onnxio.DecodeTensor(p.Tensor, "")
		if err != nil {
			t.Fatal(err)
		}
		all += tt.Len()
		if len(tt.Dims) == 2 {
			weights += tt.Len()
		}
	}
	if weights != 784*4096+2*4096*4096+4096*10 {
		t.Errorf("weights: %d", weights)
	}
	// Trainable: weights, biases, BN scale and shift; plus running statistics and the
	// four dropout ratios.
	trainable := weights + 3*(3*4096+10)
	if want := trainable + 2*(3*4096+10) + 4; all != want {
		t.Errorf("parameters: %d, want %d", all, want)
	}
	if trainable != 36843550 {
		t.Errorf("trainable parameters %d, the paper's network has 36 843 550", trainable)
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := New(64, 3).Marshal()
	b, _ := New(64, 3).Marshal()
	c, _ := New(64, 4).Marshal()
	if string(a) != string(b) {
		t.Error("the same seed gave different models")
	}
	if string(a) == string(c) {
		t.Error("different seeds gave the same model")
	}
}
