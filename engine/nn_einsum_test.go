package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// einsumCase is one Einsum equation on operands of the given shapes.
type einsumCase struct {
	eq     string
	shapes [][]int64
	noORT  bool // a form onnxruntime refuses; checked against einsumRef only
}

// einsumCases covers the equations exporters emit (batched matmuls of attention,
// "..." broadcasting), transposes, reductions, outer and inner products, diagonals, and
// each packing path: direct and transposed operands, labels summed inside one operand,
// broadcast ellipsis dimensions and outputs in another order.
func einsumCases() []einsumCase {
	s := func(d ...int64) []int64 { return d }
	return []einsumCase{
		{"bij,bjk->bik", [][]int64{s(2, 3, 4), s(2, 4, 5)}, false},
		{"bhid,bhjd->bhij", [][]int64{s(2, 2, 3, 4), s(2, 2, 5, 4)}, false},
		{"bhij,bhjd->bhid", [][]int64{s(2, 2, 3, 5), s(2, 2, 5, 4)}, false},
		{"...ij,...jk->...ik", [][]int64{s(2, 3, 4), s(2, 4, 5)}, false},
		{"...ij,...jk->...ik", [][]int64{s(2, 1, 3, 4), s(1, 2, 4, 5)}, false},
		{"bij, bjk -> bik", [][]int64{s(2, 3, 4), s(2, 4, 5)}, false},
		// onnxruntime refuses ellipses of different ranks; numpy broadcasts them.
		{"...ij,...jk->...ik", [][]int64{s(2, 1, 3, 4), s(3, 4, 5)}, true},
		{"... i j , ... j k -> ... i k", [][]int64{s(3, 4), s(2, 4, 5)}, true},
		{"ij->ji", [][]int64{s(3, 4)}, false},
		{"ij->i", [][]int64{s(3, 4)}, false},
		{"ij", [][]int64{s(3, 4)}, false},
		{"ij,jk", [][]int64{s(3, 4), s(4, 5)}, false},
		{"i,j->ij", [][]int64{s(3), s(4)}, false},
		{"i,i", [][]int64{s(5), s(5)}, false},
		{"...ii->...i", [][]int64{s(2, 3, 3)}, false},
		{"ii", [][]int64{s(4, 4)}, false},
		{"ij,kj->ik", [][]int64{s(3, 4), s(5, 4)}, false},
		{"ji,jk->ik", [][]int64{s(4, 3), s(4, 5)}, false},
		{"ij,jk->ki", [][]int64{s(3, 4), s(4, 5)}, false},
		{"bij,jk->bik", [][]int64{s(2, 3, 4), s(4, 5)}, false},
		{"ij,ij->ij", [][]int64{s(3, 4), s(3, 4)}, false},
		{"ijk,ikl->jl", [][]int64{s(2, 3, 4), s(2, 4, 5)}, false},
		{"ij,ij->", [][]int64{s(3, 4), s(3, 4)}, false},
		{"bij,bkj->bi", [][]int64{s(2, 3, 4), s(2, 5, 4)}, false},
		{"iij,jk->ik", [][]int64{s(3, 3, 4), s(4, 2)}, false},
	}
}

// scalar reports whether the equation's output has rank 0.
func (c einsumCase) scalar() bool {
	eq := strings.ReplaceAll(c.eq, " ", "")
	lhs, rhs, explicit := strings.Cut(eq, "->")
	if explicit {
		return rhs == ""
	}
	for _, ch := range strings.ReplaceAll(lhs, ",", "") {
		if strings.Count(lhs, string(ch)) == 1 {
			return false
		}
	}
	return true
}

func (c einsumCase) model() (*onnxio.Model, []string) {
	var names []string
	var inputs []*onnxpb.ValueInfoProto
	for i, sh := range c.shapes {
		names = append(names, fmt.Sprintf("x%d", i))
		inputs = append(inputs, gInput(names[i], onnxpb.TensorProto_FLOAT, sh...))
	}
	m := gModel(12, []*onnxpb.NodeProto{gNode("Einsum", names, []string{"y"}, attrS("equation", c.eq))}, inputs, []string{"y"})
	m.Proto.Graph.Output[0].Type = gInputAny("y", onnxpb.TensorProto_FLOAT).Type
	return m, names
}

// TestEinsumGradient checks the VJP of every case by finite differences, with respect
// to each operand.
func TestEinsumGradient(t *testing.T) {
	for _, c := range einsumCases() {
		t.Run(c.eq, func(t *testing.T) {
			var params []gradParam
			var names []string
			for i, sh := range c.shapes {
				names = append(names, fmt.Sprintf("x%d", i))
				params = append(params, gradParam{name: names[i], shape: sh})
			}
			checkGraphGrad(t, gradCase{name: c.eq, opset: 12, params: params, out: []string{"y"},
				nodes: []*onnxpb.NodeProto{gNode("Einsum", names, []string{"y"}, attrS("equation", c.eq))}})
		})
	}
}

// TestEinsumRefusals checks that equations qtool does not handle are refused in one
// line naming the node.
func TestEinsumRefusals(t *testing.T) {
	for _, c := range []einsumCase{
		{"bn,anm,bm->ba", [][]int64{{2, 3}, {4, 3, 5}, {2, 5}}, false},
		{"ij,jk->ix", [][]int64{{2, 3}, {3, 4}}, false},
		{"ij->ii", [][]int64{{2, 2}}, false},
		{"i.j", [][]int64{{2, 3}}, false},
	} {
		m, _ := c.model()
		if _, err := Build(m, Options{}); err == nil {
			t.Errorf("%q accepted", c.eq)
		} else {
			t.Log(err)
		}
	}
	// Shapes that contradict the equation are refused when the run is planned.
	m, _ := einsumCase{eq: "ij,jk->ik", shapes: [][]int64{{2, 3}, {4, 4}}}.model()
	_, err := mustBuild(t, m).Forward(nil, NewFloat([]int{2, 3}, make([]float32, 6)), NewFloat([]int{4, 4}, make([]float32, 16)))
	if err == nil {
		t.Error("ij,jk->ik on [2 3]·[4 4] accepted")
	} else {
		t.Log(err)
	}
}
