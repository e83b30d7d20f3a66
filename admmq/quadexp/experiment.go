// Package quadexp reproduces the quadratic experiment of the ADMM-Q paper (section 6.1 and
// appendix F): min ½xᵀQx + bᵀx over x ∈ vℤ^d, Q = Q̃ᵀQ̃ + q̃q̃ᵀ with Q̃_ij ~ N(0,1),
// q̃_i ~ N(0,σ²), b = 20·N(0,1), starts x⁰ = 10·N(0,1), solved by ADMM-Q, ADMM-S, ADMM-R,
// PGD and GD+Proj over the paper's hyper-parameter grids.
//
// All starts of one setting run together as the rows of one matrix, so each exact x-update
// is one matrix product with (Q + ρI)⁻¹ (computed once per ρ from its Cholesky factor), done
// by OpenBLAS when it can be loaded and by gonum otherwise. The y- and λ-updates are the
// formulas of package admmq's step functions, fused into two passes over each block of rows
// (ADMM-S's norm is taken row by row, one row being one run's variable); the tests check the
// batched runs against admmq.Run start by start.
package quadexp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"sync"

	"github.com/qtool/qtool/admmq"
	"gonum.org/v1/gonum/mat"
)

// Pair is one (v, d, σ²) parameter pair of the paper's Table 2.
type Pair struct {
	V      float64 `json:"v"`
	D      int     `json:"d"`
	Sigma2 float64 `json:"sigma2"`
}

