package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// refPool is max or average pooling in float64 by direct enumeration of every window
// element, with explicit pads. It also returns the flat indices of the maxima in the
// whole tensor (row-major, or column-major over the spatial dimensions).
func refPool(x []float64, xs, kern, strides, dil, pads []int, ceil, isMax, includePad, colMajor bool) ([]float64, []int64, []int) {
	nd := len(xs) - 2
	ys := []int{xs[0], xs[1]}
	for j := 0; j < nd; j++ {
		span := xs[2+j] + pads[j] + pads[nd+j] - (kern[j]-1)*dil[j] - 1
		o := span/strides[j] + 1
		if ceil {
			o = int(math.Ceil(float64(span)/float64(strides[j]))) + 1
			if (o-1)*strides[j] >= xs[2+j]+pads[j] {
				o--
			}
		}
		ys = append(ys, o)
	}
	y := make([]float64, numel(ys))
	arg := make([]int64, len(y))
	yi, ki, xi := make([]int, len(ys)), make([]int, nd), make([]int, len(xs))
	K := numel(kern)
	isz := numel(xs[2:])
	for f := range y {
		nntUnravel(f, ys, yi)
		best, bestAt, sum, count := math.Inf(-1), -1, 0.0, 0
		for kf := 0; kf < K; kf++ {
			nntUnravel(kf, kern, ki)
			xi[0], xi[1] = yi[0], yi[1]
			inside, inPadded := true, true
			for j := 0; j < nd; j++ {
				p := yi[2+j]*strides[j] - pads[j] + ki[j]*dil[j]
				if p < 0 || p >= xs[2+j] {
					inside = false
				}
				if p < -pads[j] || p >= xs[2+j]+pads[nd+j] {
					inPadded = false
				}
				xi[2+j] = p
			}
			if includePad && inPadded {
				count++
			}
			if !inside {
				continue
			}
			if !includePad {
				count++
			}
			v := x[nntRavel(xi, xs)]
			sum += v
			if bestAt < 0 || v > best {
				best, bestAt = v, nntRavel(xi, xs)
			}
		}
		if isMax {
			y[f] = best
			if colMajor {
				sp := xi[2:]
				nntUnravel(bestAt%isz, xs[2:], sp)
				c := 0
				for j := nd - 1; j >= 0; j-- {
					c = c*xs[2+j] + sp[j]
				}
				arg[f] = int64(bestAt/isz*isz + c)
			} else {
				arg[f] = int64(bestAt)
			}
		} else {
			y[f] = sum / float64(count)
		}
	}
	return y, arg, ys
}

type poolCase struct {
	name       string
	x          []int
	kern       []int
	strides    []int
	dil        []int
	pads       []int
	autoPad    string
	refPads    []int
	ceil       bool
	includePad bool
}

