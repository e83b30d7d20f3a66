package export

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Format is how quantized weights are stored in the exported file.
type Format string

// The export formats; see the package documentation.
const (
	Packed Format = "packed"
	QDQ    Format = "qdq"
	Float  Format = "float"
	// MatMulNBits stores the weights of MatMul and Gemm nodes as onnxruntime's
	// com.microsoft MatMulNBits, which keeps them at 2, 4 or 8 bits in memory at run
	// time; every other weight is stored as in Packed.
	MatMulNBits Format = "matmulnbits"
)

// ParseFormat returns the Format named s ("packed", "qdq", "float" or "matmulnbits").
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Packed, QDQ, Float, MatMulNBits:
		return f, nil
	}
	return "", fmt.Errorf("export: unknown format %q (want packed, qdq, float or matmulnbits)", s)
}

// MinOpset is the oldest default-domain opset export writes: the packed subgraph's
// operators all exist there, and older opsets are not worth a second code path.
const MinOpset = 9

// Metadata is recorded in the exported model's metadata_props under "qtool.version",
// "qtool.algorithm", "qtool.grid" and "qtool.seed"; "qtool.format" records the format
// and "qtool.tensors" the quantized tensors' names as a JSON array.
// Empty strings are not recorded; an empty Grid is described from the weights' grids.
type Metadata struct {
	Version   string
	Algorithm string
	Grid      string
	Seed      uint64
}

// Options configures Export. The zero value writes the packed format at the model's
// own opset.
type Options struct {
	// Format is Packed when empty.
	Format Format
	// Opset is the default-domain opset to write. Zero keeps the model's; a larger value
	// raises it (never lowers), and is refused when the graph uses an operator whose
	// inputs or meaning changed in between.
	Opset int64
	// Metadata is recorded in metadata_props.
	Metadata Metadata
	// BlockSize is MatMulNBits' block length along K (a power of two, at least 16);
	// 0 means DefaultBlockSize. Other formats ignore it.
	BlockSize int
	// MinBits is the narrowest MatMulNBits code width written (2, 4 or 8); 0 means
	// DefaultMinBits. Other formats ignore it.
	MinBits int
}

// WriteFile exports the weights into a copy of m and saves it atomically to path.
func WriteFile(path string, m *onnxio.Model, weights []Weight, opts Options) error {
	out, err := Export(m, weights, opts)
	if err != nil {
		return err
	}
	if err := out.Save(path); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// Check reports the error Export would return for m and opts whatever the weights: an
// unknown format, or an opset the format or the graph cannot be written at. Callers that
// train before exporting call it first, so that such a model is refused before the run
// rather than after it. It does not change m.
func Check(m *onnxio.Model, opts Options) error {
	_, _, _, err := prepare(m, opts)
	return err
}

// prepare returns the copy of m that Export fills in, the format and the opset it
// writes, after the checks that do not depend on the weights.
func prepare(m *onnxio.Model, opts Options) (*onnxio.Model, Format, int64, error) {
	format := opts.Format
	if format == "" {
		format = Packed
	}
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, "", 0, err
	}
	out := m.Clone()
	opset, err := setOpset(out, opts.Opset)
	if err != nil {
		return nil, "", 0, err
	}
	if format == QDQ && opset < 10 {
		return nil, "", 0, &OpsetError{Model: m.Name, Format: QDQ, Have: opset, Need: 10}
	}
	if b := opts.BlockSize; b != 0 && (b < 16 || b&(b-1) != 0) {
		return nil, "", 0, fmt.Errorf("export: %s: Options.BlockSize %d is not a power of two of at least 16, as MatMulNBits requires", m.Name, b)
	}
	if b := opts.MinBits; b != 0 && !slices.Contains(nbitsWidths, b) {
		return nil, "", 0, fmt.Errorf("export: %s: Options.MinBits %d is not a MatMulNBits width onnxruntime runs (2, 4 or 8)", m.Name, b)
	}
	return out, format, opset, nil
}

