package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"

	"github.com/qtool/qtool/internal/testenv"
)

// bnInputs returns X, scale, B, mean and var (positive) for X of the given shape.
func bnInputs(r *rand.Rand, shape []int) []*Tensor {
	C := []int{shape[1]}
	return []*Tensor{nntRand(r, shape, -2, 3), nntRand(r, C, 0.5, 1.5), nntRand(r, C, -1, 1),
		nntRand(r, C, -0.5, 0.5), nntRand(r, C, 0.5, 2)}
}

// refChannelStats returns the per-channel mean and population variance of x (N, C, ...).
func refChannelStats(x []float64, shape []int) (mean, pvar []float64) {
	N, C, inner := shape[0], shape[1], numel(shape[2:])
	mean, pvar = make([]float64, C), make([]float64, C)
	m := float64(N * inner)
	for c := 0; c < C; c++ {
		for n := 0; n < N; n++ {
			for i := 0; i < inner; i++ {
				mean[c] += x[(n*C+c)*inner+i] / m
			}
		}
		for n := 0; n < N; n++ {
			for i := 0; i < inner; i++ {
				d := x[(n*C+c)*inner+i] - mean[c]
				pvar[c] += d * d / m
			}
		}
	}
	return mean, pvar
}

func refBatchNorm(x []float64, shape []int, scale, b, mean, vr []float64, eps float64) []float64 {
	C, inner := shape[1], numel(shape[2:])
	y := make([]float64, len(x))
	for i, v := range x {
		c := (i / inner) % C
		y[i] = (v-mean[c])/math.Sqrt(vr[c]+eps)*scale[c] + b[c]
	}
	return y
}

func TestBatchNormInference(t *testing.T) {
	for _, opset := range []int64{7, 9, 15} {
		for _, shape := range [][]int{{2, 3, 4, 5}, {5, 4}, {2, 3, 7}} {
			t.Run(fmt.Sprintf("opset%d/%v", opset, shape), func(t *testing.T) {
				r := rand.New(rand.NewPCG(21, 22))
				in := bnInputs(r, shape)
				n := nntNode("BatchNormalization", opset, 5, 1, attrF("epsilon", 1e-2))
				out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), in)
				want := refBatchNorm(to64(in[0].F), shape, to64(in[1].F), to64(in[2].F), to64(in[3].F), to64(in[4].F), float64(float32(1e-2)))
				nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
			})
		}
	}
}

// TestBatchNormTrainingMode checks the opset-15 training_mode outputs against the ONNX
// formulas (population variance for the running-variance output).
func TestBatchNormTrainingMode(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	shape := []int{3, 2, 4, 5}
	in := bnInputs(r, shape)
	const mom = 0.8
	n := nntNode("BatchNormalization", 15, 5, 3, attrI("training_mode", 1), attrF("momentum", mom))
	out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), in)
	x := to64(in[0].F)
	mean, pvar := refChannelStats(x, shape)
	want := refBatchNorm(x, shape, to64(in[1].F), to64(in[2].F), mean, pvar, float64(float32(1e-5)))
	nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
	rm, rv := make([]float64, 2), make([]float64, 2)
	for c := range rm {
		rm[c] = float64(in[3].F[c])*float64(float32(mom)) + mean[c]*(1-float64(float32(mom)))
		rv[c] = float64(in[4].F[c])*float64(float32(mom)) + pvar[c]*(1-float64(float32(mom)))
	}
	nntClose(t, "running_mean", out[1].F, rm, 1e-6, 1e-5)
	nntClose(t, "running_var", out[2].F, rv, 1e-6, 1e-5)
}

