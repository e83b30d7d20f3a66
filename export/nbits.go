package export

import (
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// MSDomain is onnxruntime's contrib operator domain, where MatMulNBits lives.
const MSDomain = "com.microsoft"

// DefaultBlockSize is the MatMulNBits block length along K when Options.BlockSize is 0.
// qtool's scales are per output channel, so every block of a row repeats one scale:
// longer blocks only shrink that repetition (4 bytes per block).
const DefaultBlockSize = 128

// DefaultMinBits is the narrowest MatMulNBits width written unless Options.MinBits says
// otherwise: 4, so ±α and ternary weights take 4 bits, not 2. onnxruntime 1.30's x86 CPU
// provider has no 2-bit kernel for float32 activations: it dequantizes the whole weight
// to float32 on every run, which bench/nbits measured 17× slower than the float model at
// batch 1 on the paper's MLP, while 4 bits ran 5× faster with 4.9× less session memory.
const DefaultMinBits = 4

// nbitsWidths are the code widths onnxruntime 1.30's CPU MatMulNBits accepts; its
// constructor refuses the others the contrib spec allows (3, 5, 6, 7).
var nbitsWidths = []int{2, 4, 8}

// nbitsCodes returns the narrowest width that holds the grid's levels as codes
// q = level + zero point, q in [0, 2^bits), and the zero point: the spec's default
// 2^(bits−1) when it fits (then the file needs no zero-point input), else the least one
// that does. ok is false when no width holds the levels.
func nbitsCodes(levels []int, minBits int) (bits, zp int, explicit, ok bool) {
	lo, hi := levels[0], levels[len(levels)-1]
	for _, b := range nbitsWidths {
		if b < minBits {
			continue
		}
		if d := 1 << (b - 1); lo >= -d && hi <= d-1 {
			return b, d, false, true
		}
		if z := max(0, -lo); hi+z < 1<<b {
			return b, z, true, true
		}
	}
	return 0, 0, false, false
}

// nbitsUse is how a weight is consumed when the matmulnbits format can carry it: by one
// MatMul or Gemm as input 1, nothing else reading it.
type nbitsUse struct {
	node *onnxpb.NodeProto
	// kn is true when the weight is laid out [K, N] (MatMul; Gemm without transB).
	kn bool
	// axis is the weight's output-channel axis, along which its scales must run.
	axis int
	// transA, alpha and beta are a Gemm's (false, 1, 1 otherwise), which MatMulNBits
	// (A·Wᵀ + bias) lacks: the export transposes A in front of it, multiplies C by beta
	// in front and the product by alpha after it.
	transA      bool
	alpha, beta float32
}

// consumers maps every value name to the top-level nodes that read it, and marks as
// unusable the names read inside control-flow bodies or listed as graph outputs.
func (e *editor) consumers() (map[string][]*onnxpb.NodeProto, map[string]bool) {
	if e.readers != nil {
		return e.readers, e.pinned
	}
	e.readers, e.pinned = map[string][]*onnxpb.NodeProto{}, map[string]bool{}
	g := e.m.Proto.GetGraph()
	var inner func(gs []*onnxpb.GraphProto)
	inner = func(gs []*onnxpb.GraphProto) {
		for _, sg := range gs {
			for _, n := range sg.GetNode() {
				for _, in := range n.GetInput() {
					e.pinned[in] = true
				}
				inner(bodies(n))
			}
		}
	}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			if in != "" && !slices.Contains(e.readers[in], n) {
				e.readers[in] = append(e.readers[in], n)
			}
		}
		inner(bodies(n))
	}
	for _, o := range g.GetOutput() {
		e.pinned[o.GetName()] = true
	}
	return e.readers, e.pinned
}

// bodies returns the subgraphs a node holds in its attributes.
func bodies(n *onnxpb.NodeProto) []*onnxpb.GraphProto {
	var gs []*onnxpb.GraphProto
	for _, a := range n.GetAttribute() {
		if a.GetG() != nil {
			gs = append(gs, a.GetG())
		}
		gs = append(gs, a.GetGraphs()...)
	}
	return gs
}