// Export returns a copy of m in which each weight is stored in the chosen format; m is
// not changed. Each weight's values are checked against its grid first.
func Export(m *onnxio.Model, weights []Weight, opts Options) (*onnxio.Model, error) {
	out, format, opset, err := prepare(m, opts)
	if err != nil {
		return nil, err
	}
	e := newEditor(out, opset)
	seen := map[string]bool{}
	for _, w := range weights {
		if seen[w.Name] {
			return nil, fmt.Errorf("export: %s: tensor %q is given twice", m.Name, w.Name)
		}
		seen[w.Name] = true
		p, ok := out.Param(w.Name)
		if !ok {
			return nil, fmt.Errorf("export: %s: no parameter named %q (weights must be initializers or Constant-node tensors)", m.Name, w.Name)
		}
		if dt := onnxio.DataType(p.Tensor.GetDataType()); dt != onnxpb.TensorProto_FLOAT {
			return nil, fmt.Errorf("export: %s: tensor %q is %v; only FLOAT weights can be exported", m.Name, w.Name, dt)
		}
		dims := slices.Clone(p.Tensor.GetDims())
		codes, err := w.Grid.Codes(w.Values, dims)
		if err != nil {
			return nil, fmt.Errorf("export: %s: tensor %q: %w", m.Name, w.Name, err)
		}
		switch format {
		case Float:
			// Rebuilt from the codes, which Codes proved equal to the values bit for bit.
			if err := out.SetParam(w.Name, onnxio.FloatTensor(w.Name, dims, w.Grid.Values(codes, dims))); err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
		case Packed:
			if err := e.packed(p, w.Grid, codes, dims); err != nil {
				return nil, fmt.Errorf("export: %s: tensor %q: %w", m.Name, w.Name, err)
			}
		case QDQ:
			if err := e.qdq(p, w.Grid, codes, dims); err != nil {
				return nil, fmt.Errorf("export: %s: tensor %q: %w", m.Name, w.Name, err)
			}
		case MatMulNBits:
			block := cmp.Or(opts.BlockSize, DefaultBlockSize)
			if err := e.matmulnbits(p, w.Grid, codes, dims, block, cmp.Or(opts.MinBits, DefaultMinBits)); err != nil {
				return nil, fmt.Errorf("export: %s: tensor %q: %w", m.Name, w.Name, err)
			}
		}
	}
	e.commit()
	if len(e.nbits) > 0 {
		importMS(out)
		nbitsMetadata(out, e.nbits)
	}
	if err := internalize(out); err != nil {
		return nil, err
	}
	setMetadata(out, opts.Metadata, format, weights)
	return out, nil
}

// changedAt returns the opset versions at which an operator's inputs, attributes or
// results changed incompatibly, so that raising a model's opset across one of them would
// change what the node means or make it invalid.
func changedAt(op string) []int64 {
	switch op {
	case "Slice", "TopK", "Upsample":
		return []int64{10}
	case "Pad", "Clip", "Scatter":
		return []int64{11}
	case "Dropout":
		return []int64{12}
	case "Resize":
		return []int64{11, 13}
	case "Softmax", "LogSoftmax", "Hardmax", "Squeeze", "Unsqueeze", "ReduceSum":
		return []int64{13}
	case "Split":
		return []int64{13, 18}
	case "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
		"ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare":
		return []int64{18}
	case "GroupNormalization":
		return []int64{21}
	}
	return nil
}

// setOpset raises the model's default-domain opset to want (0: keep it) and returns
// the opset the export writes for.
func setOpset(m *onnxio.Model, want int64) (int64, error) {
	cur := m.Opset("")
	if cur == 0 {
		return 0, fmt.Errorf("export: %s: the model imports no default-domain opset", m.Name)
	}
	target := cur
	if want != 0 {
		if want < cur {
			return 0, &OpsetError{Model: m.Name, Have: want, Requested: true, Need: cur}
		}
		if want > onnxio.MaxOpset {
			return 0, &OpsetError{Model: m.Name, Have: want, Requested: true}
		}
		target = want
	}
	if target < MinOpset {
		return 0, &OpsetError{Model: m.Name, Have: cur, Need: MinOpset}
	}
	if target == cur {
		return target, nil
	}
	for _, n := range m.Proto.GetGraph().GetNode() {
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			continue
		}
		for _, v := range changedAt(n.GetOpType()) {
			if cur < v && v <= target {
				return 0, fmt.Errorf("export: %s: cannot raise the opset from %d to %d: node %q (%s) changed at opset %d; convert the model first (onnx.version_converter) or keep its opset", m.Name, cur, target, n.GetName(), n.GetOpType(), v)
			}
		}
	}
	for _, o := range m.Proto.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			o.Version = proto.Int64(target)
		}
	}
	if ir := onnxio.IRVersionOf(target); m.Proto.GetIrVersion() < ir {
		m.Proto.IrVersion = proto.Int64(ir)
	}
	return target, nil
}

