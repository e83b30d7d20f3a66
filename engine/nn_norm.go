package engine

import "math"

// nnMeanInvStd returns the mean and 1/sqrt(population variance + eps) of x: the sums in
// float64 as BatchNormalization's statistics take them (nnSum64, then nnSumSqDev64
// around the mean rounded to float32), 64 lanes at a time where the CPU allows; one
// sum after another, in float64, held a small transformer's LayerNormalization at a
// sixth of its time.
func nnMeanInvStd(x []float32, eps float32) (mean, inv float32) {
	if len(x) == 0 {
		return 0, 0
	}
	n := float64(len(x))
	mu := float32(nnSum64(x) / n)
	sq, _ := nnSumSqDev64(x, mu)
	return mu, float32(1 / math.Sqrt(sq/n+float64(eps)))
}

// batchNormKernel is BatchNormalization. In inference it applies the running
// statistics; with Context.Training, or the opset-14+ training_mode attribute, it uses
// the batch statistics.
//
// Running statistics: under Context.Training the kernel updates inputs 3 and 4 (the
// graph's running mean and variance) in place as PyTorch does, running = running·momentum
// + batch·(1−momentum), with the unbiased (m/(m−1)) batch variance for running_var. The
// optional outputs of training_mode=1 follow the ONNX spec instead and use the population
// variance. Gradients do not flow through the running statistics, as in PyTorch where
// they are buffers.
type batchNormKernel struct {
	n            *Node
	eps          float32
	momentum     float32
	trainingMode bool
	outputs      int // 1, or 3 with training_mode=1

	// Per-channel scratch: scale and shift of the affine form, batch mean, population
	// variance and inverse standard deviation, and float64 sums.
	a, b, mean, pvar, inv []float32
	s1, s2                []float64
	// dev is the mean of x − mean per channel: not zero, because mean is rounded to
	// float32; the input gradient corrects for it.
	dev []float64
	// stats holds the shape (N, C, inner) whose batch statistics the last training-mode
	// Forward left in mean, inv and dev, for the Backward that follows it (a graph runs
	// one Backward per Forward; a Loop's Backward recomputes each iteration's body first):
	// computing them again read every normalised activation once more, cold by then,
	// about 5 % of a training step of fmnist-resnet. Zero when there are none.
	stats [3]int
}

func buildBatchNorm(n *Node) (Kernel, error) {
	k := &batchNormKernel{n: n, eps: n.Float("epsilon", 1e-5), momentum: n.Float("momentum", 0.9), outputs: 1}
	if n.Opset < 9 {
		if s := n.Int("spatial", 1); s != 1 {
			return nil, n.Errorf("unsupported spatial=%d (only spatial=1)", s)
		}
	}
	if n.Has("consumed_inputs") || n.Has("is_test") {
		return nil, n.Errorf("opset-1/6 attributes consumed_inputs and is_test are not supported; use opset 7 or later")
	}
	outs := n.Proto.GetOutput()
	extra := 0
	for _, o := range outs[1:] {
		if o != "" {
			extra++
		}
	}
	if n.Opset >= 14 {
		k.trainingMode = n.Int("training_mode", 0) != 0
		if extra > 0 && !k.trainingMode {
			return nil, n.Errorf("outputs running_mean and running_var are only valid with training_mode=1")
		}
		if len(outs) > 3 {
			return nil, n.Errorf("has %d outputs, want at most 3", len(outs))
		}
		if k.trainingMode {
			k.outputs = len(outs)
		}
	} else if extra > 0 {
		return nil, n.Errorf("the training outputs (mean, var, saved_mean, saved_var) of opset-%d BatchNormalization are not supported; export with opset 14 or later", n.Opset)
	}
	if n.NumInputs() != 5 {
		return nil, n.Errorf("want 5 inputs (X, scale, B, mean, var), have %d", n.NumInputs())
	}
	return k, nil
}