// poolCases follow the conformance suite's MaxPool and AveragePool variants, with more
// than one batch item and channel so that plane offsets are exercised.
var poolCases = []poolCase{
	{name: "1d_default", x: []int{2, 3, 12}, kern: []int{2}},
	{name: "2d_ceil", x: []int{2, 2, 4, 4}, kern: []int{3, 3}, strides: []int{2, 2}, ceil: true},
	{name: "2d_ceil_pads_drop", x: []int{1, 2, 5, 5}, kern: []int{2, 2}, strides: []int{2, 2}, pads: []int{1, 1, 1, 1}, ceil: true},
	{name: "2d_default", x: []int{2, 3, 6, 6}, kern: []int{2, 2}},
	{name: "2d_dilations", x: []int{2, 1, 4, 4}, kern: []int{2, 2}, dil: []int{2, 2}},
	{name: "2d_pads", x: []int{1, 3, 7, 7}, kern: []int{3, 3}, pads: []int{2, 2, 2, 2}},
	{name: "2d_pads_asym", x: []int{2, 2, 6, 5}, kern: []int{3, 2}, pads: []int{1, 0, 2, 1}, strides: []int{2, 1}},
	{name: "2d_precomputed_pads", x: []int{1, 1, 5, 5}, kern: []int{5, 5}, pads: []int{2, 2, 2, 2}},
	// SAME_UPPER, kernel 3 stride 2 on 5: out 3, total (3-1)*2+3-5 = 2.
	{name: "2d_same_upper_strided", x: []int{1, 2, 5, 5}, kern: []int{3, 3}, strides: []int{2, 2}, autoPad: "SAME_UPPER", refPads: []int{1, 1, 1, 1}},
	// kernel 2 stride 1 on 6: total 1, SAME_UPPER pads after, SAME_LOWER before.
	{name: "2d_same_upper", x: []int{1, 2, 6, 6}, kern: []int{2, 2}, autoPad: "SAME_UPPER", refPads: []int{0, 0, 1, 1}},
	{name: "2d_same_lower", x: []int{1, 2, 6, 6}, kern: []int{2, 2}, autoPad: "SAME_LOWER", refPads: []int{1, 1, 0, 0}},
	{name: "2d_2x2_stride2", x: []int{2, 3, 6, 7}, kern: []int{2, 2}, strides: []int{2, 2}},
	{name: "2d_2x2_stride2_ceil", x: []int{1, 2, 5, 7}, kern: []int{2, 2}, strides: []int{2, 2}, ceil: true},
	{name: "2d_strides", x: []int{2, 2, 11, 11}, kern: []int{5, 5}, strides: []int{3, 3}},
	{name: "3d_default", x: []int{1, 2, 4, 4, 4}, kern: []int{2, 2, 2}},
	{name: "3d_strided_pads", x: []int{2, 1, 5, 4, 5}, kern: []int{2, 3, 2}, strides: []int{2, 1, 2}, pads: []int{1, 1, 0, 0, 1, 1}},
}

func (c poolCase) node(op string, opset int64, nOut int, includePad, colMajor bool) (*Node, []int, []int, []int) {
	nd := len(c.x) - 2
	attrs := []*onnxpb.AttributeProto{attrInts("kernel_shape", nntI64(c.kern)...)}
	strides, dil, pads := c.strides, c.dil, c.refPads
	if strides != nil {
		attrs = append(attrs, attrInts("strides", nntI64(strides)...))
	} else {
		strides = nntOnes(nd, 1)
	}
	if dil != nil {
		attrs = append(attrs, attrInts("dilations", nntI64(dil)...))
	} else {
		dil = nntOnes(nd, 1)
	}
	if c.pads != nil {
		attrs = append(attrs, attrInts("pads", nntI64(c.pads)...))
		pads = c.pads
	}
	if pads == nil {
		pads = nntOnes(2*nd, 0)
	}
	if c.autoPad != "" {
		attrs = append(attrs, attrS("auto_pad", c.autoPad))
	}
	if c.ceil {
		attrs = append(attrs, attrI("ceil_mode", 1))
	}
	if includePad {
		attrs = append(attrs, attrI("count_include_pad", 1))
	}
	if colMajor {
		attrs = append(attrs, attrI("storage_order", 1))
	}
	return nntNode(op, opset, 1, nOut, attrs...), strides, dil, pads
}

func TestMaxPoolForward(t *testing.T) {
	for _, c := range poolCases {
		for _, colMajor := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/colmajor=%v", c.name, colMajor), func(t *testing.T) {
				r := rand.New(rand.NewPCG(11, 12))
				n, strides, dil, pads := c.node("MaxPool", 12, 2, false, colMajor)
				x := nntRand(r, c.x, -2, 2)
				out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), []*Tensor{x})
				want, arg, ys := refPool(to64(x.F), c.x, c.kern, strides, dil, pads, c.ceil, true, false, colMajor)
				if !nnShapeEq(out[0].Shape, ys) || !nnShapeEq(out[1].Shape, ys) {
					t.Fatalf("shapes %v %v, want %v", out[0].Shape, out[1].Shape, ys)
				}
				nntClose(t, "Y", out[0].F, want, 0, 0)
				for i := range arg {
					if out[1].I[i] != arg[i] {
						t.Fatalf("Indices[%d] = %d, want %d", i, out[1].I[i], arg[i])
					}
				}
			})
		}
	}
}

