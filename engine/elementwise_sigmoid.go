package engine

import "math"

// The logistic sigmoid of whole tensors (EfficientNet's SiLU x·σ(x) after every
// convolution, gates) runs 16 lanes at a time in AVX-512 where the CPU allows: the
// scalar sigmoid, exp in float64, took two thirds of EfficientNet-B0's inference.
// sigmoidF32 defines the vector form in float32, each operation rounded on its own, so
// that the assembly gives its bits exactly; it is within a few units in the last place
// of the float64 sigmoid (TestSigmoidVector), and elsewhere the scalar one still runs.

// Cephes' expf: 2^n·exp(r) with r = t − n·ln 2 in two parts, exp(r) a degree-7
// polynomial.
const (
	sigLo    = float32(-110) // exp(t) is 0 in float32 long before
	sigLog2e = float32(1.44269504088896341)
	sigC1    = float32(0.693359375)
	sigC2    = float32(-2.12194440e-4)
	sigP0    = float32(1.9875691500e-4)
	sigP1    = float32(1.3981999507e-3)
	sigP2    = float32(8.3334519073e-3)
	sigP3    = float32(4.1665795894e-2)
	sigP4    = float32(1.6666665459e-1)
	sigP5    = float32(5.0000001201e-1)
)

// sigMin is float32's smallest normal: expNegF32 flushes its results below it to 0.
const sigMin = float32(0x1p-126)

// sigConsts are the constants as the assembly loads them.
var sigConsts = [...]float32{sigLo, sigLog2e, sigC1, sigC2, sigP0, sigP1, sigP2, sigP3, sigP4, sigP5, 1, sigMin}

// sigmoidF32 is σ(v) computed as sigmoidVec computes it: with e = exp(−|v|), which does
// not overflow, 1/(1 + e) for v ≥ 0 and e/(1 + e) below. Below about −87.3, where σ is
// under float32's smallest normal, it is 0 (see expNegF32).
func sigmoidF32(v float32) float32 {
	if v != v {
		return v
	}
	e := expNegF32(math.Float32frombits(math.Float32bits(v) | 1<<31))
	if v >= 0 {
		return 1 / (1 + e)
	}
	return e / (1 + e)
}

// siluF32 is x·σ(x) (SiLU, Swish) as siluVec computes it: sigmoidF32's σ, then one
// rounded product.
func siluF32(v float32) float32 { return v * sigmoidF32(v) }

// expNegF32 is exp(t) for t ≤ 0 (or NaN), as expNegVec computes it: the exponential
// inside sigmoidF32, which Softmax shares. A result below float32's smallest normal
// (t below about −87.3) is 0: subnormal values made every product that read them take a
// microcode assist, and EfficientNet-B0, whose SiLU made them of pre-activations below
// −87, ran 5.2 times slower on inputs from [−2, 2] than from [0, 1) (onnxruntime, whose
// logistic never returns them, equally fast on both); 2.3 times with the flush, the rest
// in products of the tiny normal values that follow. The error, under 2^−126, is below
// any tolerance the result is compared with.
func expNegF32(t float32) float32 {
	if t < sigLo {
		t = sigLo
	}
	n := float32(math.RoundToEven(float64(float32(t * sigLog2e))))
	r := t - float32(n*sigC1)
	r -= float32(n * sigC2)
	z := float32(r * r)
	p := float32(sigP0*r) + sigP1
	p = float32(p*r) + sigP2
	p = float32(p*r) + sigP3
	p = float32(p*r) + sigP4
	p = float32(p*r) + sigP5
	e := float32(p*z) + r
	e += 1
	// The exact product rounded once, as VSCALEFPS rounds it (overflow to +Inf), then
	// flushed to 0 below the smallest normal.
	r = float32(math.Ldexp(float64(e), int(n)))
	if r < sigMin {
		return 0
	}
	return r
}

// expNegSlice sets y[i] = expNegF32(x[i]) (every x[i] ≤ 0 or NaN): expNegVec where it
// runs in assembly, else the scalar definition.
func expNegSlice(x, y []float32) {
	y = y[:len(x)]
	if sigmoidFast() {
		expNegVec(x, y)
		return
	}
	for i, v := range x {
		y[i] = expNegF32(v)
	}
}

// sigmoidSlice sets y[i] = σ(x[i]): sigmoidVec where it runs in assembly, else the
// scalar sigmoid.
func sigmoidSlice(x, y []float32) {
	y = y[:len(x)]
	if sigmoidFast() {
		sigmoidVec(x, y)
		return
	}
	for i, v := range x {
		y[i] = sigmoid(v)
	}
}