// TestBatchNormContextTraining checks the in-place running-statistic update under
// Context.Training: PyTorch's rule, with the unbiased batch variance.
func TestBatchNormContextTraining(t *testing.T) {
	for _, shape := range [][]int{{4, 3, 3, 3}, {6, 5}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			r := rand.New(rand.NewPCG(25, 26))
			in := bnInputs(r, shape)
			rm0, rv0 := to64(in[3].F), to64(in[4].F)
			const mom = 0.9
			n := nntNode("BatchNormalization", 9, 5, 1, attrF("momentum", mom))
			ctx := nntCtx(t, 2)
			ctx.Training = true
			out := nntRun(t, buildKernel(t, n), ctx, in)
			x := to64(in[0].F)
			mean, pvar := refChannelStats(x, shape)
			want := refBatchNorm(x, shape, to64(in[1].F), to64(in[2].F), mean, pvar, float64(float32(1e-5)))
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
			m := float64(numel(shape) / shape[1])
			m32 := float64(float32(mom))
			rm, rv := make([]float64, shape[1]), make([]float64, shape[1])
			for c := range rm {
				rm[c] = rm0[c]*m32 + mean[c]*(1-m32)
				rv[c] = rv0[c]*m32 + pvar[c]*m/(m-1)*(1-m32)
			}
			nntClose(t, "running_mean (in place)", in[3].F, rm, 1e-6, 1e-5)
			nntClose(t, "running_var (in place)", in[4].F, rv, 1e-6, 1e-5)
		})
	}
}

func TestBatchNormGradient(t *testing.T) {
	for _, shape := range [][]int{{2, 3, 4, 5}, {6, 4}, {3, 2, 5}} {
		gen := func(r *rand.Rand) []*Tensor { return bnInputs(r, shape) }
		t.Run(fmt.Sprintf("inference/%v", shape), func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: "bn_inference", op: "BatchNormalization", opset: 15,
				attrs: []*onnxpb.AttributeProto{attrF("epsilon", 1e-2)}, inputs: gen, step: 1e-3})
		})
		t.Run(fmt.Sprintf("context_training/%v", shape), func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: "bn_ctx_training", op: "BatchNormalization", opset: 9,
				inputs: gen, training: true, check: []int{0, 1, 2}, step: 1e-3})
		})
		t.Run(fmt.Sprintf("training_mode/%v", shape), func(t *testing.T) {
			nntGradCheck(t, nntGradCase{name: "bn_training_mode", op: "BatchNormalization", opset: 15, nOut: 3,
				attrs:  []*onnxpb.AttributeProto{attrI("training_mode", 1), attrF("epsilon", 1e-2)},
				inputs: gen, lossOuts: []int{0}, check: []int{0, 1, 2}, step: 1e-3})
		})
	}
}

func TestBatchNormRejects(t *testing.T) {
	for _, n := range []*Node{
		nntNode("BatchNormalization", 7, 5, 1, attrI("spatial", 0)),
		nntNode("BatchNormalization", 15, 5, 3),
		nntNode("BatchNormalization", 9, 5, 5),
	} {
		if _, err := buildBatchNorm(n); err == nil {
			t.Errorf("opset %d %v with %d outputs: no error", n.Opset, n.Proto.Attribute, len(n.Proto.Output))
		}
	}
}

// refLayerNorm normalises rows of length D = prod(shape[axis:]).
func refLayerNorm(x []float64, D int, scale, b []float64, eps float64) (y, mean, inv []float64) {
	rows := len(x) / D
	y, mean, inv = make([]float64, len(x)), make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		row := x[r*D : (r+1)*D]
		for _, v := range row {
			mean[r] += v / float64(D)
		}
		var q float64
		for _, v := range row {
			q += (v - mean[r]) * (v - mean[r]) / float64(D)
		}
		inv[r] = 1 / math.Sqrt(q+eps)
		for i, v := range row {
			y[r*D+i] = (v-mean[r])*inv[r]*scale[i] + b[i]
		}
	}
	return y, mean, inv
}

var layerNormCases = []struct {
	shape []int
	axis  int
}{
	{[]int{3, 4}, 0}, {[]int{3, 4}, 1}, {[]int{3, 4}, -1}, {[]int{3, 4}, -2},
	{[]int{2, 3, 5}, 0}, {[]int{2, 3, 5}, 1}, {[]int{2, 3, 5}, 2}, {[]int{2, 3, 5}, -2},
	{[]int{2, 3, 4, 5}, 1}, {[]int{2, 3, 4, 5}, 2}, {[]int{2, 3, 4, 5}, -1}, {[]int{2, 3, 4, 5}, -4},
}