func TestMaxPoolInt64(t *testing.T) {
	// The conformance suite pools uint8 data, which the engine carries as int64.
	c := poolCases[5]
	n, strides, dil, pads := c.node("MaxPool", 12, 1, false, false)
	x := &Tensor{DType: Int64, Shape: c.x, I: make([]int64, numel(c.x))}
	xf := make([]float64, len(x.I))
	for i := range x.I {
		x.I[i] = int64((i * 37) % 251)
		xf[i] = float64(x.I[i])
	}
	out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), []*Tensor{x})
	want, _, _ := refPool(xf, c.x, c.kern, strides, dil, pads, c.ceil, true, false, false)
	for i, w := range want {
		if float64(out[0].I[i]) != w {
			t.Fatalf("Y[%d] = %d, want %v", i, out[0].I[i], w)
		}
	}
}

func TestAveragePoolForward(t *testing.T) {
	for _, c := range poolCases {
		for _, includePad := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/include_pad=%v", c.name, includePad), func(t *testing.T) {
				r := rand.New(rand.NewPCG(13, 14))
				opset := int64(11)
				if c.dil != nil {
					opset = 19
				}
				n, strides, dil, pads := c.node("AveragePool", opset, 1, includePad, false)
				x := nntRand(r, c.x, -2, 2)
				out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), []*Tensor{x})
				want, _, ys := refPool(to64(x.F), c.x, c.kern, strides, dil, pads, c.ceil, false, includePad, false)
				if !nnShapeEq(out[0].Shape, ys) {
					t.Fatalf("shape %v, want %v", out[0].Shape, ys)
				}
				nntClose(t, "Y", out[0].F, want, 1e-6, 1e-5)
			})
		}
	}
}

func TestPoolGradient(t *testing.T) {
	for _, c := range poolCases {
		t.Run("MaxPool/"+c.name, func(t *testing.T) {
			n, _, _, _ := c.node("MaxPool", 12, 1, false, false)
			nntGradCheck(t, nntGradCase{name: c.name, op: "MaxPool", opset: 12, attrs: n.Proto.Attribute,
				inputs: func(r *rand.Rand) []*Tensor { return []*Tensor{nntDistinct(r, c.x)} }})
		})
		for _, includePad := range []bool{false, true} {
			t.Run(fmt.Sprintf("AveragePool/%s/include_pad=%v", c.name, includePad), func(t *testing.T) {
				n, _, _, _ := c.node("AveragePool", 19, 1, includePad, false)
				nntGradCheck(t, nntGradCase{name: c.name, op: "AveragePool", opset: 19, attrs: n.Proto.Attribute,
					inputs: func(r *rand.Rand) []*Tensor { return []*Tensor{nntRand(r, c.x, -1, 1)} }})
			})
		}
	}
	for _, op := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		for _, shape := range [][]int{{2, 3, 5, 5}, {1, 2, 7}, {2, 1, 2, 3, 3}} {
			t.Run(fmt.Sprintf("%s/%v", op, shape), func(t *testing.T) {
				nntGradCheck(t, nntGradCase{name: op, op: op, opset: 11,
					inputs: func(r *rand.Rand) []*Tensor { return []*Tensor{nntDistinct(r, shape)} }})
			})
		}
	}
}

