package engine

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// The engine's one test kit: attributes, kernels built from the registry, and (in
// fdcheck_test.go) the finite-difference check. The element-wise and nn helper files add
// only their own references and input generators.

func attrI(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func attrF(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func attrInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func attrFloats(name string, v ...float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
}

func attrS(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

func attrT(name string, t *onnxpb.TensorProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t}
}

// opBuilder returns op's builder from the registry, or nil when op is not supported.
func opBuilder(op string) Builder { return registry()[op].build }

// builderMap keys the builders of defs by op type.
func builderMap(defs []opDef) map[string]Builder {
	m := map[string]Builder{}
	for _, d := range defs {
		m[d.name] = d.build
	}
	return m
}

// buildKernel builds n's kernel from the registry.
func buildKernel(t testing.TB, n *Node) Kernel {
	t.Helper()
	b := opBuilder(n.Proto.GetOpType())
	if b == nil {
		t.Fatalf("no builder for %s", n.Proto.GetOpType())
	}
	k, err := b(n)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return k
}

// randParam returns a float initializer of the given dims, uniform in (−scale, scale).
func randParam(r *rand.Rand, scale float64, name string, dims ...int64) *onnxpb.TensorProto {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r.Float64()*2 - 1) * scale)
	}
	return onnxio.FloatTensor(name, dims, v)
}

// trainFloats makes every float parameter of g trainable, as a training run does.
func trainFloats(t testing.TB, g *Graph) {
	t.Helper()
	var names []string
	for _, p := range g.Params() {
		if p.Value.DType == Float32 {
			names = append(names, p.Name)
		}
	}
	if err := g.SetTrainable(names...); err != nil {
		t.Fatal(err)
	}
}
