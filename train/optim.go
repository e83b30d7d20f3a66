package train

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/qtool/qtool/engine"
)

// Optimizer updates trainable parameters in place from their gradients.
//
// Step applies one update with learning rate lr to every trainable parameter in params
// (others are skipped), splitting the work over ctx.Workers goroutines. The optimizer
// keeps per-parameter state (moments, momentum buffers) keyed by parameter name; its
// binary form (MarshalBinary) holds that state bit for bit, so that a run resumed from a
// checkpoint continues exactly as the uninterrupted run would.
type Optimizer interface {
	Step(ctx *engine.Context, params []*engine.Param, lr float64) error
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(data []byte) error
}

// slot is the state an optimizer keeps for one parameter.
type slot struct {
	name string
	// steps counts the updates of this parameter, as PyTorch keeps a step per parameter.
	steps uint64
	bufs  [][]float32
}

// slots holds the per-parameter state in first-seen order, which is the order of the
// graph's parameters and so fixed; looking a name up is a linear scan over a few dozen
// entries at most, with no allocation.
type slots struct {
	list []*slot
	// nbuf is the number of buffers per parameter.
	nbuf int
}

// get returns the state of p, creating zeroed buffers on first use; fresh reports whether
// they were created now.
func (s *slots) get(p *engine.Param) (st *slot, err error) {
	n := len(p.Value.F)
	for _, st := range s.list {
		if st.name == p.Name {
			if len(st.bufs[0]) != n {
				return nil, fmt.Errorf("parameter %s has %d values but the optimizer state holds %d: the state belongs to another model", p.Name, n, len(st.bufs[0]))
			}
			return st, nil
		}
	}
	st = &slot{name: p.Name, bufs: make([][]float32, s.nbuf)}
	for i := range st.bufs {
		st.bufs[i] = make([]float32, n)
	}
	s.list = append(s.list, st)
	return st, nil
}

// checkParam validates a trainable parameter before any update.
func checkParam(p *engine.Param) error {
	if p.Value == nil || p.Grad == nil || len(p.Value.F) != len(p.Grad.F) {
		return fmt.Errorf("parameter %s has no float gradient matching its value: call Graph.SetTrainable before training", p.Name)
	}
	return nil
}

// The binary state format: magic, then little-endian uint64 fields: the slot count, then
// per slot the name (length-prefixed), the step count, the length, and its buffers'
// float32 bits.
func (s *slots) marshal(magic string) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	b.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(s.list))))
	for _, st := range s.list {
		b.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(st.name))))
		b.WriteString(st.name)
		b.Write(binary.LittleEndian.AppendUint64(nil, st.steps))
		b.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(st.bufs[0]))))
		for _, buf := range st.bufs {
			for _, v := range buf {
				b.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
			}
		}
	}
	return b.Bytes()
}

var errCorrupt = errors.New("corrupt or truncated optimizer state")

func (s *slots) unmarshal(data []byte, magic string) error {
	r := bytes.NewReader(data)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(r, m); err != nil || string(m) != magic {
		return fmt.Errorf("optimizer state is not a %q state: %w", magic, errCorrupt)
	}
	u64 := func() (uint64, error) {
		var v [8]byte
		if _, err := io.ReadFull(r, v[:]); err != nil {
			return 0, errCorrupt
		}
		return binary.LittleEndian.Uint64(v[:]), nil
	}
	count, err := u64()
	if err != nil {
		return err
	}
	var list []*slot
	for range count {
		nl, err := u64()
		if err != nil || nl > uint64(r.Len()) {
			return errCorrupt
		}
		name := make([]byte, nl)
		if _, err := io.ReadFull(r, name); err != nil {
			return errCorrupt
		}
		steps, err := u64()
		if err != nil {
			return err
		}
		n, err := u64()
		if err != nil || n > uint64(r.Len())/4/uint64(s.nbuf) {
			return errCorrupt
		}
		st := &slot{name: string(name), steps: steps, bufs: make([][]float32, s.nbuf)}
		for i := range st.bufs {
			buf := make([]float32, n)
			var v [4]byte
			for j := range buf {
				if _, err := io.ReadFull(r, v[:]); err != nil {
					return errCorrupt
				}
				buf[j] = math.Float32frombits(binary.LittleEndian.Uint32(v[:]))
			}
			st.bufs[i] = buf
		}
		list = append(list, st)
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d trailing bytes: %w", r.Len(), errCorrupt)
	}
	s.list = list
	return nil
}

