// Package quadratic reproduces the quadratic experiment of the ADMM-Q paper (Huang et al.,
// "Alternating Direction Method of Multipliers for Quantization", AISTATS 2021, section 6.1
// and appendix F): min ½xᵀQx + bᵀx over x ∈ vℤ^d, Q = Q̃ᵀQ̃ + q̃q̃ᵀ with Q̃_ij ~ N(0,1),
// q̃_i ~ N(0,σ²), b = 20·N(0,1), starts x⁰ = 10·N(0,1), solved by ADMM-Q, ADMM-S, ADMM-R,
// PGD and GD+Proj over the paper's hyper-parameter grids. It is an experiment, not part of
// the algorithm library: it uses package admmq and `qtool bench quadratic` drives it.
//
// All starts of one setting run together as the rows of one matrix, so each exact x-update
// is one matrix product with (Q + ρI)⁻¹ (computed once per ρ from its Cholesky factor). The
// y- and λ-updates are the formulas of package admmq's step functions, fused into passes over
// the rows (ADMM-S's norm is taken row by row, one row being one run's variable); the tests
// check the batched runs against admmq.Run start by start.
//
// Every product element is the chain of fused multiply-adds in index order (gemmFMA), so
// one run's numbers do not depend on which other runs share its product. That is what
// allows the speed: rows that reached a fixed point leave the product, and cache-sized
// regions of rows go through all iterations one after the other. Only qtool's own kernels
// compute it — a BLAS library chooses its summation order per CPU and per thread count, so
// it could not promise the same bits. On amd64 with AVX-512 the passes and the product are
// assembly (kernels_amd64.s); with AVX2 the product is (gemm_amd64.s) and the passes are
// Go; elsewhere all is Go. Every choice computes the same bits.
//
// No BLAS library is loaded: the package has no loader of its own and does not use the
// engine's (engine/blas), and nothing in it or its dependencies loads a shared library
// (TestNoDynamicLoading checks its dependencies). The one BLAS loader of qtool is
// engine/blas's. The Cholesky factor and the eigenvalues come from gonum, in pure Go.
package quadratic

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
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
	// Starts are the reporting starts: every reported number comes from them.
	Starts int `json:"starts"`
	// SelectStarts are further starts of each instance, drawn from the same stream after the
	// reporting ones, on which the hyper-parameters are chosen. Choosing on the starts that
	// are then reported would favour the methods with larger grids (ADMM-S has 189 settings,
	// ADMM-Q 9): the best of many medians of the same 50 numbers is biased low.
	SelectStarts int `json:"select_starts"`
	Iters        int `json:"iters"`     // ADMM-Q/S/R and GD+Proj
	PGDIters     int `json:"pgd_iters"` // PGD
	Last         int `json:"last"`      // score = best objective over the last Last iterates
	// RhoBars are the ρ values in units of λ_max(Q): ρ = ρ̄·λ_max(Q), as the reference code does.
	RhoBars []float64 `json:"rho_bars"`
	Betas   []float64 `json:"betas"` // ADMM-S
	Ps      []float64 `json:"ps"`    // ADMM-R
	// TheoryC are the c of the extra runs of ADMM-Q and PGD at ρ = c·L_f, L_f = λ_max(Q):
	// Lemma 3.2 and Theorem 3.4 need ρ > √2·L_f, above most of the ρ̄ grid.
	TheoryC []float64 `json:"theory_c"`
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
// β ∈ 10^{−5..5} in half decades, p ∈ {0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99}; plus 25
// selection starts per instance (the grid search runs on them, which costs half of what
// the search on 50 did, so the whole protocol still fits the 2-core machine) and ADMM-Q
// and PGD at ρ = 1.5·L_f (just above √2·L_f) and 6·L_f.
func PaperConfig(seed uint64) Config {
	return Config{
		Pairs:     []Pair{{8, 8, 30}, {8, 16, 30}, {8, 32, 30}, {8, 64, 30}, {8, 16, 10}, {8, 16, 50}, {8, 16, 70}},
		Instances: 5, Starts: 50, SelectStarts: 25, Iters: 30000, PGDIters: 100000, Last: 50,
		RhoBars: powers(-6, 2, 1), Betas: powers(-5, 5, 0.5),
		Ps:      []float64{0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99},
		TheoryC: []float64{1.5, 6},
		Seed:    seed,
	}
}