// editor collects the nodes and initializers that replace the quantized parameters.
type editor struct {
	m      *onnxio.Model
	opset  int64
	used   map[string]bool
	nodes  []*onnxpb.NodeProto
	inits  []*onnxpb.TensorProto
	drop   map[string]bool   // parameters replaced by a subgraph
	shared map[string]string // key of a shared constant → its name
	// before and after hold nodes to insert right before or after an existing node (a
	// Transpose or a Mul feeding, an Add following, a MatMulNBits that replaced a Gemm).
	before, after map[*onnxpb.NodeProto][]*onnxpb.NodeProto
	// nbits maps each weight stored in MatMulNBits to the node that reads it.
	nbits map[string]string
	// readers and pinned are consumers' result, computed on first use.
	readers map[string][]*onnxpb.NodeProto
	pinned  map[string]bool
}

func newEditor(m *onnxio.Model, opset int64) *editor {
	e := &editor{m: m, opset: opset, used: map[string]bool{}, drop: map[string]bool{}, shared: map[string]string{},
		before: map[*onnxpb.NodeProto][]*onnxpb.NodeProto{}, after: map[*onnxpb.NodeProto][]*onnxpb.NodeProto{}, nbits: map[string]string{}}
	g := m.Proto.GetGraph()
	mark := func(names ...string) {
		for _, s := range names {
			e.used[s] = true
		}
	}
	for _, n := range g.GetNode() {
		mark(n.GetName())
		mark(n.GetInput()...)
		mark(n.GetOutput()...)
	}
	for _, t := range g.GetInitializer() {
		mark(t.GetName())
	}
	for _, vs := range [][]*onnxpb.ValueInfoProto{g.GetInput(), g.GetOutput(), g.GetValueInfo()} {
		for _, v := range vs {
			mark(v.GetName())
		}
	}
	return e
}

// name returns an unused name with qtool's prefix.
func (e *editor) name(parts ...string) string {
	base := "qtool/" + strings.Join(parts, "/")
	n := base
	for i := 2; e.used[n]; i++ {
		n = base + "_" + strconv.Itoa(i)
	}
	e.used[n] = true
	return n
}

func (e *editor) init(t *onnxpb.TensorProto) string {
	e.inits = append(e.inits, t)
	return t.GetName()
}

// constant returns the name of a constant shared by all tensors that need the same
// value, making it on first use.
func (e *editor) constant(key string, make func(name string) *onnxpb.TensorProto, parts ...string) string {
	if n, ok := e.shared[key]; ok {
		return n
	}
	n := e.init(make(e.name(parts...)))
	e.shared[key] = n
	return n
}

func (e *editor) node(op, name string, in, out []string, attrs ...*onnxpb.AttributeProto) {
	e.nodes = append(e.nodes, &onnxpb.NodeProto{OpType: proto.String(op), Name: proto.String(e.name(name, op)), Input: in, Output: out, Attribute: attrs})
}

func attrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func attrInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

// scaleTensor returns the scale initializer shaped to broadcast against dims: a scalar
// for one scale, ones except the channel axis for per-channel scales.
func scaleTensor(name string, g Grid, dims []int64) *onnxpb.TensorProto {
	if !g.perChannel() {
		return onnxio.FloatTensor(name, nil, g.Scales)
	}
	shape := make([]int64, len(dims))
	for i := range shape {
		shape[i] = 1
	}
	shape[g.Axis] = dims[g.Axis]
	return onnxio.FloatTensor(name, shape, g.Scales)
}

func levelsKey(levels []int) string {
	// A run of consecutive levels (the k-bit grids) is written as its ends: int8's 255
	// levels listed one by one made a 1 KB constant name that broke `qtool inspect`.
	if n := len(levels); n > 4 && levels[n-1]-levels[0] == n-1 {
		return fmt.Sprintf("%d..%d", levels[0], levels[n-1])
	}
	s := make([]string, len(levels))
	for i, l := range levels {
		s[i] = strconv.Itoa(l)
	}
	return strings.Join(s, ",")
}

