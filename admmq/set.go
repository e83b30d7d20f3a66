package admmq

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Float is the element type of the vectors and tensors the package works on.
type Float interface{ ~float32 | ~float64 }

// Projector projects vectors and tensors onto a set A and measures their distance to it.
// Implementations must be safe for concurrent use and must not allocate per call once warm.
type Projector interface {
	// Project64 writes P_A(src) to dst; dst may alias src.
	Project64(dst, src []float64, l Layout) error
	// Project32 is Project64 for float32 tensors.
	Project32(dst, src []float32, l Layout) error
	// Dist64 returns ‖src − P_A(src)‖ without writing anything.
	Dist64(src []float64, l Layout) (float64, error)
	// Dist32 is Dist64 for float32 tensors.
	Dist32(src []float32, l Layout) (float64, error)
}

// Layout describes how a flat slice is a tensor. A zero Layout is a plain vector.
type Layout struct {
	// Shape of the tensor; nil means a vector of the slice's length.
	Shape []int
	// Axis is the axis per-channel sets keep one scale per index of: the output
	// channels of a network weight, wherever the model's format puts them. Only
	// per-channel sets use it.
	Axis int
}

// Kind names a family of quantization sets.
type Kind string

// The supported set families.
const (
	KindBinary       Kind = "binary"        // {−1,+1}
	KindScaledBinary Kind = "scaled-binary" // {−α,+α}
	KindTernary      Kind = "ternary"       // {−α,0,+α}
	KindUniform      Kind = "uniform"       // α·{−m..m}, m = 2^(k−1)−1
	KindBox          Kind = "box"           // {Lo..Hi}, integers
	KindLattice      Kind = "lattice"       // Step·ℤ
)

// ScaleRule says how the scale α of a scaled set is chosen for each group (the whole
// tensor, or each output channel).
type ScaleRule string

// Scale rules.
const (
	// ScaleFixed uses Spec.Alpha for every group.
	ScaleFixed ScaleRule = "fixed"
	// ScaleOptimal chooses α jointly with the levels to minimise ‖z − P(z)‖ over the group:
	// α = mean|z| for scaled-binary (the XNOR-Net closed form, which is the exact joint
	// minimiser: for any α ≥ 0 the best signs are sign(z), and then the best α is mean|z|);
	// for ternary the exact optimum over the prefixes of |z| sorted in decreasing order:
	// with support of size k the error is ‖z‖² − (Σ_{top k}|z|)²/k, so α = P_k/k for the k
	// that maximises P_k²/k (smallest such k on ties); for uniform grids the exact optimum
	// over every α at which some level changes (uniformScale), as Leng et al. (2018) fit the
	// scale jointly with the levels.
	ScaleOptimal ScaleRule = "optimal"
	// ScaleMax sets α = max|z|/m for uniform grids so that the extreme level reaches the
	// largest magnitude; a heuristic, not the joint minimiser.
	ScaleMax ScaleRule = "max"
)

// Spec describes a quantization set. It is plain data so that it can be stored in
// checkpoints and reports.
type Spec struct {
	Kind Kind `json:"kind"`
	// Alpha is the fixed scale for scaled-binary, ternary and uniform sets (ScaleFixed).
	Alpha float64 `json:"alpha,omitempty"`
	// Scale says how α is chosen; empty means ScaleFixed.
	Scale ScaleRule `json:"scale,omitempty"`
	// PerChannel chooses α per output channel (Layout.Axis) instead of per tensor.
	PerChannel bool `json:"per_channel,omitempty"`
	// Bits is k for uniform grids (k ≥ 2): levels α·{−(2^(k−1)−1) .. 2^(k−1)−1}, a
	// symmetric grid with zero, so k = 2 is ternary.
	Bits int `json:"bits,omitempty"`
	// Lo and Hi bound the integer box (Example 2.2 of the paper), Lo ≤ Hi.
	Lo int `json:"lo,omitempty"`
	Hi int `json:"hi,omitempty"`
	// Step is v of the lattice vℤ (v > 0).
	Step float64 `json:"step,omitempty"`
}

// Set is a quantization set built from a Spec. It implements Projector and is safe for
// concurrent use; use it by pointer.
type Set struct {
	spec  Spec
	m     float64 // largest level index of a uniform grid
	lo    float64
	hi    float64
	pool  sync.Pool // *[]float64 scratch for the joint ternary scale
	scale ScaleRule
	// invStep is 1/v for a lattice whose v is a power of two, else 0.
	invStep float64
}

