package engine

// convKernel is Conv: im2col + Sgemm per batch item and group, batch items spread over
// the workers; 1×1 stride-1 unpadded convolutions multiply the image directly, and
// depthwise convolutions (one input channel per group) run as a direct loop.
type convKernel struct {
	n     *Node
	win   nnWindow
	group int

	// Per-worker scratch, sized on first use and grown only when shapes grow.
	cols  [][]float32 // im2col matrices
	gcols [][]float32 // column gradients
	gws   [][]float32 // weight-gradient partial sums of workers 1..
	gbs   [][]float32 // bias-gradient partial sums of workers 1..
}

func buildConv(n *Node) (Kernel, error) {
	win, err := nnParseWindow(n, false)
	if err != nil {
		return nil, err
	}
	group := n.Int("group", 1)
	if group < 1 {
		return nil, n.Errorf("group %d must be positive", group)
	}
	if in := n.NumInputs(); in < 2 || in > 3 {
		return nil, n.Errorf("want 2 or 3 inputs (X, W, optional B), have %d", in)
	}
	return &convKernel{n: n, win: win, group: int(group)}, nil
}

// convDims is the shape bookkeeping of one Conv call.
type convDims struct {
	g               nnGeom
	N, C, M, Cg, Mg int
	pointwise       bool // 1×1, stride 1, no padding: the image is its own column matrix
	depthwise       bool // one input channel per group: direct loop
}

func (k *convKernel) dims(x, w []int, b *Tensor) (convDims, error) {
	var d convDims
	n := k.n
	if len(x) < 3 {
		return d, n.Errorf("input X has rank %d, want at least 3 (N, C, spatial...)", len(x))
	}
	if len(w) != len(x) {
		return d, n.Errorf("weight W has shape %v, want rank %d like X %v", w, len(x), x)
	}
	d.N, d.C, d.M, d.Cg = x[0], x[1], w[0], w[1]
	if d.Cg*k.group != d.C {
		return d, n.Errorf("X has %d channels but W %v with group %d expects %d", d.C, w, k.group, d.Cg*k.group)
	}
	if d.M%k.group != 0 {
		return d, n.Errorf("W has %d output channels, not divisible by group %d", d.M, k.group)
	}
	d.Mg = d.M / k.group
	if b != nil && !nnShapeEq(b.Shape, []int{d.M}) {
		return d, n.Errorf("bias B has shape %v, want [%d]", b.Shape, d.M)
	}
	kern := w[2:]
	if k.win.kernel != nil {
		for i, v := range k.win.kernel {
			if i < len(kern) && int(v) != kern[i] {
				return d, n.Errorf("kernel_shape %v does not match W %v", k.win.kernel, w)
			}
		}
	}
	g, err := k.win.resolve(n, x[2:], kern)
	if err != nil {
		return d, err
	}
	d.g = g
	d.pointwise = g.kSize() == 1 && g.s == [nnMaxSpatial]int{1, 1, 1} &&
		g.pb == [nnMaxSpatial]int{} && g.pe == [nnMaxSpatial]int{}
	d.depthwise = d.Cg == 1 && k.group > 1
	return d, nil
}

func (k *convKernel) bias(in []*Tensor) *Tensor {
	if len(in) > 2 && in[2] != nil && k.n.HasInput(2) {
		return in[2]
	}
	return nil
}

