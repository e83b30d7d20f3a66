package engine

import (
	"math"
	"strings"
)

// The recurrent ops LSTM, GRU and RNN share one kernel: the input projection of every
// time step is one GEMM X·Wᵀ over all T·N rows, each step adds one recurrent GEMM h·Rᵀ
// (two for GRU with linear_before_reset = 0), and the gate arithmetic runs over slices.
//
// Semantics follow onnxruntime where the specification is silent:
//   - sequence_lens: batch item n runs lens[n] steps; Y is zero past its length, Y_h and
//     Y_c are the state after its last step (zero when lens[n] = 0). The reverse
//     direction runs each sequence backwards from its own last step lens[n]−1.
//   - clip bounds every gate pre-activation (peephole and biases included) and, for
//     LSTM, the cell state before h(); the state itself is not clipped.
//   - input_forget couples the gates as f = 1 − i (after the activation).
//   - activation_alpha/beta are consumed in list order by the activations that take
//     them (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu); a missing
//     value takes onnxruntime's default (LeakyRelu 0.01, HardSigmoid 0.2 and 0.5, Elu 1,
//     otherwise 0).
//
// Backward recomputes the forward pass into the kernel's scratch, so that inference keeps
// no history it does not need, then runs backpropagation through time.

// rnnCell is the recurrent cell of the op.
type rnnCell uint8

const (
	cellRNN rnnCell = iota
	cellGRU
	cellLSTM
)

// actKind is an activation function of the recurrent ops.
type actKind uint8

const (
	actSigmoid actKind = iota
	actTanh
	actRelu
	actAffine
	actLeakyRelu
	actThresholdedRelu
	actScaledTanh
	actHardSigmoid
	actElu
	actSoftsign
	actSoftplus
)

// rnnActs maps the lower-cased ONNX names to the activation, whether it reads alpha and
// beta, and onnxruntime's defaults for them.
var rnnActs = map[string]struct {
	kind              actKind
	useAlpha, useBeta bool
	defAlpha, defBeta float32
}{
	"sigmoid":         {kind: actSigmoid},
	"tanh":            {kind: actTanh},
	"relu":            {kind: actRelu},
	"affine":          {kind: actAffine, useAlpha: true, useBeta: true},
	"leakyrelu":       {kind: actLeakyRelu, useAlpha: true, defAlpha: 0.01},
	"thresholdedrelu": {kind: actThresholdedRelu, useAlpha: true},
	"scaledtanh":      {kind: actScaledTanh, useAlpha: true, useBeta: true},
	"hardsigmoid":     {kind: actHardSigmoid, useAlpha: true, useBeta: true, defAlpha: 0.2, defBeta: 0.5},
	"elu":             {kind: actElu, useAlpha: true, defAlpha: 1},
	"softsign":        {kind: actSoftsign},
	"softplus":        {kind: actSoftplus},
}

// rnnAct is one activation with its parameters.
type rnnAct struct {
	kind        actKind
	alpha, beta float32
}

// fwd sets y = f(x). The switch is per slice, never per element.
func (a rnnAct) fwd(y, x []float32) {
	y = y[:len(x)]
	switch a.kind {
	case actSigmoid:
		for i, v := range x {
			y[i] = sigmoid(v)
		}
	case actTanh:
		for i, v := range x {
			y[i] = float32(math.Tanh(float64(v)))
		}
	case actRelu:
		for i, v := range x {
			y[i] = max(v, 0)
		}
	case actAffine:
		for i, v := range x {
			y[i] = a.alpha*v + a.beta
		}
	case actLeakyRelu:
		for i, v := range x {
			if v < 0 {
				v *= a.alpha
			}
			y[i] = v
		}
	case actThresholdedRelu:
		for i, v := range x {
			if v < a.alpha {
				v = 0
			}
			y[i] = v
		}
	case actScaledTanh:
		for i, v := range x {
			y[i] = a.alpha * float32(math.Tanh(float64(a.beta*v)))
		}
	case actHardSigmoid:
		for i, v := range x {
			y[i] = min(max(a.alpha*v+a.beta, 0), 1)
		}
	case actElu:
		for i, v := range x {
			if v < 0 {
				v = a.alpha * (expF(v) - 1)
			}
			y[i] = v
		}
	case actSoftsign:
		for i, v := range x {
			y[i] = v / (1 + float32(math.Abs(float64(v))))
		}
	case actSoftplus:
		for i, v := range x {
			y[i] = float32(math.Log1p(math.Exp(float64(v))))
		}
	}
}