func lnInputs(r *rand.Rand, shape []int, axis int, bias bool) []*Tensor {
	if axis < 0 {
		axis += len(shape)
	}
	in := []*Tensor{nntRand(r, shape, -2, 2), nntRand(r, shape[axis:], 0.5, 1.5)}
	if bias {
		in = append(in, nntRand(r, shape[axis:], -1, 1))
	}
	return in
}

func TestLayerNormForward(t *testing.T) {
	for _, c := range layerNormCases {
		t.Run(fmt.Sprintf("%v/axis%d", c.shape, c.axis), func(t *testing.T) {
			r := rand.New(rand.NewPCG(31, 32))
			in := lnInputs(r, c.shape, c.axis, true)
			n := nntNode("LayerNormalization", 17, 3, 3, attrI("axis", int64(c.axis)), attrF("epsilon", 0.1))
			out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), in)
			y, mean, inv := refLayerNorm(to64(in[0].F), in[1].Len(), to64(in[1].F), to64(in[2].F), float64(float32(0.1)))
			nntClose(t, "Y", out[0].F, y, 1e-5, 1e-5)
			nntClose(t, "Mean", out[1].F, mean, 1e-6, 1e-5)
			nntClose(t, "InvStdDev", out[2].F, inv, 1e-6, 1e-5)
			axis := c.axis
			if axis < 0 {
				axis += len(c.shape)
			}
			for i, d := range out[1].Shape {
				if (i < axis && d != c.shape[i]) || (i >= axis && d != 1) {
					t.Fatalf("Mean shape %v for X %v axis %d", out[1].Shape, c.shape, c.axis)
				}
			}
		})
	}
}

func TestLayerNormGradient(t *testing.T) {
	for _, c := range layerNormCases {
		for _, nOut := range []int{1, 3} {
			t.Run(fmt.Sprintf("%v/axis%d/outputs%d", c.shape, c.axis, nOut), func(t *testing.T) {
				nntGradCheck(t, nntGradCase{name: "ln", op: "LayerNormalization", opset: 17, nOut: nOut,
					attrs:  []*onnxpb.AttributeProto{attrI("axis", int64(c.axis)), attrF("epsilon", 0.1)},
					inputs: func(r *rand.Rand) []*Tensor { return lnInputs(r, c.shape, c.axis, nOut == 3) }, step: 1e-3})
			})
		}
	}
}

func TestInstanceNorm(t *testing.T) {
	for _, shape := range [][]int{{2, 3, 4, 5}, {1, 2, 1, 3}, {2, 2, 6}} {
		gen := func(r *rand.Rand) []*Tensor {
			C := []int{shape[1]}
			return []*Tensor{nntRand(r, shape, -2, 2), nntRand(r, C, 0.5, 1.5), nntRand(r, C, -1, 1)}
		}
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			r := rand.New(rand.NewPCG(33, 34))
			in := gen(r)
			n := nntNode("InstanceNormalization", 6, 3, 1, attrF("epsilon", 1e-2))
			out := nntRun(t, buildKernel(t, n), nntCtx(t, 2), in)
			// Instance norm is layer norm over each (n, c) plane with per-channel affine.
			inner := numel(shape[2:])
			x := to64(in[0].F)
			want := make([]float64, len(x))
			one := make([]float64, inner)
			zero := make([]float64, inner)
			for i := range one {
				one[i] = 1
			}
			y, _, _ := refLayerNorm(x, inner, one, zero, float64(float32(1e-2)))
			for i := range y {
				c := (i / inner) % shape[1]
				want[i] = y[i]*float64(in[1].F[c]) + float64(in[2].F[c])
			}
			nntClose(t, "Y", out[0].F, want, 1e-5, 1e-5)
			nntGradCheck(t, nntGradCase{name: "in", op: "InstanceNormalization", opset: 6,
				attrs: []*onnxpb.AttributeProto{attrF("epsilon", 1e-2)}, inputs: gen, step: 1e-3})
		})
	}
}