// key identifies the pair in random streams, so that an instance depends on the pair's
// values and not on its position in Config.Pairs: running a subset of the pairs reproduces
// the same instances.
func (p Pair) key() uint64 {
	return splitmix(math.Float64bits(p.V) ^ splitmix(uint64(p.D)^splitmix(math.Float64bits(p.Sigma2))))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (p Pair) String() string { return fmt.Sprintf("v=%g, d=%d, σ²=%g", p.V, p.D, p.Sigma2) }

// Config is the experimental protocol.
type Config struct {
	Pairs     []Pair `json:"pairs"`
	Instances int    `json:"instances"`
	Starts    int    `json:"starts"`
	Iters     int    `json:"iters"`     // ADMM-Q/S/R and GD+Proj
	PGDIters  int    `json:"pgd_iters"` // PGD
	Last      int    `json:"last"`      // score = best objective over the last Last iterates
	// RhoBars are the ρ values in units of λ_max(Q): ρ = ρ̄·λ_max(Q), as the reference code does.
	RhoBars []float64 `json:"rho_bars"`
	Betas   []float64 `json:"betas"` // ADMM-S
	Ps      []float64 `json:"ps"`    // ADMM-R
	Seed    uint64    `json:"seed"`
}

// Methods returns the methods of the experiment in report order.
func Methods() []admmq.Method {
	return []admmq.Method{admmq.ADMMQ, admmq.ADMMS, admmq.ADMMR, admmq.PGD, admmq.GDProj}
}

func powers(lo, hi, step float64) []float64 {
	var out []float64
	for e := lo; e <= hi+1e-9; e += step {
		out = append(out, math.Pow(10, e))
	}
	return out
}

// PaperConfig is the full protocol of design.md §2: the 7 pairs, 5 instances, 50 starts,
// 30 000 iterations (PGD 100 000), best of the last 50 iterates, ρ̄ ∈ 10^{−6..2},
// β ∈ 10^{−5..5} in half decades, p ∈ {0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99}.
func PaperConfig(seed uint64) Config {
	return Config{
		Pairs:     []Pair{{8, 8, 30}, {8, 16, 30}, {8, 32, 30}, {8, 64, 30}, {8, 16, 10}, {8, 16, 50}, {8, 16, 70}},
		Instances: 5, Starts: 50, Iters: 30000, PGDIters: 100000, Last: 50,
		RhoBars: powers(-6, 2, 1), Betas: powers(-5, 5, 0.5),
		Ps:   []float64{0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99},
		Seed: seed,
	}
}

// QuickConfig is a reduced protocol for smoke runs: same pairs and grids, 2 instances,
// 10 starts, 1 000 iterations (PGD 3 000).
func QuickConfig(seed uint64) Config {
	c := PaperConfig(seed)
	c.Instances, c.Starts, c.Iters, c.PGDIters = 2, 10, 1000, 3000
	return c
}

// Validate reports a protocol that cannot run.
func (c Config) Validate() error {
	switch {
	case len(c.Pairs) == 0:
		return errors.New("quadexp: no parameter pairs")
	case c.Instances < 1 || c.Starts < 1:
		return fmt.Errorf("quadexp: %d instances × %d starts, want at least 1 of each", c.Instances, c.Starts)
	case c.Last < 1 || c.Iters < c.Last || c.PGDIters < c.Last:
		return fmt.Errorf("quadexp: iterations (%d, PGD %d) must be at least last = %d ≥ 1", c.Iters, c.PGDIters, c.Last)
	case len(c.RhoBars) == 0 || len(c.Betas) == 0 || len(c.Ps) == 0:
		return errors.New("quadexp: empty hyper-parameter grid")
	}
	for _, p := range c.Pairs {
		if p.D < 1 || !(p.V > 0) || !(p.Sigma2 >= 0) {
			return fmt.Errorf("quadexp: bad pair %v", p)
		}
		if frac, _ := math.Frexp(p.V); frac != 0.5 {
			// x·(1/v) must equal x/v exactly for the fused projection to match admmq's.
			return fmt.Errorf("quadexp: pair %v: v must be a power of two", p)
		}
	}
	for _, p := range c.Ps {
		if !(p > 0 && p <= 1) {
			return fmt.Errorf("quadexp: ADMM-R p = %v, want 0 < p ≤ 1", p)
		}
	}
	return nil
}

// Instance is one random problem with its starting points.
type Instance struct {
	Pair  Pair
	Index int
	Q     []float64   // d×d row-major
	B     []float64   // d
	X0    [][]float64 // Starts × d
	LMax  float64     // λ_max(Q) = L_f
	LMin  float64
}

// NewInstance draws instance idx of pair number pairIdx from the stream (seed, pairIdx, idx).
func NewInstance(cfg Config, pairIdx, idx int) (*Instance, error) {
	p := cfg.Pairs[pairIdx]
	d := p.D
	rng := rand.New(rand.NewPCG(cfg.Seed, p.key()^uint64(idx)))
	qt := make([]float64, d*d)
	for i := range qt {
		qt[i] = rng.NormFloat64()
	}
	qv := make([]float64, d)
	for i := range qv {
		qv[i] = math.Sqrt(p.Sigma2) * rng.NormFloat64()
	}
	b := make([]float64, d)
	for i := range b {
		b[i] = 20 * rng.NormFloat64()
	}
	x0 := make([][]float64, cfg.Starts)
	for s := range x0 {
		x0[s] = make([]float64, d)
		for i := range x0[s] {
			x0[s][i] = 10 * rng.NormFloat64()
		}
	}
	q := make([]float64, d*d)
	for i := 0; i < d; i++ {
		for j := 0; j <= i; j++ {
			var s float64
			for k := 0; k < d; k++ {
				s += qt[k*d+i] * qt[k*d+j]
			}
			s += qv[i] * qv[j]
			q[i*d+j], q[j*d+i] = s, s
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(d, append([]float64(nil), q...)), false) {
		return nil, fmt.Errorf("quadexp: %v instance %d: eigen-decomposition failed", p, idx)
	}
	vals := eig.Values(nil)
	return &Instance{Pair: p, Index: idx, Q: q, B: b, X0: x0, LMin: vals[0], LMax: vals[d-1]}, nil
}

// Value returns f(x).
func (in *Instance) Value(x []float64) float64 {
	d := len(in.B)
	var f float64
	for i := 0; i < d; i++ {
		var qi float64
		row := in.Q[i*d : (i+1)*d]
		for j, v := range row {
			qi += v * x[j]
		}
		f += x[i] * (0.5*qi + in.B[i])
	}
	return f
}

// augInverse returns (Q + ρI)⁻¹ as a dense row-major matrix, from one Cholesky factorization.
func (in *Instance) augInverse(rho float64) ([]float64, error) {
	d := len(in.B)
	a := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			v := in.Q[i*d+j]
			if i == j {
				v += rho
			}
			a.SetSym(i, j, v)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return nil, fmt.Errorf("quadexp: Q + ρI not positive definite at ρ = %g", rho)
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return nil, fmt.Errorf("quadexp: inverting Q + ρI at ρ = %g: %w", rho, err)
	}
	out := make([]float64, d*d)
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			out[i*d+j] = inv.At(i, j)
		}
	}
	return out, nil
}

// Setting is one point of a method's hyper-parameter grid.
type Setting struct {
	Method admmq.Method `json:"method"`
	RhoBar float64      `json:"rho_bar"`
	Beta   float64      `json:"beta,omitempty"`
	P      float64      `json:"p,omitempty"`
}

