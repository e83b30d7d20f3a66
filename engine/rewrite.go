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
	readers, producer := indexNodes(nodes)
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
	return replaceNodes(nodes, drop, swish)
}

// fuseSiLU turns each Sigmoid whose output only a Mul reads, that Mul multiplying it by
// the Sigmoid's own input, into one com.microsoft QuickGelu node of alpha 1 (x·σ(x))
// named and writing as the Mul: PyTorch exports SiLU that way, and EfficientNet has the
// pair after every convolution. One pass then reads x and writes y, where the pair
// wrote σ and read it back with x, and a training plan keeps x alone. The result is the
// pair's to the last bit where the vector sigmoid runs (siluF32 is its σ times x); the
// gradient is the same function's.
func fuseSiLU(nodes []*onnxpb.NodeProto, pinned map[string]bool) []*onnxpb.NodeProto {
	readers, producer := indexNodes(nodes)
	drop := map[*onnxpb.NodeProto]bool{}
	silu := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	for _, mul := range nodes {
		in := mul.GetInput()
		if mul.GetOpType() != "Mul" || mul.GetDomain() != "" || len(in) != 2 || len(mul.GetOutput()) != 1 {
			continue
		}
		for i, h := range in {
			sg := producer[h]
			if sg == nil || drop[sg] || sg.GetOpType() != "Sigmoid" || sg.GetDomain() != "" || len(sg.GetInput()) != 1 ||
				sg.GetInput()[0] != in[1-i] || pinned[h] || len(readers[h]) != 1 {
				continue
			}
			drop[sg] = true
			silu[mul] = &onnxpb.NodeProto{Name: proto.String(mul.GetName()), OpType: proto.String("QuickGelu"), Domain: proto.String(MSDomain),
				Input: []string{in[1-i]}, Output: mul.GetOutput(),
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("alpha"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(1)}},
				DocString: proto.String("qtool: Sigmoid " + sg.GetName() + " × its input")}
			break
		}
	}
	return replaceNodes(nodes, drop, silu)
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

