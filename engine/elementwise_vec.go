package engine

import "math"

// The elementwise loops of training that ran as scalar Go over every activation of a
// step (fmnist-resnet at batch 256: Clip's and HardSwish's forward and gradient,
// BatchNormalization's scale-and-shift and its input gradient, 29 % of the step), each
// with an AVX-512 and an AVX2 form on amd64 (elementwise_vec_amd64.s) that computes the
// loop below bit for bit: the same operations, each rounded on its own (the explicit
// float32 conversions keep a compiler from fusing a product and a sum, as the assembly
// does not), the same treatment of NaN and of signed zeros.

// The loops, by the number the assembly dispatches on.
const (
	ewClipGrad      = iota // p0 += g where lo ≤ x ≤ hi, else += +0: x = p1, g = p2, c0 = lo, c1 = hi
	ewClip                 // p0 = x clamped between the order keys c0 and c1 (clipBits), NaN kept
	ewHardSwish            // p0 = x·clamp(c0·x + c1, 0, 1)
	ewHardSwishGrad        // p0 += g (x > 3), g·(x/3 + 1/2) (−3 ≤ x ≤ 3), nothing else
	ewBNGrad               // p0 = ((p0 + c0·g) + c1·(x − c3)) + c2: x = p1, g = p2
	ewAffine               // p0 = x·c0 + c1
	ewAffineAdd            // p0 += x·c0
	ewScale                // p0 = c0·x
	ewAdd                  // p0 = x + g: x = p1, g = p2
	ewMul                  // p0 = x·g
	ewRelu                 // p0 = x with every value whose sign bit is set cleared to +0
	ewReluGrad             // p0 += g where y's bits as an int32 are > 0, else += +0: y = p1, g = p2
)

// ewGo is the definition of loop mode over p0 (and p1, p2 where the mode reads them, as
// long as p0).
func ewGo(mode int, p0, p1, p2 []float32, c0, c1, c2, c3 float32) {
	n := len(p0)
	switch mode {
	case ewClipGrad:
		x, g := p1[:n], p2[:n]
		for i, v := range x {
			m := b2u(v >= c0) & b2u(v <= c1)
			p0[i] += math.Float32frombits(math.Float32bits(g[i]) & -m)
		}
	case ewClip:
		kl, kh := int32(math.Float32bits(c0)), int32(math.Float32bits(c1))
		for i, v := range p1[:n] {
			r := math.Float32frombits(uint32(floatKey(min(max(floatKey(int32(math.Float32bits(v))), kl), kh))))
			if v != v {
				r = v
			}
			p0[i] = r
		}
	case ewHardSwish:
		const one = 0x3f800000 // bits of 1
		for i, v := range p1[:n] {
			t := int32(math.Float32bits(float32(c0*v) + c1))
			p0[i] = v * math.Float32frombits(uint32(min(max(t, 0), one)))
		}
	case ewHardSwishGrad:
		x, g := p1[:n], p2[:n]
		for i, v := range x {
			switch {
			case v > 3:
				p0[i] += g[i]
			case v >= -3:
				p0[i] += g[i] * (float32(v/3) + 0.5)
			}
		}
	case ewBNGrad:
		x, g := p1[:n], p2[:n]
		for i, d := range p0 {
			p0[i] = float32(float32(d+float32(c0*g[i]))+float32(c1*float32(x[i]-c3))) + c2
		}
	case ewAffine:
		for i, v := range p1[:n] {
			p0[i] = float32(v*c0) + c1
		}
	case ewAffineAdd:
		for i, v := range p1[:n] {
			p0[i] += float32(v * c0)
		}
	case ewScale:
		for i, v := range p1[:n] {
			p0[i] = c0 * v
		}
	case ewAdd:
		x, g := p1[:n], p2[:n]
		for i, v := range x {
			p0[i] = v + g[i]
		}
	case ewMul:
		x, g := p1[:n], p2[:n]
		for i, v := range x {
			p0[i] = v * g[i]
		}
	case ewRelu:
		for i, v := range p1[:n] {
			u := int32(math.Float32bits(v))
			p0[i] = math.Float32frombits(uint32(u &^ (u >> 31)))
		}
	case ewReluGrad:
		y, g := p1[:n], p2[:n]
		for i, v := range y {
			m := b2u(int32(math.Float32bits(v)) > 0)
			p0[i] += math.Float32frombits(math.Float32bits(g[i]) & -m)
		}
	}
}