// ErrNaN reports a NaN in the input of a projection.
var ErrNaN = errors.New("NaN in input")

// NewSet validates spec and returns its Set.
func NewSet(spec Spec) (*Set, error) {
	s := &Set{spec: spec, scale: spec.Scale}
	if s.scale == "" {
		s.scale = ScaleFixed
	}
	scaled := false
	switch spec.Kind {
	case KindBinary:
	case KindScaledBinary, KindTernary:
		scaled = true
		if s.scale != ScaleFixed && s.scale != ScaleOptimal {
			return nil, fmt.Errorf("admmq: %s set: scale rule %q not supported (use fixed or optimal)", spec.Kind, s.scale)
		}
	case KindUniform:
		scaled = true
		if spec.Bits < 2 || spec.Bits > 31 {
			return nil, fmt.Errorf("admmq: uniform set: bits = %d, want 2..31", spec.Bits)
		}
		if s.scale != ScaleFixed && s.scale != ScaleMax && s.scale != ScaleOptimal {
			return nil, fmt.Errorf("admmq: uniform set: scale rule %q not supported (use fixed, max or optimal)", s.scale)
		}
		s.m = float64(int64(1)<<(spec.Bits-1) - 1)
	case KindBox:
		if spec.Lo > spec.Hi {
			return nil, fmt.Errorf("admmq: box set: lo = %d > hi = %d", spec.Lo, spec.Hi)
		}
		s.lo, s.hi = float64(spec.Lo), float64(spec.Hi)
	case KindLattice:
		if !(spec.Step > 0) || math.IsInf(spec.Step, 0) {
			return nil, fmt.Errorf("admmq: lattice set: step = %v, want a finite v > 0", spec.Step)
		}
		// x·(1/v) equals x/v exactly when v is a power of two; multiplying is much faster.
		if frac, _ := math.Frexp(spec.Step); frac == 0.5 {
			s.invStep = 1 / spec.Step
		}
	default:
		return nil, fmt.Errorf("admmq: unknown set kind %q (want binary, scaled-binary, ternary, uniform, box or lattice)", spec.Kind)
	}
	if scaled && s.scale == ScaleFixed && (!(spec.Alpha >= 0) || math.IsInf(spec.Alpha, 0)) {
		return nil, fmt.Errorf("admmq: %s set: fixed alpha = %v, want a finite α ≥ 0", spec.Kind, spec.Alpha)
	}
	if spec.PerChannel && (!scaled || s.scale == ScaleFixed) {
		return nil, fmt.Errorf("admmq: %s set: per-channel needs a data-dependent scale rule", spec.Kind)
	}
	return s, nil
}

// MustSet is NewSet for specs known to be valid at compile time; it panics otherwise.
func MustSet(spec Spec) *Set {
	s, err := NewSet(spec)
	if err != nil {
		panic(err)
	}
	return s
}

// Spec returns the set's description.
func (s *Set) Spec() Spec { return s.spec }

// SupDist returns sup_z ‖z − P_A(z)‖ for vectors of n elements, or +Inf when the set is
// bounded so that the distance is unbounded (binary, scaled, box): it is finite only for
// the lattice, where it is v·√n/2. ADMM-S coincides with ADMM-Q when β/ρ ≥ SupDist.
func (s *Set) SupDist(n int) float64 {
	if s.spec.Kind == KindLattice {
		return s.spec.Step * math.Sqrt(float64(n)) / 2
	}
	return math.Inf(1)
}

// Project64 implements Projector.
func (s *Set) Project64(dst, src []float64, l Layout) error {
	if len(dst) != len(src) {
		return fmt.Errorf("admmq: project: dst has %d elements, src %d", len(dst), len(src))
	}
	_, err := apply(s, dst, src, l)
	return err
}

// Project32 implements Projector.
func (s *Set) Project32(dst, src []float32, l Layout) error {
	if len(dst) != len(src) {
		return fmt.Errorf("admmq: project: dst has %d elements, src %d", len(dst), len(src))
	}
	_, err := apply(s, dst, src, l)
	return err
}

// Dist64 implements Projector.
func (s *Set) Dist64(src []float64, l Layout) (float64, error) {
	d2, err := apply(s, nil, src, l)
	return math.Sqrt(d2), err
}