// shape returns N, C and the number of elements per (n, c) plane.
func (k *batchNormKernel) shape(in []*Tensor) (N, C, inner int, err error) {
	x := in[0].Shape
	if len(x) < 2 {
		return 0, 0, 0, k.n.Errorf("input X has rank %d, want at least 2 (N, C, ...)", len(x))
	}
	N, C = x[0], x[1]
	inner = numel(x[2:])
	for i := 1; i < 5; i++ {
		if !nnShapeEq(in[i].Shape, []int{C}) {
			return 0, 0, 0, k.n.Errorf("input %d has shape %v, want [%d] for X %v", i, in[i].Shape, C, x)
		}
	}
	return N, C, inner, nil
}

func (k *batchNormKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	_, C, _, err := k.shape(in)
	if err != nil {
		return nil, err
	}
	outs := []*Tensor{{DType: Float32, Shape: append([]int(nil), in[0].Shape...)}}
	for i := 1; i < k.outputs; i++ {
		outs = append(outs, &Tensor{DType: Float32, Shape: []int{C}})
	}
	return outs, nil
}

func (k *batchNormKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false, true, true}, make([]bool, k.outputs)
}

func (k *batchNormKernel) scratch(C int) {
	k.a, k.b = nnGrow(k.a, C), nnGrow(k.b, C)
	k.mean, k.inv, k.pvar = nnGrow(k.mean, C), nnGrow(k.inv, C), nnGrow(k.pvar, C)
	if cap(k.s1) < C {
		k.s1, k.s2, k.dev = make([]float64, C), make([]float64, C), make([]float64, C)
	}
	k.s1, k.s2, k.dev = k.s1[:C], k.s2[:C], k.dev[:C]
}

// nnChannelGrain is the number of channels below which splitting per-channel
// reductions over workers does not pay.
func nnChannelGrain(N, inner int) int { return max(1, 16384/max(1, N*inner)) }

// What batchNormKernel.channelSums accumulates per channel.
const (
	bnSumX     = iota // s1 = Σx
	bnSumSqDev        // s1 = Σ(x−mean)², s2 = Σ(x−mean)
	bnSumGrad         // s1 = Σg, s2 = Σg·(x−mean)·inv
)

// channelSums accumulates per-channel sums over the batch and each plane's elements into
// k.s1 and k.s2 (float64). The work is split by channel ranges and walks memory row by
// row, so that inner == 1 (a BatchNorm after Gemm) reads contiguous rows rather than one
// strided column per channel.
func (k *batchNormKernel) channelSums(ctx *Context, x, g []float32, N, C, inner, what int) {
	ctx.Parallel(C, nnChannelGrain(N, inner), func(lo, hi int) {
		s1, s2 := k.s1[lo:hi], k.s2[lo:hi]
		mean, inv := k.mean[lo:hi], k.inv[lo:hi]
		if inner > 1 && nnSumsFast() {
			// One call per channel over the N planes: one per plane cost more than
			// the sums on the 7×7 and 14×14 planes of small networks.
			for j := range s1 {
				c := lo + j
				xs := x[c*inner:]
				var gs []float32
				if what == bnSumGrad {
					gs = g[c*inner:]
				}
				s1[j], s2[j] = nnSums(xs, gs, inner, N, C*inner, mean[j], inv[j], what)
			}
			return
		}
		clear(s1)
		clear(s2)
		for n := 0; n < N; n++ {
			base := (n*C + lo) * inner
			if inner == 1 {
				xr := x[base : base+hi-lo]
				switch what {
				case bnSumX:
					for j, v := range xr {
						s1[j] += float64(v)
					}
				case bnSumSqDev:
					for j, v := range xr {
						d := float64(v - mean[j])
						s1[j] += d * d
						s2[j] += d
					}
				case bnSumGrad:
					gr := g[base : base+hi-lo]
					for j, v := range xr {
						s1[j] += float64(gr[j])
						s2[j] += float64(gr[j] * (v - mean[j]) * inv[j])
					}
				}
				continue
			}
			for j := range s1 {
				off := base + j*inner
				xs := x[off : off+inner]
				var a, b float64
				switch what {
				case bnSumX:
					a = nnSum64(xs)
				case bnSumSqDev:
					a, b = nnSumSqDev64(xs, mean[j])
				case bnSumGrad:
					a, b = nnSumGrad64(xs, g[off:off+inner], mean[j], inv[j])
				}
				s1[j] += a
				s2[j] += b
			}
		}
	})
}

