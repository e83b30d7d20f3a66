package train

import (
	"math/rand/v2"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
	"google.golang.org/protobuf/proto"
)

// tinyMLP builds x[N,in] → Gemm → BatchNormalization → Relu → Dropout(0.1) → Gemm →
// logits[N,classes] with random weights: the structure of the paper's MLP in small.
// floatVI declares a float tensor; dimensions below 0 are the symbolic batch N.
func floatVI(name string, d ...int64) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for _, x := range d {
		dim := &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: x}}
		if x < 0 {
			dim = &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}}
		}
		sh.Dim = append(sh.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: sh}}}}
}

func tinyMLP(seed uint64, in, hidden, classes int, dropout bool) *onnxio.Model {
	r := rand.New(rand.NewPCG(seed, 1))
	rnd := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	node := func(op string, in, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(op + "_" + out[0]), Input: in, Output: out, Attribute: attrs}
	}
	transB := &onnxpb.AttributeProto{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}
	mom := &onnxpb.AttributeProto{Name: proto.String("momentum"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(0.9)}
	h, c := int64(hidden), int64(classes)
	nodes := []*onnxpb.NodeProto{
		node("Gemm", []string{"x", "w1", "b1"}, []string{"h1"}, transB),
		node("BatchNormalization", []string{"h1", "gamma", "beta", "mean", "var"}, []string{"h2"}, mom),
		node("Relu", []string{"h2"}, []string{"h3"}),
	}
	last := "h3"
	if dropout {
		ratio := onnxio.FloatTensor("ratio", nil, []float32{0.1})
		nodes = append(nodes, &onnxpb.NodeProto{OpType: proto.String("Constant"), Name: proto.String("ratio"), Output: []string{"ratio"},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: ratio}}})
		nodes = append(nodes, node("Dropout", []string{"h3", "ratio"}, []string{"h4"}))
		last = "h4"
	}
	nodes = append(nodes, node("Gemm", []string{last, "w2", "b2"}, []string{"logits"}, transB))
	g := &onnxpb.GraphProto{
		Name:   proto.String("tiny"),
		Node:   nodes,
		Input:  []*onnxpb.ValueInfoProto{floatVI("x", -1, int64(in))},
		Output: []*onnxpb.ValueInfoProto{floatVI("logits", -1, c)},
		Initializer: []*onnxpb.TensorProto{
			onnxio.FloatTensor("w1", []int64{h, int64(in)}, rnd(hidden*in, 0.5)),
			onnxio.FloatTensor("b1", []int64{h}, rnd(hidden, 0.1)),
			onnxio.FloatTensor("gamma", []int64{h}, ones(hidden)),
			onnxio.FloatTensor("beta", []int64{h}, make([]float32, hidden)),
			onnxio.FloatTensor("mean", []int64{h}, make([]float32, hidden)),
			onnxio.FloatTensor("var", []int64{h}, ones(hidden)),
			onnxio.FloatTensor("w2", []int64{c, h}, rnd(classes*hidden, 0.3)),
			onnxio.FloatTensor("b2", []int64{c}, make([]float32, classes)),
		},
	}
	return &onnxio.Model{Name: "tiny.onnx", Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}},
		Graph:       g,
	}}
}

var tinyTrainable = []string{"w1", "b1", "gamma", "beta", "w2", "b2"}

// blobs is a labelled data set of Gaussian clusters, one per class, in memory. The
// cluster centres are fixed; seed draws the samples.
type blobs struct {
	x   []float32
	y   []int64
	dim int
}

func newBlobs(seed uint64, n, dim, classes int) *blobs {
	rc := rand.New(rand.NewPCG(100, 2))
	centres := make([]float64, classes*dim)
	for i := range centres {
		centres[i] = rc.NormFloat64() * 3
	}
	r := rand.New(rand.NewPCG(seed, 3))
	b := &blobs{x: make([]float32, n*dim), y: make([]int64, n), dim: dim}
	for i := range n {
		c := r.IntN(classes)
		b.y[i] = int64(c)
		for j := range dim {
			b.x[i*dim+j] = float32(centres[c*dim+j] + r.NormFloat64())
		}
	}
	return b
}

// sliceBatcher is a Batcher over blobs with seeded per-epoch shuffling, as calib.Batches
// does it for files.
type sliceBatcher struct {
	d       *blobs
	size    int
	seed    uint64
	shuffle bool
	nolabel bool
	epoch   int
	pos     int
	perm    []int
	x       []float32
	y       []int64
	shape   []int64
}

func newSliceBatcher(d *blobs, size int, shuffle bool, seed uint64) *sliceBatcher {
	b := &sliceBatcher{d: d, size: size, seed: seed, shuffle: shuffle}
	b.start()
	return b
}

func (b *sliceBatcher) start() {
	n := len(b.d.y)
	b.perm = b.perm[:0]
	for i := range n {
		b.perm = append(b.perm, i)
	}
	if b.shuffle {
		r := rand.New(rand.NewPCG(b.seed, uint64(b.epoch)))
		r.Shuffle(n, func(i, j int) { b.perm[i], b.perm[j] = b.perm[j], b.perm[i] })
	}
	b.pos = 0
}

func (b *sliceBatcher) Next() bool {
	n := len(b.perm)
	if b.pos >= n {
		return false
	}
	m := min(b.size, n-b.pos)
	b.x, b.y = b.x[:0], b.y[:0]
	for _, i := range b.perm[b.pos : b.pos+m] {
		b.x = append(b.x, b.d.x[i*b.d.dim:(i+1)*b.d.dim]...)
		if b.nolabel {
			b.y = append(b.y, -1)
		} else {
			b.y = append(b.y, b.d.y[i])
		}
	}
	b.shape = append(b.shape[:0], int64(m), int64(b.d.dim))
	b.pos += m
	return true
}

func (b *sliceBatcher) X() []float32   { return b.x }
func (b *sliceBatcher) Y() []int64     { return b.y }
func (b *sliceBatcher) Shape() []int64 { return b.shape }
func (b *sliceBatcher) Err() error     { return nil }
func (b *sliceBatcher) Reset()         { b.epoch++; b.start() }
