//go:build cgo

package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/ortref"
)

// TestQuantizeLinearAgainstOnnxruntime runs every qdqCase in the engine and in
// onnxruntime 1.30: per-tensor (opset 10 and later), per-axis with positive, negative and
// default axes, uint8 with zero points, int4/uint4 stored packed (opset 21), output_dtype
// without a zero point, blocked quantization with a short last block, and int16. The
// quantized integers must be equal, and the dequantized floats bit-identical: both
// runtimes compute round-half-even(x / scale) + zp with a float32 division and
// (q − zp) · scale with one float32 rounding.
func TestQuantizeLinearAgainstOnnxruntime(t *testing.T) {
	ortref.Require(t)
	r := rand.New(rand.NewPCG(12, 2))
	for _, c := range qdqCases() {
		t.Run(c.name, func(t *testing.T) {
			x, w := c.inputs(r)
			m := c.model(w)
			b, err := proto.Marshal(m.Proto)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ortref.Run(b, []ortref.Tensor{{Name: "x", Shape: c.shape, Data: x}})
			if err != nil {
				t.Fatalf("%v: onnxruntime: %v", c, err)
			}
			g := mustBuild(t, m)
			shape := make([]int, len(c.shape))
			for i, d := range c.shape {
				shape[i] = int(d)
			}
			got, err := g.Forward(nil, NewFloat(shape, x))
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range ref {
				var want *Tensor
				if o.Int64 != nil {
					want = NewInt(shape, o.Int64)
				} else {
					want = NewFloat(shape, o.Data)
				}
				if err := closeTensors(got[i], want, 0, 0); err != nil {
					t.Errorf("%v: output %s: %v", c, o.Name, err)
				}
			}
			// The stored weight must come back as its levels: onnxruntime read the same
			// bytes, so this checks onnxio's packed 4-bit decoding too.
			lo, hi, _, _ := quantRange(c.qtype)
			if q := got[1].I; slices.Min(q) < int64(lo) || slices.Max(q) > int64(hi) {
				t.Errorf("%v: quantized values %d..%d outside %v..%v", c, slices.Min(q), slices.Max(q), lo, hi)
			}
		})
	}
}