// batchStats fills k.mean and k.inv with the per-channel batch statistics of x, k.pvar
// with the population variances and k.dev with Σ(x − mean)/m for the float32 mean.
//
// One pass around a shift, the channel's first value K: Σ(x−K) and Σ(x−K)² in float64
// give mean = K + Σ(x−K)/m and var = Σ(x−K)²/m − (Σ(x−K)/m)². K is a sample of the
// channel, so it lies within a few standard deviations of the mean and the subtraction
// loses nothing that float64 holds; a first pass for the mean (as before) made two of the
// five passes a training step takes over every normalised activation (Backward computes
// the statistics again, from the same x, so it gets the same ones).
func (k *batchNormKernel) batchStats(ctx *Context, x []float32, N, C, inner int) {
	m := float64(N * inner)
	if N*inner == 0 {
		for c := 0; c < C; c++ {
			k.mean[c], k.dev[c], k.pvar[c] = 0, 0, 0
			k.inv[c] = float32(1 / math.Sqrt(float64(k.eps)))
		}
		return
	}
	for c := 0; c < C; c++ {
		k.mean[c] = x[c*inner] // the shift K, which channelSums subtracts
	}
	k.channelSums(ctx, x, nil, N, C, inner, bnSumSqDev)
	for c := 0; c < C; c++ {
		d := k.s2[c] / m
		mean := float64(k.mean[c]) + d
		v := max(k.s1[c]/m-d*d, 0)
		k.mean[c] = float32(mean)
		k.dev[c] = mean - float64(k.mean[c])
		k.pvar[c] = float32(v)
		k.inv[c] = float32(1 / math.Sqrt(v+float64(k.eps)))
	}
}

// nnAffine computes y = x·a[c] + b[c] (add=false) or y += x·a[c] (add=true, b unused)
// over N×C planes of inner elements, split over the workers by rows when planes are
// small and by planes otherwise.
func nnAffine(ctx *Context, N, C, inner int, x, y, a, b []float32, add bool) {
	if inner < 64 {
		ctx.Parallel(N, max(1, 16384/max(C*inner, 1)), func(lo, hi int) {
			for n := lo; n < hi; n++ {
				for c := 0; c < C; c++ {
					off := (n*C + c) * inner
					ac := a[c]
					xs, ys := x[off:off+inner], y[off:off+inner]
					// Rows too short for a call each, rounded as affineVec rounds.
					if add {
						for i, v := range xs {
							ys[i] += float32(v * ac)
						}
						continue
					}
					bc := b[c]
					for i, v := range xs {
						ys[i] = float32(v*ac) + bc
					}
				}
			}
		})
		return
	}
	ctx.Parallel(N*C, max(1, 16384/inner), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			c := p % C
			ac := a[c]
			xs, ys := x[p*inner:(p+1)*inner], y[p*inner:(p+1)*inner]
			if add {
				affineAddVec(ys, xs, ac)
				continue
			}
			affineVec(ys, xs, ac, b[c])
		}
	})
}

func (k *batchNormKernel) Forward(ctx *Context, in, out []*Tensor) error {
	N, C, inner, err := k.shape(in)
	if err != nil {
		return err
	}
	k.scratch(C)
	x, scale, bias, rmean, rvar := in[0].F, in[1].F, in[2].F, in[3].F, in[4].F
	batch := ctx.Training || k.trainingMode
	k.stats = [3]int{}
	if batch {
		k.batchStats(ctx, x, N, C, inner)
		k.stats = [3]int{N, C, inner}
		m := N * inner
		for c := 0; c < C; c++ {
			if k.outputs > 1 && out[1] != nil {
				out[1].F[c] = rmean[c]*k.momentum + k.mean[c]*(1-k.momentum)
			}
			if k.outputs > 2 && out[2] != nil {
				out[2].F[c] = rvar[c]*k.momentum + k.pvar[c]*(1-k.momentum)
			}
			if ctx.Training {
				unbiased := k.pvar[c]
				if m > 1 {
					unbiased *= float32(m) / float32(m-1)
				}
				rmean[c] = rmean[c]*k.momentum + k.mean[c]*(1-k.momentum)
				rvar[c] = rvar[c]*k.momentum + unbiased*(1-k.momentum)
			}
			k.a[c] = scale[c] * k.inv[c]
			k.b[c] = bias[c] - k.mean[c]*k.a[c]
		}
		if ctx.Training {
			in[3].changed()
			in[4].changed()
		}
	} else {
		for c := 0; c < C; c++ {
			inv := float32(1 / math.Sqrt(float64(rvar[c])+float64(k.eps)))
			k.a[c] = scale[c] * inv
			k.b[c] = bias[c] - rmean[c]*k.a[c]
		}
	}
	nnAffine(ctx, N, C, inner, x, out[0].F, k.a[:C], k.b[:C], false)
	return nil
}