// reluGradVec adds g to dst where Relu's output y is above +0 (its bits, as an int32,
// positive: Relu's own gradient rule, a NaN without its sign bit passing g), +0 elsewhere.
// Relu's gradient ran as scalar Go over every activation of a training step: 3 % of
// MobileNetV3-small's.
func reluGradVec(dst, y, g []float32) { ewVec(ewReluGrad, dst, y, g, 0, 0, 0, 0) }

// clipGradVec adds g to dst where lo ≤ x ≤ hi (Clip's gradient; NaN bounds pass nothing).
func clipGradVec(dst, x, g []float32, lo, hi float32) { ewVec(ewClipGrad, dst, x, g, lo, hi, 0, 0) }

// clipKeysVec sets y = x clamped to the order keys kl ≤ kh of the bounds (floatKey of
// their bits), NaN staying NaN: clipBits without NaN bounds.
func clipKeysVec(y, x []float32, kl, kh int32) {
	ewVec(ewClip, y, x, nil, math.Float32frombits(uint32(kl)), math.Float32frombits(uint32(kh)), 0, 0)
}

// hardSwishVec sets y = x·clamp(a·x + b, 0, 1), the clamp on bit patterns (+0 below, 1
// above, NaN through the product).
func hardSwishVec(y, x []float32, a, b float32) { ewVec(ewHardSwish, y, x, nil, a, b, 0, 0) }

// hardSwishGradVec adds HardSwish's (α = 1/6, β = 1/2) gradient at x times g to dst.
func hardSwishGradVec(dst, x, g []float32) { ewVec(ewHardSwishGrad, dst, x, g, 0, 0, 0, 0) }

// bnGradVec sets gd = gd + a·gy + b·(x − mu) + c, left to right.
func bnGradVec(gd, x, gy []float32, a, b, c, mu float32) { ewVec(ewBNGrad, gd, x, gy, a, b, c, mu) }

// affineVec sets y = x·a + b; affineAddVec adds x·a to y.
func affineVec(y, x []float32, a, b float32) { ewVec(ewAffine, y, x, nil, a, b, 0, 0) }
func affineAddVec(y, x []float32, a float32) { ewVec(ewAffineAdd, y, x, nil, a, 0, 0, 0) }

// scaleVec sets y = a·x: Mul by a broadcast scalar (the squeeze-and-excitation blocks'
// channel scales, a pass over the block's activations that took 7 % of MobileNetV3-small's
// inference as scalar Go).
func scaleVec(y, x []float32, a float32) { ewVec(ewScale, y, x, nil, a, 0, 0, 0) }

// addVec and mulVec set z = x + y and z = x·y; reluVec sets y = Relu(x) as the Relu
// kernel defines it (−0 and NaNs with the sign bit set to +0). The transformer's residual
// and bias Adds and its feed-forward Relu ran as scalar Go. (x + a is affineVec's x·1 + a:
// the product by 1 is exact, so the sum is the same, −0 and NaN included.)
func addVec(z, x, y []float32) { ewVec(ewAdd, z, x, y, 0, 0, 0, 0) }
func mulVec(z, x, y []float32) { ewVec(ewMul, z, x, y, 0, 0, 0, 0) }
func reluVec(y, x []float32)   { ewVec(ewRelu, y, x, nil, 0, 0, 0, 0) }