func (k *convKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	d, err := k.dims(in[0].Shape, in[1].Shape, k.bias(in))
	if err != nil {
		return nil, err
	}
	shape := append([]int{d.N, d.M}, d.g.outShape()...)
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

func (k *convKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, []bool{false}
}

// nnScratch makes sure bufs has nw buffers of at least size elements each.
func nnScratch(bufs [][]float32, nw, size int) [][]float32 {
	for len(bufs) < nw {
		bufs = append(bufs, nil)
	}
	for i := 0; i < nw; i++ {
		bufs[i] = nnGrow(bufs[i], size)
	}
	return bufs
}

func (k *convKernel) Forward(ctx *Context, in, out []*Tensor) error {
	b := k.bias(in)
	d, err := k.dims(in[0].Shape, in[1].Shape, b)
	if err != nil {
		return err
	}
	g := &d.g
	x, w, y := in[0].F, in[1].F, out[0].F
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	CgK := d.Cg * K
	nw := nnWorkers(ctx, d.N)
	if !d.pointwise && !d.depthwise {
		k.cols = nnScratch(k.cols, nw, CgK*O)
	}
	nnEach(ctx, nw, d.N, func(wk, lo, hi int) {
		for i := lo; i < hi; i++ {
			xn := x[i*d.C*isz : (i+1)*d.C*isz]
			yn := y[i*d.M*O : (i+1)*d.M*O]
			if d.depthwise {
				clear(yn)
				for m := 0; m < d.M; m++ {
					xc := xn[(m/d.Mg)*isz : (m/d.Mg+1)*isz]
					ym := yn[m*O : (m+1)*O]
					r := m * K
					for k0 := 0; k0 < g.k[0]; k0++ {
						for k1 := 0; k1 < g.k[1]; k1++ {
							for k2 := 0; k2 < g.k[2]; k2++ {
								nnDepthwiseRow(g, w[r], xc, ym, k0, k1, k2)
								r++
							}
						}
					}
				}
			} else {
				for grp := 0; grp < k.group; grp++ {
					xg := xn[grp*d.Cg*isz : (grp+1)*d.Cg*isz]
					col := xg
					if !d.pointwise {
						col = k.cols[wk][:CgK*O]
						nnIm2col(g, d.Cg, xg, col)
					}
					nnSgemm(ctx.BLAS, false, false, d.Mg, O, CgK, 1,
						w[grp*d.Mg*CgK:(grp+1)*d.Mg*CgK], col, 0, yn[grp*d.Mg*O:(grp+1)*d.Mg*O])
				}
			}
			if b != nil {
				for m, bv := range b.F {
					ym := yn[m*O : (m+1)*O]
					for j := range ym {
						ym[j] += bv
					}
				}
			}
		}
	})
	return nil
}

func (k *convKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	gy := gout[0]
	if gy == nil {
		return nil
	}
	b := k.bias(in)
	d, err := k.dims(in[0].Shape, in[1].Shape, b)
	if err != nil {
		return err
	}
	g := &d.g
	x, w := in[0].F, in[1].F
	isz, O, K := g.inSize(), g.outSize(), g.kSize()
	CgK := d.Cg * K
	var gx, gw, gb []float32
	if gin[0] != nil {
		gx = gin[0].F
	}
	if len(gin) > 1 && gin[1] != nil {
		gw = gin[1].F
	}
	if len(gin) > 2 && gin[2] != nil && b != nil {
		gb = gin[2].F
	}
	nw := nnWorkers(ctx, d.N)
	if !d.pointwise && !d.depthwise {
		if gw != nil {
			k.cols = nnScratch(k.cols, nw, CgK*O)
		}
		if gx != nil {
			k.gcols = nnScratch(k.gcols, nw, CgK*O)
		}
	}
	// Worker 0 accumulates straight into the gradients; the others into their own
	// buffers, summed in worker order afterwards so that results are deterministic.
	if gw != nil {
		k.gws = nnScratch(k.gws, nw, len(w))
	}
	if gb != nil {
		k.gbs = nnScratch(k.gbs, nw, d.M)
	}
	nnEach(ctx, nw, d.N, func(wk, lo, hi int) {
		gwk, gbk := gw, gb
		if wk > 0 {
			if gw != nil {
				gwk = k.gws[wk][:len(w)]
				clear(gwk)
			}
			if gb != nil {
				gbk = k.gbs[wk][:d.M]
				clear(gbk)
			}
		}
		for i := lo; i < hi; i++ {
			xn := x[i*d.C*isz : (i+1)*d.C*isz]
			gyn := gy.F[i*d.M*O : (i+1)*d.M*O]
			var gxn []float32
			if gx != nil {
				gxn = gx[i*d.C*isz : (i+1)*d.C*isz]
			}
			if gbk != nil {
				for m := range gbk {
					var s float32
					for _, v := range gyn[m*O : (m+1)*O] {
						s += v
					}
					gbk[m] += s
				}
			}
			if d.depthwise {
				var xw []float32
				if gwk != nil {
					xw = xn
				}
				for m := 0; m < d.M; m++ {
					c := m / d.Mg
					var gxc []float32
					if gxn != nil {
						gxc = gxn[c*isz : (c+1)*isz]
					}
					var xc []float32
					if xw != nil {
						xc = xw[c*isz : (c+1)*isz]
					}
					gym := gyn[m*O : (m+1)*O]
					r := m * K
					for k0 := 0; k0 < g.k[0]; k0++ {
						for k1 := 0; k1 < g.k[1]; k1++ {
							for k2 := 0; k2 < g.k[2]; k2++ {
								s := nnDepthwiseBackRow(g, w[r], xc, gym, gxc, k0, k1, k2)
								if gwk != nil {
									gwk[r] += s
								}
								r++
							}
						}
					}
				}
				continue
			}
			for grp := 0; grp < k.group; grp++ {
				xg := xn[grp*d.Cg*isz : (grp+1)*d.Cg*isz]
				gyg := gyn[grp*d.Mg*O : (grp+1)*d.Mg*O]
				wg := w[grp*d.Mg*CgK : (grp+1)*d.Mg*CgK]
				if gwk != nil {
					col := xg
					if !d.pointwise {
						col = k.cols[wk][:CgK*O]
						nnIm2col(g, d.Cg, xg, col)
					}
					nnSgemm(ctx.BLAS, false, true, d.Mg, CgK, O, 1, gyg, col, 1, gwk[grp*d.Mg*CgK:(grp+1)*d.Mg*CgK])
				}
				if gxn != nil {
					gxg := gxn[grp*d.Cg*isz : (grp+1)*d.Cg*isz]
					if d.pointwise {
						nnSgemm(ctx.BLAS, true, false, CgK, O, d.Mg, 1, wg, gyg, 1, gxg)
					} else {
						gcol := k.gcols[wk][:CgK*O]
						nnSgemm(ctx.BLAS, true, false, CgK, O, d.Mg, 1, wg, gyg, 0, gcol)
						nnCol2im(g, d.Cg, gcol, gxg)
					}
				}
			}
		}
	})
	for wk := 1; wk < nw; wk++ {
		if gw != nil {
			for j, v := range k.gws[wk][:len(w)] {
				gw[j] += v
			}
		}
		if gb != nil {
			for j, v := range k.gbs[wk][:d.M] {
				gb[j] += v
			}
		}
	}
	return nil
}
