package network

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/qtool/qtool/admmq"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Grid names the set the targeted weights are put on.
type Grid string

// The grids of `qtool binarize --grid`.
const (
	// Binary is exactly {−1,+1} with no scale, the paper's setting: right when a
	// normalisation follows the layer and absorbs the scale.
	Binary Grid = "binary"
	// BinaryChannel is {−α_c,+α_c} with α_c jointly optimal per output channel (mean |z|).
	BinaryChannel Grid = "binary-channel"
	// Ternary is {−α_c,0,+α_c} with the exact joint per-channel scale.
	Ternary Grid = "ternary"
	// Int2, Int4 and Int8 are symmetric k-bit grids α_c·{−m..m}, m = 2^(k−1)−1, with a
	// scale per output channel: for int2 and int4 jointly optimal with the levels (the
	// exact sweep of admmq.ScaleOptimal, re-fitted at every projection), for int8
	// α_c = max|z|/m. Projecting every layer of fmnist-cnn at once on 2 000 validation
	// images, the joint α lowered the accuracy loss from 38.6 to 12.3 pp on int2 and from
	// 1.5 to 0.4 pp on int4; int8's loss was 0.05 pp either way.
	Int2 Grid = "int2"
	Int4 Grid = "int4"
	Int8 Grid = "int8"
	// Auto chooses per weight: Binary where a normalisation follows (it absorbs the
	// scale, and the weight is rescaled to mean |w| = 1 first, see Precondition),
	// BinaryChannel elsewhere (a ±1 weight with nothing after it to restore its scale
	// loses the layer's gain). Target.Grid holds each weight's choice.
	Auto Grid = "auto"
)

// Grids lists every grid, for usage messages.
func Grids() []Grid { return []Grid{Binary, BinaryChannel, Ternary, Int2, Int4, Int8} }

// ParseGrid returns the grid named s: one of Grids, or Auto.
func ParseGrid(s string) (Grid, error) {
	for _, g := range append(Grids(), Auto) {
		if string(g) == strings.ToLower(s) {
			return g, nil
		}
	}
	return "", fmt.Errorf("unknown grid %q: want one of auto, binary, binary-channel, ternary, int2, int4, int8", s)
}

// Spec returns the admmq set of the grid.
func (g Grid) Spec() admmq.Spec {
	switch g {
	case BinaryChannel:
		return admmq.Spec{Kind: admmq.KindScaledBinary, Scale: admmq.ScaleOptimal, PerChannel: true}
	case Ternary:
		return admmq.Spec{Kind: admmq.KindTernary, Scale: admmq.ScaleOptimal, PerChannel: true}
	case Int2:
		return admmq.Spec{Kind: admmq.KindUniform, Bits: 2, Scale: admmq.ScaleOptimal, PerChannel: true}
	case Int4:
		return admmq.Spec{Kind: admmq.KindUniform, Bits: 4, Scale: admmq.ScaleOptimal, PerChannel: true}
	case Int8:
		// The joint α's sweep costs n·m·log m per channel: with m = 127, 12 s for a 2.4 M
		// weight tensor after every PGD or STE step (int4's: 0.5 s), for a loss that
		// max|z|/m already keeps near 0.
		return admmq.Spec{Kind: admmq.KindUniform, Bits: 8, Scale: admmq.ScaleMax, PerChannel: true}
	}
	return admmq.Spec{Kind: admmq.KindBinary}
}

// Levels returns the grid's integer levels in increasing order.
func (g Grid) Levels() []int {
	m := 1
	switch g {
	case Binary, BinaryChannel:
		return []int{-1, 1}
	case Int4:
		m = 7
	case Int8:
		m = 127
	}
	l := make([]int, 0, 2*m+1)
	for i := -m; i <= m; i++ {
		l = append(l, i)
	}
	return l
}

// Scaled reports whether the grid carries a per-channel scale.
func (g Grid) Scaled() bool { return g != Binary }

// resolve is the grid a weight gets under g: g itself, or Auto's choice.
func (g Grid) resolve(normalized bool) Grid {
	if g != Auto {
		return g
	}
	if normalized {
		return Binary
	}
	return BinaryChannel
}

// Target is one parameter the algorithm puts on the grid.
type Target struct {
	Name string
	// Set projects onto the grid; Layout gives the tensor's shape and channel axis.
	Set    *admmq.Set
	Layout admmq.Layout
	// Dims is the tensor's shape as ONNX stores it.
	Dims []int64
	// Node is the operator that reads the weight, Normalized whether a normalisation
	// follows it (so that an unscaled grid loses nothing to the missing scale).
	Node       string
	Normalized bool
	// Grid is the weight's grid: the one Targets was given, or Auto's choice for it.
	Grid Grid

	// norm is the normalisation node that follows, bias the parameter added before it
	// (empty when none): what Precondition rescales along with the weight.
	norm *onnxpb.NodeProto
	bias string
}

