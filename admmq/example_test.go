package admmq_test

import (
	"fmt"
	"math"

	"github.com/qtool/qtool/admmq"
)

// An external training loop drives ADMM-S on the float32 weight tensors of a model. Here
// the "model" is f(W) = ½Σ‖W_t − T_t‖² with targets T_t, and the inner solver is plain
// gradient descent standing in for K epochs of Adam; the pieces are the same for a network.
func Example_externalLoop() {
	set := admmq.MustSet(admmq.Spec{Kind: admmq.KindScaledBinary, Scale: admmq.ScaleOptimal, PerChannel: true})
	type tensor struct {
		w, y, lam, z, zt, grad, target []float32
		layout                         admmq.Layout
	}
	mk := func(shape []int, axis int, target []float32) *tensor {
		n := len(target)
		t := &tensor{layout: admmq.Layout{Shape: shape, Axis: axis}, target: target}
		for _, p := range []*[]float32{&t.w, &t.y, &t.lam, &t.z, &t.zt, &t.grad} {
			*p = make([]float32, n)
		}
		copy(t.w, target) // start from the "pretrained" weights
		return t
	}
	// A Gemm weight B [K=2, N=3] with transB = 0, whose output channels are its columns
	// (axis 1), and a Conv weight [M=2, C=1, 1, 2], whose output channels are axis 0.
	const gemmAxis, convAxis = 1, 0
	ts := []*tensor{
		mk([]int{2, 3}, gemmAxis, []float32{0.9, -0.2, 0.5, -1.1, 0.3, -0.4}),
		mk([]int{2, 1, 1, 2}, convAxis, []float32{0.25, -0.75, 2, 1}),
	}
	sched := admmq.Schedule{Rho0: 0.5, Growth: 2, Every: 5}
	const beta = 1.0
	for r := 0; r < 60; r++ {
		rho := sched.Rho(r)
		// ADMM-S y-update: the soft step uses the norm over all tensors together.
		var d2 float64
		for _, t := range ts {
			e, err := admmq.SoftPrepare(set, t.z, t.zt, t.w, t.lam, rho, t.layout)
			if err != nil {
				panic(err)
			}
			d2 += e
		}
		s := admmq.SoftFactor(d2, beta, rho)
		for _, t := range ts {
			admmq.SoftApply(t.y, t.z, t.zt, s)
		}
		// x-update: a few gradient steps on f + penalty.
		for k := 0; k < 50; k++ {
			for _, t := range ts {
				for i := range t.grad {
					t.grad[i] = t.w[i] - t.target[i]
				}
				admmq.AddPenaltyGrad(t.grad, t.w, t.y, t.lam, rho)
				for i := range t.w {
					t.w[i] -= float32(0.5 / (1 + rho) * float64(t.grad[i]))
				}
			}
		}
		for _, t := range ts {
			admmq.UpdateDual(t.lam, t.w, t.y, rho)
		}
	}
	// Export: project the final weights; each output channel is ±α_c.
	for _, t := range ts {
		q := make([]float32, len(t.w))
		if err := set.Project32(q, t.w, t.layout); err != nil {
			panic(err)
		}
		dist, _ := set.Dist32(t.w, t.layout)
		fmt.Printf("%v  (distance of the weights to the set %.3f)\n", round3(q), dist)
	}
	// Output:
	// [1 -0.25 0.45 -1 0.25 -0.45]  (distance of the weights to the set 0.000)
	// [0.5 -0.5 1.5 1.5]  (distance of the weights to the set 0.000)
}

func round3(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(float64(x)*1000) / 1000
	}
	return out
}
