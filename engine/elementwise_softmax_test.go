package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpNegF32 holds Softmax's exponential to float64's exp: within 2 units in the last
// place over the whole range of normal results, 0 exactly where exp is below float32's
// smallest normal (flushed, never a subnormal), 0 at −Inf, NaN at NaN.
func TestExpNegF32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var x []float32
	for v := float32(-110); v <= 0; v += 0.00731 {
		x = append(x, v)
	}
	for range 20000 {
		x = append(x, -float32(r.ExpFloat64()*4))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), -1e-30, math.Float32frombits(0x80000001), -87.3365, -103.97, -104, -150, -1e30)
	for _, v := range x {
		got, want := float64(expNegF32(v)), math.Exp(float64(v))
		checkFlushed(t, "expNegF32", v, got, want, 2)
	}
	if e := expNegF32(float32(math.Inf(-1))); e != 0 {
		t.Errorf("expNegF32(−Inf) = %v, want 0", e)
	}
	if e := expNegF32(float32(math.NaN())); e == e {
		t.Errorf("expNegF32(NaN) = %v, want NaN", e)
	}
}

// TestExpNegVec checks the vector exponential (AVX-512, or AVX2 under
// GODEBUG=cpu.avx512f=off, or the scalar loop) bit for bit against expNegF32, for every
// length up to 40 (each tail), without writing past y.
func TestExpNegVec(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	x := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN()), -110, -120, -87.3, -103.9, -104, -1e-8}
	for v := float32(-110); v < -80; v += 0.0037 {
		x = append(x, v)
	}
	for range 3000 {
		x = append(x, -float32(r.ExpFloat64()*6))
	}
	for n := 0; n <= 40; n++ {
		for _, in := range [][]float32{x[:n], x[len(x)-n:], x} {
			y := make([]float32, len(in)+1)
			y[len(in)] = 42
			expNegVec(in, y[:len(in)])
			if y[len(in)] != 42 {
				t.Fatalf("length %d: wrote past y", len(in))
			}
			for i, v := range in {
				want := expNegF32(v)
				if math.Float32bits(y[i]) != math.Float32bits(want) && !(want != want && y[i] != y[i]) {
					t.Fatalf("exp(%v) = %v (%#x), expNegF32 %v (%#x)", v, y[i], math.Float32bits(y[i]), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestSoftmaxLayouts runs Softmax and LogSoftmax along a middle axis (the strided
// layout, lanes normalised in blocks) and along the last axis of the transposed input
// (the contiguous layout, short rows in groups): both must give the same bits, in place
// or not, NaN rows NaN in both.
func TestSoftmaxLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	const A, D, I = 3, 37, 300 // I > softmaxBlock: two lane blocks per row, the second partial
	x := make([]float32, A*D*I)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 6)
	}
	// Rows (along D) of values the maxima treat specially: zeros of both signs (a tie of
	// −0 and +0), +Inf, −Inf throughout, and a NaN, which makes its row NaN.
	negZero := float32(math.Copysign(0, -1))
	for d := range D {
		x[(0*D+d)*I+5] = []float32{0, negZero}[d%2]
		x[(1*D+d)*I+7] = float32(math.Inf(-1))
	}
	x[(2*D+3)*I+11] = float32(math.Inf(1))
	x[(2*D+20)*I+13] = float32(math.NaN())
	xt := make([]float32, len(x)) // [A, I, D]
	for a := range A {
		for d := range D {
			for i := range I {
				xt[(a*I+i)*D+d] = x[(a*D+d)*I+i]
			}
		}
	}
	for _, op := range []string{"Softmax", "LogSoftmax"} {
		strided := runForward(t, buildKernel(t, testNode(op, 13, names(1), attrI("axis", 1))), []*Tensor{NewFloat([]int{A, D, I}, x)}, 2)[0].F
		contig := runForward(t, buildKernel(t, testNode(op, 13, names(1))), []*Tensor{NewFloat([]int{A, I, D}, xt)}, 2)[0].F
		for a := range A {
			for d := range D {
				for i := range I {
					s, c := strided[(a*D+d)*I+i], contig[(a*I+i)*D+d]
					if s != s && c != c {
						continue // a NaN row's payloads may differ
					}
					if math.Float32bits(s) != math.Float32bits(c) {
						t.Fatalf("%s [%d %d %d]: strided %v, contiguous %v", op, a, d, i, s, c)
					}
				}
			}
		}
		// In place: the output buffer is the input.
		for _, c := range []struct {
			axis  int64
			shape []int
			src   []float32
			want  []float32
		}{{1, []int{A, D, I}, x, strided}, {-1, []int{A, I, D}, xt, contig}} {
			k := buildKernel(t, testNode(op, 13, names(1), attrI("axis", c.axis)))
			buf := append([]float32(nil), c.src...)
			in := NewFloat(c.shape, buf)
			if err := k.Forward(nntCtx(t, 2), []*Tensor{in}, []*Tensor{in}); err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				if math.Float32bits(buf[i]) != math.Float32bits(c.want[i]) {
					t.Fatalf("%s axis %d in place: element %d is %v, want %v", op, c.axis, i, buf[i], c.want[i])
				}
			}
		}
	}
}

// checkFlushed fails t unless got, fn(v) in float32, is 0 where want (float64's value) is
// below float32's smallest normal, never a subnormal, and within ulps units in the last
// place of want elsewhere; values within 2^−20 of the smallest normal may go either way.
func checkFlushed(t *testing.T, fn string, v float32, got, want float64, ulps float64) {
	t.Helper()
	switch {
	case want < 0x1p-126*(1-0x1p-20) && got != 0:
		t.Fatalf("%s(%v) = %v, want 0 below the smallest normal (float64 %v)", fn, v, got, want)
	case got == 0 && want < 0x1p-126*(1+0x1p-20):
		// Flushed.
	case got < 0x1p-126:
		t.Fatalf("%s(%v) = %v, a subnormal (float64 %v)", fn, v, got, want)
	default:
		if d := math.Abs(got - want); d > ulps*0x1p-24*want {
			t.Fatalf("%s(%v) = %v, float64 %v: %.3g ulp off", fn, v, got, want, d/(0x1p-24*want))
		}
	}
}
