package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// vecSpecials are the values the loops treat apart: both zeros, the infinities, NaN,
// HardSwish's ±3 and their neighbours, and the Clip bounds ewCases use.
var vecSpecials = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.NaN()), 3, -3, math.Nextafter32(3, 4), math.Nextafter32(-3, -4), math.Nextafter32(3, 0),
	math.Nextafter32(-3, 0), -0.5, 0.75, 6, 1e-30, -1e-30}

// vecData returns n values drawn from r: mostly in [−5, 5], one in four a special.
func vecData(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		if r.IntN(4) == 0 {
			v[i] = vecSpecials[r.IntN(len(vecSpecials))]
		} else {
			v[i] = float32(r.Float64()*10 - 5)
		}
	}
	return v
}

// ewCases are the loops with the constants they run with in the engine: Clip's bounds
// (ReLU6, a negative lower bound, a signed-zero bound; the order keys for ewClip),
// HardSwish's slope and offset, and arbitrary BatchNormalization and affine constants.
func vecLoopCases() []struct {
	name           string
	mode           int
	c0, c1, c2, c3 float32
} {
	key := func(f float32) float32 { return math.Float32frombits(uint32(floatKey(int32(math.Float32bits(f))))) }
	return []struct {
		name           string
		mode           int
		c0, c1, c2, c3 float32
	}{
		{"clip_grad_relu6", ewClipGrad, 0, 6, 0, 0},
		{"clip_grad_neg", ewClipGrad, -0.5, 0.75, 0, 0},
		{"clip_grad_negzero", ewClipGrad, float32(math.Copysign(0, -1)), 3, 0, 0},
		{"clip_relu6", ewClip, key(0), key(6), 0, 0},
		{"clip_neg", ewClip, key(-0.5), key(0.75), 0, 0},
		{"clip_negzero", ewClip, key(float32(math.Copysign(0, -1))), key(0), 0, 0},
		{"hardswish", ewHardSwish, 1.0 / 6, 0.5, 0, 0},
		{"hardswish_grad", ewHardSwishGrad, 0, 0, 0, 0},
		{"bn_grad", ewBNGrad, -0.37, 1.9, 0.013, 0.41},
		{"affine", ewAffine, 1.7, -0.3, 0, 0},
		{"affine_add", ewAffineAdd, -2.3, 0, 0, 0},
		{"scale", ewScale, -1.3, 0, 0, 0},
		{"scale_zero", ewScale, float32(math.Copysign(0, -1)), 0, 0, 0},
		{"scale_inf", ewScale, float32(math.Inf(1)), 0, 0, 0},
		{"scale_nan", ewScale, float32(math.NaN()), 0, 0, 0},
		{"add", ewAdd, 0, 0, 0, 0},
		{"mul", ewMul, 0, 0, 0, 0},
		{"relu", ewRelu, 0, 0, 0, 0},
		{"relu_grad", ewReluGrad, 0, 0, 0, 0},
		// Add by a scalar runs as affine with a = 1.
		{"affine_add_scalar", ewAffine, 1, 0.7, 0, 0},
		{"affine_add_negzero", ewAffine, 1, float32(math.Copysign(0, -1)), 0, 0},
		{"affine_add_inf", ewAffine, 1, float32(math.Inf(-1)), 0, 0},
	}
}