// bwd multiplies g by f'(x), where y = f(x); entries whose pre-activation was clipped
// (|x| ≥ clip, clip > 0) get no gradient, as clip's derivative there is 0.
func (a rnnAct) bwd(g, x, y []float32, clip float32) {
	g, y = g[:len(x)], y[:len(x)]
	switch a.kind {
	case actSigmoid:
		for i, v := range y {
			g[i] *= v * (1 - v)
		}
	case actTanh:
		for i, v := range y {
			g[i] *= 1 - v*v
		}
	case actRelu:
		for i, v := range x {
			if v <= 0 {
				g[i] = 0
			}
		}
	case actAffine:
		for i := range x {
			g[i] *= a.alpha
		}
	case actLeakyRelu:
		for i, v := range x {
			if v < 0 {
				g[i] *= a.alpha
			}
		}
	case actThresholdedRelu:
		for i, v := range x {
			if v < a.alpha {
				g[i] = 0
			}
		}
	case actScaledTanh:
		for i, v := range x {
			t := float32(math.Tanh(float64(a.beta * v)))
			g[i] *= a.alpha * a.beta * (1 - t*t)
		}
	case actHardSigmoid:
		for i, v := range x {
			if u := a.alpha*v + a.beta; u <= 0 || u >= 1 {
				g[i] = 0
			} else {
				g[i] *= a.alpha
			}
		}
	case actElu:
		for i, v := range x {
			if v < 0 {
				g[i] *= y[i] + a.alpha
			}
		}
	case actSoftsign:
		for i, v := range x {
			d := 1 + float32(math.Abs(float64(v)))
			g[i] /= d * d
		}
	case actSoftplus:
		for i, v := range x {
			g[i] *= sigmoid(v)
		}
	}
	if clip > 0 {
		for i, v := range x {
			if v >= clip || v <= -clip {
				g[i] = 0
			}
		}
	}
}

// clipTo bounds x to [−c, c] when c > 0.
func clipTo(x []float32, c float32) {
	if c <= 0 {
		return
	}
	for i, v := range x {
		x[i] = min(max(v, -c), c)
	}
}

// rnnKernel is LSTM, GRU or RNN.
type rnnKernel struct {
	n      *Node
	cell   rnnCell
	gates  int // gates per direction: 1, 3 or 4
	hidden int // hidden_size attribute, 0 when absent (then read from R)
	dirs   int
	rev    bool // direction = reverse (one direction, run backwards)
	layout int64
	clip   float32 // 0: none
	lbr    bool    // GRU linear_before_reset
	forget bool    // LSTM input_forget
	acts   [2][3]rnnAct

	s rnnScratch
}

// rnnScratch is the history of one direction's forward pass (what Backward needs) and
// the buffers of its steps; it grows to the largest problem seen and is then reused.
type rnnScratch struct {
	xw   []float32 // [T·N, G·H] input projection in X's row order; Backward reuses it for dXW
	a    []float32 // [T, N, G·H] clipped pre-activations, by step
	g    []float32 // [T, N, G·H] activated gates, by step
	hs   []float32 // [T+1, N, H] hidden state before step 0 and after every step
	cs   []float32 // [T+1, N, H] LSTM cell state
	aux  []float32 // [T, N, H] LSTM: h(clip(c)); GRU lbr=1: h·Rhᵀ + Rbh
	tmp  []float32 // [N, G·H]
	dh   []float32 // [N, H]
	dc   []float32 // [N, H]
	dtmp []float32 // [N, H]
	rh   []float32 // [N, H] GRU lbr=0: r∘h_prev
	cc   []float32 // [H] LSTM: clip(c)
	bias []float32 // [G·H] bias added to the projection
	lens []int     // [N]
}

func buildRNNOp(cell rnnCell) Builder {
	return func(n *Node) (Kernel, error) {
		k := &rnnKernel{n: n, cell: cell}
		nacts := 0
		var defActs []string
		switch cell {
		case cellRNN:
			k.gates, nacts, defActs = 1, 1, []string{"Tanh"}
		case cellGRU:
			k.gates, nacts, defActs = 3, 2, []string{"Sigmoid", "Tanh"}
		case cellLSTM:
			k.gates, nacts, defActs = 4, 3, []string{"Sigmoid", "Tanh", "Tanh"}
		}
		switch d := n.String("direction", "forward"); d {
		case "forward":
			k.dirs = 1
		case "reverse":
			k.dirs, k.rev = 1, true
		case "bidirectional":
			k.dirs = 2
		default:
			return nil, n.Errorf("direction %q is not forward, reverse or bidirectional", d)
		}
		k.hidden = int(n.Int("hidden_size", 0))
		if k.hidden < 0 {
			return nil, n.Errorf("hidden_size %d is negative", k.hidden)
		}
		k.layout = n.Int("layout", 0)
		if k.layout != 0 && k.layout != 1 {
			return nil, n.Errorf("layout %d is not 0 or 1", k.layout)
		}
		if n.Has("clip") {
			k.clip = n.Float("clip", 0)
			if !(k.clip > 0) {
				return nil, n.Errorf("clip %v is not positive", k.clip)
			}
		}
		k.lbr = n.Int("linear_before_reset", 0) != 0
		k.forget = n.Int("input_forget", 0) != 0
		if cell != cellGRU && n.Has("linear_before_reset") {
			return nil, n.Errorf("linear_before_reset is a GRU attribute")
		}
		var names []string
		if a := n.attr("activations"); a != nil {
			for _, b := range a.GetStrings() {
				names = append(names, string(b))
			}
		}
		switch {
		case names == nil:
			names = defActs
			if k.dirs == 2 {
				names = append(append([]string(nil), defActs...), defActs...)
			}
		case len(names) == nacts && k.dirs == 2:
			// onnxruntime accepts one set for both directions.
			names = append(append([]string(nil), names...), names...)
		case len(names) != nacts*k.dirs:
			return nil, n.Errorf("%d activations given, want %d per direction", len(names), nacts)
		}
		alphas, betas := n.Floats("activation_alpha", nil), n.Floats("activation_beta", nil)
		for i, name := range names {
			e, ok := rnnActs[strings.ToLower(name)]
			if !ok {
				return nil, n.Errorf("activation %q is not supported (Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus are)", name)
			}
			a := rnnAct{kind: e.kind, alpha: e.defAlpha, beta: e.defBeta}
			if e.useAlpha && len(alphas) > 0 {
				a.alpha, alphas = alphas[0], alphas[1:]
			}
			if e.useBeta && len(betas) > 0 {
				a.beta, betas = betas[0], betas[1:]
			}
			k.acts[i/nacts][i%nacts] = a
		}
		maxIn := 6
		if cell == cellLSTM {
			maxIn = 8
		}
		if nin := n.NumInputs(); nin < 3 || nin > maxIn {
			return nil, n.Errorf("want 3 to %d inputs, have %d", maxIn, nin)
		}
		return k, nil
	}
}

