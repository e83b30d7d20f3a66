package train

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/qtool/qtool/engine"
)

// quadratic is the fixtures' problem f(p) = ½Σa(p−c)² over parameters w [3,4] and b [3].
type quadratic struct {
	params []*engine.Param
	a, c   [][]float32
}

func newQuadratic(t *testing.T) *quadratic {
	q := &quadratic{}
	for _, n := range []string{"w", "b"} {
		v := fixture32(t, "optim.npz", n+"0")
		p := &engine.Param{Name: n, Value: engine.NewFloat([]int{len(v)}, v),
			Grad: engine.NewFloat([]int{len(v)}, make([]float32, len(v))), Trainable: true}
		q.params = append(q.params, p)
		q.a = append(q.a, fixture32(t, "optim.npz", "a"+n))
		q.c = append(q.c, fixture32(t, "optim.npz", "c"+n))
	}
	// A frozen parameter the optimizers must leave alone.
	q.params = append(q.params, &engine.Param{Name: "frozen", Value: engine.NewFloat([]int{2}, []float32{1, 2})})
	return q
}

// grad sets the gradient a·(p−c) in float32, as the fixture script does.
func (q *quadratic) grad() {
	for k, p := range q.params[:2] {
		for i, w := range p.Value.F {
			d := w - q.c[k][i]
			p.Grad.F[i] = q.a[k][i] * d
		}
	}
}

var optimCases = []struct {
	key  string
	make func() Optimizer
	lr   float64
}{
	{"adam", func() Optimizer { return NewAdam(AdamOptions{}) }, 0.05},
	{"adam_l2", func() Optimizer {
		return NewAdam(AdamOptions{Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1})
	}, 0.05},
	{"adamw", func() Optimizer { return NewAdam(AdamOptions{WeightDecay: 0.1, Decoupled: true}) }, 0.05},
	{"sgd", func() Optimizer { return mustSGD(SGDOptions{}) }, 0.1},
	{"sgd_momentum", func() Optimizer { return mustSGD(SGDOptions{Momentum: 0.9, WeightDecay: 0.01}) }, 0.1},
	{"sgd_nesterov", func() Optimizer { return mustSGD(SGDOptions{Momentum: 0.9, Nesterov: true}) }, 0.1},
	{"sgd_dampening", func() Optimizer { return mustSGD(SGDOptions{Momentum: 0.5, Dampening: 0.3}) }, 0.1},
}

func mustSGD(o SGDOptions) *SGD {
	s, err := NewSGD(o)
	if err != nil {
		panic(err)
	}
	return s
}

// TestOptimizersMatchPyTorch follows torch.optim's trajectories step by step
// (testdata/make_fixtures.py) to 1e-6 relative (in the 2-norm of each tensor).
func TestOptimizersMatchPyTorch(t *testing.T) {
	for _, c := range optimCases {
		t.Run(c.key, func(t *testing.T) {
			q := newQuadratic(t)
			opt := c.make()
			ctx := &engine.Context{Workers: 2}
			for k, n := range []string{"w", "b"} {
				want := fixture32(t, "optim.npz", c.key+"_"+n)
				size := len(q.params[k].Value.F)
				steps := len(want) / size
				q2 := newQuadratic(t)
				for s := range steps {
					q2.grad()
					if err := opt.Step(ctx, q2.params, c.lr); err != nil {
						t.Fatal(err)
					}
					// Norm-wise relative error: elements crossing zero make element-wise
					// ratios meaningless, and PyTorch's kernels fuse some multiply-adds
					// (one rounding instead of two), so the two agree to float32 rounding,
					// not bit for bit.
					var num, den float64
					for i, got := range q2.params[k].Value.F {
						w := float64(want[s*size+i])
						num += (float64(got) - w) * (float64(got) - w)
						den += w * w
					}
					if e := math.Sqrt(num / den); e > 1e-6 {
						t.Fatalf("%s step %d: %s = %v, PyTorch %v (relative error %.2g)", c.key, s+1, n, q2.params[k].Value.F, want[s*size:(s+1)*size], e)
					}
				}
				if f := q2.params[2].Value.F; f[0] != 1 || f[1] != 2 {
					t.Errorf("frozen parameter changed to %v", f)
				}
				opt = c.make()
			}
			_ = q
		})
	}
}