// Dist32 implements Projector.
func (s *Set) Dist32(src []float32, l Layout) (float64, error) {
	d2, err := apply(s, nil, src, l)
	return math.Sqrt(d2), err
}

// groups splits a tensor of n elements into outer × channels × inner, where the channel
// index of element (o, c, i) is c and its offset is (o·channels + c)·inner + i.
func groups(n int, l Layout, perChannel bool) (outer, channels, inner int, err error) {
	if l.Shape == nil {
		if perChannel {
			return 0, 0, 0, errors.New("admmq: per-channel projection needs a Layout with a shape")
		}
		return 1, 1, n, nil
	}
	total := 1
	for _, d := range l.Shape {
		if d < 0 {
			return 0, 0, 0, fmt.Errorf("admmq: negative dimension in shape %v", l.Shape)
		}
		total *= d
	}
	if total != n {
		return 0, 0, 0, fmt.Errorf("admmq: shape %v has %d elements, slice has %d", l.Shape, total, n)
	}
	if !perChannel {
		return 1, 1, n, nil
	}
	if l.Axis < 0 || l.Axis >= len(l.Shape) {
		return 0, 0, 0, fmt.Errorf("admmq: channel axis %d out of range for shape %v", l.Axis, l.Shape)
	}
	outer, inner = 1, 1
	for _, d := range l.Shape[:l.Axis] {
		outer *= d
	}
	for _, d := range l.Shape[l.Axis+1:] {
		inner *= d
	}
	return outer, l.Shape[l.Axis], inner, nil
}

// apply projects src group by group into dst (when dst is non-nil) and returns the squared
// distance.
func apply[T Float](s *Set, dst, src []T, l Layout) (float64, error) {
	outer, channels, inner, err := groups(len(src), l, s.spec.PerChannel)
	if err != nil {
		return 0, err
	}
	alphas := channelScales(s, src, outer, channels, inner)
	var d2 float64
	nan := false
	for c := 0; c < channels; c++ {
		alpha := s.spec.Alpha
		if alphas != nil {
			alpha = alphas[c]
		} else if s.scale != ScaleFixed {
			alpha = groupScaleT(s, src, outer, channels, inner, c)
		}
		for o := 0; o < outer; o++ {
			off := (o*channels + c) * inner
			var blk []T
			if dst != nil {
				blk = dst[off : off+inner]
			}
			e, bad := quantize(s, blk, src[off:off+inner], alpha)
			d2 += e
			nan = nan || bad
		}
	}
	if nan {
		return d2, fmt.Errorf("admmq: project onto %s set: %w", s.spec.Kind, ErrNaN)
	}
	return d2, nil
}

// channelScales returns every channel's α when they are worth fitting concurrently, else
// nil (apply then fits each in its loop, without allocating). The sorting rules (the joint
// ternary and uniform scales) cost n·log n or more per channel, most of a large tensor's
// projection: their channels are fitted on up to GOMAXPROCS goroutines, each α from its
// own channel alone, so the result does not depend on how many ran. Each reads only its
// channel of src, which apply overwrites after all are done, so dst may alias src.
func channelScales[T Float](s *Set, src []T, outer, channels, inner int) []float64 {
	if s.scale != ScaleOptimal || s.spec.Kind == KindScaledBinary || len(src) < 1<<16 {
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), channels)
	if workers <= 1 {
		return nil
	}
	alphas := make([]float64, channels)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for c := w; c < channels; c += workers {
				alphas[c] = groupScaleT(s, src, outer, channels, inner, c)
			}
		})
	}
	wg.Wait()
	return alphas
}

