package engine

import "slices"

// Inference plans also join a bias Add to the MatMul before it, as onnxruntime's
// MatMul+Add fusion does: PyTorch exports every nn.Linear on a 3-D input as a MatMul
// with the weight and an Add of the bias, and in a small transformer those Adds were a
// tenth of the run, each a pass over the product. The fused step starts the product's
// rows from the bias and lets the BLAS add to them (beta = 1), so the Add's pass and its
// output buffer go. Outputs differ from the unfused pair by float rounding only: the
// bias joins the sum before the product is rounded instead of after. The bias is read on
// every run, as any parameter is (see fuse.go).

// matMulBiasKernel is a MatMul whose output a bias of its last dimension is added to.
// Inputs: A, B, bias.
type matMulBiasKernel struct {
	mm *matMulKernel
}

func (k *matMulBiasKernel) Infer(in []*Tensor) ([]*Tensor, error) { return k.mm.Infer(in[:2]) }

func (k *matMulBiasKernel) Forward(ctx *Context, in, out []*Tensor) error {
	d, err := k.mm.cached(in[0].Shape, in[1].Shape)
	if err != nil {
		return err
	}
	bias, y := in[2].F, out[0].F
	for r := 0; r < len(y); r += d.n {
		copy(y[r:r+d.n], bias)
	}
	if d.k == 0 {
		return nil
	}
	a, b := in[0].F, in[1].F
	if M := d.batch * d.m; tileGEMMOK(M, d.n, d.k) {
		k.mm.tileGEMM(ctx, M, d.n, d.k, a, b, y, tileAdd)
		return nil
	}
	nnSgemm(ctx.BLAS, false, false, d.batch*d.m, d.n, d.k, 1, a, b, 1, y)
	return nil
}

// fuseMatMulBias joins to each MatMul step of p whose one product (B shared by the whole
// batch, as a Linear layer's weight is) only an Add reads, with a float32 vector of the
// product's last dimension as its other operand (a parameter, an input, or a value
// computed before the MatMul), that Add.
func (g *Graph) fuseMatMulBias(p *plan) {
	uses := readers(p)
	drop := make([]bool, len(p.steps))
	for s := range p.steps {
		ms := p.steps[s].node
		mm, ok := ms.k.(*matMulKernel)
		if !ok || len(ms.out) != 1 || len(ms.in) != 2 || uses[ms.out[0]] != 1 {
			continue
		}
		y := ms.out[0]
		a, b := p.vals[ms.in[0]], p.vals[ms.in[1]]
		if a == nil || b == nil || len(a.Shape) < 2 || len(b.Shape) != 2 {
			continue // a vector operand, or a batched B
		}
		d, err := mm.dims(a.Shape, b.Shape)
		if err != nil || !d.sharedB() {
			continue
		}
		t := nextReader(p.steps, s, y)
		if t < 0 {
			continue
		}
		as := p.steps[t].node
		add, ok := as.k.(*binaryKernel)
		if !ok || add.op.id != opAdd || len(as.in) != 2 || len(as.out) != 1 || p.steps[t].on != p.steps[s].on {
			continue
		}
		bias := as.in[0]
		if bias == y {
			bias = as.in[1]
		}
		bv := p.vals[bias]
		if bias == y || bias < 0 || bv == nil || bv.DType != Float32 ||
			len(bv.Shape) != 1 || bv.Shape[0] != d.n || !nnShapeEq(p.vals[as.out[0]].Shape, p.vals[y].Shape) {
			continue
		}
		// A computed bias (PyTorch writes equal initializers once and the others as
		// Identity nodes of it) must exist when the MatMul runs.
		if p.values[bias].kind == kindNode && !slices.ContainsFunc(p.steps[:s], func(st step) bool { return slices.Contains(st.node.out, bias) }) {
			continue
		}
		p.steps[s] = step{node: &gnode{n: ms.n, op: ms.op + "+" + as.op, k: &matMulBiasKernel{mm: mm},
			in: []int{ms.in[0], ms.in[1], bias}, out: []int{as.out[0]}}, on: p.steps[s].on}
		drop[t] = true
	}
	p.steps = kept(p.steps, drop)
}
