package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// TestFuseMatMulBias builds Linear layers as PyTorch exports them on 3-D inputs (MatMul
// with the weight, then Add of the bias, in either operand order, then Relu) and checks
// that inference plans fuse each MatMul with its Add, agreeing with the unfused plan
// within float rounding and with a float64 reference; and that they do not fuse where
// the product has another reader, the addend is computed after the MatMul, or the bias
// does not have the product's last dimension; a bias computed before it (an Identity of
// an initializer, as PyTorch writes equal ones) fuses.
func TestFuseMatMulBias(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const N, T, D, H = 3, 5, 8, 6
	w1, b1, w2, b2, bad := vals(D*H), vals(H), vals(H*H), vals(H), vals(H)
	inits := []*onnxpb.TensorProto{
		onnxio.FloatTensor("w1", []int64{D, H}, w1), onnxio.FloatTensor("b1", []int64{H}, b1),
		onnxio.FloatTensor("w2", []int64{H, H}, w2), onnxio.FloatTensor("b2", []int64{H}, b2),
		onnxio.FloatTensor("bad", []int64{1, H}, bad),
	}
	in := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, -1, T, D)}
	x := NewFloat([]int{N, T, D}, vals(N*T*D))
	for _, c := range []struct {
		name  string
		nodes []*onnxpb.NodeProto
		fused int
	}{
		{"two_linears", []*onnxpb.NodeProto{
			gNode("MatMul", []string{"x", "w1"}, []string{"p1"}), gNode("Add", []string{"p1", "b1"}, []string{"h"}),
			gNode("Relu", []string{"h"}, []string{"a"}),
			gNode("MatMul", []string{"a", "w2"}, []string{"p2"}), gNode("Add", []string{"b2", "p2"}, []string{"y"}),
		}, 2},
		{"product_read_twice", []*onnxpb.NodeProto{
			gNode("MatMul", []string{"x", "w1"}, []string{"p1"}), gNode("Add", []string{"p1", "b1"}, []string{"h"}),
			gNode("Mul", []string{"h", "p1"}, []string{"y"}),
		}, 0},
		{"addend_computed_after", []*onnxpb.NodeProto{
			gNode("MatMul", []string{"x", "w1"}, []string{"p1"}), gNode("Relu", []string{"b1"}, []string{"rb"}),
			gNode("Add", []string{"p1", "rb"}, []string{"y"}),
		}, 0},
		// PyTorch's dedup of equal initializers: the second bias an Identity of the first.
		{"identity_bias", []*onnxpb.NodeProto{
			gNode("Identity", []string{"b2"}, []string{"b2i"}),
			gNode("MatMul", []string{"x", "w1"}, []string{"p1"}), gNode("Add", []string{"p1", "b2i"}, []string{"y"}),
		}, 1},
		{"row_bias", []*onnxpb.NodeProto{
			gNode("MatMul", []string{"x", "w1"}, []string{"p1"}), gNode("Add", []string{"p1", "bad"}, []string{"y"}),
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := gModel(13, c.nodes, in, []string{"y"}, inits...)
			fused, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := Build(m, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			plain.noFuse = true
			got, err := fused.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Forward(nil, x)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, st := range fused.last.steps {
				if _, ok := st.node.k.(*matMulBiasKernel); ok {
					n++
				}
			}
			if n != c.fused {
				t.Fatalf("%d fused MatMul+Add steps, want %d", n, c.fused)
			}
			for i, v := range want[0].F {
				if d := math.Abs(float64(got[0].F[i] - v)); d > 1e-5+1e-5*math.Abs(float64(v)) {
					t.Fatalf("output %d: fused %v, unfused %v", i, got[0].F[i], v)
				}
			}
			if c.name != "two_linears" {
				return
			}
			// The float64 reference of the two layers.
			for row := range N * T {
				h := make([]float64, H)
				for j := range H {
					s := float64(b1[j])
					for k := range D {
						s += float64(x.F[row*D+k]) * float64(w1[k*H+j])
					}
					h[j] = math.Max(s, 0)
				}
				for j := range H {
					s := float64(b2[j])
					for k := range H {
						s += h[k] * float64(w2[k*H+j])
					}
					if d := math.Abs(float64(got[0].F[row*H+j]) - s); d > 1e-5+1e-5*math.Abs(s) {
						t.Fatalf("y[%d,%d] = %v, float64 %v", row, j, got[0].F[row*H+j], s)
					}
				}
			}
		})
	}
}