// Selection chooses which weights are targeted. Keep and Only hold parameter names;
// Keep may also hold "first" and "last": the weights that some path from a graph input
// meets before any other weight, and those that some path to a graph output meets after
// every other (see ends: several for a network with several inputs or heads, both
// branches of an If), and "depthwise": every depthwise convolution's weight (see
// depthwise). The zero Selection targets every weight.
type Selection struct {
	Keep, Only []string
}

// depthwise reports whether n, reading weight dims, is a depthwise convolution: a Conv
// of more than one group whose every output channel reads one input channel (weight
// [M, 1, k…]). Its ±1 kernel has no sum over input channels to average the signs' error
// (2⁹ patterns per 3×3 channel), and neither PGD nor ADMM-Q at ρ̄ = 1 flips a sign of it
// (issue 15: keeping fmnist-resnet's three depthwise weights, 3.5 % of its binarized
// weights, raised ADMM-Q's validation accuracy from 86.5 to 89.9 %, seed 1).
func depthwise(n *onnxpb.NodeProto, dims []int64) bool {
	if n.GetOpType() != "Conv" || len(dims) < 3 || dims[1] != 1 {
		return false
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() == "group" {
			return a.GetI() > 1
		}
	}
	return false
}

// SelectionError reports a Selection that does not fit the model: a name that is no
// weight of it, or a selection that leaves no weight to binarize.
type SelectionError struct {
	Model string
	// List is "Keep" or "Only", the Selection field that holds Name; both are empty when
	// the selection as a whole leaves nothing to binarize.
	List, Name string
	// Weights lists the model's weights in graph order, the names a Selection may use.
	Weights []string
}

func (e *SelectionError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s: the selection leaves no weight to binarize", e.Model)
	}
	return fmt.Sprintf("%s: %s %s: no weight of that name (weights: %s)", e.Model, strings.ToLower(e.List), e.Name, strings.Join(e.Weights, ", "))
}

