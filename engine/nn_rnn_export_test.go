//go:build cgo

package engine

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
	"github.com/qtool/qtool/onnxio"
)

// TestRNNClassifierExports checks PyTorch's exports of a bidirectional LSTM and GRU
// sequence classifier (testdata/rnn/make.py: batch_first, last step, Linear; dynamic
// batch and sequence axes) against onnxruntime (forward, 1e-5, at the fixture's shape and
// at another batch and length) and against PyTorch itself: its logits, and the gradients
// of Σ wts·logits with respect to the recurrent node's W, R and B and the Linear weight
// (1e-4).
func TestRNNClassifierExports(t *testing.T) {
	ortref.Require(t)
	for _, name := range []string{"lstm-classifier", "gru-classifier"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "rnn")
			m, err := onnxio.Load(filepath.Join(dir, name+".onnx"))
			if err != nil {
				t.Fatal(err)
			}
			recordPassed(t, opsCovered.ort, m.Proto)
			fix := filepath.Join(dir, name+".npz")
			var x, logits, wts []float32
			xs, err := npzArray(fix, "x", &x)
			if err != nil {
				t.Fatal(err)
			}
			ls, err := npzArray(fix, "logits", &logits)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := npzArray(fix, "wts", &wts); err != nil {
				t.Fatal(err)
			}
			xs64 := []int64{int64(xs[0]), int64(xs[1]), int64(xs[2])}
			got := compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: xs64, Data: x}}, []*Tensor{NewFloat(xs, slices.Clone(x))}, 1e-5)
			if err := closeTensors(got[0], NewFloat(ls, logits), 1e-4, 1e-4); err != nil {
				t.Errorf("logits against PyTorch: %v", err)
			}
			// The axes are dynamic: another batch size and sequence length.
			r := rand.New(rand.NewPCG(2, 8))
			x2 := gFloats(r, 2*9*xs[2])
			compareWithOrt(t, m, []ortref.Tensor{{Name: "x", Shape: []int64{2, 9, xs64[2]}, Data: x2}}, []*Tensor{NewFloat([]int{2, 9, xs[2]}, x2)}, 1e-5)

			g, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]string{"fc_weight": "fc.weight"}
			for _, nd := range m.Proto.GetGraph().GetNode() {
				if op := nd.GetOpType(); op == "LSTM" || op == "GRU" {
					in := nd.GetInput()
					params["W"], params["R"], params["B"] = in[1], in[2], in[3]
				}
			}
			if len(params) != 4 {
				t.Fatalf("no recurrent node with W, R and B in %s", name)
			}
			var names []string
			for _, p := range params {
				names = append(names, p)
			}
			if err := g.SetTrainable(names...); err != nil {
				t.Fatal(err)
			}
			ctx := &Context{Training: true}
			if _, err := g.Forward(ctx, NewFloat(xs, slices.Clone(x))); err != nil {
				t.Fatal(err)
			}
			if err := g.Backward(ctx, NewFloat(ls, wts)); err != nil {
				t.Fatal(err)
			}
			for key, p := range params {
				var want []float32
				ws, err := npzArray(fix, "grad_"+key, &want)
				if err != nil {
					t.Fatal(err)
				}
				if err := closeTensors(g.Param(p).Grad, NewFloat(ws, want), 1e-4, 1e-4); err != nil {
					t.Errorf("gradient of %s (%s) against PyTorch: %v", key, p, err)
				}
			}
		})
	}
}