// job is one (instance, method, ρ̄): every sub-setting (β or p) × every start, as rows.
type job struct {
	pair, inst int
	method     admmq.Method
	rhoIdx     int
	subs       []float64 // β or p per group of Starts rows; {0} otherwise
	// aliasQ are the β of ADMM-S with β/ρ ≥ sup‖z − P_A(z)‖ = v√d/2: there ADMM-S is ADMM-Q
	// iterate by iterate (appendix D; admmq's TestADMMSEqualsADMMQForLargeBeta), so they are
	// not simulated again but take the ADMM-Q job's scores.
	aliasQ []float64
	cost   float64
	// final keeps the batch after the run, for tests that compare states.
	final  *batch
	scores []float64 // filled by the worker: len(subs)·Starts
}

func (j *job) seed(cfg Config) uint64 {
	return cfg.Seed ^ splitmix(cfg.Pairs[j.pair].key()^uint64(j.inst)<<32|uint64(j.rhoIdx))
}

// Options controls how Run executes; none of it changes the results.
type Options struct {
	Workers int // 0 means runtime.NumCPU()
	// PureGo skips OpenBLAS and uses gonum's Dgemm.
	PureGo bool
	// Progress, if non-nil, is called after each finished job (from the calling goroutine's
	// point of view serially).
	Progress func(done, total int)
}