// parallel runs fn over [0, n) on ctx's workers, or in the calling goroutine without a
// context.
func parallel(ctx *engine.Context, n int, fn func(lo, hi int)) {
	if ctx == nil {
		fn(0, n)
		return
	}
	// 32k elements per chunk at least: below that, starting a goroutine costs more than
	// the update.
	ctx.Parallel(n, 1<<15, fn)
}

// AdamOptions configures Adam. Zero fields take PyTorch's defaults.
type AdamOptions struct {
	// Beta1 and Beta2 are the decay rates of the first and second moments (0.9, 0.999).
	Beta1, Beta2 float64
	// Eps is added to the root of the second moment (1e-8).
	Eps float64
	// WeightDecay is the weight-decay coefficient; 0 means none.
	WeightDecay float64
	// Decoupled selects AdamW's decoupled weight decay, p ← p·(1 − lr·WeightDecay) before the
	// Adam step (torch.optim.AdamW); otherwise the decay is an L2 term added to the gradient,
	// g ← g + WeightDecay·p (torch.optim.Adam's weight_decay). For ADMM the L2 form changes
	// the x-subproblem's objective, the decoupled one does not: prefer Decoupled there.
	Decoupled bool
}

// Adam is the Adam optimizer with bias correction (Kingma & Ba), computed as
// torch.optim.Adam (and AdamW) compute it, in float32:
//
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²
//	p ← p − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)
type Adam struct {
	o     AdamOptions
	state slots
}

// NewAdam returns an Adam optimizer with no state.
func NewAdam(o AdamOptions) *Adam {
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	return &Adam{o: o, state: slots{nbuf: 2}}
}

// Step implements Optimizer.
func (a *Adam) Step(ctx *engine.Context, params []*engine.Param, lr float64) error {
	if math.IsNaN(lr) || lr < 0 {
		return fmt.Errorf("adam: learning rate %v must be non-negative", lr)
	}
	// Validate everything and create state first, so that an error leaves every
	// parameter and the step count unchanged.
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		if err := checkParam(p); err != nil {
			return fmt.Errorf("adam: %w", err)
		}
		if _, err := a.state.get(p); err != nil {
			return fmt.Errorf("adam: %w", err)
		}
	}
	// As PyTorch: the scalars are float64 and are rounded to float32 where they meet the
	// tensors.
	b1, b2 := float32(a.o.Beta1), float32(a.o.Beta2)
	c1, c2 := float32(1-a.o.Beta1), float32(1-a.o.Beta2)
	eps := float32(a.o.Eps)
	wd := float32(a.o.WeightDecay)
	decay := float32(1 - lr*a.o.WeightDecay)
	l2 := a.o.WeightDecay != 0 && !a.o.Decoupled
	decoupled := a.o.WeightDecay != 0 && a.o.Decoupled
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		st, _ := a.state.get(p)
		st.steps++
		p.Changed()
		t := float64(st.steps)
		stepSize := float32(-lr / (1 - math.Pow(a.o.Beta1, t)))
		bc2sqrt := float32(math.Sqrt(1 - math.Pow(a.o.Beta2, t)))
		w, g, m, v := p.Value.F, p.Grad.F, st.bufs[0], st.bufs[1]
		parallel(ctx, len(w), func(lo, hi int) {
			w, g, m, v := w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
			for i := range w {
				gi := g[i]
				if decoupled {
					w[i] *= decay
				}
				if l2 {
					gi += wd * w[i]
				}
				mi := m[i]*b1 + c1*gi
				vi := v[i]*b2 + c2*gi*gi
				m[i], v[i] = mi, vi
				denom := float32(math.Sqrt(float64(vi)))/bc2sqrt + eps
				w[i] += stepSize * (mi / denom)
			}
		})
	}
	return nil
}

const adamMagic = "qtool-adam-state-v1\n"

// MarshalBinary returns the optimizer's state: the step count and both moments of every
// parameter it has updated.
func (a *Adam) MarshalBinary() ([]byte, error) {
	return a.state.marshal(adamMagic), nil
}