func (k *batchNormKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil {
		return nil
	}
	N, C, inner, err := k.shape(in)
	if err != nil {
		return err
	}
	k.scratch(C)
	x, scale, rmean, rvar := in[0].F, in[1].F, in[3].F, in[4].F
	batch := ctx.Training || k.trainingMode
	if batch {
		if k.stats != [3]int{N, C, inner} {
			k.batchStats(ctx, x, N, C, inner)
		}
	} else {
		for c := 0; c < C; c++ {
			k.mean[c] = rmean[c]
			k.inv[c] = float32(1 / math.Sqrt(float64(rvar[c])+float64(k.eps)))
		}
	}
	k.stats = [3]int{}
	// Per-channel sums Σgy and Σgy·x̂.
	k.channelSums(ctx, x, gy.F, N, C, inner, bnSumGrad)
	if gx := nnGrad(gin, 0); gx != nil {
		for c := 0; c < C; c++ {
			k.a[c] = scale[c] * k.inv[c]
		}
		if !batch {
			nnAffine(ctx, N, C, inner, gy.F, gx, k.a[:C], nil, true)
		} else {
			// gx = a·(gy − mean(gy) − x̂·mean(gy·x̂)) = a·gy + (x−mean)·(−a·inv·mean(gy·x̂))
			//      − a·mean(gy), with x̂ centred on the exact mean (mean + dev, dev from the
			// float32 rounding of mean). The channel sums of gx are zero in exact
			// arithmetic (they are the gradient of a bias before the BatchNorm); folding
			// the mean into the constant term, or ignoring dev, leaves them visibly
			// nonzero when |mean| ≫ std.
			m := float64(N * inner)
			for c := 0; c < C; c++ {
				mg, mgx := k.s1[c]/m, k.s2[c]/m
				a, inv, dev := float64(k.a[c]), float64(k.inv[c]), k.dev[c]
				mgx -= dev * inv * mg
				b := -a * inv * mgx
				k.b[c] = float32(b)
				k.pvar[c] = float32(-a*mg - b*dev)
			}
			nnBatchNormGrad(ctx, N, C, inner, x, gy.F, gx, k.mean[:C], k.a[:C], k.b[:C], k.pvar[:C])
		}
	}
	gs, gb, gm, gv := nnGrad(gin, 1), nnGrad(gin, 2), nnGrad(gin, 3), nnGrad(gin, 4)
	for c := 0; c < C; c++ {
		sg, sgx := float32(k.s1[c]), float32(k.s2[c]) // Σgy, Σgy·x̂
		if gs != nil {
			gs[c] += sgx
		}
		if gb != nil {
			gb[c] += sg
		}
		if !batch {
			// y = scale·(x−mean)·(var+eps)^(-1/2) + B
			if gm != nil {
				gm[c] -= scale[c] * k.inv[c] * sg
			}
			if gv != nil {
				inv := k.inv[c]
				gv[c] -= 0.5 * scale[c] * inv * inv * sgx
			}
		}
	}
	return nil
}

// layerNormKernel is LayerNormalization (opset 17): each row of the trailing dimensions
// from axis on is normalised to zero mean and unit variance, then scaled and shifted.
type layerNormKernel struct {
	n       *Node
	axis    int64
	eps     float32
	outputs int

	mean, inv []float32 // per-row scratch for Backward
	gs, gb    []float32
}