// nbitsTarget returns how MatMulNBits can replace the node that reads weight w, ok false
// when it cannot (the weight then stays in the packed format).
func (e *editor) nbitsTarget(w string, dims []int64) (nbitsUse, bool) {
	readers, pinned := e.consumers()
	rs := readers[w]
	if pinned[w] || len(rs) != 1 || len(dims) != 2 {
		return nbitsUse{}, false
	}
	n := rs[0]
	in := n.GetInput()
	if d := n.GetDomain(); d != "" && d != "ai.onnx" || len(in) < 2 || in[1] != w || in[0] == w {
		return nbitsUse{}, false
	}
	switch n.GetOpType() {
	case "MatMul":
		return nbitsUse{node: n, kn: true, axis: 1, alpha: 1, beta: 1}, true
	case "Gemm":
		attr := func(name string, def float32) float32 {
			for _, a := range n.GetAttribute() {
				if a.GetName() == name {
					if a.GetType() == onnxpb.AttributeProto_FLOAT {
						return a.GetF()
					}
					return float32(a.GetI())
				}
			}
			return def
		}
		u := nbitsUse{node: n, kn: true, axis: 1, transA: attr("transA", 0) != 0, alpha: attr("alpha", 1), beta: attr("beta", 1)}
		if attr("transB", 0) != 0 {
			u.kn, u.axis = false, 0
		}
		return u, true
	}
	return nbitsUse{}, false
}