func TestGlobalPoolForward(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	x := nntRand(r, []int{2, 3, 4, 5}, -1, 1)
	for _, op := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		out := nntRun(t, buildKernel(t, nntNode(op, 11, 1, 1)), nntCtx(t, 2), []*Tensor{x})
		if !nnShapeEq(out[0].Shape, []int{2, 3, 1, 1}) {
			t.Fatalf("%s: shape %v", op, out[0].Shape)
		}
		want := make([]float64, 6)
		for p := range want {
			best, sum := math.Inf(-1), 0.0
			for _, v := range x.F[p*20 : (p+1)*20] {
				best = math.Max(best, float64(v))
				sum += float64(v)
			}
			if op == "GlobalMaxPool" {
				want[p] = best
			} else {
				want[p] = sum / 20
			}
		}
		nntClose(t, op, out[0].F, want, 1e-6, 1e-6)
	}
}

// TestGlobalPoolOneValue: planes of one value (ResNet-18's last stage at 32 px) take a
// path of their own, which must give planeMean's bits (its sum from 0 turns −0 into +0)
// and the max loop's (the value itself), NaN, ±0, ±Inf and subnormals included.
func TestGlobalPoolOneValue(t *testing.T) {
	negz := float32(math.Copysign(0, -1))
	vals := []float32{float32(math.NaN()), negz, 0, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40, 3.5, -2.25e7}
	r := rand.New(rand.NewPCG(17, 18))
	for range 41 {
		vals = append(vals, float32(r.NormFloat64()))
	}
	x := &Tensor{DType: Float32, Shape: []int{2, len(vals) / 2, 1, 1}, F: vals}
	for _, op := range []string{"GlobalAveragePool", "GlobalMaxPool"} {
		out := nntRun(t, buildKernel(t, nntNode(op, 11, 1, 1)), nntCtx(t, 2), []*Tensor{x})
		for i, v := range vals {
			want := v
			if op == "GlobalAveragePool" {
				want = planeMean(vals[i : i+1])
			}
			if math.Float32bits(out[0].F[i]) != math.Float32bits(want) {
				t.Errorf("%s of %v: %v (bits %#x), want %v (bits %#x)", op, v, out[0].F[i], math.Float32bits(out[0].F[i]), want, math.Float32bits(want))
			}
		}
	}
	if math.Float32bits(planeMean([]float32{negz})) != 0 {
		t.Errorf("planeMean(−0) is no longer +0: the one-value path's + 0 must follow it")
	}
}

func TestPoolRejectsBadAttributes(t *testing.T) {
	for _, n := range []*Node{
		nntNode("MaxPool", 12, 1, 1),
		nntNode("MaxPool", 12, 1, 1, attrInts("kernel_shape", 2, 2), attrI("storage_order", 2)),
		nntNode("AveragePool", 11, 1, 1, attrInts("kernel_shape", 2, 2), attrS("auto_pad", "FOO")),
		nntNode("AveragePool", 11, 1, 1, attrInts("kernel_shape", 2, 0)),
	} {
		if _, err := opBuilder(n.Proto.GetOpType())(n); err == nil {
			t.Errorf("%v: no error", n.Proto.GetAttribute())
		}
	}
}