// rnnDims are the sizes of one call.
type rnnDims struct {
	T, N, I, H, G int
}

func (k *rnnKernel) dims(in []*Tensor) (rnnDims, error) {
	x, w, r := in[0], in[1], in[2]
	if len(x.Shape) != 3 || len(w.Shape) != 3 || len(r.Shape) != 3 {
		return rnnDims{}, k.n.Errorf("X %v, W %v and R %v must have rank 3", x.Shape, w.Shape, r.Shape)
	}
	d := rnnDims{T: x.Shape[0], N: x.Shape[1], I: x.Shape[2], H: r.Shape[2], G: k.gates}
	if k.layout == 1 {
		d.T, d.N = d.N, d.T
	}
	if k.hidden != 0 && k.hidden != d.H {
		return d, k.n.Errorf("hidden_size %d, but R %v has %d columns", k.hidden, r.Shape, d.H)
	}
	gh := d.G * d.H
	if w.Shape[0] != k.dirs || w.Shape[1] != gh || w.Shape[2] != d.I {
		return d, k.n.Errorf("W %v, want [%d %d %d]", w.Shape, k.dirs, gh, d.I)
	}
	if r.Shape[0] != k.dirs || r.Shape[1] != gh {
		return d, k.n.Errorf("R %v, want [%d %d %d]", r.Shape, k.dirs, gh, d.H)
	}
	// Checked without building shape slices: dims runs on every call.
	check := func(i int, what string, a, b, c int) error {
		t := k.n.Optional(in, i)
		if t == nil {
			return nil
		}
		sh := t.Shape
		ok := len(sh) == 2 && c < 0 && sh[0] == a && sh[1] == b ||
			len(sh) == 1 && b < 0 && sh[0] == a ||
			len(sh) == 3 && c >= 0 && sh[0] == a && sh[1] == b && sh[2] == c
		if !ok {
			want := []int{a}
			for _, v := range []int{b, c} {
				if v >= 0 {
					want = append(want, v)
				}
			}
			return k.n.Errorf("%s has shape %v, want %v", what, sh, want)
		}
		return nil
	}
	sa, sb := k.dirs, d.N
	if k.layout == 1 {
		sa, sb = d.N, k.dirs
	}
	for _, err := range [...]error{
		check(3, "B", k.dirs, 2*gh, -1),
		check(4, "sequence_lens", d.N, -1, -1),
		check(5, "initial_h", sa, sb, d.H),
		check(6, "initial_c", sa, sb, d.H),
		check(7, "P", k.dirs, 3*d.H, -1),
	} {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

func (k *rnnKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	for i, t := range in {
		if t != nil && k.n.HasInput(i) && i != 4 && t.DType != Float32 {
			return nil, k.n.Errorf("input %d is %v, want float32", i, t.DType)
		}
	}
	if s := k.n.Optional(in, 4); s != nil && s.DType != Int64 {
		return nil, k.n.Errorf("sequence_lens is %v, want an integer tensor", s.DType)
	}
	d, err := k.dims(in)
	if err != nil {
		return nil, err
	}
	y, state := []int{d.T, k.dirs, d.N, d.H}, []int{k.dirs, d.N, d.H}
	if k.layout == 1 {
		y, state = []int{d.N, d.T, k.dirs, d.H}, []int{d.N, k.dirs, d.H}
	}
	nout := len(k.n.Proto.GetOutput())
	maxOut := 2
	if k.cell == cellLSTM {
		maxOut = 3
	}
	if nout > maxOut {
		return nil, k.n.Errorf("%d outputs, at most %d", nout, maxOut)
	}
	out := make([]*Tensor, nout)
	for j := range out {
		s := state
		if j == 0 {
			s = y
		}
		out[j] = &Tensor{DType: Float32, Shape: append([]int(nil), s...)}
	}
	return out, nil
}

// Retains: Backward recomputes the forward pass from the inputs and reads no output.
func (k *rnnKernel) Retains() (inputs, outputs []bool) {
	return []bool{true, true, true, true, true, true, true, true}, []bool{false, false, false}
}

// xRow is the row of X (and of the projection) holding time t of batch item n.
func (k *rnnKernel) xRow(d *rnnDims, t, n int) int {
	if k.layout == 1 {
		return n*d.T + t
	}
	return t*d.N + n
}

// yOff is the offset of Y's vector for time t, direction dir, batch item n.
func (k *rnnKernel) yOff(d *rnnDims, t, dir, n int) int {
	if k.layout == 1 {
		return ((n*d.T+t)*k.dirs + dir) * d.H
	}
	return ((t*k.dirs+dir)*d.N + n) * d.H
}

// stateOff is the offset of a state vector (initial_h, Y_h, …) of direction dir, item n.
func (k *rnnKernel) stateOff(d *rnnDims, dir, n int) int {
	if k.layout == 1 {
		return (n*k.dirs + dir) * d.H
	}
	return (dir*d.N + n) * d.H
}

// backwards reports whether direction dir runs from each sequence's end to its start.
func (k *rnnKernel) backwards(dir int) bool { return k.rev || dir == 1 }

// timeAt is the time index of step s of batch item n in direction dir, or −1 when the
// item's sequence has ended.
func (k *rnnKernel) timeAt(dir, s, n int) int {
	l := k.s.lens[n]
	if s >= l {
		return -1
	}
	if k.backwards(dir) {
		return l - 1 - s
	}
	return s
}

func (k *rnnKernel) prepare(d *rnnDims, in []*Tensor) error {
	s := &k.s
	gh := d.G * d.H
	s.xw = grow(s.xw, d.T*d.N*gh)
	s.a = grow(s.a, d.T*d.N*gh)
	s.g = grow(s.g, d.T*d.N*gh)
	s.hs = grow(s.hs, (d.T+1)*d.N*d.H)
	if k.cell == cellLSTM {
		s.cs = grow(s.cs, (d.T+1)*d.N*d.H)
	}
	if k.cell == cellLSTM || k.cell == cellGRU && k.lbr {
		s.aux = grow(s.aux, d.T*d.N*d.H)
	}
	s.tmp = grow(s.tmp, d.N*gh)
	s.dh = grow(s.dh, d.N*d.H)
	s.dc = grow(s.dc, d.N*d.H)
	s.dtmp = grow(s.dtmp, d.N*d.H)
	s.rh = grow(s.rh, d.N*d.H)
	s.cc = grow(s.cc, d.H)
	s.bias = grow(s.bias, gh)
	if cap(s.lens) < d.N {
		s.lens = make([]int, d.N)
	}
	s.lens = s.lens[:d.N]
	sl := k.n.Optional(in, 4)
	for n := range s.lens {
		s.lens[n] = d.T
		if sl != nil {
			l := sl.I[n]
			if l < 0 || l > int64(d.T) {
				return k.n.Errorf("sequence_lens[%d] = %d is outside [0, %d]", n, l, d.T)
			}
			s.lens[n] = int(l)
		}
	}
	return nil
}

// forwardDir runs direction dir over the whole sequence, filling the scratch history.
func (k *rnnKernel) forwardDir(ctx *Context, d *rnnDims, in []*Tensor, dir int) {
	s := &k.s
	H, G, N := d.H, d.G, d.N
	gh := G * H
	x := in[0].F
	w := in[1].F[dir*gh*d.I : (dir+1)*gh*d.I]
	r := in[2].F[dir*gh*H : (dir+1)*gh*H]
	// The projection's bias: Wb + Rb, except GRU's Rbh, which sits inside the reset
	// gate's product (linear_before_reset) or after the (r∘h)·Rhᵀ product.
	clear(s.bias)
	var rbh []float32
	if b := k.n.Optional(in, 3); b != nil {
		bd := b.F[dir*2*gh : (dir+1)*2*gh]
		for j := range gh {
			s.bias[j] = bd[j]
			if k.cell != cellGRU || j < 2*H {
				s.bias[j] += bd[gh+j]
			}
		}
		if k.cell == cellGRU {
			rbh = bd[gh+2*H : 2*gh]
		}
	}
	xw := s.xw[:d.T*N*gh]
	for row := range d.T * N {
		copy(xw[row*gh:(row+1)*gh], s.bias)
	}
	nnSgemm(ctx.BLAS, false, true, d.T*N, gh, d.I, 1, x, w, 1, xw)

	// Initial states.
	h0, c0 := k.n.Optional(in, 5), k.n.Optional(in, 6)
	for n := range N {
		hv := s.hs[n*H : (n+1)*H]
		if h0 != nil {
			copy(hv, h0.F[k.stateOff(d, dir, n):][:H])
		} else {
			clear(hv)
		}
		if k.cell == cellLSTM {
			cv := s.cs[n*H : (n+1)*H]
			if c0 != nil {
				copy(cv, c0.F[k.stateOff(d, dir, n):][:H])
			} else {
				clear(cv)
			}
		}
	}
	var p []float32
	if pt := k.n.Optional(in, 7); pt != nil && k.cell == cellLSTM {
		p = pt.F[dir*3*H : (dir+1)*3*H]
	}
	acts := &k.acts[dir]
	for st := range d.T {
		hPrev := s.hs[st*N*H : (st+1)*N*H]
		hNext := s.hs[(st+1)*N*H : (st+2)*N*H]
		a := s.a[st*N*gh : (st+1)*N*gh]
		g := s.g[st*N*gh : (st+1)*N*gh]
		for n := range N {
			if t := k.timeAt(dir, st, n); t >= 0 {
				copy(a[n*gh:(n+1)*gh], xw[k.xRow(d, t, n)*gh:][:gh])
			} else {
				clear(a[n*gh : (n+1)*gh])
			}
		}
		switch {
		case k.cell == cellGRU && !k.lbr:
			// z and r first; the candidate needs r.
			nnSgemmLD(ctx.BLAS, false, true, N, 2*H, H, 1, hPrev, H, r, H, 1, a, gh)
		case k.cell == cellGRU:
			nnSgemm(ctx.BLAS, false, true, N, gh, H, 1, hPrev, r, 0, s.tmp)
		default:
			nnSgemm(ctx.BLAS, false, true, N, gh, H, 1, hPrev, r, 1, a)
		}
		for n := range N {
			an, gn := a[n*gh:(n+1)*gh], g[n*gh:(n+1)*gh]
			hp, hn := hPrev[n*H:(n+1)*H], hNext[n*H:(n+1)*H]
			active := k.timeAt(dir, st, n) >= 0
			switch k.cell {
			case cellRNN:
				if !active {
					copy(hn, hp)
					continue
				}
				clipTo(an, k.clip)
				acts[0].fwd(gn, an)
				copy(hn, gn)
			case cellLSTM:
				cp := s.cs[st*N*H+n*H:][:H]
				cn := s.cs[(st+1)*N*H+n*H:][:H]
				if !active {
					copy(hn, hp)
					copy(cn, cp)
					continue
				}
				ai, ao, af, ac := an[:H], an[H:2*H], an[2*H:3*H], an[3*H:]
				gi, gO, gf, gc := gn[:H], gn[H:2*H], gn[2*H:3*H], gn[3*H:]
				if p != nil {
					for j := range H {
						ai[j] += p[j] * cp[j]
						af[j] += p[2*H+j] * cp[j]
					}
				}
				clipTo(ai, k.clip)
				clipTo(af, k.clip)
				clipTo(ac, k.clip)
				acts[0].fwd(gi, ai)
				if k.forget {
					for j := range H {
						gf[j] = 1 - gi[j]
					}
				} else {
					acts[0].fwd(gf, af)
				}
				acts[1].fwd(gc, ac)
				for j := range H {
					cn[j] = gf[j]*cp[j] + gi[j]*gc[j]
				}
				if p != nil {
					for j := range H {
						ao[j] += p[H+j] * cn[j]
					}
				}
				clipTo(ao, k.clip)
				acts[0].fwd(gO, ao)
				hc := s.aux[st*N*H+n*H:][:H]
				copy(hc, cn)
				clipTo(hc, k.clip)
				acts[2].fwd(hc, hc)
				for j := range H {
					hn[j] = gO[j] * hc[j]
				}
			case cellGRU:
				if !active {
					copy(hn, hp)
					continue
				}
				azr, gzr := an[:2*H], gn[:2*H]
				if k.lbr {
					hr := s.aux[st*N*H+n*H:][:H]
					tn := s.tmp[n*gh : (n+1)*gh]
					for j := range 2 * H {
						azr[j] += tn[j]
					}
					clipTo(azr, k.clip)
					acts[0].fwd(gzr, azr)
					ah := an[2*H:]
					for j := range H {
						hr[j] = tn[2*H+j]
						if rbh != nil {
							hr[j] += rbh[j]
						}
						ah[j] += gzr[H+j] * hr[j]
					}
				} else {
					clipTo(azr, k.clip)
					acts[0].fwd(gzr, azr)
				}
			}
		}
		if k.cell != cellGRU {
			continue
		}
		if !k.lbr {
			// ah += (r∘h)·Rhᵀ + Rbh for the active items; inactive ones keep zeros
			// they never use.
			rh := s.rh[:N*H]
			for n := range N {
				if k.timeAt(dir, st, n) < 0 {
					clear(rh[n*H : (n+1)*H])
					continue
				}
				gr, hp := g[n*gh+H:][:H], hPrev[n*H:(n+1)*H]
				for j := range H {
					rh[n*H+j] = gr[j] * hp[j]
				}
				if rbh != nil {
					ah := a[n*gh+2*H:][:H]
					for j := range H {
						ah[j] += rbh[j]
					}
				}
			}
			nnSgemmLD(ctx.BLAS, false, true, N, H, H, 1, rh, H, r[2*H*H:], H, 1, a[2*H:], gh)
		}
		for n := range N {
			if k.timeAt(dir, st, n) < 0 {
				continue
			}
			an, gn := a[n*gh:(n+1)*gh], g[n*gh:(n+1)*gh]
			hp, hn := hPrev[n*H:(n+1)*H], hNext[n*H:(n+1)*H]
			ah, gh2 := an[2*H:], gn[2*H:]
			clipTo(ah, k.clip)
			acts[1].fwd(gh2, ah)
			z := gn[:H]
			for j := range H {
				hn[j] = (1-z[j])*gh2[j] + z[j]*hp[j]
			}
		}
	}
}

// writeOutputs copies direction dir's history into Y, Y_h and Y_c.
func (k *rnnKernel) writeOutputs(d *rnnDims, out []*Tensor, dir int) {
	s := &k.s
	H, N := d.H, d.N
	if y := out[0]; y != nil && len(y.F) > 0 {
		for st := range d.T {
			for n := range N {
				if t := k.timeAt(dir, st, n); t >= 0 {
					copy(y.F[k.yOff(d, t, dir, n):][:H], s.hs[(st+1)*N*H+n*H:][:H])
				}
			}
		}
	}
	for j := 1; j < len(out) && j < 3; j++ {
		src := s.hs
		if j == 2 {
			src = s.cs
		}
		for n := range N {
			dst := out[j].F[k.stateOff(d, dir, n):][:H]
			if s.lens[n] == 0 {
				clear(dst)
			} else {
				copy(dst, src[d.T*N*H+n*H:][:H])
			}
		}
	}
}

func (k *rnnKernel) Forward(ctx *Context, in, out []*Tensor) error {
	d, err := k.dims(in)
	if err != nil {
		return err
	}
	if err := k.prepare(&d, in); err != nil {
		return err
	}
	// Y is zero past each sequence's end.
	clear(out[0].F)
	for dir := range k.dirs {
		k.forwardDir(ctx, &d, in, dir)
		k.writeOutputs(&d, out, dir)
	}
	return nil
}

func (k *rnnKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	d, err := k.dims(in)
	if err != nil {
		return err
	}
	if err := k.prepare(&d, in); err != nil {
		return err
	}
	for dir := range k.dirs {
		k.forwardDir(ctx, &d, in, dir)
		k.backwardDir(ctx, &d, in, gout, gin, dir)
	}
	return nil
}

// gradOf returns the gradient buffer of input i, or nil.
func gradOf(gin []*Tensor, i int) []float32 {
	if i < len(gin) && gin[i] != nil {
		return gin[i].F
	}
	return nil
}

// backwardDir is backpropagation through time over direction dir's history. The
// gradients of the pre-activations go, by X row, into the projection buffer (whose
// values the history no longer needs), so that dX, dW and dWb are one GEMM each.
func (k *rnnKernel) backwardDir(ctx *Context, d *rnnDims, in, gout, gin []*Tensor, dir int) {
	s := &k.s
	H, G, N := d.H, d.G, d.N
	gh := G * H
	r := in[2].F[dir*gh*H : (dir+1)*gh*H]
	var dr, db []float32
	if g := gradOf(gin, 2); g != nil {
		dr = g[dir*gh*H : (dir+1)*gh*H]
	}
	if g := gradOf(gin, 3); g != nil && k.n.Optional(in, 3) != nil {
		db = g[dir*2*gh : (dir+1)*2*gh]
	}
	var p, dp []float32
	if pt := k.n.Optional(in, 7); pt != nil && k.cell == cellLSTM {
		p = pt.F[dir*3*H : (dir+1)*3*H]
		if g := gradOf(gin, 7); g != nil {
			dp = g[dir*3*H : (dir+1)*3*H]
		}
	}
	var gy, gyh, gyc []float32
	if len(gout) > 0 && gout[0] != nil {
		gy = gout[0].F
	}
	if len(gout) > 1 && gout[1] != nil {
		gyh = gout[1].F
	}
	if len(gout) > 2 && gout[2] != nil {
		gyc = gout[2].F
	}
	// The carried state gradients start at Y_h's and Y_c's.
	dh, dc := s.dh[:N*H], s.dc[:N*H]
	clear(dh)
	clear(dc)
	for n := range N {
		if s.lens[n] == 0 {
			continue
		}
		if gyh != nil {
			copy(dh[n*H:(n+1)*H], gyh[k.stateOff(d, dir, n):][:H])
		}
		if gyc != nil && k.cell == cellLSTM {
			copy(dc[n*H:(n+1)*H], gyc[k.stateOff(d, dir, n):][:H])
		}
	}
	dxw := s.xw[:d.T*N*gh]
	clear(dxw)
	acts := &k.acts[dir]
	for st := d.T - 1; st >= 0; st-- {
		hPrev := s.hs[st*N*H : (st+1)*N*H]
		a := s.a[st*N*gh : (st+1)*N*gh]
		g := s.g[st*N*gh : (st+1)*N*gh]
		// da: the pre-activation gradients of this step, [N, G·H]; rows of items
		// whose sequence has ended stay zero.
		da := s.tmp[:N*gh]
		clear(da)
		for n := range N {
			t := k.timeAt(dir, st, n)
			if t < 0 {
				continue
			}
			dhn := dh[n*H : (n+1)*H]
			if gy != nil {
				gyn := gy[k.yOff(d, t, dir, n):][:H]
				for j := range H {
					dhn[j] += gyn[j]
				}
			}
			an, gn, dan := a[n*gh:(n+1)*gh], g[n*gh:(n+1)*gh], da[n*gh:(n+1)*gh]
			switch k.cell {
			case cellRNN:
				copy(dan, dhn)
				acts[0].bwd(dan, an, gn, k.clip)
				clear(dhn) // replaced by da·R below
			case cellLSTM:
				cp := s.cs[st*N*H+n*H:][:H]
				cn := s.cs[(st+1)*N*H+n*H:][:H]
				hc := s.aux[st*N*H+n*H:][:H]
				dcn := dc[n*H : (n+1)*H]
				ai, ao, af, ac := an[:H], an[H:2*H], an[2*H:3*H], an[3*H:]
				gi, gO, gf, gc := gn[:H], gn[H:2*H], gn[2*H:3*H], gn[3*H:]
				dai, dao, daf, dac := dan[:H], dan[H:2*H], dan[2*H:3*H], dan[3*H:]
				// h = o∘h(clip(c)); dtmp holds d h(clip(c)) → dc.
				dt := s.dtmp[n*H : (n+1)*H]
				for j := range H {
					dao[j] = dhn[j] * hc[j]
					dt[j] = dhn[j] * gO[j]
				}
				// h's derivative reads clip(c); aux holds h(clip(c)).
				cc := s.cc[:H]
				copy(cc, cn)
				clipTo(cc, k.clip)
				acts[2].bwd(dt, cc, hc, k.clip)
				acts[0].bwd(dao, ao, gO, k.clip)
				for j := range H {
					dcn[j] += dt[j]
				}
				if p != nil {
					for j := range H {
						dcn[j] += dao[j] * p[H+j]
					}
				}
				for j := range H {
					dai[j] = dcn[j] * gc[j]
					dac[j] = dcn[j] * gi[j]
					daf[j] = dcn[j] * cp[j]
				}
				if k.forget {
					for j := range H {
						dai[j] -= daf[j]
						daf[j] = 0
					}
				} else {
					acts[0].bwd(daf, af, gf, k.clip)
				}
				acts[0].bwd(dai, ai, gi, k.clip)
				acts[1].bwd(dac, ac, gc, k.clip)
				for j := range H {
					dcn[j] *= gf[j]
				}
				if p != nil {
					for j := range H {
						dcn[j] += dai[j]*p[j] + daf[j]*p[2*H+j]
					}
					if dp != nil {
						for j := range H {
							dp[j] += dai[j] * cp[j]
							dp[H+j] += dao[j] * cn[j]
							dp[2*H+j] += daf[j] * cp[j]
						}
					}
				}
				clear(dhn)
			case cellGRU:
				hp := hPrev[n*H : (n+1)*H]
				z, gc := gn[:H], gn[2*H:]
				daz, dah := dan[:H], dan[2*H:]
				for j := range H {
					daz[j] = dhn[j] * (hp[j] - gc[j])
					dah[j] = dhn[j] * (1 - z[j])
					dhn[j] *= z[j]
				}
				acts[0].bwd(daz, an[:H], z, k.clip)
				acts[1].bwd(dah, an[2*H:], gc, k.clip)
			}
		}
		if k.cell == cellGRU {
			k.gruResetBackward(ctx, d, st, dir, r, dr, db)
		}
		// Scatter into X's row order for the projection's gradients.
		for n := range N {
			if t := k.timeAt(dir, st, n); t >= 0 {
				copy(dxw[k.xRow(d, t, n)*gh:][:gh], da[n*gh:(n+1)*gh])
			}
		}
		// Recurrent gradients: dh_prev += da·R, dR += daᵀ·h_prev over the part of R
		// that multiplies h_prev directly (GRU lbr=0: z and r only; its candidate's
		// part went through gruResetBackward).
		rows := gh
		if k.cell == cellGRU && !k.lbr {
			rows = 2 * H
		}
		if k.cell == cellGRU && k.lbr {
			// The candidate's recurrent product saw r∘dah as its gradient.
			for n := range N {
				if k.timeAt(dir, st, n) < 0 {
					continue
				}
				gr := g[n*gh+H:][:H]
				dah := da[n*gh+2*H:][:H]
				for j := range H {
					dah[j] *= gr[j]
				}
			}
			if db != nil {
				for n := range N {
					dah := da[n*gh+2*H:][:H]
					for j := range H {
						db[gh+2*H+j] += dah[j]
					}
				}
			}
		}
		nnSgemmLD(ctx.BLAS, false, false, N, H, rows, 1, da, gh, r, H, 1, dh, H)
		if dr != nil {
			nnSgemmLD(ctx.BLAS, true, false, rows, H, N, 1, da, gh, hPrev, H, 1, dr, H)
		}
	}
	// Initial states' gradients are what is carried past step 0.
	if g := gradOf(gin, 5); g != nil && k.n.Optional(in, 5) != nil {
		for n := range N {
			dst := g[k.stateOff(d, dir, n):][:H]
			for j, v := range dh[n*H : (n+1)*H] {
				dst[j] += v
			}
		}
	}
	if g := gradOf(gin, 6); g != nil && k.n.Optional(in, 6) != nil && k.cell == cellLSTM {
		for n := range N {
			dst := g[k.stateOff(d, dir, n):][:H]
			for j, v := range dc[n*H : (n+1)*H] {
				dst[j] += v
			}
		}
	}
	// The projection: dX += dXW·W, dW += dXWᵀ·X, dWb (and the Rb that was folded in)
	// += the column sums of dXW.
	if g := gradOf(gin, 0); g != nil {
		nnSgemm(ctx.BLAS, false, false, d.T*N, d.I, gh, 1, dxw, in[1].F[dir*gh*d.I:(dir+1)*gh*d.I], 1, g)
	}
	if g := gradOf(gin, 1); g != nil {
		nnSgemm(ctx.BLAS, true, false, gh, d.I, d.T*N, 1, dxw, in[0].F, 1, g[dir*gh*d.I:(dir+1)*gh*d.I])
	}
	if db != nil {
		for row := range d.T * N {
			for j, v := range dxw[row*gh : (row+1)*gh] {
				db[j] += v
				if k.cell != cellGRU || j < 2*H {
					db[gh+j] += v
				}
			}
		}
	}
}

// gruResetBackward propagates the candidate gradient dah (in s.tmp, columns 2H..3H)
// through the reset gate of step st: it fills dar and, for linear_before_reset = 0,
// adds the candidate's recurrent contributions to dh, dR and dRbh.
func (k *rnnKernel) gruResetBackward(ctx *Context, d *rnnDims, st, dir int, r, dr, db []float32) {
	s := &k.s
	H, N := d.H, d.N
	gh := d.G * H
	hPrev := s.hs[st*N*H : (st+1)*N*H]
	a := s.a[st*N*gh : (st+1)*N*gh]
	g := s.g[st*N*gh : (st+1)*N*gh]
	da := s.tmp[:N*gh]
	acts := &k.acts[dir]
	if k.lbr {
		for n := range N {
			if k.timeAt(dir, st, n) < 0 {
				continue
			}
			hr := s.aux[st*N*H+n*H:][:H]
			dah, dar := da[n*gh+2*H:][:H], da[n*gh+H:][:H]
			for j := range H {
				dar[j] = dah[j] * hr[j]
			}
			acts[0].bwd(dar, a[n*gh+H:][:H], g[n*gh+H:][:H], k.clip)
		}
		return
	}
	// ah = … + (r∘h_prev)·Rhᵀ + Rbh: d(r∘h_prev) = dah·Rh.
	drh := s.dtmp[:N*H]
	nnSgemmLD(ctx.BLAS, false, false, N, H, H, 1, da[2*H:], gh, r[2*H*H:], H, 0, drh, H)
	if dr != nil {
		// dRh += dahᵀ·(r∘h_prev), r∘h_prev rebuilt from the history.
		rh := s.rh[:N*H]
		for n := range N {
			if k.timeAt(dir, st, n) < 0 {
				// Stale gates of an ended sequence must not reach dR, not even as 0·NaN.
				clear(rh[n*H : (n+1)*H])
				continue
			}
			gr, hp := g[n*gh+H:][:H], hPrev[n*H:(n+1)*H]
			for j := range H {
				rh[n*H+j] = gr[j] * hp[j]
			}
		}
		nnSgemmLD(ctx.BLAS, true, false, H, H, N, 1, da[2*H:], gh, rh, H, 1, dr[2*H*H:], H)
	}
	if db != nil {
		for n := range N {
			for j, v := range da[n*gh+2*H:][:H] {
				db[gh+2*H+j] += v
			}
		}
	}
	dh := s.dh[:N*H]
	for n := range N {
		if k.timeAt(dir, st, n) < 0 {
			continue
		}
		gr, hp := g[n*gh+H:][:H], hPrev[n*H:(n+1)*H]
		dar := da[n*gh+H:][:H]
		drn := drh[n*H : (n+1)*H]
		for j := range H {
			dar[j] = drn[j] * hp[j]
			dh[n*H+j] += drn[j] * gr[j]
		}
		acts[0].bwd(dar, a[n*gh+H:][:H], gr, k.clip)
	}
}