func buildLayerNorm(n *Node) (Kernel, error) {
	if st := n.Int("stash_type", 1); st != 1 {
		return nil, n.Errorf("unsupported stash_type %d (only 1, float32)", st)
	}
	if in := n.NumInputs(); in < 2 || in > 3 {
		return nil, n.Errorf("want 2 or 3 inputs (X, Scale, optional B), have %d", in)
	}
	outs := n.Proto.GetOutput()
	if len(outs) > 3 {
		return nil, n.Errorf("has %d outputs, want at most 3", len(outs))
	}
	return &layerNormKernel{n: n, axis: n.Int("axis", -1), eps: n.Float("epsilon", 1e-5), outputs: len(outs)}, nil
}

// rows returns the number of rows and their length.
func (k *layerNormKernel) rows(in []*Tensor) (axis, outer, D int, err error) {
	x := in[0].Shape
	r := len(x)
	axis = int(k.axis)
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return 0, 0, 0, k.n.Errorf("axis %d out of range for X %v", k.axis, x)
	}
	outer, D = numel(x[:axis]), numel(x[axis:])
	for i := 1; i < len(in) && i < 3; i++ {
		if in[i] == nil || !k.n.HasInput(i) {
			continue
		}
		if s := in[i].Shape; numel(s) != D || len(s) > r-axis {
			return 0, 0, 0, k.n.Errorf("input %d has shape %v, want %v", i, s, x[axis:])
		}
	}
	return axis, outer, D, nil
}

func (k *layerNormKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	axis, _, _, err := k.rows(in)
	if err != nil {
		return nil, err
	}
	x := in[0].Shape
	outs := []*Tensor{{DType: Float32, Shape: append([]int(nil), x...)}}
	stat := append([]int(nil), x...)
	for i := axis; i < len(stat); i++ {
		stat[i] = 1
	}
	for i := 1; i < k.outputs; i++ {
		outs = append(outs, &Tensor{DType: Float32, Shape: append([]int(nil), stat...)})
	}
	return outs, nil
}

func (k *layerNormKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, make([]bool, k.outputs)
}

func (k *layerNormKernel) bias(in []*Tensor) []float32 {
	if b := k.n.Optional(in, 2); b != nil {
		return b.F
	}
	return nil
}

func (k *layerNormKernel) Forward(ctx *Context, in, out []*Tensor) error {
	_, outer, D, err := k.rows(in)
	if err != nil {
		return err
	}
	x, scale, bias, y := in[0].F, in[1].F, k.bias(in), out[0].F
	var om, oi []float32
	if len(out) > 1 && out[1] != nil {
		om = out[1].F
	}
	if len(out) > 2 && out[2] != nil {
		oi = out[2].F
	}
	ctx.Parallel(outer, max(1, 16384/max(D, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*D:(r+1)*D], y[r*D:(r+1)*D]
			mu, inv := nnMeanInvStd(xr, k.eps)
			normRow(xr, yr, scale, bias, mu, inv)
			if om != nil {
				om[r] = mu
			}
			if oi != nil {
				oi[r] = inv
			}
		}
	})
	return nil
}

// normRowGo is the definition of normRow: y[i] = ((x[i] − mu)·inv)·s[i], plus b[i] when b
// is not nil, each operation rounded on its own. LayerNormalization's rows, 16 or 8 at a
// time in assembly where the CPU allows: the scalar loop was most of a small
// transformer's normalisations.
func normRowGo(x, y, s, b []float32, mu, inv float32) {
	y, s = y[:len(x)], s[:len(x)]
	if b == nil {
		for i, v := range x {
			y[i] = float32(float32(v-mu)*inv) * s[i]
		}
		return
	}
	b = b[:len(x)]
	for i, v := range x {
		y[i] = float32(float32(float32(v-mu)*inv)*s[i]) + b[i]
	}
}