// Run executes the protocol and returns its results.
func Run(ctx context.Context, cfg Config, opt Options) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	newGemm, backend := (func() gemmFunc)(nil), ""
	if !opt.PureGo && os.Getenv("QTOOL_BLAS") != "go" {
		if g, name, err := openBLASDgemm(); err == nil {
			newGemm, backend = g, name
		}
	}
	if newGemm == nil {
		newGemm, backend = gonumDgemm, "gonum (pure Go)"
	}
	insts := make([][]*Instance, len(cfg.Pairs))
	var jobs []*job
	for pi, p := range cfg.Pairs {
		for ii := 0; ii < cfg.Instances; ii++ {
			in, err := NewInstance(cfg, pi, ii)
			if err != nil {
				return nil, err
			}
			insts[pi] = append(insts[pi], in)
			for ri := range cfg.RhoBars {
				for _, m := range Methods() {
					j := &job{pair: pi, inst: ii, method: m, rhoIdx: ri, subs: []float64{0}}
					iters := cfg.Iters
					switch m {
					case admmq.ADMMS:
						j.subs = nil
						sup := p.V * math.Sqrt(float64(p.D)) / 2
						for _, beta := range cfg.Betas {
							if beta/(cfg.RhoBars[ri]*in.LMax) >= sup {
								j.aliasQ = append(j.aliasQ, beta)
							} else {
								j.subs = append(j.subs, beta)
							}
						}
					case admmq.ADMMR:
						j.subs = cfg.Ps
					case admmq.PGD:
						iters = cfg.PGDIters
					}
					rows := len(j.subs) * cfg.Starts
					j.cost = float64(iters) * float64(rows) * float64(p.D) * float64(p.D+8)
					jobs = append(jobs, j)
				}
			}
		}
	}
	// Longest jobs first keeps both cores busy to the end; the order does not affect results.
	order := make([]*job, len(jobs))
	copy(order, jobs)
	sort.SliceStable(order, func(a, b int) bool { return order[a].cost > order[b].cost })

	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan *job)
	var (
		mu       sync.Mutex
		firstErr error
		done     int
		wg       sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gemm := newGemm() // per worker: the OpenBLAS caller keeps its arguments in place
			for j := range next {
				err := runJob(ctx, cfg, insts[j.pair][j.inst], j, gemm)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				done++
				if opt.Progress != nil && err == nil {
					opt.Progress(done, len(jobs))
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, j := range order {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return assemble(cfg, insts, jobs, backend), nil
}

// blockElems is the size, in matrix elements, of the row blocks an iteration is processed
// in, so that the rows stay in the L2 cache between the element-wise passes and the product.
const blockElems = 4096

// runJob runs every row of j and stores its scores.
//
// One iteration of the ADMM family is, row by row, the y-update (fused with forming the
// right-hand side w = ρy − b − λ), then X = W(Q + ρI)⁻¹ for the block, then the λ-update.
// These are the same formulas as admmq's UpdateYQ, UpdateYR (with MaskBits), SoftPrepare/
// SoftFactor/SoftApply and UpdateDual, fused into two passes because element-wise work, not
// the product, dominates at these sizes; TestBatchMatchesDriver checks them against
// admmq.Run.
//
// A row whose whole state (x, y, λ) came out of an iteration bit-identical to what went in
// (and, for ADMM-R, whose unmasked projection equals y, so that no mask can move it) is at a
// fixed point of the iteration and stays there; it is frozen and skipped. This changes no
// result, it only skips recomputing it.
func runJob(ctx context.Context, cfg Config, in *Instance, j *job, gemm gemmFunc) error {
	d := in.Pair.D
	S := cfg.Starts
	n := len(j.subs) * S
	rho := cfg.RhoBars[j.rhoIdx] * in.LMax
	b := newBatch(in, n, S, gemm)
	j.scores = b.best
	j.final = b
	if n == 0 {
		return nil
	}
	iters := cfg.Iters
	if j.method == admmq.PGD {
		iters = cfg.PGDIters
	}
	var minv []float64
	switch j.method {
	case admmq.ADMMQ, admmq.ADMMR, admmq.ADMMS:
		var err error
		if minv, err = in.augInverse(rho); err != nil {
			return fmt.Errorf("quadexp: %v instance %d: %w", in.Pair, in.Index, err)
		}
		for i, x := range b.X { // y⁰ = P_A(x⁰); λ⁰ = 0
			b.Y[i] = b.proj(x)
		}
	}
	seed := j.seed(cfg)
	gpb := max(1, blockElems/(S*d)) // sub-setting groups per block
	for it := 0; it < iters; it++ {
		if it%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		scoring := it >= iters-cfg.Last
		b.X, b.Xprev = b.Xprev, b.X
		for g0 := 0; g0 < len(j.subs); g0 += gpb {
			g1 := min(g0+gpb, len(j.subs))
			lo, hi := g0*S, g1*S
			if !scoring && allTrue(b.frozen[lo:hi]) {
				continue
			}
			b.iterate(j, minv, rho, seed, it, lo, hi, g0, S, scoring)
		}
	}
	return nil
}

func allTrue(v []bool) bool {
	for _, x := range v {
		if !x {
			return false
		}
	}
	return true
}

// batch holds n runs as the rows of n×d matrices.
type batch struct {
	in                       *Instance
	n, d                     int
	v, invV                  float64 // lattice step v (a power of two) and 1/v
	X, Xprev, Y, L, Z, ZT, W []float64
	G                        []float64 // scratch for scoring; W must survive for frozen rows
	frozen                   []bool
	best                     []float64
	gemm                     gemmFunc
}

func newBatch(in *Instance, n, starts int, gemm gemmFunc) *batch {
	d := in.Pair.D
	b := &batch{in: in, n: n, d: d, gemm: gemm, v: in.Pair.V, invV: 1 / in.Pair.V}
	for _, p := range []*[]float64{&b.X, &b.Xprev, &b.Y, &b.L, &b.Z, &b.ZT, &b.W, &b.G} {
		*p = make([]float64, n*d)
	}
	for r := 0; r < n; r++ {
		copy(b.X[r*d:(r+1)*d], in.X0[r%starts])
	}
	copy(b.Xprev, b.X)
	b.frozen = make([]bool, n)
	b.best = make([]float64, n)
	for i := range b.best {
		b.best[i] = math.Inf(1)
	}
	return b
}

// proj is the projection onto vℤ with admmq's tie rule (admmq.Set of kind lattice); v is a
// power of two, so z·(1/v) is z/v exactly.
func (b *batch) proj(z float64) float64 { return b.v * admmq.RoundHalfUp(z*b.invV) }

// iterate performs iteration it of j's method on rows [lo, hi), which hold the sub-setting
// groups from g0 on.
func (b *batch) iterate(j *job, minv []float64, rho float64, seed uint64, it, lo, hi, g0, S int, scoring bool) {
	d := b.d
	v, iv := b.v, b.invV // b.proj, written out so that it inlines
	row := func(m []float64, r int) []float64 { return m[r*d : (r+1)*d] }
	block := func(m []float64) []float64 { return m[lo*d : hi*d] }
	bb := b.in.B
	switch j.method {
	case admmq.ADMMQ, admmq.ADMMR, admmq.ADMMS:
		inv := 1 / rho
		var bits admmq.MaskBits
		group := -1
		// The x-update reads the previous x only through λ; X now holds x^r in Xprev.
		for r := lo; r < hi; r++ {
			if b.frozen[r] {
				continue
			}
			x, y, l, w := row(b.Xprev, r), row(b.Y, r), row(b.L, r), row(b.W, r)
			switch j.method {
			case admmq.ADMMQ:
				for i := range x {
					y[i] = v * admmq.RoundHalfUp((x[i]+l[i]*inv)*iv)
					w[i] = rho*y[i] - bb[i] - l[i]
				}
			case admmq.ADMMR:
				g := r / S
				if g != group {
					group = g
					bits = admmq.Mask{P: j.subs[g], Seed: seed, Iter: it, Stream: uint64(g)}.Bits()
				}
				off := (r - g*S) * d // element index within the group, as UpdateYR on the group
				for i := range x {
					if p := v * admmq.RoundHalfUp((x[i]+l[i]*inv)*iv); p != y[i] && bits.On(off+i) {
						y[i] = p
					}
					w[i] = rho*y[i] - bb[i] - l[i]
				}
			case admmq.ADMMS:
				z, zt := row(b.Z, r), row(b.ZT, r)
				var d2 float64
				for i := range x {
					z[i] = x[i] + l[i]*inv
					zt[i] = v * admmq.RoundHalfUp((z[i])*iv)
					d2 += (zt[i] - z[i]) * (zt[i] - z[i])
				}
				if s := admmq.SoftFactor(d2, j.subs[r/S], rho); s >= 1 {
					copy(y, zt)
				} else {
					for i := range y {
						y[i] = z[i] + s*(zt[i]-z[i])
					}
				}
				for i := range x {
					w[i] = rho*y[i] - bb[i] - l[i]
				}
			}
		}
		b.gemm(hi-lo, d, d, block(b.W), d, minv, d, block(b.X), d)
		for r := lo; r < hi; r++ {
			if b.frozen[r] {
				continue
			}
			// If x and λ come out unchanged, the next y-update sees the same inputs, so (for
			// ADMM-Q and ADMM-S) every later iteration reproduces this state.
			x, xp, y, l := row(b.X, r), row(b.Xprev, r), row(b.Y, r), row(b.L, r)
			same := true
			var nonfinite float64 // x·0 is NaN exactly when x is ±Inf or NaN
			for i := range x {
				nl := l[i] + rho*(x[i]-y[i])
				same = same && nl == l[i] && x[i] == xp[i]
				l[i] = nl
				nonfinite += x[i] * 0
			}
			if nonfinite != nonfinite {
				same = true // diverged: NaN/Inf is absorbing, its objective never counts
			}
			if same && j.method == admmq.ADMMR {
				for i := range x { // fixed under every mask only if the full projection agrees
					if v*admmq.RoundHalfUp((xp[i]+l[i]*inv)*iv) != y[i] {
						same = false
						break
					}
				}
			}
			b.frozen[r] = same
		}
		if scoring {
			if j.method == admmq.ADMMS {
				b.score(lo, hi, b.ZT) // the iteration's point of A, P_A(z), as the reference code
			} else {
				b.score(lo, hi, b.Y)
			}
		}
	case admmq.PGD, admmq.GDProj:
		// Xprev holds x^r; compute G = x^r Q into W, then x^{r+1} into X.
		b.gemm(hi-lo, d, d, block(b.Xprev), d, b.in.Q, d, block(b.W), d)
		inv := 1 / rho
		for r := lo; r < hi; r++ {
			x, xp, g := row(b.X, r), row(b.Xprev, r), row(b.W, r)
			if b.frozen[r] {
				copy(x, xp)
				continue
			}
			same := true
			for i := range x {
				nx := xp[i] - (g[i]+bb[i])*inv
				if j.method == admmq.PGD {
					nx = v * admmq.RoundHalfUp((nx)*iv)
				}
				same = same && nx == xp[i]
				x[i] = nx
			}
			b.frozen[r] = same || !finiteRow(x)
		}
		if scoring {
			if j.method == admmq.PGD {
				b.score(lo, hi, b.X)
			} else {
				for i, x := range block(b.X) {
					block(b.ZT)[i] = v * admmq.RoundHalfUp((x)*iv)
				}
				b.score(lo, hi, b.ZT)
			}
		}
	}
}

func finiteRow(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// score lowers the best objective of rows [lo, hi) with f at the rows of F.
func (b *batch) score(lo, hi int, F []float64) {
	d := b.d
	F, W := F[lo*d:hi*d], b.G[lo*d:hi*d]
	b.gemm(hi-lo, d, d, F, d, b.in.Q, d, W, d)
	for r := 0; r < hi-lo; r++ {
		x, g := F[r*d:(r+1)*d], W[r*d:(r+1)*d]
		var f float64
		for i := range x {
			f += x[i] * (0.5*g[i] + b.in.B[i])
		}
		if f < b.best[lo+r] && !math.IsInf(f, -1) { // NaN never lowers the score, nor does a diverged row
			b.best[lo+r] = f
		}
	}
}
