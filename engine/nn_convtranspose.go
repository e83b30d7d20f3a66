package engine

// convTransposeKernel is ConvTranspose, the adjoint of Conv: per batch item and group
// the column matrix Wᵀ·X is scattered into the output with col2im. Its geometry is the
// one of the Conv it transposes, whose image is this op's output and whose window grid
// is this op's input. Items run one after the other with the BLAS parallelising each
// product; none of qtool's target networks has this op on a hot path.
type convTransposeKernel struct {
	n           *Node
	win         nnWindow
	group       int
	outPadding  []int64
	outputShape []int64

	col []float32 // one item's column matrix
}

func buildConvTranspose(n *Node) (Kernel, error) {
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
	k := &convTransposeKernel{n: n, win: win, group: int(group),
		outPadding: n.Ints("output_padding", nil), outputShape: n.Ints("output_shape", nil)}
	for _, v := range k.outPadding {
		if v < 0 {
			return nil, n.Errorf("output_padding %v has a negative entry", k.outPadding)
		}
	}
	return k, nil
}

type convTDims struct {
	g               nnGeom // image: Y's spatial dims; window grid: X's
	N, C, M, Cg, Mg int
}

// nnFloorDiv2 is ⌊v/2⌋ also for negative v (total padding is negative when output_shape
// asks for more than the transposed convolution reaches).
func nnFloorDiv2(v int) int {
	if v < 0 {
		return -((-v + 1) / 2)
	}
	return v / 2
}

func (k *convTransposeKernel) dims(x, w []int, b *Tensor) (convTDims, error) {
	var d convTDims
	n := k.n
	if len(x) < 3 {
		return d, n.Errorf("input X has rank %d, want at least 3 (N, C, spatial...)", len(x))
	}
	if len(w) != len(x) {
		return d, n.Errorf("weight W has shape %v, want rank %d like X %v", w, len(x), x)
	}
	d.N, d.C, d.Cg, d.Mg = x[0], x[1], w[0], w[1]
	if d.C < 1 || d.Mg < 1 {
		return d, n.Errorf("X %v and W %v: a transposed convolution needs at least one input and one output channel", x, w)
	}
	if d.Cg != d.C {
		return d, n.Errorf("X has %d channels but W %v has %d", d.C, w, d.Cg)
	}
	if d.C%k.group != 0 {
		return d, n.Errorf("X has %d channels, not divisible by group %d", d.C, k.group)
	}
	d.Cg = d.C / k.group
	d.M = d.Mg * k.group
	if b != nil && !nnShapeEq(b.Shape, []int{d.M}) {
		return d, n.Errorf("bias B has shape %v, want [%d]", b.Shape, d.M)
	}
	kern := w[2:]
	nd := len(kern)
	if k.win.kernel != nil {
		for i, v := range k.win.kernel {
			if i < len(kern) && int(v) != kern[i] {
				return d, n.Errorf("kernel_shape %v does not match W %v", k.win.kernel, w)
			}
		}
	}
	if k.outPadding != nil && len(k.outPadding) != nd {
		return d, n.Errorf("output_padding %v does not match %d spatial dimensions", k.outPadding, nd)
	}
	os := k.outputShape
	if len(os) == nd+2 {
		os = os[2:] // some exporters give the full output shape
	}
	if os != nil && len(os) != nd {
		return d, n.Errorf("output_shape %v does not match %d spatial dimensions", k.outputShape, nd)
	}
	g := &d.g
	if err := k.win.params(n, g, kern); err != nil {
		return d, err
	}
	off := nnMaxSpatial - nd
	for i := 0; i < nd; i++ {
		j := off + i
		in := x[2+i]
		if in < 1 {
			return d, n.Errorf("input X %v has an empty spatial axis", x)
		}
		g.out[j] = in
		op := 0
		if k.outPadding != nil {
			op = int(k.outPadding[i])
		}
		reach := g.s[j]*(in-1) + op + (g.k[j]-1)*g.d[j] + 1
		switch {
		case os != nil:
			total := reach - int(os[i])
			k.splitPads(g, j, total)
			g.in[j] = int(os[i])
		case k.win.autoPad == "SAME_UPPER" || k.win.autoPad == "SAME_LOWER":
			total := reach - in*g.s[j]
			k.splitPads(g, j, total)
			g.in[j] = in * g.s[j]
		default: // NOTSET uses the pads; VALID has none
			g.in[j] = reach - g.pb[j] - g.pe[j]
		}
		if g.in[j] < 1 {
			return d, n.Errorf("output spatial size %d < 1 for input %v", g.in[j], x)
		}
	}
	g.initRanges()
	return d, nil
}