// TestElementwiseVec checks ewVec (the assembly where the CPU has it) against ewGo bit
// for bit, NaN payloads included, at every length up to 70 (the masked and unrolled
// tails) and a long one, the output buffer starting from data of its own.
func TestElementwiseVec(t *testing.T) {
	for _, c := range vecLoopCases() {
		for _, n := range append(vecLens(0, 70), 1000) {
			r := rand.New(rand.NewPCG(uint64(c.mode), uint64(n)))
			x, g, d := vecData(r, n), vecData(r, n), vecData(r, n)
			want := append([]float32(nil), d...)
			ewGo(c.mode, want, x, g, c.c0, c.c1, c.c2, c.c3)
			got := append([]float32(nil), d...)
			ewVec(c.mode, got, x, g, c.c0, c.c1, c.c2, c.c3)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, n = %d: [%d] (x %v, g %v, dst %v) = %v (%#x), ewGo %v (%#x)", c.name, n, i,
						x[i], g[i], d[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}

func vecLens(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestElementwiseVecDefinitions checks ewGo against the operations written out in
// float64 with each float32 rounding made explicit, on the specials and random data: the
// definition the assembly follows is the one the kernels had.
func TestElementwiseVecDefinitions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	x, g, d := vecData(r, 4000), vecData(r, 4000), vecData(r, 4000)
	f := func(v float64) float32 { return float32(v) }
	for _, c := range vecLoopCases() {
		got := append([]float32(nil), d...)
		ewGo(c.mode, got, x, g, c.c0, c.c1, c.c2, c.c3)
		for i, v := range x {
			var want float32
			switch c.mode {
			case ewClipGrad:
				want = d[i]
				if v >= c.c0 && v <= c.c1 {
					want = f(float64(d[i]) + float64(g[i]))
				} else {
					want = f(float64(d[i]) + 0)
				}
			case ewClip:
				lo := math.Float32frombits(uint32(floatKey(int32(math.Float32bits(c.c0)))))
				hi := math.Float32frombits(uint32(floatKey(int32(math.Float32bits(c.c1)))))
				want = v
				if v == v {
					// Order with −0 below +0, as the keys have it.
					below := func(a, b float32) bool {
						return a < b || (a == b && math.Signbit(float64(a)) && !math.Signbit(float64(b)))
					}
					if below(v, lo) {
						want = lo
					}
					if below(hi, want) {
						want = hi
					}
				}
			case ewHardSwish:
				s := f(float64(f(float64(c.c0)*float64(v))) + float64(c.c1))
				switch {
				case s != s:
					s = f(math.NaN())
				case s <= 0:
					s = 0
				case s >= 1:
					s = 1
				}
				want = f(float64(v) * float64(s))
				if s != s {
					want = s
				}
			case ewHardSwishGrad:
				want = d[i]
				switch {
				case v > 3:
					want = f(float64(d[i]) + float64(g[i]))
				case v >= -3:
					want = f(float64(d[i]) + float64(f(float64(g[i])*float64(f(float64(f(float64(v)/3))+0.5)))))
				}
			case ewBNGrad:
				a := f(float64(d[i]) + float64(f(float64(c.c0)*float64(g[i]))))
				b := f(float64(c.c1) * float64(f(float64(v)-float64(c.c3))))
				want = f(float64(f(float64(a)+float64(b))) + float64(c.c2))
			case ewAffine:
				want = f(float64(f(float64(v)*float64(c.c0))) + float64(c.c1))
			case ewAffineAdd:
				want = f(float64(d[i]) + float64(f(float64(v)*float64(c.c0))))
			case ewScale:
				want = f(float64(c.c0) * float64(v))
			case ewAdd:
				want = f(float64(v) + float64(g[i]))
			case ewMul:
				want = f(float64(v) * float64(g[i]))
			case ewRelu:
				want = v
				if math.Signbit(float64(v)) {
					want = 0
				}
			case ewReluGrad:
				// Relu's output y = v passes g where it is above +0 or a NaN without its
				// sign bit, and adds +0 elsewhere.
				if v > 0 || (v != v && !math.Signbit(float64(v))) {
					want = f(float64(d[i]) + float64(g[i]))
				} else {
					want = f(float64(d[i]) + 0)
				}
			}
			if got[i] != want && !(got[i] != got[i] && want != want) {
				t.Fatalf("%s: [%d] (x %v, g %v, dst %v) = %v, want %v", c.name, i, v, g[i], d[i], got[i], want)
			}
			if got[i] == 0 && want == 0 && math.Signbit(float64(got[i])) != math.Signbit(float64(want)) {
				t.Fatalf("%s: [%d] (x %v, g %v, dst %v) = %v, want %v (sign of zero)", c.name, i, v, g[i], d[i], got[i], want)
			}
		}
	}
}
