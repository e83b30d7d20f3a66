package engine

import (
	"fmt"
	"slices"
	"strings"
)

// einsumOpDefs returns Einsum's row.
func einsumOpDefs() []opDef {
	return []opDef{{name: "Einsum", build: buildEinsum, inputs: arity{n: 1, variadic: true}, grad: true}}
}

// Einsum labels: letters are 0–51 (A–Z then a–z, so that sorting ids sorts characters
// as numpy does for the implicit output), and the dimensions "..." stands for are
// einsumEll+i, right-aligned over the operands' ellipsis ranks.
const (
	einsumEll    = 52
	einsumMaxEll = 12
)

// einsumTerm is one operand's (or the output's) subscripts as written: labels, with -1
// where "..." stands.
type einsumTerm []int

func (t einsumTerm) hasEllipsis() bool { return slices.Contains(t, -1) }

// einsumKernel is Einsum with one or two operands. One operand (transposes, diagonals,
// reductions) is a single strided walk. Two operands reduce to a batched GEMM: each
// label is a batch label (in both operands and the output), an m or n label (in one
// operand and the output), a contracted k label (in both, not the output), or summed
// away inside one operand. Each operand is packed by one strided walk into
// [batch, m, k] or [batch, k, n], unless its data already has that layout (possibly
// transposed), as in "bij,bjk->bik" or "bhid,bhjd->bhij", which then go straight to
// BLAS; the product is unpacked into the output likewise. The VJP is the same GEMMs
// with the output gradient, and the packing walks run backwards, accumulating.
type einsumKernel struct {
	n    *Node
	in   []einsumTerm
	out  einsumTerm // nil when the equation has no "->"
	plan einsumPlan
	// Scratch of the packed operands, the packed product and their gradients.
	ap, bp, cp, gap, gbp, gcp []float32
	idx                       []int
}

// einsumWalk is one strided walk: the index space shape, with the strides of the
// strided tensor (st) and of the packed or output tensor (ps) along it.
type einsumWalk struct{ shape, st, ps []int }

// einsumPlan is the bookkeeping for one pair of input shapes.
type einsumPlan struct {
	shapes   [][]int
	outShape []int
	// One operand: walk maps the input (st) onto the output (ps); sum says some labels
	// are summed (their output stride is 0).
	walk einsumWalk
	sum  bool
	// Two operands: the product is batch × (m×k)·(k×n). aw, bw and cw map the operands and
	// the output onto their packed forms; a direct operand skips its walk (trans when its
	// data is the transposed block).
	batch, m, nn, k            int
	aw, bw, cw                 einsumWalk
	aDirect, bDirect, cDirect  bool
	aTrans, bTrans, aSum, bSum bool
}

func buildEinsum(n *Node) (Kernel, error) {
	eq := strings.ReplaceAll(n.String("equation", ""), " ", "")
	if eq == "" {
		return nil, n.Errorf("the equation attribute is required")
	}
	lhs, rhs, explicit := strings.Cut(eq, "->")
	k := &einsumKernel{n: n}
	parse := func(s string) (einsumTerm, error) {
		t := einsumTerm{}
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c >= 'A' && c <= 'Z':
				t = append(t, int(c-'A'))
			case c >= 'a' && c <= 'z':
				t = append(t, 26+int(c-'a'))
			case strings.HasPrefix(s[i:], "...") && !t.hasEllipsis():
				t = append(t, -1)
				i += 2
			default:
				return nil, fmt.Errorf("equation %q: unexpected %q", eq, s[i:])
			}
		}
		return t, nil
	}
	for _, s := range strings.Split(lhs, ",") {
		t, err := parse(s)
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		k.in = append(k.in, t)
	}
	if len(k.in) > 2 {
		return nil, n.Errorf("equation %q has %d operands; qtool supports one or two", eq, len(k.in))
	}
	if explicit {
		t, err := parse(rhs)
		if err != nil {
			return nil, n.Errorf("%v", err)
		}
		seen := map[int]bool{}
		for _, l := range t {
			if seen[l] {
				return nil, n.Errorf("equation %q repeats an output subscript", eq)
			}
			seen[l] = true
			if l >= 0 && !slices.ContainsFunc(k.in, func(in einsumTerm) bool { return slices.Contains(in, l) }) {
				return nil, n.Errorf("equation %q: output subscript %q is in no operand", eq, labelChar(l))
			}
		}
		k.out = t
	}
	return k, nil
}

func labelChar(l int) string {
	if l < 26 {
		return string(rune('A' + l))
	}
	return string(rune('a' + l - 26))
}