// matmulnbits replaces the node that reads parameter p by com.microsoft MatMulNBits
// reading the codes, or stores p in the packed format when MatMulNBits cannot carry it
// (not the weight of a MatMul or Gemm, read by several nodes, scales not along the
// output channels, levels too far apart for 8-bit codes).
func (e *editor) matmulnbits(p onnxio.Param, g Grid, codes []uint8, dims []int64, block, minBits int) error {
	use, ok := e.nbitsTarget(p.Name, dims)
	bits, zp, explicit, fits := nbitsCodes(g.Levels, minBits)
	if !ok || !fits || g.perChannel() && g.Axis != use.axis {
		return e.packed(p, g, codes, dims)
	}
	k, n := int(dims[1]), int(dims[0])
	if use.kn {
		k, n = n, k
	}
	// code returns the grid code of W's element (row n, column k) of the [N, K] view.
	code := func(row, col int) uint8 {
		if use.kn {
			return codes[col*n+row]
		}
		return codes[row*k+col]
	}
	kb, blob := (k+block-1)/block, block*bits/8
	data := make([]byte, n*kb*blob)
	scales := make([]float32, n*kb)
	for row := range n {
		scale := float32(1)
		switch {
		case g.perChannel():
			scale = g.Scales[row]
		case len(g.Scales) == 1:
			scale = g.Scales[0]
		}
		for b := range kb {
			scales[row*kb+b] = scale
			// The padding of a short last block holds the code of level 0 when there is
			// one; onnxruntime and the spec ignore it either way.
			blk := data[(row*kb+b)*blob : (row*kb+b+1)*blob]
			for j := range block {
				q := zp
				if col := b*block + j; col < k {
					q = g.Levels[code(row, col)] + zp
				}
				bit := j * bits
				blk[bit/8] |= byte(q << (bit % 8))
			}
		}
	}
	w := p.Name
	node := use.node
	a := node.GetInput()[0]
	if use.transA {
		at := e.name(w, "A_transposed")
		e.before[node] = append(e.before[node], &onnxpb.NodeProto{OpType: proto.String("Transpose"), Name: proto.String(e.name(node.GetName(), "Transpose")),
			Input: []string{a}, Output: []string{at}, Attribute: []*onnxpb.AttributeProto{attrInts("perm", 1, 0)}})
		a = at
	}
	inputs := []string{a, e.init(onnxio.BytesTensor(e.name(w, "nbits"), []int64{int64(n), int64(kb), int64(blob)}, data)),
		e.init(onnxio.FloatTensor(e.name(w, "scales"), []int64{int64(n), int64(kb)}, scales)), ""}
	if explicit {
		row := (kb*bits + 7) / 8
		z := make([]byte, n*row)
		for r := range n {
			for b := range kb {
				bit := b * bits
				z[r*row+bit/8] |= byte(zp << (bit % 8))
			}
		}
		inputs[3] = e.init(onnxio.BytesTensor(e.name(w, "zero_points"), []int64{int64(n), int64(row)}, z))
	}
	// Gemm's alpha·(A·W) + beta·C becomes MatMulNBits, then a Mul by alpha, then an Add
	// of C (MatMulNBits' bias input when C is [N] and alpha is 1), built from the output
	// back; the stored codes stay the weight itself.
	out := slices.Clone(node.GetOutput())
	var tail []*onnxpb.NodeProto
	if node.GetOpType() == "Gemm" && len(node.GetInput()) > 2 && node.GetInput()[2] != "" {
		c := node.GetInput()[2]
		cp, isParam := e.m.Param(c)
		if use.beta != 1 {
			// beta·C as Gemm computes it, one float32 product per element.
			cb := e.name(w, "C_beta")
			beta := e.init(onnxio.FloatTensor(e.name(w, "beta"), nil, []float32{use.beta}))
			e.before[node] = append(e.before[node], &onnxpb.NodeProto{OpType: proto.String("Mul"), Name: proto.String(e.name(node.GetName(), "Mul")),
				Input: []string{c, beta}, Output: []string{cb}})
			c = cb
		}
		if use.alpha == 1 && isParam && slices.Equal(cp.Tensor.GetDims(), []int64{int64(n)}) {
			inputs = append(inputs, "", c)
		} else {
			// C of another shape broadcasts as Gemm's C does: an Add after the product.
			prod := e.name(w, "product")
			tail = append(tail, &onnxpb.NodeProto{OpType: proto.String("Add"), Name: proto.String(e.name(node.GetName(), "Add")),
				Input: []string{prod, c}, Output: out})
			out = []string{prod}
		}
	}
	if use.alpha != 1 {
		unscaled := e.name(w, "unscaled")
		alpha := e.init(onnxio.FloatTensor(e.name(w, "alpha"), nil, []float32{use.alpha}))
		tail = append([]*onnxpb.NodeProto{{OpType: proto.String("Mul"), Name: proto.String(e.name(node.GetName(), "alpha")),
			Input: []string{unscaled, alpha}, Output: out}}, tail...)
		out = []string{unscaled}
	}
	e.after[node] = append(e.after[node], tail...)
	for len(inputs) > 3 && inputs[len(inputs)-1] == "" {
		inputs = inputs[:len(inputs)-1]
	}
	node.OpType, node.Domain, node.Input, node.Output = proto.String("MatMulNBits"), proto.String(MSDomain), inputs, out
	// accuracy_level 1: float32 activations, the file's float semantics; onnxruntime's
	// level 4 would quantize the activations to int8 as well.
	node.Attribute = []*onnxpb.AttributeProto{attrInt("K", int64(k)), attrInt("N", int64(n)), attrInt("bits", int64(bits)),
		attrInt("block_size", int64(block)), attrInt("accuracy_level", 1)}
	e.nbits[w] = node.GetName()
	e.replace(p)
	return nil
}

// importMS adds onnxruntime's domain to the model's opset imports if it is missing.
func importMS(m *onnxio.Model) {
	if m.Opset(MSDomain) != 0 {
		return
	}
	m.Proto.OpsetImport = append(m.Proto.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String(MSDomain), Version: proto.Int64(1)})
}

// metaNBits is the metadata key mapping each weight stored in MatMulNBits to the node
// that reads it, as a JSON object: the report finds the stored codes through it.
const metaNBits = "qtool.matmulnbits"

func nbitsMetadata(m *onnxio.Model, nodes map[string]string) {
	if len(nodes) == 0 {
		return
	}
	b, _ := json.Marshal(nodes) // a map[string]string always marshals; keys sorted
	setProp(m, metaNBits, string(b))
}