// packed replaces parameter p by its packed codes and the unpacking subgraph.
func (e *editor) packed(p onnxio.Param, g Grid, codes []uint8, dims []int64) error {
	bits := g.Bits()
	data, err := Pack(codes, bits)
	if err != nil {
		return err
	}
	per := int64(8 / bits)
	n := int64(len(codes))
	w := p.Name
	packedName := e.init(onnxio.BytesTensor(e.name(w, "packed"), []int64{int64(len(data))}, data))
	lut := e.constant(fmt.Sprintf("lut/%d/%s", bits, levelsKey(g.Levels)), func(name string) *onnxpb.TensorProto {
		return onnxio.FloatTensor(name, []int64{256, per}, LUT(g.Levels, bits))
	}, "lut", fmt.Sprintf("%dbit", bits), levelsKey(g.Levels))
	codesName := e.name(w, "codes")
	e.node("Cast", w, []string{packedName}, []string{codesName}, attrInt("to", int64(onnxpb.TensorProto_INT32)))
	rows := e.name(w, "rows")
	e.node("Gather", w, []string{lut, codesName}, []string{rows}, attrInt("axis", 0))
	flat := rows
	if int64(len(data))*per != n {
		// The last byte holds padding codes: flatten and cut them off.
		all := e.name(w, "flat")
		minus1 := e.constant("shape/-1", func(name string) *onnxpb.TensorProto {
			return onnxio.Int64Tensor(name, []int64{1}, []int64{-1})
		}, "shape_flat")
		e.node("Reshape", w+"/flat", []string{rows, minus1}, []string{all})
		flat = e.name(w, "trimmed")
		if e.opset < 10 {
			e.node("Slice", w, []string{all}, []string{flat}, attrInts("starts", 0), attrInts("ends", n), attrInts("axes", 0))
		} else {
			zero := e.constant("int64/0", func(name string) *onnxpb.TensorProto {
				return onnxio.Int64Tensor(name, []int64{1}, []int64{0})
			}, "zero")
			end := e.init(onnxio.Int64Tensor(e.name(w, "count"), []int64{1}, []int64{n}))
			e.node("Slice", w, []string{all, zero, end, zero}, []string{flat})
		}
	}
	shape := e.init(onnxio.Int64Tensor(e.name(w, "shape"), []int64{int64(len(dims))}, dims))
	if len(g.Scales) == 0 {
		e.node("Reshape", w, []string{flat, shape}, []string{w})
	} else {
		unscaled := e.name(w, "levels")
		e.node("Reshape", w, []string{flat, shape}, []string{unscaled})
		scale := e.init(scaleTensor(e.name(w, "scale"), g, dims))
		e.node("Mul", w, []string{unscaled, scale}, []string{w})
	}
	e.replace(p)
	return nil
}

// qdq replaces parameter p by integer levels and DequantizeLinear.
func (e *editor) qdq(p onnxio.Param, g Grid, codes []uint8, dims []int64) error {
	lo, hi := g.Levels[0], g.Levels[len(g.Levels)-1]
	w := p.Name
	var data *onnxpb.TensorProto
	switch {
	case e.opset >= 21 && lo >= -8 && hi <= 7:
		raw := make([]byte, (len(codes)+1)/2)
		for i, c := range codes {
			raw[i/2] |= byte(g.Levels[c]&0xf) << (4 * (i % 2))
		}
		data = &onnxpb.TensorProto{Name: proto.String(e.name(w, "int4")), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_INT4)), RawData: raw}
	case lo >= -128 && hi <= 127:
		raw := make([]byte, len(codes))
		for i, c := range codes {
			raw[i] = byte(int8(g.Levels[c]))
		}
		data = &onnxpb.TensorProto{Name: proto.String(e.name(w, "int8")), Dims: dims, DataType: proto.Int32(int32(onnxpb.TensorProto_INT8)), RawData: raw}
	default:
		return fmt.Errorf("levels %d..%d do not fit int8, which the qdq format stores; use the packed or float format", lo, hi)
	}
	q := e.init(data)
	switch {
	case len(g.Scales) == 0:
		one := e.constant("float/1", func(name string) *onnxpb.TensorProto {
			return onnxio.FloatTensor(name, nil, []float32{1})
		}, "one")
		e.node("DequantizeLinear", w, []string{q, one}, []string{w})
	case !g.perChannel():
		scale := e.init(scaleTensor(e.name(w, "scale"), g, dims))
		e.node("DequantizeLinear", w, []string{q, scale}, []string{w})
	case e.opset >= 13:
		scale := e.init(onnxio.FloatTensor(e.name(w, "scale"), []int64{int64(len(g.Scales))}, g.Scales))
		e.node("DequantizeLinear", w, []string{q, scale}, []string{w}, attrInt("axis", int64(g.Axis)))
	default:
		// Per-channel DequantizeLinear arrived at opset 13: dequantize with scale 1 and
		// multiply by the broadcast scale vector instead.
		one := e.constant("float/1", func(name string) *onnxpb.TensorProto {
			return onnxio.FloatTensor(name, nil, []float32{1})
		}, "one")
		levels := e.name(w, "levels")
		e.node("DequantizeLinear", w, []string{q, one}, []string{levels})
		scale := e.init(scaleTensor(e.name(w, "scale"), g, dims))
		e.node("Mul", w, []string{levels, scale}, []string{w})
	}
	e.replace(p)
	return nil
}