// TestOldOpsetConformanceData runs the conformance tests that the graph runner skips
// because their models declare opsets below 7 (GlobalAveragePool and GlobalMaxPool at
// opset 1, InstanceNormalization at 6; the ops are unchanged since) straight through the
// kernels.
func TestOldOpsetConformanceData(t *testing.T) {
	const dir = "/usr/share/libonnx-testdata/data/node"
	testenv.RequireFile(t, dir, "apt-get install libonnx-testdata")
	for _, name := range []string{"test_globalaveragepool", "test_globalaveragepool_precomputed",
		"test_globalmaxpool", "test_globalmaxpool_precomputed", "test_instancenorm_epsilon", "test_instancenorm_example",
		"test_hardsigmoid", "test_hardsigmoid_default", "test_hardsigmoid_example"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name, "model.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			mp := &onnxpb.ModelProto{}
			if err := proto.Unmarshal(raw, mp); err != nil {
				t.Fatal(err)
			}
			recordPassed(t, opsCovered.conf, mp)
			np := mp.GetGraph().GetNode()[0]
			k := buildKernel(t, &Node{Proto: np, Opset: 7})
			sets, _ := filepath.Glob(filepath.Join(dir, name, "test_data_set_*"))
			if len(sets) == 0 {
				t.Fatal("no data sets")
			}
			for _, set := range sets {
				var in []*Tensor
				for i := range np.GetInput() {
					tt, err := onnxio.ReadTensorFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
					if err != nil {
						t.Fatal(err)
					}
					in = append(in, NewFloat(nntDims(tt.Dims), tt.Float))
				}
				want, err := onnxio.ReadTensorFile(filepath.Join(set, "output_0.pb"))
				if err != nil {
					t.Fatal(err)
				}
				out := nntRun(t, k, nntCtx(t, 2), in)
				if !nnShapeEq(out[0].Shape, nntDims(want.Dims)) {
					t.Fatalf("shape %v, want %v", out[0].Shape, want.Dims)
				}
				nntClose(t, "Y", out[0].F, to64(want.Float), 1e-4, 1e-4)
			}
		})
	}
}

func nntDims(d []int64) []int {
	s := make([]int, len(d))
	for i, v := range d {
		s[i] = int(v)
	}
	return s
}

// TestBatchNormGradientChannelSums checks a property of training-mode BatchNorm that the
// gradient of a bias in front of it depends on: the input gradient sums to zero over each
// channel, since adding a constant to a channel does not change the output. With a mean
// far from zero relative to the spread this is where float32 rounding shows first.
func TestBatchNormGradientChannelSums(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	shape := []int{64, 3, 28, 28}
	in := bnInputs(r, shape)
	for i := range in[0].F {
		in[0].F[i] = 40 + 0.1*in[0].F[i]
	}
	k := buildKernel(t, nntNode("BatchNormalization", 9, 5, 1))
	ctx := nntCtx(t, 2)
	ctx.Training = true
	out := nntRun(t, k, ctx, in)
	gy := nntRand(r, shape, -1, 1)
	gx := NewFloat(shape, make([]float32, in[0].Len()))
	if err := k.(Differentiable).Backward(ctx, in, out, []*Tensor{gy}, []*Tensor{gx, nil, nil, nil, nil}); err != nil {
		t.Fatal(err)
	}
	N, C, inner := shape[0], shape[1], numel(shape[2:])
	for c := 0; c < C; c++ {
		var s, mag float64
		for n := 0; n < N; n++ {
			for _, v := range gx.F[(n*C+c)*inner : (n*C+c+1)*inner] {
				s += float64(v)
				mag += math.Abs(float64(v))
			}
		}
		// Each of the m terms carries a rounding error of about 2⁻²⁴ of its size in
		// either direction, so the sum of those errors stays far below 2⁻²⁴·Σ|gx|; an
		// error common to all terms (a bias from the rounded mean) does not.
		if math.Abs(s) > 1e-7*mag {
			t.Errorf("channel %d: Σgx = %.3g, want 0 within %.3g (Σ|gx| = %.3g)", c, s, 1e-7*mag, mag)
		}
	}
}

