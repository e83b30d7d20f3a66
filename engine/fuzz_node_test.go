package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// fuzzAttrs are the attributes a fuzzed node may carry: the names the registry's
// builders read, each with the kinds a hostile file might give it (the builder must
// refuse a wrong kind, not crash on it).
var fuzzAttrs = []string{
	"axis", "axes", "perm", "kernel_shape", "pads", "strides", "dilations", "group",
	"keepdims", "shape", "to", "mode", "alpha", "beta", "transA", "transB", "epsilon",
	"batch_dims", "auto_pad", "ceil_mode", "count_include_pad", "split", "starts", "ends",
	"num_outputs", "exclusive", "reverse", "select_last_index", "noop_with_empty_axes",
	"blocksize", "output_padding", "output_shape", "value", "min", "max", "lambd", "bias",
	"momentum", "training_mode", "direction", "hidden_size", "layout", "coordinate_transformation_mode",
	"nearest_mode", "cubic_coeff_a", "scales", "sizes", "allowzero", "fmod", "largest", "sorted",
	"equation", "stash_type", "K", "N", "bits", "block_size", "accuracy_level", "seed", "ratio",
	"p", "size", "spatial_scale", "detect_negative", "detect_positive", "upper", "linear_before_reset",
	"clip", "input_forget", "activations", "storage_order", "reduction", "ignore_index",
}

var fuzzStrings = []string{"", "constant", "reflect", "edge", "linear", "nearest", "cubic",
	"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "DCR", "CRD", "forward", "reverse",
	"bidirectional", "half_pixel", "asymmetric", "align_corners", "floor", "ceil",
	"round_prefer_floor", "mean", "sum", "none", "ij,jk->ik", "i,i->", "...ii->...i", "Relu", "Tanh",
	"Sigmoid", "x"}

var fuzzFloats = []float32{0, 1, -1, 0.5, 2, 1e-5, -3, float32(math.NaN()), float32(math.Inf(1)), 1e30}

// fuzzBytes hands out the fuzzer's bytes as small choices, zeros once they run out.
type fuzzBytes struct {
	b []byte
}

func (f *fuzzBytes) next() int {
	if len(f.b) == 0 {
		return 0
	}
	v := int(f.b[0])
	f.b = f.b[1:]
	return v
}

// n returns a choice in [0, k).
func (f *fuzzBytes) n(k int) int { return f.next() % k }

// small returns an int in [−2, 6), mostly what shapes, axes and counts hold.
func (f *fuzzBytes) small() int64 { return int64(f.n(8)) - 2 }

// fuzzNodeModel builds a one-node model from the fuzzer's bytes: an op of the registry,
// its inputs (float graph inputs of random small shapes, or int64 and float initializers)
// and random attributes. It returns the model and the graph inputs' tensors.
func fuzzNodeModel(data []byte, ops []string) (*onnxio.Model, []*Tensor) {
	f := &fuzzBytes{b: data}
	key := ops[f.n(len(ops))]
	domain, op := "", key
	if d, o, ok := strings.Cut(key, MSDomain+"."); ok && d == "" {
		domain, op = MSDomain, o
	}
	opset := []int64{7, 11, 13, 18, 21}[f.n(5)]
	node := &onnxpb.NodeProto{Name: proto.String("fuzzed"), OpType: proto.String(op), Domain: proto.String(domain)}
	var inputs []*onnxpb.ValueInfoProto
	var inits []*onnxpb.TensorProto
	var feeds []*Tensor
	r := rand.New(rand.NewPCG(uint64(len(data)), 7))
	shape := func() []int64 {
		s := make([]int64, f.n(5))
		for i := range s {
			s[i] = int64(f.n(5))
			if s[i] == 0 && f.n(4) != 0 {
				s[i] = 1
			}
		}
		return s
	}
	nin := f.n(5)
	for i := range nin {
		name := "in" + string(rune('a'+i))
		switch f.n(4) {
		case 0: // an empty name: an optional input left out
			name = ""
		case 1: // an int64 initializer: shapes, axes, indices, pads
			n := f.n(5)
			v := make([]int64, n)
			for j := range v {
				v[j] = f.small()
			}
			dims := []int64{int64(n)}
			if n == 1 && f.n(2) == 0 {
				dims = nil
			}
			inits = append(inits, onnxio.Int64Tensor(name, dims, v))
		case 2: // a float initializer, which a training run makes trainable
			dims := shape()
			v := make([]float32, numel(intDims(dims)))
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			inits = append(inits, onnxio.FloatTensor(name, dims, v))
		default: // a float graph input
			dims := shape()
			inputs = append(inputs, gInput(name, onnxpb.TensorProto_FLOAT, dims...))
			v := make([]float32, numel(intDims(dims)))
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			feeds = append(feeds, NewFloat(intDims(dims), v))
		}
		node.Input = append(node.Input, name)
	}
	for range f.n(4) {
		a := &onnxpb.AttributeProto{Name: proto.String(fuzzAttrs[f.n(len(fuzzAttrs))])}
		switch f.n(4) {
		case 0:
			a.Type, a.I = onnxpb.AttributeProto_INT.Enum(), proto.Int64(f.small())
		case 1:
			a.Type = onnxpb.AttributeProto_INTS.Enum()
			for range f.n(7) {
				a.Ints = append(a.Ints, f.small())
			}
		case 2:
			a.Type, a.F = onnxpb.AttributeProto_FLOAT.Enum(), proto.Float32(fuzzFloats[f.n(len(fuzzFloats))])
		default:
			a.Type, a.S = onnxpb.AttributeProto_STRING.Enum(), []byte(fuzzStrings[f.n(len(fuzzStrings))])
		}
		node.Attribute = append(node.Attribute, a)
	}
	outs := []string{"y"}
	if f.n(3) == 0 {
		outs = append(outs, "y2", "y3")[:2+f.n(2)]
	}
	node.Output = outs
	m := gModel(opset, []*onnxpb.NodeProto{node}, inputs, outs, inits...)
	if domain != "" {
		m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(domain), Version: proto.Int64(1)})
	}
	return m, feeds
}