// replace marks parameter p for removal; commit drops it.
func (e *editor) replace(p onnxio.Param) { e.drop[p.Name] = true }

// commit puts the collected nodes at the front of the graph (they read only
// initializers), drops the replaced initializers, Constant nodes and graph-input
// entries, and adds the new initializers, listing them as graph inputs too in IR < 4
// models, where every initializer must be one.
func (e *editor) commit() {
	g := e.m.Proto.GetGraph()
	if len(e.drop) == 0 {
		return
	}
	keep := func(name string) bool { return !e.drop[name] }
	g.Initializer = slices.DeleteFunc(g.Initializer, func(t *onnxpb.TensorProto) bool { return !keep(t.GetName()) })
	g.Input = slices.DeleteFunc(g.Input, func(v *onnxpb.ValueInfoProto) bool { return !keep(v.GetName()) })
	nodes := slices.DeleteFunc(g.Node, func(n *onnxpb.NodeProto) bool {
		return n.GetOpType() == "Constant" && len(n.GetOutput()) == 1 && !keep(n.GetOutput()[0])
	})
	var placed []*onnxpb.NodeProto
	for _, n := range nodes {
		placed = append(append(append(placed, e.before[n]...), n), e.after[n]...)
	}
	g.Node = append(e.nodes, placed...)
	g.Initializer = append(g.Initializer, e.inits...)
	if e.m.Proto.GetIrVersion() < 4 {
		for _, t := range e.inits {
			g.Input = append(g.Input, tensorInput(t))
		}
	}
}

// tensorInput declares an initializer as a graph input.
func tensorInput(t *onnxpb.TensorProto) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range t.GetDims() {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(t.GetName()), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(t.GetDataType()), Shape: shape},
	}}}
}

// setMetadata records qtool's facts in metadata_props, replacing earlier qtool entries
// of the same key and keeping every other entry in place.
func setMetadata(m *onnxio.Model, md Metadata, format Format, weights []Weight) {
	grid := md.Grid
	if grid == "" {
		var seen []string
		for _, w := range weights {
			if s := w.Grid.String(); !slices.Contains(seen, s) {
				seen = append(seen, s)
			}
		}
		grid = strings.Join(seen, "; ")
	}
	set := func(k, v string) { setProp(m, k, v) }
	set("qtool.version", md.Version)
	set("qtool.algorithm", md.Algorithm)
	set("qtool.grid", grid)
	set("qtool.seed", strconv.FormatUint(md.Seed, 10))
	set("qtool.format", string(format))
	names := make([]string, len(weights))
	for i, w := range weights {
		names[i] = w.Name
	}
	// Names, as JSON, so that a report can tell float-format weights from kept ones.
	b, _ := json.Marshal(names) // a []string always marshals
	set(metaTensors, string(b))
}

// setProp sets metadata entry k to v, replacing an entry of the same key in place; an
// empty v is not recorded.
func setProp(m *onnxio.Model, k, v string) {
	if v == "" {
		return
	}
	for _, p := range m.Proto.GetMetadataProps() {
		if p.GetKey() == k {
			p.Value = proto.String(v)
			return
		}
	}
	m.Proto.MetadataProps = append(m.Proto.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(v)})
}

// metaTensors is the metadata key listing the quantized tensors' names as a JSON array.
const metaTensors = "qtool.tensors"