func (k *layerNormKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	_, outer, D, err := k.rows(in)
	if err != nil {
		return err
	}
	x, scale := in[0].F, in[1].F
	var gy, gm, gi []float32
	if gout[0] != nil {
		gy = gout[0].F
	}
	if len(gout) > 1 && gout[1] != nil {
		gm = gout[1].F
	}
	if len(gout) > 2 && gout[2] != nil {
		gi = gout[2].F
	}
	if gy == nil && gm == nil && gi == nil {
		return nil
	}
	k.mean, k.inv = nnGrow(k.mean, outer), nnGrow(k.inv, outer)
	fd := float32(D)
	ctx.Parallel(outer, max(1, 16384/max(D, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*D : (r+1)*D]
			mu, inv := nnMeanInvStd(xr, k.eps)
			k.mean[r], k.inv[r] = mu, inv
			if gin[0] == nil {
				continue
			}
			gxr := gin[0].F[r*D : (r+1)*D]
			if gy != nil {
				// g' = gy·scale; gx = inv·(g' − mean(g') − x̂·mean(g'·x̂))
				var sg, sgx float64
				gyr := gy[r*D : (r+1)*D]
				for i, g := range gyr {
					gp := float64(g * scale[i])
					sg += gp
					sgx += gp * float64((xr[i]-mu)*inv)
				}
				mg, mgx := float32(sg)/fd, float32(sgx)/fd
				for i, g := range gyr {
					gxr[i] += inv * (g*scale[i] - mg - (xr[i]-mu)*inv*mgx)
				}
			}
			if gm != nil {
				v := gm[r] / fd
				for i := range gxr {
					gxr[i] += v
				}
			}
			if gi != nil {
				// d inv/dx_i = −inv³·(x_i−mean)/D
				v := -gi[r] * inv * inv * inv / fd
				for i, xv := range xr {
					gxr[i] += v * (xv - mu)
				}
			}
		}
	})
	var gs, gb []float32
	if len(gin) > 1 && gin[1] != nil {
		gs = gin[1].F
	}
	if len(gin) > 2 && gin[2] != nil && k.bias(in) != nil {
		gb = gin[2].F
	}
	if gy == nil || (gs == nil && gb == nil) {
		return nil
	}
	// Column sums over rows, split by column so that workers write disjoint entries.
	ctx.Parallel(D, max(1, 16384/max(outer, 1)), func(lo, hi int) {
		for r := 0; r < outer; r++ {
			mu, inv := k.mean[r], k.inv[r]
			xr, gyr := x[r*D:(r+1)*D], gy[r*D:(r+1)*D]
			for i := lo; i < hi; i++ {
				if gs != nil {
					gs[i] += gyr[i] * (xr[i] - mu) * inv
				}
				if gb != nil {
					gb[i] += gyr[i]
				}
			}
		}
	})
	return nil
}

// instanceNormKernel is InstanceNormalization: each (n, c) plane is normalised over
// its spatial elements, then scaled and shifted per channel.
type instanceNormKernel struct {
	n   *Node
	eps float32

	sg, sgx []float32 // per-plane backward sums
}

func buildInstanceNorm(n *Node) (Kernel, error) {
	if n.NumInputs() != 3 {
		return nil, n.Errorf("want 3 inputs (input, scale, B), have %d", n.NumInputs())
	}
	return &instanceNormKernel{n: n, eps: n.Float("epsilon", 1e-5)}, nil
}

func (k *instanceNormKernel) shape(in []*Tensor) (N, C, inner int, err error) {
	x := in[0].Shape
	if len(x) < 3 {
		return 0, 0, 0, k.n.Errorf("input has rank %d, want at least 3 (N, C, spatial...)", len(x))
	}
	N, C, inner = x[0], x[1], numel(x[2:])
	for i := 1; i < 3; i++ {
		if !nnShapeEq(in[i].Shape, []int{C}) {
			return 0, 0, 0, k.n.Errorf("input %d has shape %v, want [%d]", i, in[i].Shape, C)
		}
	}
	return N, C, inner, nil
}

func (k *instanceNormKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	if _, _, _, err := k.shape(in); err != nil {
		return nil, err
	}
	return []*Tensor{{DType: Float32, Shape: append([]int(nil), in[0].Shape...)}}, nil
}

func (k *instanceNormKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, []bool{false}
}

func (k *instanceNormKernel) Forward(ctx *Context, in, out []*Tensor) error {
	N, C, inner, err := k.shape(in)
	if err != nil {
		return err
	}
	x, scale, bias, y := in[0].F, in[1].F, in[2].F, out[0].F
	ctx.Parallel(N*C, max(1, 16384/max(inner, 1)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			c := p % C
			xp, yp := x[p*inner:(p+1)*inner], y[p*inner:(p+1)*inner]
			mu, inv := nnMeanInvStd(xp, k.eps)
			a := scale[c] * inv
			b := bias[c] - mu*a
			for i, v := range xp {
				yp[i] = v*a + b
			}
		}
	})
	return nil
}