// groupScaleT returns the data-dependent α of channel c.
func groupScaleT[T Float](s *Set, src []T, outer, channels, inner, c int) float64 {
	n := outer * inner
	if n == 0 {
		return 0
	}
	switch {
	case s.spec.Kind == KindScaledBinary: // α = mean|z|
		var sum float64
		for o := 0; o < outer; o++ {
			off := (o*channels + c) * inner
			for _, x := range src[off : off+inner] {
				sum += math.Abs(float64(x))
			}
		}
		return sum / float64(n)
	case s.spec.Kind == KindUniform && s.scale == ScaleOptimal:
		var abs []float64
		for o := 0; o < outer; o++ {
			off := (o*channels + c) * inner
			for _, x := range src[off : off+inner] {
				abs = append(abs, math.Abs(float64(x)))
			}
		}
		return uniformScale(abs, int(s.m))
	case s.spec.Kind == KindUniform: // ScaleMax
		var mx float64
		for o := 0; o < outer; o++ {
			off := (o*channels + c) * inner
			for _, x := range src[off : off+inner] {
				mx = max(mx, math.Abs(float64(x)))
			}
		}
		return mx / s.m
	default: // exact joint ternary scale
		bp, _ := s.pool.Get().(*[]float64)
		if bp == nil {
			bp = new([]float64)
		}
		buf := (*bp)[:0]
		for o := 0; o < outer; o++ {
			off := (o*channels + c) * inner
			for _, x := range src[off : off+inner] {
				buf = append(buf, math.Abs(float64(x)))
			}
		}
		slices.Sort(buf)
		var prefix, best, alpha float64
		for k := 1; k <= n; k++ {
			prefix += buf[n-k]
			if v := prefix * prefix / float64(k); v > best {
				best, alpha = v, prefix/float64(k)
			}
		}
		*bp = buf
		s.pool.Put(bp)
		return alpha
	}
}