// QuickConfig is a reduced protocol for smoke runs: same pairs and grids, 2 instances,
// 10 reporting and 10 selection starts, 1 000 iterations (PGD 3 000).
func QuickConfig(seed uint64) Config {
	c := PaperConfig(seed)
	c.Instances, c.Starts, c.SelectStarts, c.Iters, c.PGDIters = 2, 10, 10, 1000, 3000
	return c
}

// Validate reports a protocol that cannot run.
func (c Config) Validate() error {
	switch {
	case len(c.Pairs) == 0:
		return errors.New("quadratic: no parameter pairs")
	case c.Instances < 1 || c.Starts < 1 || c.SelectStarts < 1:
		return fmt.Errorf("quadratic: %d instances × %d reporting + %d selection starts, want at least 1 of each", c.Instances, c.Starts, c.SelectStarts)
	case c.Last < 1 || c.Iters < c.Last || c.PGDIters < c.Last:
		return fmt.Errorf("quadratic: iterations (%d, PGD %d) must be at least last = %d ≥ 1", c.Iters, c.PGDIters, c.Last)
	case len(c.RhoBars) == 0 || len(c.Betas) == 0 || len(c.Ps) == 0:
		return errors.New("quadratic: empty hyper-parameter grid")
	}
	for _, p := range c.Pairs {
		if p.D < 1 || !(p.V > 0) || !(p.Sigma2 >= 0) {
			return fmt.Errorf("quadratic: bad pair %v", p)
		}
		if frac, _ := math.Frexp(p.V); frac != 0.5 {
			// x·(1/v) must equal x/v exactly for the fused projection to match admmq's.
			return fmt.Errorf("quadratic: pair %v: v must be a power of two", p)
		}
	}
	for _, k := range c.TheoryC {
		if !(k > math.Sqrt2) || math.IsInf(k, 0) {
			return fmt.Errorf("quadratic: theory-valid ρ = %v·L_f, want c > √2 (Lemma 3.2)", k)
		}
	}
	for _, p := range c.Ps {
		if !(p > 0 && p <= 1) {
			return fmt.Errorf("quadratic: ADMM-R p = %v, want 0 < p ≤ 1", p)
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
	X0    [][]float64 // Starts × d: the reporting starts
	XSel  [][]float64 // SelectStarts × d: the selection starts, none equal to a reporting one
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
	// The reporting starts are drawn first, so they are the starts of the earlier protocol
	// that selected on them too; the selection starts follow in the same stream.
	draw := func(n int) [][]float64 {
		x := make([][]float64, n)
		for s := range x {
			x[s] = make([]float64, d)
			for i := range x[s] {
				x[s][i] = 10 * rng.NormFloat64()
			}
		}
		return x
	}
	x0, xsel := draw(cfg.Starts), draw(cfg.SelectStarts)
	// Successive draws of one stream do not repeat in practice; this makes "disjoint" a
	// checked property rather than a probable one.
	for _, a := range xsel {
		for _, r := range x0 {
			if slices.Equal(a, r) {
				return nil, fmt.Errorf("quadratic: %v instance %d: a selection start equals a reporting start", p, idx)
			}
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
		return nil, fmt.Errorf("quadratic: %v instance %d: eigen-decomposition failed", p, idx)
	}
	vals := eig.Values(nil)
	return &Instance{Pair: p, Index: idx, Q: q, B: b, X0: x0, XSel: xsel, LMin: vals[0], LMax: vals[d-1]}, nil
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
		return nil, fmt.Errorf("quadratic: Q + ρI not positive definite at ρ = %g", rho)
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return nil, fmt.Errorf("quadratic: inverting Q + ρI at ρ = %g: %w", rho, err)
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
	// rhoIdx indexes cfg.RhoBars; the theory-valid runs use len(RhoBars)+k for TheoryC[k],
	// so that every ρ has its own index in the ADMM-R mask seed.
	rhoIdx int
	// sel runs the selection starts (Instance.XSel) instead of the reporting ones (X0).
	sel  bool
	subs []float64 // β or p per group of starts; {0} otherwise
	// aliasQ are the β of ADMM-S with β/ρ ≥ sup‖z − P_A(z)‖ = v√d/2: there ADMM-S is ADMM-Q
	// iterate by iterate (appendix D; admmq's TestADMMSEqualsADMMQForLargeBeta), so they are
	// not simulated again but take the ADMM-Q job's scores.
	aliasQ []float64
	cost   float64
	// final keeps the batch after the run, for tests that compare states.
	final  *batch
	scores []float64 // filled by the worker: len(subs)·starts
}

// rhoBar returns the job's ρ in units of λ_max(Q).
func (j *job) rhoBar(cfg Config) float64 {
	if j.rhoIdx < len(cfg.RhoBars) {
		return cfg.RhoBars[j.rhoIdx]
	}
	return cfg.TheoryC[j.rhoIdx-len(cfg.RhoBars)]
}

// starts returns the starting points the job runs.
func (j *job) starts(in *Instance) [][]float64 {
	if j.sel {
		return in.XSel
	}
	return in.X0
}

func (j *job) seed(cfg Config) uint64 {
	s := cfg.Seed ^ splitmix(cfg.Pairs[j.pair].key()^uint64(j.inst)<<32|uint64(j.rhoIdx))
	if j.sel { // ADMM-R's masks on the selection starts are not those of the reporting runs
		s = splitmix(s ^ 0x5e1ec7)
	}
	return s
}

// isAlias reports whether ADMM-S with this β at this ρ̄ is ADMM-Q: β/ρ ≥ v√d/2 bounds
// ‖z − P_A(z)‖ for every z, so the soft projection's factor is 1 (appendix D).
func isAlias(p Pair, lmax, rhoBar, beta float64) bool {
	return beta/(rhoBar*lmax) >= p.V*math.Sqrt(float64(p.D))/2
}

// Options controls how Run executes; none of it changes the results.
type Options struct {
	Workers int // 0 means runtime.NumCPU()
	// PureGo uses the Go passes and the Go FMA product instead of the assembly; the
	// results are the same bits, only slower.
	PureGo bool
	// Progress, if non-nil, is called after each finished job (from the calling goroutine's
	// point of view serially).
	Progress func(done, total int)
}

// kernels is the arithmetic one worker uses. Every choice computes the same bits: the
// AVX-512 passes equal the Go passes, and every product is gemmFMA's chain.
type kernels struct {
	simd bool     // AVX-512 passes and product for rows whose length is a multiple of 8
	gemm gemmFunc // the product otherwise: gemmFMA or its AVX2 assembly
}

// Arithmetic names, for results, what every kernel computes. It is one string because the
// results do not depend on the kernel: files written on any CPU are the same bytes.
const Arithmetic = "sequential FMA products (qtool's own kernels, the same bits on every CPU)"

// chooseKernels picks the fastest kernels this CPU runs and names them for logs.
func chooseKernels(pureGo bool) (newKernels func() kernels, name string) {
	switch {
	case pureGo || os.Getenv("QTOOL_BLAS") == "go":
		return func() kernels { return kernels{gemm: gemmFMA} }, "Go"
	case haveSIMD():
		return func() kernels { return kernels{simd: true, gemm: gemmFMA} }, "AVX-512 assembly"
	case haveAVX2():
		return func() kernels { return kernels{gemm: gemmAVX2} }, "AVX2 products, Go passes"
	}
	return func() kernels { return kernels{gemm: gemmFMA} }, "Go"
}

// Run executes the protocol and returns its results, in two phases. Phase 1 runs every
// setting of every method's grid on the selection starts and picks, per instance and
// method, the best sub-setting (β or p) at each ρ̄ and the best setting overall, by median.
// Phase 2 runs those picks on the reporting starts, plus ADMM-Q and PGD at ρ = c·L_f for
// each c of TheoryC; every reported number comes from phase 2.
func Run(ctx context.Context, cfg Config, opt Options) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	newKernels, backend := chooseKernels(opt.PureGo)
	insts := make([][]*Instance, len(cfg.Pairs))
	var sel []*job
	for pi, p := range cfg.Pairs {
		for ii := 0; ii < cfg.Instances; ii++ {
			in, err := NewInstance(cfg, pi, ii)
			if err != nil {
				return nil, err
			}
			insts[pi] = append(insts[pi], in)
			for ri, rb := range cfg.RhoBars {
				for _, m := range Methods() {
					j := &job{pair: pi, inst: ii, method: m, rhoIdx: ri, sel: true, subs: []float64{0}}
					switch m {
					case admmq.ADMMS:
						j.subs = nil
						for _, beta := range cfg.Betas {
							if isAlias(p, in.LMax, rb, beta) {
								j.aliasQ = append(j.aliasQ, beta)
							} else {
								j.subs = append(j.subs, beta)
							}
						}
					case admmq.ADMMR:
						j.subs = cfg.Ps
					}
					sel = append(sel, j)
				}
			}
		}
	}
	// Phase 2 has one job per (instance, method, ρ̄), ADMM-S's only where some β is not an
	// alias, and 2·len(TheoryC) more: known before phase 1, so progress has one total.
	nRep := 0
	for _, j := range sel {
		if j.method != admmq.ADMMS || len(j.subs) > 0 {
			nRep++
		}
	}
	nRep += len(cfg.Pairs) * cfg.Instances * 2 * len(cfg.TheoryC)
	total := len(sel) + nRep
	done := 0
	progress := func() {
		done++
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	if err := runJobs(ctx, cfg, insts, sel, opt.Workers, newKernels, progress); err != nil {
		return nil, err
	}
	picks := selectSettings(cfg, insts, sel)
	var rep []*job
	for _, pk := range picks {
		rep = append(rep, pk.jobs...)
	}
	for pi := range cfg.Pairs {
		for ii := 0; ii < cfg.Instances; ii++ {
			for k := range cfg.TheoryC {
				for _, m := range []admmq.Method{admmq.ADMMQ, admmq.PGD} {
					rep = append(rep, &job{pair: pi, inst: ii, method: m, rhoIdx: len(cfg.RhoBars) + k, subs: []float64{0}})
				}
			}
		}
	}
	if err := runJobs(ctx, cfg, insts, rep, opt.Workers, newKernels, progress); err != nil {
		return nil, err
	}
	res := assemble(cfg, insts, picks, rep, Arithmetic)
	res.Kernels = backend
	return res, nil
}

// runJobs runs jobs on workers goroutines, longest first, calling progress after each.
func runJobs(ctx context.Context, cfg Config, insts [][]*Instance, jobs []*job, workers int, newKernels func() kernels, progress func()) error {
	for _, j := range jobs {
		iters := cfg.Iters
		if j.method == admmq.PGD {
			iters = cfg.PGDIters
		}
		d := cfg.Pairs[j.pair].D
		rows := len(j.subs) * len(j.starts(insts[j.pair][j.inst]))
		j.cost = float64(iters) * float64(rows) * float64(d) * float64(d+8)
	}
	// Longest jobs first keeps both cores busy to the end; the order does not affect results.
	order := slices.Clone(jobs)
	sort.SliceStable(order, func(a, b int) bool { return order[a].cost > order[b].cost })
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan *job)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := newKernels()
			for j := range next {
				err := runJob(ctx, cfg, insts[j.pair][j.inst], j, k)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				if err == nil {
					progress()
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
		return firstErr
	}
	return ctx.Err()
}

// regionElems bounds, in matrix elements, the rows that go through all iterations together.
// Runs are independent, so a region's rows can finish every iteration before the next
// region starts; a region's eight n×d arrays then stay in the L2 cache for the whole run
// instead of streaming from memory every iteration.
const regionElems = 4096

// runJob runs every row of j and stores its scores.
//
// One iteration of the ADMM family is, row by row, the y-update fused with forming the
// right-hand side w = ρy − b − λ, then X = W(Q + ρI)⁻¹ for the rows of a region, then the
// λ-update: the passes of kernels.go. TestBatchMatchesDriver checks them against admmq.Run.
//
// A row whose whole state (x, y, λ) came out of an iteration bit-identical to what went in
// (and, for ADMM-R, whose unmasked projection equals y, so that no mask can move it) is at a
// fixed point of the iteration and stays there. It is frozen: moved behind the active rows,
// which stay contiguous, so that neither the passes nor the product see it again. That
// changes no result, because every row of a product is computed on its own (gemmFMA), and a
// frozen row's objective is constant, so it is scored once, when scoring starts.
func runJob(ctx context.Context, cfg Config, in *Instance, j *job, k kernels) error {
	d := in.Pair.D
	x0 := j.starts(in)
	S := len(x0)
	n := len(j.subs) * S
	rho := j.rhoBar(cfg) * in.LMax
	b := newBatch(in, x0, n, k, rho)
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
			return fmt.Errorf("quadratic: %v instance %d: %w", in.Pair, in.Index, err)
		}
		for i, x := range b.X { // y⁰ = P_A(x⁰); λ⁰ = 0
			b.Y[i] = b.c.proj(x)
		}
	}
	for r := range b.grp {
		g := r / S
		b.grp[r], b.offs[r] = g, (r-g*S)*d // the run's first element within its group
		if j.method == admmq.ADMMS {
			b.bRho[r] = j.subs[g] / rho
		}
	}
	seed := j.seed(cfg)
	rows := max(4, regionElems/d)
	for lo := 0; lo < n; lo += rows {
		r := b.region(lo, min(lo+rows, n))
		if err := r.run(ctx, j, minv, seed, iters, iters-cfg.Last); err != nil {
			return err
		}
		if &r.X[0] != &b.X[lo*d] { // the final iterate is in the other buffer
			copy(b.X[lo*d:], r.X)
		}
	}
	b.unpermute()
	return nil
}

// run performs all iterations on the batch's rows; first is the first scored iteration.
func (b *batch) run(ctx context.Context, j *job, minv []float64, seed uint64, iters, first int) error {
	for it := 0; it < iters; it++ {
		if it%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if b.nAct == 0 {
			if it <= first {
				b.score(j.method, 0, b.n)
			}
			break
		}
		b.X, b.Xprev = b.Xprev, b.X
		if j.method == admmq.PGD || j.method == admmq.GDProj {
			b.stepGradient(j.method, 0, b.nAct)
		} else {
			b.stepADMM(j, minv, seed, it, 0, b.nAct)
		}
		switch {
		case it == first:
			b.score(j.method, 0, b.n) // the frozen rows' constant objectives too
		case it > first:
			b.score(j.method, 0, b.nAct)
		}
		b.compact()
	}
	return nil
}

// batch holds n runs as the rows of n×d matrices. Rows are kept in slots: the nAct active
// runs first, the frozen ones behind them; perm maps a slot to its run.
type batch struct {
	in                       *Instance
	n, d, starts             int
	c                        passConsts
	k                        kernels
	simd                     bool // k.simd and d a multiple of 8
	X, Xprev, Y, L, Z, ZT, W []float64
	G                        []float64 // scratch: squares of ADMM-S, products for scoring
	nAct                     int
	perm                     []int
	frz                      []bool    // slot froze in this iteration
	froze                    bool      // some slot did
	d2, s                    []float64 // per slot: ADMM-S's ‖z − P_A(z)‖² and soft factor
	flags                    []int64   // per slot: dual pass flags
	keys, thrs               []uint64  // per slot: ADMM-R's mask in this iteration
	// Per slot, moving with its run: the run's group of starts (one β or p), its first
	// element within the group's mask (ADMM-R), and β/ρ (ADMM-S).
	grp, offs []int
	bRho      []float64
	best      []float64 // per run
}

func newBatch(in *Instance, x0 [][]float64, n int, k kernels, rho float64) *batch {
	d := in.Pair.D
	starts := len(x0)
	b := &batch{in: in, n: n, d: d, starts: starts, k: k, simd: k.simd && d%8 == 0, nAct: n,
		c: passConsts{inv: 1 / rho, iv: 1 / in.Pair.V, v: in.Pair.V, rho: rho}}
	for _, p := range []*[]float64{&b.X, &b.Xprev, &b.Y, &b.L, &b.Z, &b.ZT, &b.W, &b.G} {
		*p = make([]float64, n*d)
	}
	for r := 0; r < n; r++ {
		copy(b.X[r*d:(r+1)*d], x0[r%starts])
	}
	copy(b.Xprev, b.X)
	b.perm = make([]int, n)
	for i := range b.perm {
		b.perm[i] = i
	}
	b.frz = make([]bool, n)
	b.d2, b.s = make([]float64, n), make([]float64, n)
	b.flags = make([]int64, n)
	b.keys, b.thrs = make([]uint64, n), make([]uint64, n)
	b.grp, b.offs, b.bRho = make([]int, n), make([]int, n), make([]float64, n)
	b.best = make([]float64, n)
	for i := range b.best {
		b.best[i] = math.Inf(1)
	}
	return b
}

// region returns a batch of slots [lo, hi) that shares b's storage.
func (b *batch) region(lo, hi int) *batch {
	d := b.d
	r := *b
	r.n, r.nAct = hi-lo, hi-lo
	for _, p := range []*[]float64{&r.X, &r.Xprev, &r.Y, &r.L, &r.Z, &r.ZT, &r.W, &r.G} {
		*p = (*p)[lo*d : hi*d]
	}
	r.perm, r.frz = b.perm[lo:hi], b.frz[lo:hi]
	r.d2, r.s, r.flags = b.d2[lo:hi], b.s[lo:hi], b.flags[lo:hi]
	r.keys, r.thrs = b.keys[lo:hi], b.thrs[lo:hi]
	r.grp, r.offs, r.bRho = b.grp[lo:hi], b.offs[lo:hi], b.bRho[lo:hi]
	return &r
}

func (b *batch) gemm(m int, a, bm, c []float64) {
	if b.simd {
		gemmSIMD(m, b.d, b.d, a, b.d, bm, b.d, c, b.d)
	} else {
		b.k.gemm(m, b.d, b.d, a, b.d, bm, b.d, c, b.d)
	}
}

// stepADMM performs iteration it of j's method (ADMM-Q, -S or -R) on slots [lo, hi).
func (b *batch) stepADMM(j *job, minv []float64, seed uint64, it, lo, hi int) {
	d, c, bb := b.d, b.c, b.in.B
	blk := func(m []float64) []float64 { return m[lo*d : hi*d] }
	// Xprev holds x^r, which the x-update reads only through λ.
	x, y, l, w := blk(b.Xprev), blk(b.Y), blk(b.L), blk(b.W)
	switch j.method {
	case admmq.ADMMQ:
		if b.simd {
			yQSIMD(x, l, y, w, bb, c)
		} else {
			yQGo(x, l, y, w, bb, c)
		}
	case admmq.ADMMS:
		z, zt, sq := blk(b.Z), blk(b.ZT), blk(b.G)
		if b.simd {
			zSSIMD(x, l, z, zt, sq, c)
		} else {
			zSGo(x, l, z, zt, sq, c)
		}
		d2, s := b.d2[lo:hi], b.s[lo:hi]
		rowSums(sq, d, d2)
		for r, bRho := range b.bRho[lo:hi] {
			s[r] = softFactor(d2[r], bRho)
		}
		if b.simd {
			ySSIMD(z, zt, y, w, l, bb, s, c)
		} else {
			ySGo(z, zt, y, w, l, bb, s, c)
		}
	case admmq.ADMMR:
		keys, thrs, offs := b.keys[lo:hi], b.thrs[lo:hi], b.offs[lo:hi]
		last, key, thr := -1, uint64(0), uint64(0)
		for r, g := range b.grp[lo:hi] {
			if g != last { // one mask per group of starts, as UpdateYR on the group
				last = g
				key, thr = maskParams(j.subs[g], seed, it, uint64(g))
			}
			keys[r], thrs[r] = key, thr
		}
		if b.simd {
			yRSIMD(x, l, y, w, bb, keys, thrs, offs, c)
		} else {
			yRGo(x, l, y, w, bb, keys, thrs, offs, c)
		}
	}
	xn := blk(b.X)
	b.gemm(hi-lo, w, minv, xn)
	flags := b.flags[lo:hi]
	var candidates int
	if b.simd {
		candidates = dualSIMD(xn, x, y, l, flags, d, c.rho)
	} else {
		candidates = dualGo(xn, x, y, l, flags, d, c.rho)
	}
	if candidates == 0 {
		return
	}
	for r, f := range flags {
		// Unchanged x and λ give the next y-update the same inputs, so (for ADMM-Q and
		// ADMM-S) every later iteration reproduces this state. A non-finite x is absorbing:
		// the run has diverged.
		same := f&flagChanged == 0 || f&flagNonFinite != 0
		if same && j.method == admmq.ADMMR {
			o := r * d
			xp, y, l := x[o:o+d], y[o:o+d], l[o:o+d]
			for i := range xp { // fixed under every mask only if the full projection agrees
				if c.proj(xp[i]+float64(l[i]*c.inv)) != y[i] {
					same = false
					break
				}
			}
		}
		b.frz[lo+r] = same
		b.froze = b.froze || same
	}
}

// stepGradient performs iteration it of PGD or GD+Proj (whose projection comes only at
// scoring) on slots [lo, hi).
func (b *batch) stepGradient(m admmq.Method, lo, hi int) {
	d, c, bb := b.d, b.c, b.in.B
	// Xprev holds x^r; G = x^r Q goes to W, then x^{r+1} to X.
	b.gemm(hi-lo, b.Xprev[lo*d:hi*d], b.in.Q, b.W[lo*d:hi*d])
	for r := lo; r < hi; r++ {
		x, xp, g := b.X[r*d:(r+1)*d], b.Xprev[r*d:(r+1)*d], b.W[r*d:(r+1)*d]
		same := true
		for i := range x {
			nx := xp[i] - float64((g[i]+bb[i])*c.inv)
			if m == admmq.PGD {
				nx = c.proj(nx)
			}
			same = same && nx == xp[i]
			x[i] = nx
		}
		b.frz[r] = same || !finiteRow(x)
		b.froze = b.froze || b.frz[r]
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

// score lowers the best objective of the runs in slots [lo, hi) with f at the iteration's
// point of A: y, except for ADMM-S (P_A(z), as the reference code), PGD (x) and GD+Proj
// (P_A(x)).
func (b *batch) score(m admmq.Method, lo, hi int) {
	if lo == hi {
		return
	}
	d := b.d
	F := b.Y
	switch m {
	case admmq.ADMMS:
		F = b.ZT
	case admmq.PGD:
		F = b.X
	case admmq.GDProj:
		for i, x := range b.X[lo*d : hi*d] {
			b.ZT[lo*d+i] = b.c.proj(x)
		}
		F = b.ZT
	}
	F, G := F[lo*d:hi*d], b.G[lo*d:hi*d]
	b.gemm(hi-lo, F, b.in.Q, G)
	for r := 0; r < hi-lo; r++ {
		x, g := F[r*d:(r+1)*d], G[r*d:(r+1)*d]
		var f float64
		for i := range x {
			f += float64(x[i] * (float64(0.5*g[i]) + b.in.B[i]))
		}
		run := b.perm[lo+r]
		if f < b.best[run] && !math.IsInf(f, -1) { // NaN never lowers the score, nor does a diverged row
			b.best[run] = f
		}
	}
}

// compact moves the rows frozen in this iteration behind the active ones.
func (b *batch) compact() {
	if !b.froze {
		return
	}
	b.froze = false
	d := b.d
	for r := b.nAct - 1; r >= 0; r-- {
		if !b.frz[r] {
			continue
		}
		b.frz[r] = false
		// Both iterate buffers hold the final x from now on, whichever is current.
		copy(b.Xprev[r*d:(r+1)*d], b.X[r*d:(r+1)*d])
		last := b.nAct - 1
		if r != last {
			for _, m := range [][]float64{b.X, b.Xprev, b.Y, b.L, b.Z, b.ZT} {
				p, q := m[r*d:(r+1)*d], m[last*d:(last+1)*d]
				for i := range p {
					p[i], q[i] = q[i], p[i]
				}
			}
			b.perm[r], b.perm[last] = b.perm[last], b.perm[r]
			b.grp[r], b.grp[last] = b.grp[last], b.grp[r]
			b.offs[r], b.offs[last] = b.offs[last], b.offs[r]
			b.bRho[r], b.bRho[last] = b.bRho[last], b.bRho[r]
		}
		b.nAct--
	}
}

// unpermute puts the rows back in run order, for tests that compare final states.
func (b *batch) unpermute() {
	d := b.d
	for _, p := range []*[]float64{&b.X, &b.Xprev, &b.Y, &b.L, &b.Z, &b.ZT} {
		m := make([]float64, len(*p))
		for slot, run := range b.perm {
			copy(m[run*d:(run+1)*d], (*p)[slot*d:(slot+1)*d])
		}
		*p = m
	}
	grp, offs, bRho := make([]int, b.n), make([]int, b.n), make([]float64, b.n)
	for slot, run := range b.perm {
		grp[run], offs[run], bRho[run] = b.grp[slot], b.offs[slot], b.bRho[slot]
	}
	b.grp, b.offs, b.bRho = grp, offs, bRho
	for i := range b.perm {
		b.perm[i] = i
	}
}