// TestBatchNormBackwardStats checks that Backward takes the batch statistics the last
// training Forward computed rather than computing them again: bit for bit the gradients
// of a Backward made to recompute them, after a Forward of other values too; and (the
// control) a Backward given other values than its Forward's uses that Forward's
// statistics, so the comparison above runs the reuse and not a recomputation.
func TestBatchNormBackwardStats(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	shape := []int{8, 5, 7, 7}
	in, other := bnInputs(r, shape), bnInputs(r, shape)
	gy := nntRand(r, shape, -1, 1)
	ctx := nntCtx(t, 2)
	ctx.Training = true
	// grads runs Forward on each of fwd in turn, then Backward on in; recompute drops the
	// statistics the Forward left.
	grads := func(fwd [][]*Tensor, recompute bool) [][]float32 {
		k := buildKernel(t, nntNode("BatchNormalization", 9, 5, 1))
		var out []*Tensor
		for _, f := range fwd {
			cp := make([]*Tensor, len(f))
			for i, v := range f {
				cp[i] = NewFloat(v.Shape, append([]float32(nil), v.F...))
			}
			out = nntRun(t, k, ctx, cp)
		}
		if recompute {
			k.(*batchNormKernel).stats = [3]int{}
		}
		g := []*Tensor{NewFloat(shape, make([]float32, numel(shape))), NewFloat(shape[1:2], make([]float32, shape[1])), NewFloat(shape[1:2], make([]float32, shape[1])), nil, nil}
		if err := k.(Differentiable).Backward(ctx, in, out, []*Tensor{gy}, g); err != nil {
			t.Fatal(err)
		}
		return [][]float32{g[0].F, g[1].F, g[2].F}
	}
	want := grads([][]*Tensor{in}, true)
	same := func(a, b [][]float32) bool {
		for i := range a {
			for j := range a[i] {
				if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
					return false
				}
			}
		}
		return true
	}
	if got := grads([][]*Tensor{in}, false); !same(got, want) {
		t.Error("Backward after Forward differs from Backward recomputing the statistics")
	}
	if got := grads([][]*Tensor{other, in}, false); !same(got, want) {
		t.Error("Backward after two Forwards did not take the last one's statistics")
	}
	if got := grads([][]*Tensor{other}, false); same(got, want) {
		t.Error("control: Backward on other values than its Forward's gave the recomputed gradients; the statistics were not reused")
	}
}