// uniformScale returns the α ≥ 0 minimising Σ_i (a_i − α·q_i)² with q_i the nearest level
// of {0..m} to a_i/α (a_i = |z_i|: the signs follow z). Level q_i reaches k once α ≤
// a_i/(k − ½), so over each interval between consecutive such breakpoints every q_i is
// fixed and the error is the quadratic Σa² − 2α·Σaq + α²·Σq², least at Σaq/Σq² or at the
// interval's end; sweeping the breakpoints downwards visits every interval with running
// sums, in O(n·log n + n·m·log m). The largest α wins ties.
func uniformScale(a []float64, m int) float64 {
	// The breakpoints of level k are a_i/(k − ½): with a sorted in decreasing order each
	// level's list is sorted too, so merging the m lists through a heap visits every
	// breakpoint in decreasing order for n·log n + n·m·log m instead of sorting all n·m.
	slices.SortFunc(a, func(x, y float64) int { return cmp.Compare(y, x) })
	var szz float64
	for _, v := range a {
		szz += v * v
	}
	h := make(breakpoints, 0, m)
	if len(a) > 0 && a[0] > 0 {
		for k := 1; k <= m; k++ {
			h = append(h, breakpoint{a[0] / (float64(k) - 0.5), k, 0})
		}
		h.init()
	}
	bestE, bestA := szz, 0.0
	var szq, sqq float64
	for len(h) > 0 {
		e := h[0]
		v := a[e.i]
		szq += v
		sqq += float64(2*e.k - 1)
		if i := e.i + 1; i < len(a) && a[i] > 0 {
			h[0] = breakpoint{a[i] / (float64(e.k) - 0.5), e.k, i}
		} else {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		h.down(0)
		lo := 0.0
		if len(h) > 0 {
			lo = h[0].alpha
		}
		al := min(max(szq/sqq, lo), e.alpha)
		if en := szz - 2*al*szq + al*al*sqq; en < bestE {
			bestE, bestA = en, al
		}
	}
	return bestA
}

// breakpoint is the α below which element i of the sorted magnitudes rounds to level k
// or above.
type breakpoint struct {
	alpha float64
	k, i  int
}

// breakpoints is a max-heap on alpha.
type breakpoints []breakpoint

func (h breakpoints) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h breakpoints) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r].alpha > h[l].alpha {
			l = r
		}
		if h[l].alpha <= h[i].alpha {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// RoundHalfUp rounds to the nearest integer, ties toward +∞, the tie rule of every Set.
func RoundHalfUp(x float64) float64 { return roundHalfUp(x) }

// roundHalfUp rounds to the nearest integer, ties toward +∞. It avoids data-dependent
// branches, which mispredict half of the time on random inputs: adding and subtracting
// ±2^52 rounds |x| < 2^52 to the nearest integer with ties to even (exactly, unlike
// floor(x+0.5), which rounds 0.49999999999999994 up), and the rare tie that went down is
// then moved up. Beyond 2^52 every float64 is already an integer.
func roundHalfUp(x float64) float64 {
	if !(math.Abs(x) < 1<<52) {
		return x // integral, ±Inf or NaN
	}
	m := math.Copysign(1<<52, x)
	r := (x + m) - m
	if x-r == 0.5 {
		r++
	}
	return r
}

// quantize writes the nearest point of the set (with scale alpha) to dst when dst is
// non-nil, and returns the squared distance and whether a NaN was seen.
func quantize[T Float](s *Set, dst, src []T, alpha float64) (d2 float64, nan bool) {
	write := dst != nil
	// Fast paths for projection without the distance: the running sum of squares is a
	// dependency chain that would otherwise bound the loop's speed.
	switch {
	case write && (s.spec.Kind == KindBinary || s.spec.Kind == KindScaledBinary):
		// Copysign is branch-free, unlike a comparison on random signs; adding +0 turns −0
		// into +0, so that sign(±0) = +1.
		a := alpha
		if s.spec.Kind == KindBinary {
			a = 1
		}
		for i, x := range src {
			nan = nan || x != x
			dst[i] = T(math.Copysign(a, float64(x)+0))
		}
		return 0, nan
	case write && s.spec.Kind == KindLattice && s.invStep != 0:
		v, inv := s.spec.Step, s.invStep
		for i, x := range src {
			t := float64(x) * inv
			nan = nan || t != t
			dst[i] = T(v * roundHalfUp(t))
		}
		return 0, nan
	}
	switch s.spec.Kind {
	case KindBinary, KindScaledBinary:
		a := alpha
		if s.spec.Kind == KindBinary {
			a = 1
		}
		for i, x := range src {
			xf := float64(x)
			q := a
			if !(xf >= 0) {
				q = -a
				nan = nan || xf != xf
			}
			d2 += (xf - q) * (xf - q)
			if write {
				dst[i] = T(q)
			}
		}
	case KindTernary:
		h := alpha / 2
		for i, x := range src {
			xf := float64(x)
			var q float64
			switch {
			case xf >= h:
				q = alpha
			case xf < -h:
				q = -alpha
			default:
				nan = nan || xf != xf
			}
			d2 += (xf - q) * (xf - q)
			if write {
				dst[i] = T(q)
			}
		}
	case KindUniform:
		for i, x := range src {
			xf := float64(x)
			nan = nan || xf != xf
			var q float64
			if alpha > 0 {
				q = alpha * min(max(roundHalfUp(xf/alpha), -s.m), s.m)
			}
			d2 += (xf - q) * (xf - q)
			if write {
				dst[i] = T(q)
			}
		}
	case KindBox:
		for i, x := range src {
			xf := float64(x)
			nan = nan || xf != xf
			q := min(max(roundHalfUp(xf), s.lo), s.hi)
			d2 += (xf - q) * (xf - q)
			if write {
				dst[i] = T(q)
			}
		}
	case KindLattice:
		v := s.spec.Step
		for i, x := range src {
			xf := float64(x)
			nan = nan || xf != xf
			q := v * roundHalfUp(xf/v)
			d2 += (xf - q) * (xf - q)
			if write {
				dst[i] = T(q)
			}
		}
	}
	return d2, nan
}

// ProjectParallel32 is Project32 spread over up to workers goroutines, for large tensors.
// Sets with a fixed scale split the tensor into contiguous chunks; per-channel sets whose
// channel axis is 0, the outermost, split it by channels. Other layouts, and tensors
// under 64 Ki elements, are projected serially. The result is always identical to
// Project32's.
func (s *Set) ProjectParallel32(dst, src []float32, l Layout, workers int) error {
	if len(dst) != len(src) {
		return fmt.Errorf("admmq: project: dst has %d elements, src %d", len(dst), len(src))
	}
	outer, channels, inner, err := groups(len(src), l, s.spec.PerChannel)
	if err != nil {
		return err
	}
	n := len(src)
	type part struct {
		lo, hi int // element range
		l      Layout
	}
	var parts []part
	switch {
	case workers <= 1 || n < 1<<16:
	case s.scale == ScaleFixed:
		step := (n + workers - 1) / workers
		for lo := 0; lo < n; lo += step {
			parts = append(parts, part{lo: lo, hi: min(lo+step, n)})
		}
	case s.spec.PerChannel && l.Axis == 0 && outer == 1:
		step := (channels + workers - 1) / workers
		for c := 0; c < channels; c += step {
			c1 := min(c+step, channels)
			shape := append([]int{c1 - c}, l.Shape[1:]...)
			parts = append(parts, part{lo: c * inner, hi: c1 * inner, l: Layout{Shape: shape}})
		}
	}
	if len(parts) < 2 {
		return s.Project32(dst, src, l)
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = apply(s, dst[p.lo:p.hi], src[p.lo:p.hi], p.l)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
