package engine

import (
	"slices"
	"sync"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// nbitsOpDefs returns onnxruntime's com.microsoft MatMulNBits, which qtool's
// matmulnbits export writes for MatMul and Gemm weights: the engine runs it so that the
// accuracy qtool reports is that of the written file.
func nbitsOpDefs() []opDef {
	return []opDef{{name: MSDomain + ".MatMulNBits", build: buildMatMulNBits, inputs: arity{n: 3}}}
}

// matMulNBitsKernel computes Y = A · Wᵀ + bias, W [N, K] dequantized block-wise along K
// as (q − zero point) · scale, the contrib spec's definition. W is rebuilt on every run
// from the constant inputs into w, owned by the kernel, so no plan holds a float copy
// of a weight the file stores in a few bits.
type matMulNBitsKernel struct {
	n                 *Node
	k, nOut, bits, bs int
	mu                sync.Mutex
	w                 []float32
}

func buildMatMulNBits(n *Node) (Kernel, error) {
	k := &matMulNBitsKernel{n: n, k: int(n.Int("K", 0)), nOut: int(n.Int("N", 0)), bits: int(n.Int("bits", 4)), bs: int(n.Int("block_size", 0))}
	switch {
	case k.k <= 0 || k.nOut <= 0:
		return nil, n.Errorf("K %d and N %d must be positive", k.k, k.nOut)
	case k.bits != 2 && k.bits != 4 && k.bits != 8:
		// onnxruntime's CPU kernel refuses other widths; a file that only qtool could run
		// would be no use.
		return nil, n.Errorf("bits %d is not supported (2, 4 or 8, as onnxruntime's CPU kernel)", k.bits)
	case k.bs < 16 || k.bs&(k.bs-1) != 0:
		return nil, n.Errorf("block_size %d must be a power of two, at least 16", k.bs)
	case n.HasInput(4):
		return nil, n.Errorf("g_idx (input 4) is deprecated and not supported")
	}
	if n.HasInput(3) && n.InputType(3) != onnxpb.TensorProto_UINT8 {
		return nil, n.Errorf("zero points of type %s are not supported; only packed uint8 zero points are", n.InputType(3))
	}
	return k, nil
}

// blocks returns the number of blocks along K and the bytes of one block.
func (k *matMulNBitsKernel) blocks() (kb, blob int) {
	return (k.k + k.bs - 1) / k.bs, k.bs * k.bits / 8
}

func (k *matMulNBitsKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	a, b, s := in[0], in[1], in[2]
	kb, blob := k.blocks()
	switch {
	case a.DType != Float32:
		return nil, k.n.Errorf("A is %v, want float32", a.DType)
	case len(a.Shape) == 0 || a.Shape[len(a.Shape)-1] != k.k:
		return nil, k.n.Errorf("A %v does not end in K = %d", a.Shape, k.k)
	case b.DType != Int64 || !slices.Equal(b.Shape, []int{k.nOut, kb, blob}):
		return nil, k.n.Errorf("B is %v %v, want uint8 [%d %d %d] (N, blocks, block bytes)", b.DType, b.Shape, k.nOut, kb, blob)
	case s.DType != Float32 || s.Len() != k.nOut*kb:
		return nil, k.n.Errorf("scales are %v %v, want %d float32 values (N × blocks)", s.DType, s.Shape, k.nOut*kb)
	}
	if zp := k.n.Optional(in, 3); zp != nil && (zp.DType != Int64 || zp.Len() != k.nOut*((kb*k.bits+7)/8)) {
		return nil, k.n.Errorf("zero points are %v %v, want uint8 [%d %d]", zp.DType, zp.Shape, k.nOut, (kb*k.bits+7)/8)
	}
	if bias := k.n.Optional(in, 5); bias != nil && (bias.DType != Float32 || !slices.Equal(bias.Shape, []int{k.nOut})) {
		return nil, k.n.Errorf("bias is %v %v, want float32 [%d]", bias.DType, bias.Shape, k.nOut)
	}
	shape := slices.Clone(a.Shape)
	shape[len(shape)-1] = k.nOut
	return []*Tensor{{DType: Float32, Shape: shape}}, nil
}

// dequantize writes W [N, K]: code j of a block sits in bits j·bits… of its bytes,
// least significant first; the zero point of block b of row n is packed the same way
// in row n of the zero points, and is 2^(bits−1) without them. The integer difference
// converts to float32 exactly, so the only rounding is the product's.
func (k *matMulNBitsKernel) dequantize(ctx *Context, b, s, zp *Tensor) {
	kb, blob := k.blocks()
	zpRow := (kb*k.bits + 7) / 8
	mask := int64(1)<<k.bits - 1
	ctx.Parallel(k.nOut, max(1, quantGrain/k.k), func(lo, hi int) {
		for n := lo; n < hi; n++ {
			for blk := range kb {
				z := int64(1) << (k.bits - 1)
				if zp != nil {
					bit := blk * k.bits
					z = zp.I[n*zpRow+bit/8] >> (bit % 8) & mask
				}
				scale := s.F[n*kb+blk]
				data := b.I[(n*kb+blk)*blob:]
				for j := range min(k.bs, k.k-blk*k.bs) {
					bit := j * k.bits
					q := data[bit/8] >> (bit % 8) & mask
					k.w[n*k.k+blk*k.bs+j] = float32(q-z) * scale
				}
			}
		}
	})
}

func (k *matMulNBitsKernel) Forward(ctx *Context, in, out []*Tensor) error {
	a, y := in[0], out[0].F
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.w == nil {
		k.w = make([]float32, k.nOut*k.k)
	}
	k.dequantize(ctx, in[1], in[2], k.n.Optional(in, 3))
	m := a.Len() / k.k
	nnSgemm(ctx.BLAS, false, true, m, k.nOut, k.k, 1, a.F, k.w, 0, y)
	if bias := k.n.Optional(in, 5); bias != nil {
		for i := range m {
			row := y[i*k.nOut : (i+1)*k.nOut]
			for j, v := range bias.F {
				row[j] += v
			}
		}
	}
	return nil
}