// expand turns a term into labels for an operand of rank r (ell is the broadcast
// ellipsis rank), or reports a rank mismatch.
func expand(t einsumTerm, r, ell int) ([]int, bool) {
	if !t.hasEllipsis() {
		return t, len(t) == r
	}
	e := r - (len(t) - 1)
	if e < 0 {
		return nil, false
	}
	out := make([]int, 0, r)
	for _, l := range t {
		if l >= 0 {
			out = append(out, l)
			continue
		}
		for i := range e {
			out = append(out, einsumEll+ell-e+i)
		}
	}
	return out, true
}

// makePlan works out the labels, sizes, strides and the GEMM for the input shapes.
func (k *einsumKernel) makePlan(shapes [][]int) (einsumPlan, error) {
	p := einsumPlan{}
	for _, s := range shapes {
		p.shapes = append(p.shapes, slices.Clone(s))
	}
	ell := 0
	for i, t := range k.in {
		if t.hasEllipsis() {
			ell = max(ell, len(shapes[i])-(len(t)-1))
		}
	}
	if ell > einsumMaxEll {
		return p, k.n.Errorf("ellipsis covers %d dimensions, more than %d", ell, einsumMaxEll)
	}
	labels := make([][]int, len(k.in))
	size := map[int]int{}
	count := map[int]int{}
	for i, t := range k.in {
		ls, ok := expand(t, len(shapes[i]), ell)
		if !ok {
			return p, k.n.Errorf("operand %d of shape %v does not fit its subscripts", i, shapes[i])
		}
		labels[i] = ls
		for j, l := range ls {
			d := shapes[i][j]
			count[l]++
			switch s, seen := size[l]; {
			case !seen || s == 1 && l >= einsumEll:
				size[l] = d
			case s != d && !(d == 1 && l >= einsumEll):
				return p, k.n.Errorf("subscript %s has sizes %d and %d", labelName(l), s, d)
			}
		}
	}
	var outL []int
	if k.out != nil {
		for _, l := range k.out {
			if l >= 0 {
				outL = append(outL, l)
				continue
			}
			for i := range ell {
				outL = append(outL, einsumEll+i)
			}
		}
	} else {
		// Implicit output: the ellipsis, then the letters used once, in order.
		for i := range ell {
			outL = append(outL, einsumEll+i)
		}
		for l := range einsumEll {
			if count[l] == 1 {
				outL = append(outL, l)
			}
		}
	}
	for _, l := range outL {
		p.outShape = append(p.outShape, size[l])
	}
	// strides returns operand i's stride of each label in ls: repeated labels add up
	// (a diagonal), broadcast ellipsis dimensions and absent labels have stride 0.
	strides := func(i int, ls []int) []int {
		st := stridesOf(nil, shapes[i])
		out := make([]int, len(ls))
		for j, l := range ls {
			for q, m := range labels[i] {
				if m == l && shapes[i][q] == size[l] {
					out[j] += st[q]
				}
			}
		}
		return out
	}
	// packed returns the row-major strides of ls (0 for labels in zero).
	packed := func(ls []int, zero func(int) bool) []int {
		out := make([]int, len(ls))
		s := 1
		for j := len(ls) - 1; j >= 0; j-- {
			if !zero(ls[j]) {
				out[j] = s
				s *= size[ls[j]]
			}
		}
		return out
	}
	sizes := func(ls []int) []int {
		out := make([]int, len(ls))
		for j, l := range ls {
			out[j] = size[l]
		}
		return out
	}
	inOut := func(l int) bool { return slices.Contains(outL, l) }
	uniq := func(ls []int) []int { // first appearances, in order
		var out []int
		for _, l := range ls {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
		return out
	}
	if len(k.in) == 1 {
		var summed []int
		for _, l := range uniq(labels[0]) {
			if !inOut(l) {
				summed = append(summed, l)
			}
		}
		all := slices.Concat(outL, summed)
		p.walk = einsumWalk{shape: sizes(all), st: strides(0, all), ps: packed(all, func(l int) bool { return !inOut(l) })}
		p.sum = len(summed) > 0
		return p, nil
	}
	a, b := labels[0], labels[1]
	var bat, ml, nl, kl, sa, sb []int
	for _, l := range outL {
		switch inA, inB := slices.Contains(a, l), slices.Contains(b, l); {
		case inA && inB:
			bat = append(bat, l)
		case inA:
			ml = append(ml, l)
		default:
			nl = append(nl, l)
		}
	}
	for _, l := range uniq(a) {
		switch {
		case inOut(l):
		case slices.Contains(b, l):
			kl = append(kl, l)
		default:
			sa = append(sa, l)
		}
	}
	for _, l := range uniq(b) {
		if !inOut(l) && !slices.Contains(a, l) {
			sb = append(sb, l)
		}
	}
	prod := func(ls []int) int {
		n := 1
		for _, l := range ls {
			n *= size[l]
		}
		return n
	}
	p.batch, p.m, p.nn, p.k = prod(bat), prod(ml), prod(nl), prod(kl)
	none := func(int) bool { return false }
	// direct reports whether operand i's data is exactly the layout ls, with no
	// repeated, broadcast or summed label.
	direct := func(i int, ls []int) bool {
		return slices.Equal(labels[i], ls) && slices.Equal(shapes[i], sizes(ls))
	}
	aw := slices.Concat(bat, ml, kl, sa)
	p.aw = einsumWalk{shape: sizes(aw), st: strides(0, aw), ps: packed(aw, func(l int) bool { return slices.Contains(sa, l) })}
	p.aSum = len(sa) > 0
	switch {
	case direct(0, slices.Concat(bat, ml, kl)):
		p.aDirect = true
	case direct(0, slices.Concat(bat, kl, ml)):
		p.aDirect, p.aTrans = true, true
	}
	bw := slices.Concat(bat, kl, nl, sb)
	p.bw = einsumWalk{shape: sizes(bw), st: strides(1, bw), ps: packed(bw, func(l int) bool { return slices.Contains(sb, l) })}
	p.bSum = len(sb) > 0
	switch {
	case direct(1, slices.Concat(bat, kl, nl)):
		p.bDirect = true
	case direct(1, slices.Concat(bat, nl, kl)):
		p.bDirect, p.bTrans = true, true
	}
	cw := slices.Concat(bat, ml, nl)
	ost := stridesOf(nil, p.outShape)
	yst := make([]int, len(cw))
	for j, l := range cw {
		yst[j] = ost[slices.Index(outL, l)]
	}
	p.cw = einsumWalk{shape: sizes(cw), st: yst, ps: packed(cw, none)}
	p.cDirect = slices.Equal(cw, outL)
	return p, nil
}

func labelName(l int) string {
	if l >= einsumEll {
		return fmt.Sprintf("... dimension %d", l-einsumEll)
	}
	return labelChar(l)
}

func (k *einsumKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	if len(in) != len(k.in) {
		return nil, k.n.Errorf("the equation has %d operands, the node %d inputs", len(k.in), len(in))
	}
	shapes := make([][]int, len(in))
	for i, t := range in {
		if t.DType != Float32 {
			return nil, k.n.Errorf("input %d has type %s; qtool's Einsum is float only", i, t.DType)
		}
		shapes[i] = t.Shape
	}
	p, err := k.makePlan(shapes)
	if err != nil {
		return nil, err
	}
	k.plan = p
	return []*Tensor{{DType: Float32, Shape: slices.Clone(p.outShape)}}, nil
}

// planFor returns the plan of the inputs' shapes, remaking it only when they changed.
func (k *einsumKernel) planFor(in []*Tensor) (*einsumPlan, error) {
	same := len(k.plan.shapes) == len(in)
	for i := 0; same && i < len(in); i++ {
		same = slices.Equal(k.plan.shapes[i], in[i].Shape)
	}
	if !same {
		shapes := make([][]int, len(in))
		for i, t := range in {
			shapes[i] = t.Shape
		}
		p, err := k.makePlan(shapes)
		if err != nil {
			return nil, err
		}
		k.plan = p
	}
	return &k.plan, nil
}

// grow returns buf resized to n.
func grow(buf []float32, n int) []float32 { return slices.Grow(buf[:0], n)[:n] }

func (k *einsumKernel) walk(add bool, dst []float32, ds []int, src []float32, ss []int, w *einsumWalk) {
	k.idx = slices.Grow(k.idx[:0], len(w.shape))[:len(w.shape)]
	viewCopy(add, dst, 0, ds, src, 0, ss, w.shape, k.idx)
}

func (k *einsumKernel) Forward(ctx *Context, in, out []*Tensor) error {
	p, err := k.planFor(in)
	if err != nil {
		return err
	}
	y := out[0].F
	if len(in) == 1 {
		if p.sum {
			clear(y)
		}
		k.walk(p.sum, y, p.walk.ps, in[0].F, p.walk.st, &p.walk)
		return nil
	}
	a, b := k.operands(p, in)
	c := y
	if !p.cDirect {
		k.cp = grow(k.cp, p.batch*p.m*p.nn)
		c = k.cp
	}
	mk, kn, mn := p.m*p.k, p.k*p.nn, p.m*p.nn
	for bi := range p.batch {
		nnSgemm(ctx.BLAS, p.aDirect && p.aTrans, p.bDirect && p.bTrans, p.m, p.nn, p.k, 1,
			a[bi*mk:(bi+1)*mk], b[bi*kn:(bi+1)*kn], 0, c[bi*mn:(bi+1)*mn])
	}
	if p.k == 0 {
		clear(c)
	}
	if !p.cDirect {
		k.walk(false, y, p.cw.st, c, p.cw.ps, &p.cw)
	}
	return nil
}

// operands returns the product's operands as its GEMM reads them: the inputs' data where
// they are laid out for it, else packed into the kernel's buffers (the forward's packed
// buffers may have been reused before the backward pass, so it packs again).
func (k *einsumKernel) operands(p *einsumPlan, in []*Tensor) (a, b []float32) {
	a, b = in[0].F, in[1].F
	if !p.aDirect {
		k.ap = grow(k.ap, p.batch*p.m*p.k)
		if p.aSum {
			clear(k.ap)
		}
		k.walk(p.aSum, k.ap, p.aw.ps, a, p.aw.st, &p.aw)
		a = k.ap
	}
	if !p.bDirect {
		k.bp = grow(k.bp, p.batch*p.k*p.nn)
		if p.bSum {
			clear(k.bp)
		}
		k.walk(p.bSum, k.bp, p.bw.ps, b, p.bw.st, &p.bw)
		b = k.bp
	}
	return a, b
}

// Retains keeps the operands of a product, whose VJP reads them; a one-operand
// equation's VJP needs shapes only.
func (k *einsumKernel) Retains() (in, out []bool) {
	two := len(k.in) == 2
	return []bool{two, two}[:len(k.in)], []bool{false}
}

func (k *einsumKernel) Backward(ctx *Context, in, out, gout, gin []*Tensor) error {
	if gout[0] == nil {
		return nil
	}
	p, err := k.planFor(in)
	if err != nil {
		return err
	}
	gy := gout[0].F
	if len(in) == 1 {
		if gin[0] != nil {
			// Every input element the walk visits receives its output element's gradient.
			k.walk(true, gin[0].F, p.walk.st, gy, p.walk.ps, &p.walk)
		}
		return nil
	}
	gc := gy
	if !p.cDirect {
		k.gcp = grow(k.gcp, p.batch*p.m*p.nn)
		k.walk(false, k.gcp, p.cw.ps, gy, p.cw.st, &p.cw)
		gc = k.gcp
	}
	a, b := k.operands(p, in)
	ta, tb := p.aDirect && p.aTrans, p.bDirect && p.bTrans
	mk, kn, mn := p.m*p.k, p.k*p.nn, p.m*p.nn
	if gin[0] != nil {
		// dA = gC·op(B)ᵀ, written as A is stored; a direct A accumulates in place.
		ga, beta := gin[0].F, float32(1)
		if !p.aDirect {
			k.gap = grow(k.gap, p.batch*mk)
			ga, beta = k.gap, 0
		}
		for bi := range p.batch {
			g, bb, da := gc[bi*mn:(bi+1)*mn], b[bi*kn:(bi+1)*kn], ga[bi*mk:(bi+1)*mk]
			if ta {
				nnSgemm(ctx.BLAS, tb, true, p.k, p.m, p.nn, 1, bb, g, beta, da)
			} else {
				nnSgemm(ctx.BLAS, false, !tb, p.m, p.k, p.nn, 1, g, bb, beta, da)
			}
		}
		if p.nn == 0 && beta == 0 {
			clear(ga)
		}
		if !p.aDirect {
			k.walk(true, gin[0].F, p.aw.st, k.gap, p.aw.ps, &p.aw)
		}
	}
	if gin[1] != nil {
		// dB = op(A)ᵀ·gC, written as B is stored.
		gb, beta := gin[1].F, float32(1)
		if !p.bDirect {
			k.gbp = grow(k.gbp, p.batch*kn)
			gb, beta = k.gbp, 0
		}
		for bi := range p.batch {
			g, aa, db := gc[bi*mn:(bi+1)*mn], a[bi*mk:(bi+1)*mk], gb[bi*kn:(bi+1)*kn]
			if tb {
				nnSgemm(ctx.BLAS, true, ta, p.nn, p.k, p.m, 1, g, aa, beta, db)
			} else {
				nnSgemm(ctx.BLAS, !ta, false, p.k, p.nn, p.m, 1, aa, g, beta, db)
			}
		}
		if p.m == 0 && beta == 0 {
			clear(gb)
		}
		if !p.bDirect {
			k.walk(true, gin[1].F, p.bw.st, k.gbp, p.bw.ps, &p.bw)
		}
	}
	return nil
}
