package engine

import (
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// fuseHardSwish turns each HardSigmoid(alpha = 1/6, beta = 1/2) whose output only a Mul
// reads, that Mul multiplying it by the HardSigmoid's own input, into one HardSwish node
// named and writing as the Mul. PyTorch's exporter writes hardswish that way below opset
// 14, so MobileNetV3-style models have the pair after every other convolution.
//
// The forward pass is bit for bit the pair's: HardSwish computes the same v·clamp(v/6 + 1/2,
// 0, 1) in the same float32 operations (elementwise_unary.go). What changes is that the
// HardSigmoid's output is never stored, so a training plan keeps one activation where it
// kept two (MobileNetV3-small at batch 32 held 28 % more than PyTorch's step), and that
// inference plans fuse the activation into the convolution before it (fuse.go). The
// gradient is HardSwish's, which at exactly ±3 takes PyTorch's hardswish convention
// (x/3 + 1/2 on the closed interval) where the pair's is one-sided: a set of measure zero.
//
// pinned names the values that must stay visible: graph outputs, and anything a
// control-flow body reads. Only the nodes given are rewritten, not bodies.
func fuseHardSwish(nodes []*onnxpb.NodeProto, pinned map[string]bool) []*onnxpb.NodeProto {
	readers := map[string][]*onnxpb.NodeProto{}
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range nodes {
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	drop := map[*onnxpb.NodeProto]bool{}
	swish := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	for _, mul := range nodes {
		in := mul.GetInput()
		if mul.GetOpType() != "Mul" || mul.GetDomain() != "" || len(in) != 2 || len(mul.GetOutput()) != 1 {
			continue
		}
		for i, h := range in {
			hs := producer[h]
			if hs == nil || drop[hs] || !isSwishSigmoid(hs) || hs.GetInput()[0] != in[1-i] || pinned[h] || len(readers[h]) != 1 {
				continue
			}
			drop[hs] = true
			swish[mul] = &onnxpb.NodeProto{Name: proto.String(mul.GetName()), OpType: proto.String("HardSwish"),
				Input: []string{in[1-i]}, Output: mul.GetOutput(), DocString: proto.String("qtool: HardSigmoid " + hs.GetName() + " × its input")}
			break
		}
	}
	if len(swish) == 0 {
		return nodes
	}
	out := make([]*onnxpb.NodeProto, 0, len(nodes)-len(drop))
	for _, n := range nodes {
		switch {
		case drop[n]:
		case swish[n] != nil:
			out = append(out, swish[n])
		default:
			out = append(out, n)
		}
	}
	return out
}

// isSwishSigmoid reports whether n is HardSigmoid with HardSwish's line: alpha the float32
// nearest 1/6 (what PyTorch writes) and beta 1/2.
func isSwishSigmoid(n *onnxpb.NodeProto) bool {
	if n.GetOpType() != "HardSigmoid" || n.GetDomain() != "" || len(n.GetInput()) != 1 || len(n.GetOutput()) != 1 {
		return false
	}
	alpha, beta := float32(0.2), float32(0.5) // the spec's defaults
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "alpha":
			alpha = a.GetF()
		case "beta":
			beta = a.GetF()
		}
	}
	return math.Float32bits(alpha) == math.Float32bits(1.0/6) && beta == 0.5
}

// bodyReads adds to pinned every name a control-flow body among nodes reads, at any depth.
func bodyReads(nodes []*onnxpb.NodeProto, pinned map[string]bool) {
	for _, n := range nodes {
		for _, a := range n.GetAttribute() {
			gs := a.GetGraphs()
			if a.GetG() != nil {
				gs = append(gs, a.GetG())
			}
			for _, g := range gs {
				for _, bn := range g.GetNode() {
					for _, in := range bn.GetInput() {
						pinned[in] = true
					}
				}
				bodyReads(g.GetNode(), pinned)
			}
		}
	}
}