// UnmarshalBinary replaces the optimizer's state with one from MarshalBinary. The options
// are not part of the state: make the optimizer with the same options as the saved one.
func (a *Adam) UnmarshalBinary(data []byte) error {
	if err := a.state.unmarshal(data, adamMagic); err != nil {
		return fmt.Errorf("adam: %w", err)
	}
	return nil
}

// SGDOptions configures SGD, with PyTorch's meaning of each field.
type SGDOptions struct {
	// Momentum is the momentum factor; 0 means plain gradient descent.
	Momentum float64
	// Dampening scales the new gradient's share of the momentum buffer by 1−Dampening.
	Dampening float64
	// WeightDecay adds WeightDecay·p to the gradient (L2).
	WeightDecay float64
	// Nesterov selects Nesterov momentum.
	Nesterov bool
}

// SGD is stochastic gradient descent with momentum, computed as torch.optim.SGD computes
// it:
//
//	g ← g + wd·p;  b ← g at the first step, else μb + (1−dampening)g
//	p ← p − lr·(g + μb if Nesterov, else b)
type SGD struct {
	o     SGDOptions
	state slots
}

// NewSGD returns an SGD optimizer with no state. Nesterov momentum needs a positive
// momentum and no dampening, as in PyTorch.
func NewSGD(o SGDOptions) (*SGD, error) {
	if o.Nesterov && (o.Momentum <= 0 || o.Dampening != 0) {
		return nil, fmt.Errorf("sgd: Nesterov momentum requires a positive momentum and zero dampening")
	}
	if o.Momentum < 0 || o.WeightDecay < 0 {
		return nil, fmt.Errorf("sgd: momentum %v and weight decay %v must be non-negative", o.Momentum, o.WeightDecay)
	}
	return &SGD{o: o, state: slots{nbuf: 1}}, nil
}

// Step implements Optimizer.
func (s *SGD) Step(ctx *engine.Context, params []*engine.Param, lr float64) error {
	if math.IsNaN(lr) || lr < 0 {
		return fmt.Errorf("sgd: learning rate %v must be non-negative", lr)
	}
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		if err := checkParam(p); err != nil {
			return fmt.Errorf("sgd: %w", err)
		}
		if s.o.Momentum != 0 {
			if _, err := s.state.get(p); err != nil {
				return fmt.Errorf("sgd: %w", err)
			}
		}
	}
	wd := float32(s.o.WeightDecay)
	mu := float32(s.o.Momentum)
	damp := float32(1 - s.o.Dampening)
	nlr := float32(-lr)
	for _, p := range params {
		if !p.Trainable {
			continue
		}
		p.Changed()
		w, g := p.Value.F, p.Grad.F
		if s.o.Momentum == 0 {
			parallel(ctx, len(w), func(lo, hi int) {
				for i := lo; i < hi; i++ {
					gi := g[i]
					if wd != 0 {
						gi += wd * w[i]
					}
					w[i] += nlr * gi
				}
			})
			continue
		}
		st, _ := s.state.get(p)
		// PyTorch fills a parameter's buffer with its first gradient, undamped.
		first := st.steps == 0
		st.steps++
		b := st.bufs[0]
		nesterov := s.o.Nesterov
		parallel(ctx, len(w), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gi := g[i]
				if wd != 0 {
					gi += wd * w[i]
				}
				bi := gi
				if !first {
					bi = b[i]*mu + damp*gi
				}
				b[i] = bi
				if nesterov {
					gi += mu * bi
				} else {
					gi = bi
				}
				w[i] += nlr * gi
			}
		})
	}
	return nil
}

const sgdMagic = "qtool-sgd-state-v1\n"

// MarshalBinary returns the momentum buffers.
func (s *SGD) MarshalBinary() ([]byte, error) {
	return s.state.marshal(sgdMagic), nil
}

// UnmarshalBinary replaces the optimizer's state with one from MarshalBinary.
func (s *SGD) UnmarshalBinary(data []byte) error {
	if err := s.state.unmarshal(data, sgdMagic); err != nil {
		return fmt.Errorf("sgd: %w", err)
	}
	return nil
}