// fuzzCheckErr fails on an error that a user could not act on: one that spans lines,
// or one that says the engine itself broke (a recovered panic) rather than what is
// wrong with the node. The failure shows the model, so that a corpus entry needs no
// decoding.
func fuzzCheckErr(t *testing.T, m *onnxio.Model, stage string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("%s: error spans lines: %q\n%s", stage, msg, fuzzDescribe(m))
	}
	if strings.Contains(msg, "internal error") || strings.Contains(msg, "malformed node") || strings.Contains(msg, "runtime error") {
		t.Fatalf("%s: a recovered panic, not a refusal: %s\n%s", stage, msg, fuzzDescribe(m))
	}
}

// fuzzDescribe prints a fuzzed model: its opset, node, initializers and graph inputs.
func fuzzDescribe(m *onnxio.Model) string {
	var b strings.Builder
	gp := m.Proto.GetGraph()
	fmt.Fprintf(&b, "opset %d: %v\n", m.Proto.GetOpsetImport()[0].GetVersion(), gp.GetNode()[0])
	for _, t := range gp.GetInitializer() {
		fmt.Fprintf(&b, "initializer %s %s %v\n", t.GetName(), onnxpb.TensorProto_DataType(t.GetDataType()), t.GetDims())
	}
	for _, v := range gp.GetInput() {
		fmt.Fprintf(&b, "input %s %v\n", v.GetName(), v.GetType())
	}
	return b.String()
}

// FuzzNode builds and runs one-node graphs of every op the engine registers (but the
// control-flow ops, whose bodies are graphs), with inputs of random small shapes and
// random attributes, forward for inference and in training with a backward pass. No
// input may crash the process or take more than the plans' memory limit, and every
// refusal must be one line that names what is wrong: a panic that the engine recovers
// into an "internal error" fails the test, since the user cannot act on it. The seed
// corpus in testdata/fuzz/FuzzNode holds the inputs that once failed.
//
//	go test ./engine -run '^$' -fuzz FuzzNode -fuzztime 60s
func FuzzNode(f *testing.F) {
	var ops []string
	for k := range registry() {
		switch k {
		case "If", "Loop", "Scan":
			continue
		}
		ops = append(ops, k)
	}
	slices.Sort(ops) // a corpus entry picks the same op in every run
	for i := range 64 {
		f.Add([]byte{byte(i * 5), 3, 3, 2, 3, 1, 2, 3, 3, 2, 2, 1, 1, 4, 4, 0, 1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, feeds := fuzzNodeModel(data, ops)
		g, err := Build(m, Options{MaxBytes: 64 << 20, Workers: 2})
		fuzzCheckErr(t, m, "build", err)
		if err != nil {
			return
		}
		_, err = g.Forward(&Context{Workers: 2}, feeds...)
		fuzzCheckErr(t, m, "forward", err)
		var train []string
		for _, p := range g.Params() {
			if p.Value.DType == Float32 {
				train = append(train, p.Name)
			}
		}
		if len(train) == 0 || g.SetTrainable(train...) != nil {
			return
		}
		outs, err := g.Forward(&Context{Workers: 2, Training: true, Rand: rand.New(rand.NewPCG(1, 1))}, feeds...)
		fuzzCheckErr(t, m, "training forward", err)
		if err != nil {
			return
		}
		grads := make([]*Tensor, len(outs))
		for i, o := range outs {
			if o.DType != Float32 {
				continue
			}
			v := make([]float32, o.Len())
			for j := range v {
				v[j] = 1
			}
			grads[i] = NewFloat(slices.Clone(o.Shape), v)
		}
		fuzzCheckErr(t, m, "backward", g.Backward(&Context{Workers: 2}, grads...))
	})
}
