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
// as (q − zero point) · scale, the contrib spec's definition. W is never held whole in
// float32: each run dequantizes nbitsChunk values' worth of its rows at a time into
// scratch and multiplies them (one row of A: 1024 values of a row at a time on each
// worker's stack, forwardRow), so the graph keeps only the codes (one byte for two
// 4-bit codes, when Build could keep the initializer as bytes) and a weight the file
// stores in 4 bits costs 4 bits in qtool's memory too, plus one chunk.
type matMulNBitsKernel struct {
	n                 *Node
	k, nOut, bits, bs int
	mu                sync.Mutex
	own               []float32 // the chunk's scratch when the context has no arena
	yc                []float32 // one chunk's product rows when A has more than one row
	codes, zps        []byte    // B and the zero points as bytes when they come as int64
}

// nbitsChunk is how many float32 values of dequantized W a run holds at a time: 256 Ki,
// 1 MiB, which stays in a core's L2 while the product reads it.
const nbitsChunk = 1 << 18

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
	if dt := n.InputType(1); dt != onnxpb.TensorProto_UINT8 && dt != onnxpb.TensorProto_UNDEFINED {
		return nil, n.Errorf("B is of type %s; MatMulNBits takes packed uint8 codes", dt)
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

// asBytes returns t's values as bytes: t.u8 itself, or its int64 values (a UINT8 input
// that Build kept as int64, or one given at run time) narrowed into *buf. Values outside
// 0..255 cannot come from a UINT8 tensor; they are an error, not a wrap-around.
func (k *matMulNBitsKernel) asBytes(t *Tensor, buf *[]byte, what string) ([]byte, error) {
	if t.u8 != nil && !t.s8 {
		return t.u8, nil
	}
	vals := t.intValues()
	if cap(*buf) < len(vals) {
		*buf = make([]byte, len(vals))
	}
	b := (*buf)[:len(vals)]
	for i, v := range vals {
		if v < 0 || v > 255 {
			return nil, k.n.Errorf("%s value %d at %d is not a uint8", what, v, i)
		}
		b[i] = byte(v)
	}
	return b, nil
}

// dequantize writes rows [n0, n1) of W into w (row-major, K values a row), each block
// as block does.
func (k *matMulNBitsKernel) dequantize(ctx *Context, codes, zp []byte, scales []float32, n0, n1 int, w []float32) {
	kb, _ := k.blocks()
	ctx.Parallel(n1-n0, max(1, quantGrain/k.k), func(lo, hi int) {
		var lut [256]float32
		for r := lo; r < hi; r++ {
			row := w[r*k.k : (r+1)*k.k]
			for blk := range kb {
				k.block(codes, zp, scales, n0+r, blk, row[blk*k.bs:min(k.k, (blk+1)*k.bs)], &lut)
			}
		}
	})
}

// block writes block blk of row n of W into out (its min(block_size, K − blk·block_size)
// values): code j of a block sits in bits j·bits… of its bytes, least significant first;
// the zero point of block blk of row n is packed the same way in row n of the zero
// points, and is 2^(bits−1) without them. Every code of a block maps through one table
// of its 2^bits values (q − z)·scale, lut, computed as the spec's definition computes each
// value: the integer difference converts to float32 exactly, so the only rounding is the
// product's.
func (k *matMulNBitsKernel) block(codes, zp []byte, scales []float32, n, blk int, out []float32, lut *[256]float32) {
	kb, blob := k.blocks()
	mask := byte(1)<<k.bits - 1
	z := 1 << (k.bits - 1)
	if zp != nil {
		zpRow := (kb*k.bits + 7) / 8
		bit := blk * k.bits
		z = int(zp[n*zpRow+bit/8] >> (bit % 8) & mask)
	}
	scale := scales[n*kb+blk]
	if k.bits < 8 {
		// 16 or 4 entries for a block of 16 or more codes; at 8 bits the table would
		// outnumber the block's codes.
		for q := range 1 << k.bits {
			lut[q] = float32(q-z) * scale
		}
	}
	per := 8 / k.bits // codes a byte
	data := codes[(n*kb+blk)*blob : (n*kb+blk)*blob+(len(out)+per-1)/per]
	switch {
	case k.bits == 8:
		for j, b := range data[:len(out)] {
			out[j] = float32(int(b)-z) * scale
		}
	case k.bits == 4 && len(out)%2 == 0:
		nibbles(out, data, (*[16]float32)(lut[:16]))
	case k.bits == 2 && len(out)%4 == 0:
		for j, b := range data {
			o := out[4*j : 4*j+4 : 4*j+4]
			o[0], o[1], o[2], o[3] = lut[b&3], lut[b>>2&3], lut[b>>4&3], lut[b>>6]
		}
	default: // a last block that ends inside a byte
		for j := range out {
			bit := j * k.bits
			out[j] = lut[data[bit/8]>>(bit%8)&mask]
		}
	}
}

// nbitsRowBlock is the largest block_size forwardRow takes: its buffer is on the stack.
const nbitsRowBlock = 1024

// forwardRow is Forward for one row of A (batch 1): y[n] = dotF32(row n of W, A), the
// row dequantized 1024 values at a time into a buffer on the worker's stack and its
// products added into the row's 32 sums at once, so that W is read once as codes and
// never written out as float32. Dequantizing 1 MiB chunks over the workers and handing
// them to sgemv wrote and read every weight twice more: a 4096 × 4096 layer took
// 6.7–9.2 ms (BenchmarkMatMulNBits, Zen 5, OpenBLAS), the paper MLP 20 ms at batch 1,
// four times its float model. Each row's sum depends only on the row, so the result does
// not depend on the workers or the BLAS.
func (k *matMulNBitsKernel) forwardRow(ctx *Context, a []float32, codes, zp []byte, scales, y []float32) {
	ctx.Parallel(k.nOut, max(1, quantGrain/k.k), func(lo, hi int) {
		var lut [256]float32
		var buf [nbitsRowBlock]float32
		for n := lo; n < hi; n++ {
			var s [32]float32
			// Segments of 1024 values, a multiple of every block size taken here and of
			// 32: each starts on lane 0 of the sums, and only the row's last has a tail.
			for b0 := 0; b0 < k.k; b0 += nbitsRowBlock {
				b1 := min(k.k, b0+nbitsRowBlock)
				for blk := b0 / k.bs; blk*k.bs < b1; blk++ {
					k.block(codes, zp, scales, n, blk, buf[blk*k.bs-b0:min(b1, (blk+1)*k.bs)-b0], &lut)
				}
				dotAdd(buf[:b1-b0], a[b0:b1], &s)
			}
			y[n] = sumPairs32(&s)
		}
	})
}

// dotF32 is Σ x[i]·y[i] over len(x) values: the products go into 32 interleaved sums,
// s[i mod 32] (so that the additions do not each wait on the last, and so that four
// 8-lane registers hold them: dot32 adds whole groups of 32 in AVX2), each product and
// each sum rounded to float32 on its own, and the sums are added pairwise at the end
// (sumPairs32).
func dotF32(x, y []float32) float32 {
	var s [32]float32
	dotAdd(x, y, &s)
	return sumPairs32(&s)
}

// dotAdd adds x[i]·y[i] into s[i mod 32], whole groups of 32 through dot32.
func dotAdd(x, y []float32, s *[32]float32) {
	y = y[:len(x)]
	n := len(x) &^ 31
	dot32(x[:n], y[:n], s)
	for i := n; i < len(x); i++ {
		s[i%32] += float32(x[i] * y[i]) // the conversion keeps the product rounded: no FMA
	}
}

// sumPairs32 adds the 32 sums pairwise: s[j] + s[j+16], then the first 16 the same way, down
// to one.
func sumPairs32(s *[32]float32) float32 {
	for w := 16; w >= 1; w /= 2 {
		for j := range w {
			s[j] += s[j+w]
		}
	}
	return s[0]
}

// dot32Go is the definition of dot32: s[i mod 32] += x[i]·y[i] for len(x) values, a
// multiple of 32, product and sum rounded on their own.
func dot32Go(x, y []float32, s *[32]float32) {
	y = y[:len(x)]
	for i := 0; i+32 <= len(x); i += 32 {
		xs, ys := x[i:i+32:i+32], y[i:i+32:i+32]
		for j := range 32 {
			s[j] += float32(xs[j] * ys[j]) // the conversion keeps the product rounded: no FMA
		}
	}
}

// nibblesGo is the definition of the 4-bit lookup: out[2j] = lut[data[j] & 15] and
// out[2j+1] = lut[data[j] >> 4] (the contrib spec's order: low nibble first).
func nibblesGo(out []float32, data []byte, lut *[16]float32) {
	for j, b := range data {
		o := out[2*j : 2*j+2 : 2*j+2]
		o[0], o[1] = lut[b&15], lut[b>>4]
	}
}

func (k *matMulNBitsKernel) Forward(ctx *Context, in, out []*Tensor) error {
	a, y := in[0], out[0].F
	k.mu.Lock()
	defer k.mu.Unlock()
	codes, err := k.asBytes(in[1], &k.codes, "B")
	if err != nil {
		return err
	}
	var zp []byte
	if t := k.n.Optional(in, 3); t != nil {
		if zp, err = k.asBytes(t, &k.zps, "zero point"); err != nil {
			return err
		}
	}
	m := a.Len() / k.k
	if m == 1 && k.bs <= nbitsRowBlock {
		k.forwardRow(ctx, a.F, codes, zp, in[2].F, y)
		k.addBias(in, y, m)
		return nil
	}
	// Many rows of A take 16 times larger chunks (16 MiB), so that each product stays a
	// wide GEMM: a 256 × 4096 · 4096 × 4096 product took 193 ms in chunks of 64 rows of
	// W, 127 ms in chunks of 1024 and 111 ms in one (OpenBLAS, 2 cores, 2026-11-28; the
	// float product alone 90 ms), while one row (sgemv) is as fast in 1 MiB chunks.
	rows := max(1, nbitsChunk/k.k)
	if m >= 16 {
		rows = max(rows, 16*nbitsChunk/k.k)
	}
	rows = min(k.nOut, rows)
	w, shared := ctx.scratch(&k.own, rows*k.k)
	defer ctx.releaseScratch(shared)
	if m > 1 {
		k.yc = nnGrow(k.yc, m*rows)
	}
	for n0 := 0; n0 < k.nOut; n0 += rows {
		n1 := min(k.nOut, n0+rows)
		k.dequantize(ctx, codes, zp, in[2].F, n0, n1, w)
		if m == 1 {
			nnSgemm(ctx.BLAS, false, true, 1, n1-n0, k.k, 1, a.F, w, 0, y[n0:n1])
			continue
		}
		// The chunk's columns of Y through a buffer of their own, so that the product is
		// the same call, and so the same sums, whatever the row stride of Y.
		yc := k.yc[:m*(n1-n0)]
		nnSgemm(ctx.BLAS, false, true, m, n1-n0, k.k, 1, a.F, w, 0, yc)
		for i := range m {
			copy(y[i*k.nOut+n0:i*k.nOut+n1], yc[i*(n1-n0):(i+1)*(n1-n0)])
		}
	}
	k.addBias(in, y, m)
	return nil
}

// addBias adds the optional bias (input 5) to each of Y's m rows, after the product as
// onnxruntime adds it.
func (k *matMulNBitsKernel) addBias(in []*Tensor, y []float32, m int) {
	if bias := k.n.Optional(in, 5); bias != nil {
		for i := range m {
			row := y[i*k.nOut : (i+1)*k.nOut]
			for j, v := range bias.F {
				row[j] += v
			}
		}
	}
}