// TestMaxPoolRows checks maxPoolRows bit for bit against poolMaxValues, its portable
// definition, over 2-D windows of 1 to 5 taps, strides 1 to 3, padding 0 to 2 and odd
// and even planes, with NaN, ±0 and ±Inf among the values; and the kernel on the float
// cases of poolCases (without indices, so that it takes maxPoolRows) against refPool.
func TestMaxPoolRows(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	negz := float32(math.Copysign(0, -1))
	edges := []float32{float32(math.NaN()), negz, 0, float32(math.Inf(1)), float32(math.Inf(-1))}
	var tab poolTables
	for k := 1; k <= 5; k++ {
		for s := 1; s <= 3; s++ {
			for p := 0; p <= min(2, k-1); p++ {
				// The wider planes give the AVX-512 column pass of 3-wide stride-2
				// windows (maxPoolRowsFast) whole blocks of 16 outputs and tails.
				for _, hw := range [][2]int{{k, k}, {7, 9}, {12, 11}, {1, 13}, {5, 57}, {4, 66}, {3, 111}} {
					H, W := max(hw[0], k-2*p), max(hw[1], k-2*p)
					oh, ow := (H+2*p-k)/s+1, (W+2*p-k)/s+1
					g := nnGeom{nd: 2, in: [nnMaxSpatial]int{1, H, W}, out: [nnMaxSpatial]int{1, oh, ow}, k: [nnMaxSpatial]int{1, k, k},
						s: [nnMaxSpatial]int{1, s, s}, d: [nnMaxSpatial]int{1, 1, 1}, pb: [nnMaxSpatial]int{0, p, p}, pe: [nnMaxSpatial]int{0, p, p}}
					if !g.rowsFirst() {
						t.Fatalf("k %d s %d p %d: not a rowsFirst geometry", k, s, p)
					}
					tab.fill(&g)
					x := make([]float32, H*W)
					for i := range x {
						if r.IntN(5) == 0 {
							x[i] = edges[r.IntN(len(edges))]
						} else {
							x[i] = r.Float32()*2 - 1
						}
					}
					want, got := make([]float32, oh*ow+1), make([]float32, oh*ow+1)
					want[oh*ow], got[oh*ow] = 42, 42 // past the plane: must stay
					poolMaxValues(&g, &tab, x, want, float32(math.Inf(-1)))
					maxPoolRows(&g, &tab, x, got)
					for i := range got {
						a, b := got[i], want[i]
						if (a != a) != (b != b) || (a == a && math.Float32bits(a) != math.Float32bits(b)) {
							t.Fatalf("k %d s %d p %d, %d×%d: y[%d] = %v, want %v", k, s, p, H, W, i, a, b)
						}
					}
				}
			}
		}
	}
	// Windows of 1, 2, 4 and 5 rows over 3 columns at column stride 2: the AVX-512
	// pass of whole runs of unclipped windows (maxPoolRowsAVX512) with other heights.
	for _, kh := range []int{1, 2, 4, 5} {
		for s1 := 1; s1 <= 2; s1++ {
			for _, hw := range [][2]int{{9, 40}, {6, 13}} {
				H, W := hw[0], hw[1]
				oh, ow := (H+2-kh)/s1+1, (W+2-3)/2+1
				g := nnGeom{nd: 2, in: [nnMaxSpatial]int{1, H, W}, out: [nnMaxSpatial]int{1, oh, ow}, k: [nnMaxSpatial]int{1, kh, 3},
					s: [nnMaxSpatial]int{1, s1, 2}, d: [nnMaxSpatial]int{1, 1, 1}, pb: [nnMaxSpatial]int{0, 1, 1}, pe: [nnMaxSpatial]int{0, 1, 1}}
				tab.fill(&g)
				x := make([]float32, H*W)
				for i := range x {
					x[i] = r.Float32()*2 - 1
					if r.IntN(5) == 0 {
						x[i] = edges[r.IntN(len(edges))]
					}
				}
				want, got := make([]float32, oh*ow+1), make([]float32, oh*ow+1)
				want[oh*ow], got[oh*ow] = 42, 42
				poolMaxValues(&g, &tab, x, want, float32(math.Inf(-1)))
				maxPoolRows(&g, &tab, x, got)
				for i := range got {
					a, b := got[i], want[i]
					if (a != a) != (b != b) || (a == a && math.Float32bits(a) != math.Float32bits(b)) {
						t.Fatalf("%d×3 window, row stride %d, %d×%d: y[%d] = %v, want %v", kh, s1, H, W, i, a, b)
					}
				}
			}
		}
	}
	for _, c := range poolCases {
		n, strides, dil, pads := c.node("MaxPool", 12, 1, false, false)
		x := nntRand(r, c.x, -2, 2)
		out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), []*Tensor{x})
		want, _, _ := refPool(to64(x.F), c.x, c.kern, strides, dil, pads, c.ceil, true, false, false)
		nntClose(t, c.name, out[0].F, want, 0, 0)
	}
}