// TestNormSums checks the float64 sums of BatchNormalization (nnSums) against their
// definition nnSumsLanes bit for bit at every length up to 200 (each of the four sets of
// lanes ending a segment, full or part-filled) and a long one, in one
// segment and in three apart (NaN between them, which must not be read), and both,
// with the dispatching nnSum64, nnSumSqDev64 and nnSumGrad64, against float64 sums.
func TestNormSums(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 2))
	x, g := make([]float32, 1000), make([]float32, 1000)
	for i := range x {
		x[i], g[i] = float32(r.NormFloat64()*3+1), float32(r.NormFloat64())
	}
	// Values a few units apart sum exactly in float64 in any order; the same values
	// scaled by 2^−40 … 2^40 do not, so that a wrong order of the lanes shows.
	xw, gw := make([]float32, len(x)), make([]float32, len(g))
	for i := range x {
		xw[i], gw[i] = float32(math.Ldexp(float64(x[i]), r.IntN(81)-40)), float32(math.Ldexp(float64(g[i]), r.IntN(81)-40))
	}
	const mu, inv = float32(0.75), float32(1.25)
	for _, n := range append([]int{1000}, func() []int {
		var s []int
		for n := 0; n <= 200; n++ {
			s = append(s, n)
		}
		return s
	}()...) {
		for mode := range 3 {
			a, b := nnSums(xw[:n], gw[:n], n, 1, 0, mu, inv, mode)
			da, db := nnSumsLanes(xw[:n], gw[:n], n, 1, 0, mu, inv, mode)
			if math.Float64bits(a) != math.Float64bits(da) || math.Float64bits(b) != math.Float64bits(db) {
				t.Fatalf("scaled values, n %d mode %d: nnSums %v %v, nnSumsLanes %v %v", n, mode, a, b, da, db)
			}
			if n >= 8 {
				a, b := nnSums(xw, gw, n/4, 3, n/4+1, mu, inv, mode)
				da, db := nnSumsLanes(xw, gw, n/4, 3, n/4+1, mu, inv, mode)
				if math.Float64bits(a) != math.Float64bits(da) || math.Float64bits(b) != math.Float64bits(db) {
					t.Fatalf("scaled values, 3 segments of %d, mode %d: nnSums %v %v, nnSumsLanes %v %v", n/4, mode, a, b, da, db)
				}
			}
		}
	}
	for _, n := range append([]int{1000}, func() []int {
		var s []int
		for n := 0; n <= 200; n++ {
			s = append(s, n)
		}
		return s
	}()...) {
		xs, gs := x[:n], g[:n]
		var want [3][2]float64
		for i := range xs {
			d := float64(xs[i] - mu)
			want[0][0] += float64(xs[i])
			want[1][0] += d * d
			want[1][1] += d
			want[2][0] += float64(gs[i])
			want[2][1] += float64(gs[i]*(xs[i]-mu)) * float64(inv)
		}
		for mode := range 3 {
			a, b := nnSums(xs, gs, n, 1, 0, mu, inv, mode)
			da, db := nnSumsLanes(xs, gs, n, 1, 0, mu, inv, mode)
			if math.Float64bits(a) != math.Float64bits(da) || math.Float64bits(b) != math.Float64bits(db) {
				t.Fatalf("n %d mode %d: nnSums %v %v, nnSumsLanes %v %v", n, mode, a, b, da, db)
			}
			// The same values as segments: 3 of them (or 1 of an empty length), with
			// gaps between them that must not be read.
			if n >= 3 {
				seg, stride := n/3, n/3+5
				xg, gg := make([]float32, 2*stride+seg), make([]float32, 2*stride+seg)
				for i := range xg {
					xg[i], gg[i] = float32(math.NaN()), float32(math.NaN())
				}
				var flat, flatG []float32
				for sg := range 3 {
					copy(xg[sg*stride:sg*stride+seg], xs[sg*seg:])
					copy(gg[sg*stride:sg*stride+seg], gs[sg*seg:])
					flat, flatG = append(flat, xs[sg*seg:(sg+1)*seg]...), append(flatG, gs[sg*seg:(sg+1)*seg]...)
				}
				a, b := nnSums(xg, gg, seg, 3, stride, mu, inv, mode)
				da, db := nnSumsLanes(xg, gg, seg, 3, stride, mu, inv, mode)
				if math.Float64bits(a) != math.Float64bits(da) || math.Float64bits(b) != math.Float64bits(db) {
					t.Fatalf("3 segments of %d, mode %d: nnSums %v %v, nnSumsLanes %v %v", seg, mode, a, b, da, db)
				}
				// Against one segment per call (a different order: float64 rounding).
				var ra, rb float64
				for sg := range 3 {
					pa, pb := nnSumsLanes(flat[sg*seg:], flatG[sg*seg:], seg, 1, 0, mu, inv, mode)
					ra, rb = ra+pa, rb+pb
				}
				if math.Abs(a-ra) > 1e-9*(1+math.Abs(ra)) || math.Abs(b-rb) > 1e-9*(1+math.Abs(rb)) {
					t.Fatalf("3 segments of %d, mode %d: %v %v, per segment %v %v", seg, mode, a, b, ra, rb)
				}
			}
		}
		got := [3][2]float64{{nnSum64(xs)}}
		got[1][0], got[1][1] = nnSumSqDev64(xs, mu)
		got[2][0], got[2][1] = nnSumGrad64(xs, gs, mu, inv)
		for mode := range got {
			for j := range 2 {
				// float32 rounding of each product g·(x−mu)·inv, then float64 sums.
				if d := math.Abs(got[mode][j] - want[mode][j]); d > 1e-5*(1+float64(n)) {
					t.Fatalf("n %d mode %d sum %d: %v, float64 %v", n, mode, j, got[mode][j], want[mode][j])
				}
			}
		}
	}
}