// fuseLayerNorm turns layer normalisation over the last axis as exporters write it below
// opset 17 — m = ReduceMean(x), d = x − m, v = ReduceMean(d^2), d / Sqrt(v + ε), then
// × γ + β — into one LayerNormalization(x, γ, β) named and writing as the final Add.
// The kernel computes the same function in one pass over each row with its own rounding
// (onnxruntime fuses the same pattern), and its backward pass keeps the row statistics
// instead of five intermediate tensors. Every intermediate value must be read only by the
// next node of the pattern (d by the square and the division), none pinned; the exponent
// must be the constant 2 and ε a scalar, both from Constant nodes (an initializer could be
// trained, and the fused node reads neither), γ and β vectors of more than one element (a
// parameter, or an Identity of one). param returns a parameter's values and dims, and
// whether a Constant node holds it.
func fuseLayerNorm(nodes []*onnxpb.NodeProto, pinned map[string]bool, param func(string) (v []float32, dims []int, constant, ok bool)) []*onnxpb.NodeProto {
	readers, producer := indexNodes(nodes)
	// only returns the node of the given op that alone reads v, with v its input i.
	only := func(v, op string, i int) *onnxpb.NodeProto {
		rs := readers[v]
		if pinned[v] || len(rs) != 1 || rs[0].GetOpType() != op || rs[0].GetDomain() != "" || len(rs[0].GetInput()) <= i || rs[0].GetInput()[i] != v || len(rs[0].GetOutput()) != 1 {
			return nil
		}
		return rs[0]
	}
	scalar := func(name string) (float32, bool) {
		if v, _, constant, ok := param(name); ok && constant && len(v) == 1 {
			return v[0], true
		}
		return 0, false
	}
	// vector resolves γ or β through an Identity to a parameter of more than one element.
	vector := func(name string) bool {
		if p := producer[name]; p != nil && p.GetOpType() == "Identity" && len(p.GetInput()) == 1 {
			name = p.GetInput()[0]
		}
		_, dims, _, ok := param(name)
		return ok && len(dims) == 1 && dims[0] > 1
	}
	lastAxisMean := func(n *onnxpb.NodeProto) bool {
		if n == nil || len(n.GetInput()) != 1 {
			return false
		}
		axes, keep := []int64(nil), int64(1)
		for _, a := range n.GetAttribute() {
			switch a.GetName() {
			case "axes":
				axes = a.GetInts()
			case "keepdims":
				keep = a.GetI()
			}
		}
		return keep == 1 && len(axes) == 1 && axes[0] == -1
	}
	drop := map[*onnxpb.NodeProto]bool{}
	ln := map[*onnxpb.NodeProto]*onnxpb.NodeProto{}
	for _, mean := range nodes {
		if mean.GetOpType() != "ReduceMean" || mean.GetDomain() != "" || !lastAxisMean(mean) {
			continue
		}
		x := mean.GetInput()[0]
		sub := only(mean.GetOutput()[0], "Sub", 1)
		if sub == nil || sub.GetInput()[0] != x {
			continue
		}
		d := sub.GetOutput()[0]
		var pow, div *onnxpb.NodeProto
		for _, r := range readers[d] {
			switch {
			case r.GetOpType() == "Pow" && len(r.GetInput()) == 2 && r.GetInput()[0] == d:
				pow = r
			case r.GetOpType() == "Div" && len(r.GetInput()) == 2 && r.GetInput()[0] == d:
				div = r
			}
		}
		if pinned[d] || len(readers[d]) != 2 || pow == nil || div == nil {
			continue
		}
		if e, ok := scalar(pow.GetInput()[1]); !ok || e != 2 {
			continue
		}
		vmean := only(pow.GetOutput()[0], "ReduceMean", 0)
		if !lastAxisMean(vmean) {
			continue
		}
		addEps := only(vmean.GetOutput()[0], "Add", 0)
		if addEps == nil {
			continue
		}
		eps, ok := scalar(addEps.GetInput()[1])
		if !ok {
			continue
		}
		sqrt := only(addEps.GetOutput()[0], "Sqrt", 0)
		if sqrt == nil || only(sqrt.GetOutput()[0], "Div", 1) != div {
			continue
		}
		mul := only(div.GetOutput()[0], "Mul", 0)
		if mul == nil || !vector(mul.GetInput()[1]) {
			continue
		}
		add := only(mul.GetOutput()[0], "Add", 0)
		if add == nil || !vector(add.GetInput()[1]) {
			continue
		}
		for _, n := range []*onnxpb.NodeProto{mean, sub, pow, vmean, addEps, sqrt, div, mul} {
			drop[n] = true
		}
		ln[add] = &onnxpb.NodeProto{Name: proto.String(add.GetName()), OpType: proto.String("LayerNormalization"),
			Input: []string{x, mul.GetInput()[1], add.GetInput()[1]}, Output: add.GetOutput(),
			Attribute: []*onnxpb.AttributeProto{
				{Name: proto.String("axis"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(-1)},
				{Name: proto.String("epsilon"), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(eps)},
			},
			DocString: proto.String("qtool: layer normalisation from " + mean.GetName() + " … " + add.GetName())}
	}
	return replaceNodes(nodes, drop, ln)
}

// indexNodes maps each value name to the nodes that read it and to the node that writes it.
func indexNodes(nodes []*onnxpb.NodeProto) (readers map[string][]*onnxpb.NodeProto, producer map[string]*onnxpb.NodeProto) {
	readers, producer = map[string][]*onnxpb.NodeProto{}, map[string]*onnxpb.NodeProto{}
	for _, n := range nodes {
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	return readers, producer
}

// replaceNodes returns nodes without those in drop and with each node in repl replaced
// where it stands, which keeps a valid order: a replacement reads only values its pattern
// read from outside and writes what the pattern's last node wrote.
func replaceNodes(nodes []*onnxpb.NodeProto, drop map[*onnxpb.NodeProto]bool, repl map[*onnxpb.NodeProto]*onnxpb.NodeProto) []*onnxpb.NodeProto {
	if len(repl) == 0 {
		return nodes
	}
	out := make([]*onnxpb.NodeProto, 0, len(nodes))
	for _, n := range nodes {
		switch {
		case drop[n]:
		case repl[n] != nil:
			out = append(out, repl[n])
		default:
			out = append(out, n)
		}
	}
	return out
}