func (k *instanceNormKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	N, C, inner, err := k.shape(in)
	if err != nil {
		return err
	}
	x, scale, gy := in[0].F, in[1].F, gout[0].F
	k.sg, k.sgx = nnGrow(k.sg, N*C), nnGrow(k.sgx, N*C)
	fi := float32(inner)
	ctx.Parallel(N*C, max(1, 16384/max(inner, 1)), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			c := p % C
			xp, gyp := x[p*inner:(p+1)*inner], gy[p*inner:(p+1)*inner]
			mu, inv := nnMeanInvStd(xp, k.eps)
			var sg, sgx float64
			for i, g := range gyp {
				sg += float64(g)
				sgx += float64(g) * float64((xp[i]-mu)*inv)
			}
			k.sg[p], k.sgx[p] = float32(sg), float32(sgx)
			if gin[0] == nil {
				continue
			}
			a := scale[c] * inv
			mg, mgx := float32(sg)/fi, float32(sgx)/fi
			gxp := gin[0].F[p*inner : (p+1)*inner]
			for i, g := range gyp {
				gxp[i] += a * (g - mg - (xp[i]-mu)*inv*mgx)
			}
		}
	})
	gs, gb := nnGrad(gin, 1), nnGrad(gin, 2)
	for p := 0; p < N*C; p++ {
		c := p % C
		if gs != nil {
			gs[c] += k.sgx[p]
		}
		if gb != nil {
			gb[c] += k.sg[p]
		}
	}
	return nil
}

// nnBatchNormGrad adds ga[c]·gy + gb[c]·(x − mean[c]) + gc[c] to gx over N×C planes of
// inner elements, the batch-statistics BatchNorm input gradient written as an affine map.
func nnBatchNormGrad(ctx *Context, N, C, inner int, x, gy, gx, mean, ga, gb, gc []float32) {
	ctx.Parallel(N, max(1, 16384/max(C*inner, 1)), func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for c := 0; c < C; c++ {
				off := (n*C + c) * inner
				a, b, cc, mu := ga[c], gb[c], gc[c], mean[c]
				xs, gs, gd := x[off:off+inner], gy[off:off+inner], gx[off:off+inner]
				if inner >= 16 {
					bnGradVec(gd, xs, gs, a, b, cc, mu)
					continue
				}
				// Rows too short for a call each (BatchNorm1d: one value per channel),
				// rounded as bnGradVec rounds.
				xs, gs = xs[:len(gd)], gs[:len(gd)]
				for i, g := range gd {
					gd[i] = float32(float32(g+float32(a*gs[i]))+float32(b*float32(xs[i]-mu))) + cc
				}
			}
		}
	})
}

// nnSumSqDev64Go returns Σ(x−mu)² and Σ(x−mu) in float64, in interleaved partial sums
// (see nnSum64).
func nnSumSqDev64Go(x []float32, mu float32) (sq, dev float64) {
	var q0, q1, d0, d1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		v := x[i : i+2 : i+2]
		a, b := float64(v[0]-mu), float64(v[1]-mu)
		q0 += a * a
		q1 += b * b
		d0 += a
		d1 += b
	}
	if i < len(x) {
		a := float64(x[i] - mu)
		q0 += a * a
		d0 += a
	}
	return q0 + q1, d0 + d1
}

// nnSumGrad64Go returns Σg and Σg·(x−mu)·inv in float64, in interleaved partial sums
// (see nnSum64).
func nnSumGrad64Go(x, g []float32, mu, inv float32) (sg, sgx float64) {
	x = x[:len(g)]
	var a0, a1, b0, b1 float64
	i := 0
	for ; i+2 <= len(g); i += 2 {
		gv, xv := g[i:i+2:i+2], x[i:i+2:i+2]
		a0 += float64(gv[0])
		a1 += float64(gv[1])
		b0 += float64(gv[0] * (xv[0] - mu) * inv)
		b1 += float64(gv[1] * (xv[1] - mu) * inv)
	}
	if i < len(g) {
		a0 += float64(g[i])
		b0 += float64(g[i] * (x[i] - mu) * inv)
	}
	return a0 + a1, b0 + b1
}