// TestOptimizerStateResume checks that a run stopped after some steps and resumed from
// the marshalled state (into a fresh optimizer, as from a checkpoint) ends bit for bit
// where the uninterrupted run ends.
func TestOptimizerStateResume(t *testing.T) {
	for _, c := range optimCases {
		t.Run(c.key, func(t *testing.T) {
			ctx := &engine.Context{Workers: 2}
			whole := newQuadratic(t)
			o1 := c.make()
			for range 12 {
				whole.grad()
				if err := o1.Step(ctx, whole.params, c.lr); err != nil {
					t.Fatal(err)
				}
			}
			part := newQuadratic(t)
			o2 := c.make()
			for range 5 {
				part.grad()
				if err := o2.Step(ctx, part.params, c.lr); err != nil {
					t.Fatal(err)
				}
			}
			state, err := o2.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			o3 := c.make()
			if err := o3.UnmarshalBinary(state); err != nil {
				t.Fatal(err)
			}
			again, _ := o3.MarshalBinary()
			if !bytes.Equal(state, again) {
				t.Fatal("state changed through UnmarshalBinary and MarshalBinary")
			}
			for range 7 {
				part.grad()
				if err := o3.Step(ctx, part.params, c.lr); err != nil {
					t.Fatal(err)
				}
			}
			for k := range 2 {
				for i, w := range whole.params[k].Value.F {
					if math.Float32bits(w) != math.Float32bits(part.params[k].Value.F[i]) {
						t.Fatalf("param %d[%d]: resumed %v, uninterrupted %v", k, i, part.params[k].Value.F[i], w)
					}
				}
			}
		})
	}
}

func TestOptimizerErrors(t *testing.T) {
	q := newQuadratic(t)
	a := NewAdam(AdamOptions{})
	q.grad()
	if err := a.Step(nil, q.params, 0.1); err != nil {
		t.Fatal(err)
	}
	// The same name with another size: state of another model.
	other := []*engine.Param{{Name: "w", Value: engine.NewFloat([]int{2}, make([]float32, 2)), Grad: engine.NewFloat([]int{2}, make([]float32, 2)), Trainable: true}}
	before := fmt.Sprint(q.params[0].Value.F)
	if err := a.Step(nil, other, 0.1); err == nil {
		t.Error("Step accepted a parameter whose size differs from its state")
	}
	if fmt.Sprint(q.params[0].Value.F) != before {
		t.Error("failed Step changed parameters")
	}
	noGrad := []*engine.Param{{Name: "x", Value: engine.NewFloat([]int{2}, make([]float32, 2)), Trainable: true}}
	if err := a.Step(nil, noGrad, 0.1); err == nil {
		t.Error("Step accepted a trainable parameter without gradient")
	}
	if err := a.Step(nil, q.params, math.NaN()); err == nil {
		t.Error("Step accepted a NaN learning rate")
	}
	state, _ := a.MarshalBinary()
	for _, bad := range [][]byte{nil, []byte("garbage"), state[:len(state)-3], append(state[:len(state):len(state)], 0)} {
		if err := NewAdam(AdamOptions{}).UnmarshalBinary(bad); err == nil {
			t.Errorf("UnmarshalBinary accepted %d bytes of bad state", len(bad))
		}
	}
	if err := mustSGD(SGDOptions{Momentum: 0.9}).UnmarshalBinary(state); err == nil {
		t.Error("SGD accepted Adam's state")
	}
	if _, err := NewSGD(SGDOptions{Nesterov: true}); err == nil {
		t.Error("Nesterov without momentum accepted")
	}
}

// TestSchedulesMatchPyTorch compares with StepLR(step_size=3, gamma=0.5) and
// CosineAnnealingLR(T_max=10, eta_min=1e-3) stepped per epoch from lr 0.1.
func TestSchedulesMatchPyTorch(t *testing.T) {
	for _, c := range []struct {
		key string
		s   Schedule
	}{
		{"steplr", StepDecay{LR: 0.1, Every: 3, Gamma: 0.5}},
		{"cosine", Cosine{LR: 0.1, Min: 1e-3, Total: 10, PerEpoch: true}},
	} {
		for e, want := range fixture64(t, "optim.npz", c.key) {
			// PyTorch's cosine is a recurrence, exact only to rounding.
			if got := c.s.Rate(1000*e, e); relErr(got, want, 1e-300) > 1e-12 {
				t.Errorf("%s epoch %d: %v, PyTorch %v", c.key, e, got, want)
			}
		}
	}
	if r := (Cosine{LR: 1, Min: 0.1, Total: 4}).Rate(2, 0); math.Abs(r-0.55) > 1e-15 {
		t.Errorf("cosine half way: %v, want 0.55", r)
	}
	if r := (Cosine{LR: 1, Min: 0.1, Total: 4}).Rate(9, 0); r != 0.1 {
		t.Errorf("cosine after Total: %v, want Min", r)
	}
	if r := (Constant{LR: 0.3}).Rate(5, 7); r != 0.3 {
		t.Errorf("constant: %v", r)
	}
}