// splitPads distributes the total padding of dimension j as the ONNX spec says:
// SAME_UPPER puts the smaller half first, everything else the larger half.
func (k *convTransposeKernel) splitPads(g *nnGeom, j, total int) {
	small := nnFloorDiv2(total)
	if k.win.autoPad == "SAME_UPPER" {
		g.pb[j], g.pe[j] = small, total-small
	} else {
		g.pb[j], g.pe[j] = total-small, small
	}
}

func (k *convTransposeKernel) bias(in []*Tensor) *Tensor {
	return k.n.Optional(in, 2)
}

func (k *convTransposeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	d, err := k.dims(in[0].Shape, in[1].Shape, k.bias(in))
	if err != nil {
		return nil, err
	}
	shape := []int{d.N, d.M}
	shape = append(shape, d.g.in[nnMaxSpatial-d.g.nd:]...)
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

func (k *convTransposeKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, false}, []bool{false}
}

func (k *convTransposeKernel) Forward(ctx *Context, in, out []*Tensor) error {
	b := k.bias(in)
	d, err := k.dims(in[0].Shape, in[1].Shape, b)
	if err != nil {
		return err
	}
	g := &d.g
	x, w, y := in[0].F, in[1].F, out[0].F
	xsz, ysz, K := g.outSize(), g.inSize(), g.kSize()
	MgK := d.Mg * K
	k.col = nnGrow(k.col, MgK*xsz)
	col := k.col[:MgK*xsz]
	for i := 0; i < d.N; i++ {
		xn := x[i*d.C*xsz : (i+1)*d.C*xsz]
		yn := y[i*d.M*ysz : (i+1)*d.M*ysz]
		clear(yn)
		for grp := 0; grp < k.group; grp++ {
			nnSgemm(ctx.BLAS, true, false, MgK, xsz, d.Cg, 1,
				w[grp*d.Cg*MgK:(grp+1)*d.Cg*MgK], xn[grp*d.Cg*xsz:(grp+1)*d.Cg*xsz], 0, col)
			nnCol2im(g, d.Mg, col, yn[grp*d.Mg*ysz:(grp+1)*d.Mg*ysz], xsz)
		}
		if b != nil {
			for m, bv := range b.F {
				ym := yn[m*ysz : (m+1)*ysz]
				for j := range ym {
					ym[j] += bv
				}
			}
		}
	}
	return nil
}

func (k *convTransposeKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
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
	xsz, ysz, K := g.outSize(), g.inSize(), g.kSize()
	MgK := d.Mg * K
	gx, gw := nnGrad(gin, 0), nnGrad(gin, 1)
	var gb []float32
	if b != nil {
		gb = nnGrad(gin, 2)
	}
	k.col = nnGrow(k.col, MgK*xsz)
	col := k.col[:MgK*xsz]
	for i := 0; i < d.N; i++ {
		xn := x[i*d.C*xsz : (i+1)*d.C*xsz]
		gyn := gy.F[i*d.M*ysz : (i+1)*d.M*ysz]
		for m := range gb {
			var s float32
			for _, v := range gyn[m*ysz : (m+1)*ysz] {
				s += v
			}
			gb[m] += s
		}
		if gx == nil && gw == nil {
			continue
		}
		for grp := 0; grp < k.group; grp++ {
			nnIm2col(g, d.Mg, gyn[grp*d.Mg*ysz:(grp+1)*d.Mg*ysz], col, xsz)
			wg := w[grp*d.Cg*MgK : (grp+1)*d.Cg*MgK]
			if gx != nil {
				nnSgemm(ctx.BLAS, false, false, d.Cg, xsz, MgK, 1, wg, col, 1,
					gx[(i*d.C+grp*d.Cg)*xsz:(i*d.C+(grp+1)*d.Cg)*xsz])
			}
			if gw != nil {
				nnSgemm(ctx.BLAS, false, true, d.Cg, MgK, xsz, 1,
					xn[grp*d.Cg*xsz:(grp+1)*d.Cg*xsz], col, 1, gw[grp*d.Cg*MgK:(grp+1)*d.Cg*MgK])
			}
		}
	}
	return nil
}
