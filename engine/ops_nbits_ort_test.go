//go:build cgo

package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
)

// TestMatMulNBitsAgainstOnnxruntime runs MatMulNBits at every width onnxruntime's CPU
// kernel takes (2, 4, 8 bits), with and without zero points and bias, with a short last
// block, and on rank-3 A, in the engine and in onnxruntime 1.30 at accuracy level 1
// (float32 activations). They must agree within float32 summation order, normwise: 8-bit
// codes make sums of terms in the hundreds whose rounding is relative to the output's
// largest magnitude, not to a small entry's.
func TestMatMulNBitsAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(16, 1))
	var cases []nbitsCase
	for _, bits := range []int{2, 4, 8} {
		for _, opt := range []struct{ zp, bias bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			cases = append(cases, nbitsCase{bits, 64, 16, opt.zp, opt.bias, []int64{3, 64}, 0},
				nbitsCase{bits, 100, 32, opt.zp, opt.bias, []int64{2, 3, 100}, 0})
		}
		// W larger than one chunk of the run's dequantization (nbitsChunk): 600 × 1000
		// is three chunks, the last short, at batch 1 (one row: sgemv) and 7.
		cases = append(cases, nbitsCase{bits, 1000, 64, true, true, []int64{1, 1000}, 600},
			nbitsCase{bits, 1000, 64, false, false, []int64{7, 1000}, 600})
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			m := c.model(r)
			recordPassed(t, opsCovered.ort, m.Proto)
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			n := 1
			shape := make([]int, len(c.a))
			for i, d := range c.a {
				shape[i] = int(d)
				n *= int(d)
			}
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "a", Shape: c.a, Data: x}})
			if err != nil {
				t.Fatalf("onnxruntime: %v", err)
			}
			got, err := mustBuild(t, m).Forward(nil, NewFloat(shape, x))
			if err != nil {
				t.Fatal(err)
			}
			outShape := append([]int(nil), shape...)
			outShape[len(outShape)-1] = c.cols()
			norm := 1.0
			for _, v := range ref[0].Data {
				norm = max(norm, math.Abs(float64(v)))
			}
			if err := closeTensors(got[0], NewFloat(outShape, ref[0].Data), 1e-5*norm, 0); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMatMulNBitsWidthsOnnxruntimeRefuses: the contrib spec allows 2 to 8 bits, but
// onnxruntime 1.30's CPU kernel takes only 2, 4 and 8; the engine refuses the others
// too, so that qtool never reports the accuracy of a file onnxruntime cannot load.
func TestMatMulNBitsWidthsOnnxruntimeRefuses(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(16, 2))
	for _, bits := range []int{3, 5, 6, 7} {
		m := nbitsCase{bits, 64, 16, false, false, []int64{3, 64}, 0}.model(r)
		b, err := proto.Marshal(m.Proto)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ortref.NewSession(b, ortref.Options{}); err == nil {
			t.Errorf("bits=%d: onnxruntime loads it; the engine's refusal is out of date", bits)
		}
		if _, err := Build(m, Options{}); err == nil || !strings.Contains(err.Error(), "bits") {
			t.Errorf("bits=%d: Build gives %v, want a refusal naming bits", bits, err)
		}
	}
}