// nnSum64Go returns the sum of x accumulated in float64, in four interleaved partial sums
// so that the additions do not wait on each other.
func nnSum64Go(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += float64(v[0])
		s1 += float64(v[1])
		s2 += float64(v[2])
		s3 += float64(v[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// The float64 sums of BatchNormalization's statistics and gradients (and of convolution
// bias gradients) run 64 lanes at a time in AVX-512 where the CPU allows: in training
// MobileNetV3 they were a third of the step. nnSumsLanes defines them: lane j takes the
// elements i ≡ j mod 64 (a lane past the end takes x = g = 0), and the lanes are added
// as it says. Elsewhere the Go loops above run, in their own
// order: results agree within float64 rounding, not bit for bit.

// nnSum64 returns Σx in float64.
func nnSum64(x []float32) float64 {
	if !nnSumsFast() {
		return nnSum64Go(x)
	}
	a, _ := nnSums(x, nil, len(x), 1, 0, 0, 0, 0)
	return a
}

// nnSumSqDev64 returns Σ(x−mu)² and Σ(x−mu) in float64, x−mu rounded to float32.
func nnSumSqDev64(x []float32, mu float32) (sq, dev float64) {
	if !nnSumsFast() {
		return nnSumSqDev64Go(x, mu)
	}
	return nnSums(x, nil, len(x), 1, 0, mu, 0, 1)
}

// nnSumGrad64 returns Σg and Σg·(x−mu)·inv in float64, the product in float32.
func nnSumGrad64(x, g []float32, mu, inv float32) (sg, sgx float64) {
	if !nnSumsFast() {
		return nnSumGrad64Go(x, g, mu, inv)
	}
	return nnSums(x[:len(g)], g, len(g), 1, 0, mu, inv, 2)
}

// nnSumsLanes is the definition of nnSums over segs segments of n elements, stride
// apart in x (and g): mode 0 sums x; mode 1 sums (x−mu)² and x−mu; mode 2 sums g and
// g·(x−mu)·inv. Lane j of 64 takes element j of every 64 of each segment, a lane past a
// segment's end x = g = 0, the segments one after another; lanes j, 16+j, 32+j and 48+j
// are then added as (j + 16+j) + (32+j + 48+j), and those 16 by halves. Four sets of 16
// lanes keep eight float64 additions in flight in the assembly, where one set of 16 left
// the sums waiting on each addition's latency (a sixth of a training step of fmnist-resnet
// at batch 256).
func nnSumsLanes(x, g []float32, n, segs, stride int, mu, inv float32, mode int) (float64, float64) {
	var a, b [64]float64
	for s := range segs {
		xs := x[s*stride : s*stride+n]
		var gs []float32
		if mode == 2 {
			gs = g[s*stride : s*stride+n]
		}
		for c := 0; c < n; c += 64 {
			for j := range 64 {
				var xv, gv float32
				if c+j < n {
					xv = xs[c+j]
					if mode == 2 {
						gv = gs[c+j]
					}
				}
				switch mode {
				case 0:
					a[j] += float64(xv)
				case 1:
					d := float32(0)
					if c+j < n {
						d = xv - mu
					}
					dd := float64(d)
					a[j] += float64(dd * dd)
					b[j] += dd
				case 2:
					a[j] += float64(gv)
					b[j] += float64(float32(gv*(xv-mu)) * inv)
				}
			}
		}
	}
	return nnLanes64(a), nnLanes64(b)
}

// nnLanes64 adds the four sets of 16 lanes pairwise, then the 16 by halves, as the
// assembly does.
func nnLanes64(s [64]float64) float64 {
	var t [16]float64
	for j := range t {
		t[j] = (s[j] + s[16+j]) + (s[32+j] + s[48+j])
	}
	return nnLanes16(t)
}

// nnLanes16 adds 16 lanes by halves, as the assembly does.
func nnLanes16(s [16]float64) float64 {
	var t8 [8]float64
	for i := range t8 {
		t8[i] = s[i] + s[i+8]
	}
	var t4 [4]float64
	for i := range t4 {
		t4[i] = t8[i] + t8[i+4]
	}
	return (t4[0] + t4[2]) + (t4[1] + t4[3])
}