// TestNormRow checks LayerNormalization's row kernel (AVX-512, AVX2 under
// GODEBUG=cpu.avx512f=off, or Go) bit for bit against normRowGo at every length up to
// 40 and a long one, with and without a bias, over values that include ±0, ±Inf and NaN,
// without writing past y; and normRowGo against float64 arithmetic rounded the same way.
func TestNormRow(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 9))
	const N = 300
	x, s, b := make([]float32, N), make([]float32, N), make([]float32, N)
	for i := range x {
		x[i], s[i], b[i] = float32(r.NormFloat64()*3+1), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	x[3], x[7], x[11], s[5], b[9] = float32(math.Inf(1)), float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN())
	const mu, inv = float32(0.8125), float32(1.375)
	for _, n := range append([]int{N}, func() []int {
		var l []int
		for n := 0; n <= 200; n++ {
			l = append(l, n)
		}
		return l
	}()...) {
		for _, bias := range [][]float32{nil, b[:n]} {
			got, want := make([]float32, n+1), make([]float32, n)
			got[n] = 42
			normRow(x[:n], got[:n], s[:n], bias, mu, inv)
			normRowGo(x[:n], want, s[:n], bias, mu, inv)
			if got[n] != 42 {
				t.Fatalf("n %d: wrote past y", n)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("n %d bias %v: y[%d] = %v, normRowGo %v", n, bias != nil, i, got[i], want[i])
				}
				ref := float32(float64(float32(float64(float32(float64(x[i])-float64(mu)))*float64(inv))) * float64(s[i]))
				if bias != nil {
					ref = float32(float64(ref) + float64(bias[i]))
				}
				if math.Float32bits(ref) != math.Float32bits(want[i]) && !(ref != ref && want[i] != want[i]) {
					t.Fatalf("n %d bias %v: normRowGo y[%d] = %v, float64 rounded per step %v", n, bias != nil, i, want[i], ref)
				}
			}
		}
	}
}

// TestBatchNormStatsShifted checks the one-pass batch statistics against two-pass float64
// ones on channels where a naive Σx² would cancel: a mean 10⁴ times the standard
// deviation, a tiny standard deviation, and a channel whose first value (the shift) is an
// outlier 10³ standard deviations out; and that mean + dev is the exact mean to within
// the rounding of x − K.
func TestBatchNormStatsShifted(t *testing.T) {
	const N, C, inner = 4, 3, 50
	r := rand.New(rand.NewPCG(7, 3))
	x := make([]float32, N*C*inner)
	for n := range N {
		for i := range inner {
			x[(n*C+0)*inner+i] = float32(1e4 + r.NormFloat64())
			x[(n*C+1)*inner+i] = float32(0.5 + 1e-3*r.NormFloat64())
			x[(n*C+2)*inner+i] = float32(-3 + 2*r.NormFloat64())
		}
	}
	x[2*inner] = -3 + 2e3 // channel 2's first value
	k := &batchNormKernel{eps: 1e-5}
	k.scratch(C)
	k.batchStats(&Context{Workers: 2}, x, N, C, inner)
	for c := range C {
		var s, q float64
		for n := range N {
			for _, v := range x[(n*C+c)*inner : (n*C+c+1)*inner] {
				s += float64(v)
			}
		}
		m := float64(N * inner)
		mean := s / m
		for n := range N {
			for _, v := range x[(n*C+c)*inner : (n*C+c+1)*inner] {
				q += (float64(v) - mean) * (float64(v) - mean)
			}
		}
		vr := q / m
		if d := math.Abs(float64(k.mean[c]) - mean); d > 1e-6*math.Abs(mean)+1e-3*math.Sqrt(vr) {
			t.Errorf("channel %d: mean %v, float64 %v", c, k.mean[c], mean)
		}
		// x − K is rounded to float32 before it is summed: the exact mean is known to
		// within half an ulp of the largest |x − K|.
		var span float64
		for n := range N {
			for _, v := range x[(n*C+c)*inner : (n*C+c+1)*inner] {
				span = max(span, math.Abs(float64(v)-float64(x[c*inner])))
			}
		}
		if d := math.Abs(float64(k.mean[c]) + k.dev[c] - mean); d > 0x1p-24*span+1e-12*math.Abs(mean) {
			t.Errorf("channel %d: mean + dev %v, float64 %v", c, float64(k.mean[c])+k.dev[c], mean)
		}
		if d := math.Abs(float64(k.pvar[c]) - vr); d > 1e-4*vr {
			t.Errorf("channel %d: variance %v, float64 %v (%.2g relative)", c, k.pvar[c], vr, d/vr)
		}
	}
}
