package onnxio

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// benchModel is the paper's MNIST MLP at width 4096 (784-4096×3-10, about 30 M weights,
// 120 MB), the size where load and save time starts to matter.
func benchModel(b *testing.B) *Model {
	rng := rand.New(rand.NewPCG(7, 1))
	widths := []int{784, 4096, 4096, 4096, 10}
	g := &onnxpb.GraphProto{Name: proto.String("mlp"), Input: []*onnxpb.ValueInfoProto{valueInfo("x", "batch", 784)}}
	in := "x"
	for i := 0; i+1 < len(widths); i++ {
		w := make([]float32, widths[i]*widths[i+1])
		for j := range w {
			w[j] = float32(rng.NormFloat64())
		}
		name := "fc" + string(rune('0'+i))
		g.Initializer = append(g.Initializer, FloatTensor(name+".w", []int64{int64(widths[i+1]), int64(widths[i])}, w))
		g.Node = append(g.Node, node("Gemm", name, []string{in, name + ".w"}, []string{name + ".y"}))
		in = name + ".y"
	}
	g.Output = []*onnxpb.ValueInfoProto{valueInfo(in, "batch", 10)}
	return newModel(g)
}

func BenchmarkSave(b *testing.B) {
	m := benchModel(b)
	out := filepath.Join(b.TempDir(), "m.onnx")
	b.SetBytes(int64(proto.Size(m.Proto)))
	for b.Loop() {
		if err := m.Save(out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadDecode(b *testing.B) {
	m := benchModel(b)
	out := filepath.Join(b.TempDir(), "m.onnx")
	if err := m.Save(out); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(proto.Size(m.Proto)))
	for b.Loop() {
		back, err := Load(out)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range back.Params() {
			if _, err := back.Tensor(p.Tensor); err != nil {
				b.Fatal(err)
			}
		}
	}
}