// Targets returns the weights of m that binarization targets under sel — by default
// every weight of Conv, ConvTranspose, Gemm and MatMul (onnxio's RoleWeight) — in the
// order the graph reads them, each with its projector for grid g.
func Targets(m *onnxio.Model, g Grid, sel Selection) ([]Target, error) {
	roles := m.ParamRoles()
	var order []string
	seen := map[string]bool{}
	for _, u := range m.ParamReads() {
		in := u.Node.GetInput()[u.Input]
		if c := roles[in]; c.Role == onnxio.RoleWeight && !seen[in] {
			seen[in] = true
			order = append(order, in)
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%s: no Conv, ConvTranspose, Gemm or MatMul weight to binarize", m.Name)
	}
	keep := map[string]bool{}
	var first, last []string
	if slices.Contains(sel.Keep, "first") || slices.Contains(sel.Keep, "last") {
		first, last = ends(m, order)
	}
	for _, k := range sel.Keep {
		switch k {
		case "depthwise":
			for _, w := range order {
				if p, ok := m.Param(w); ok && depthwise(roles[w].Use.Node, p.Tensor.GetDims()) {
					keep[w] = true
				}
			}
		case "first":
			for _, w := range first {
				keep[w] = true
			}
		case "last":
			for _, w := range last {
				keep[w] = true
			}
		default:
			if !seen[k] {
				return nil, &SelectionError{Model: m.Name, List: "Keep", Name: k, Weights: order}
			}
			keep[k] = true
		}
	}
	only := map[string]bool{}
	for _, k := range sel.Only {
		if !seen[k] {
			return nil, &SelectionError{Model: m.Name, List: "Only", Name: k, Weights: order}
		}
		only[k] = true
	}
	var ts []Target
	for _, name := range order {
		if keep[name] || (len(only) > 0 && !only[name]) {
			continue
		}
		p, _ := m.Param(name)
		use := roles[name].Use
		dims := p.Tensor.GetDims()
		norm, bias := normalizedBy(m, use.Node)
		tg := g.resolve(norm != nil)
		tset, err := admmq.NewSet(tg.Spec())
		if err != nil {
			return nil, err
		}
		layout := admmq.Layout{Shape: make([]int, len(dims))}
		for i, d := range dims {
			layout.Shape[i] = int(d)
		}
		if layout.Axis, err = use.ChannelAxis(dims); err != nil {
			// Output channels along no single axis: one scale for the whole tensor. A nil
			// shape makes snap and Precondition see one channel too.
			if tset, err = perTensor(tg); err != nil {
				return nil, err
			}
			layout = admmq.Layout{}
		}
		ts = append(ts, Target{
			Name: name, Set: tset, Layout: layout, Dims: dims, Grid: tg,
			Node: use.Node.GetName(), Normalized: norm != nil, norm: norm, bias: bias,
		})
	}
	if len(ts) == 0 {
		return nil, &SelectionError{Model: m.Name, Weights: order}
	}
	return ts, nil
}

// perTensor returns the set of grid g with one scale for the whole tensor.
func perTensor(g Grid) (*admmq.Set, error) {
	spec := g.Spec()
	spec.PerChannel = false
	return admmq.NewSet(spec)
}

// normalizedBy returns the normalisation that the output of n reaches through nodes that
// keep channels apart (a bias Add, reshapes; activations are not passed: a ReLU before
// the normalisation would make the scale matter), and the bias parameter on the way.
func normalizedBy(m *onnxio.Model, n *onnxpb.NodeProto) (*onnxpb.NodeProto, string) {
	bias := ""
	if l, ok := (onnxio.Use{Node: n}).Layer(); ok {
		for _, i := range l.Inputs(onnxio.RoleBias) {
			if i < len(n.GetInput()) {
				bias = n.GetInput()[i]
			}
		}
	}
	for range 4 {
		outs := n.GetOutput()
		if len(outs) == 0 {
			return nil, ""
		}
		cons := m.Consumers(outs[0])
		if len(cons) != 1 {
			return nil, ""
		}
		next := cons[0].Node
		if l, ok := cons[0].Layer(); ok && l.Normalization() {
			return next, bias
		}
		switch next.GetOpType() {
		case "Add":
			for _, in := range next.GetInput() {
				if _, ok := m.Param(in); ok && bias == "" {
					bias = in
				}
			}
			n = next
		case "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity":
			n = next
		default:
			return nil, ""
		}
	}
	return nil, ""
}

// snap returns the exportable form of y for grid g: values equal to float32(level)·scale
// bit for bit, with the scale per output channel. For the binary grid y is returned as it
// is (it is ±1 already); for scaled grids the scale is recovered from the values, so a
// value moves by at most one float32 rounding of level·α. The joint α of a projection need
// not put any value on the top level m, so the scale is max|y|/L for the largest L ≤ m at
// which every value is a whole multiple. The target's own grid, when set (Auto's
// per-weight choice), overrides g.
func snap(g Grid, y []float32, t Target) Weight {
	if t.Grid != "" {
		g = t.Grid
	}
	levels := g.Levels()
	out := make([]float32, len(y))
	w := Weight{Name: t.Name, Values: out, Levels: levels}
	if !g.Scaled() {
		for i, v := range y {
			if v >= 0 {
				out[i] = 1
			} else {
				out[i] = -1
			}
		}
		return w
	}
	m := float64(levels[len(levels)-1])
	shape := t.Layout.Shape
	axis := t.Layout.Axis
	channels, inner := 1, 1
	if len(shape) > 0 {
		channels = shape[axis]
		for _, d := range shape[axis+1:] {
			inner *= d
		}
	}
	outer := len(y) / (channels * inner)
	scales := make([]float32, channels)
	for c := range channels {
		mx := 0.0
		for o := range outer {
			off := (o*channels + c) * inner
			for _, v := range y[off : off+inner] {
				mx = math.Max(mx, math.Abs(float64(v)))
			}
		}
		a := float32(mx / m)
		for l := m; l >= 1; l-- {
			if onGrid(y, outer, channels, inner, c, float32(mx/l)) {
				a = float32(mx / l)
				break
			}
		}
		scales[c] = a
		for o := range outer {
			off := (o*channels + c) * inner
			for i, v := range y[off : off+inner] {
				lv := 1.0
				if a > 0 {
					lv = math.Min(math.Max(admmq.RoundHalfUp(float64(v)/float64(a)), -m), m)
				}
				if g == BinaryChannel && lv == 0 {
					lv = 1
				}
				out[off+i] = float32(lv) * a
			}
		}
	}
	w.Scales, w.Axis = scales, axis
	return w
}

// onGrid reports whether every value of channel c is within a float32 rounding of a whole
// multiple of a. A wrong scale leaves some value at least 1/m of a step away.
func onGrid(y []float32, outer, channels, inner, c int, a float32) bool {
	if a == 0 {
		return true
	}
	for o := range outer {
		off := (o*channels + c) * inner
		for _, v := range y[off : off+inner] {
			q := float64(v) / float64(a)
			if math.Abs(q-math.Round(q)) > 1e-3 {
				return false
			}
		}
	}
	return true
}
