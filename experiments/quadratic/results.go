package quadratic

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/qtool/qtool/admmq"
	"gonum.org/v1/gonum/mat"
)

// Score is an objective value; +Inf marks a run that diverged (its iterates became NaN or
// infinite). It encodes to JSON as a number, or null when not finite.
type Score float64

// MarshalJSON implements json.Marshaler.
func (s Score) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler; null decodes to +Inf.
func (s *Score) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Score(math.Inf(1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Score(f)
	return nil
}

// Results is the outcome of Run.
type Results struct {
	Config Config       `json:"config"`
	BLAS   string       `json:"blas"` // the arithmetic (Arithmetic), not the kernel: no result depends on the kernel
	Pairs  []PairResult `json:"pairs"`
	// Kernels names the kernels Run used on this CPU, for logs; it is kept out of the
	// files so that they are the same bytes on every machine.
	Kernels string `json:"-"`
}

// PairResult holds the instances of one parameter pair.
type PairResult struct {
	Pair      Pair             `json:"pair"`
	Instances []InstanceResult `json:"instances"`
}

// InstanceResult holds every method's result on one instance.
type InstanceResult struct {
	Index int     `json:"index"`
	LMax  float64 `json:"lambda_max"`
	LMin  float64 `json:"lambda_min"`
	// FRelaxed is min f over ℝ^d (a lower bound), FRounded is f of its projection onto A.
	FRelaxed Score          `json:"f_relaxed"`
	FRounded Score          `json:"f_rounded"`
	Methods  []MethodResult `json:"methods"`
	// Diffs are the paired differences f(method) − f(ADMM-Q) for the same reporting start,
	// each method at its selected setting.
	Diffs []Diff `json:"paired_differences"`
	// Theory holds ADMM-Q and PGD at ρ = c·L_f for each c of Config.TheoryC, on the
	// reporting starts: the ρ that Lemma 3.2 and Theorem 3.4 assume (c > √2).
	Theory []TheoryResult `json:"theory_rho"`
}

// TheoryResult is one method at ρ = C·L_f (PGD: step 1/ρ), no selection involved.
type TheoryResult struct {
	Method admmq.Method `json:"method"`
	C      float64      `json:"c"`
	Rho    float64      `json:"rho"`
	Q25    Score        `json:"q25"`
	Median Score        `json:"median"`
	Q75    Score        `json:"q75"`
}

// RhoResult is one method at one ρ̄ of the grid: its best sub-setting there (β or p), chosen
// on the selection starts, and its quartiles on the reporting starts.
type RhoResult struct {
	Setting
	// Alias marks an ADMM-S setting with β/ρ ≥ v√d/2, which is ADMM-Q exactly: its
	// reported scores are ADMM-Q's at this ρ̄.
	Alias        bool  `json:"admmq_alias,omitempty"`
	SelectMedian Score `json:"select_median"`
	Q25          Score `json:"q25"`
	Median       Score `json:"median"`
	Q75          Score `json:"q75"`
}

// MethodResult is one method on one instance, at its best setting by median on the
// selection starts; the quartiles and scores are those of the reporting starts.
type MethodResult struct {
	Method admmq.Method `json:"method"`
	Best   Setting      `json:"best"`
	// SelectMedian is Best's median on the selection starts, the number it was chosen by.
	SelectMedian Score `json:"select_median"`
	Q25          Score `json:"q25"`
	Median       Score `json:"median"`
	Q75          Score `json:"q75"`
	Min          Score `json:"min"`
	Max          Score `json:"max"`
	// Diverged counts the starts whose run diverged at the best setting.
	Diverged int     `json:"diverged"`
	Scores   []Score `json:"scores"`
	// Grid is the median score on the selection starts of every setting tried.
	Grid []GridPoint `json:"selection_grid"`
	// PerRho is the method at each ρ̄ of the grid (ADMM-S's ADMM-Q aliases included).
	PerRho []RhoResult `json:"per_rho"`
	// PerRhoNoAlias is ADMM-S at each ρ̄ with its ADMM-Q aliases left out of the choice of
	// β; a ρ̄ where every β is an alias has no entry. Empty for the other methods.
	PerRhoNoAlias []RhoResult `json:"per_rho_without_aliases,omitempty"`
}

// AtRho returns the entry of rs at ρ̄ = rb, or nil.
func AtRho(rs []RhoResult, rb float64) *RhoResult {
	for i := range rs {
		if rs[i].RhoBar == rb {
			return &rs[i]
		}
	}
	return nil
}

// TheoryAt returns method m's result at ρ = c·L_f, or nil.
func (ir *InstanceResult) TheoryAt(m admmq.Method, c float64) *TheoryResult {
	for i := range ir.Theory {
		if ir.Theory[i].Method == m && ir.Theory[i].C == c {
			return &ir.Theory[i]
		}
	}
	return nil
}

// GridPoint is one setting's median.
type GridPoint struct {
	Setting
	Median Score `json:"median"`
}

// Diff is a vector of paired differences.
type Diff struct {
	Method admmq.Method `json:"method"` // f(Method) − f(ADMM-Q)
	Values []Score      `json:"values"`
}

// Quantile returns the q-quantile of sorted values with linear interpolation between order
// statistics (numpy's default), treating +Inf as larger than every number.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	if lo >= n-1 {
		return sorted[n-1]
	}
	frac := pos - float64(lo)
	if frac == 0 {
		return sorted[lo]
	}
	a, b := sorted[lo], sorted[lo+1]
	if math.IsInf(b, 1) {
		return math.Inf(1)
	}
	return a + frac*(b-a)
}

func summarize(scores []float64) (q25, med, q75 float64, sorted []float64) {
	sorted = slices.Clone(scores)
	slices.Sort(sorted)
	return Quantile(sorted, 0.25), Quantile(sorted, 0.5), Quantile(sorted, 0.75), sorted
}

func toScores(v []float64) []Score {
	out := make([]Score, len(v))
	for i, x := range v {
		out[i] = Score(x)
	}
	return out
}

// rhoPick is phase 1's choice at one ρ̄.
type rhoPick struct {
	st    Setting
	med   float64 // on the selection starts
	alias bool    // ADMM-S: an ADMM-Q alias
	ok    bool    // some setting was eligible
}

// pick is phase 1's outcome for one (instance, method): the selection median of every
// setting, the best setting at each ρ̄ (for ADMM-S also without the aliases), and the
// reporting jobs that run those choices.
type pick struct {
	pair, inst int
	method     admmq.Method
	grid       []GridPoint
	perRho     []rhoPick
	perRhoNA   []rhoPick // ADMM-S only
	best       int       // index of the overall best in perRho
	jobs       []*job
}

// jobKey identifies a job within a phase.
type jobKey struct {
	pair, inst int
	method     admmq.Method
	rhoIdx     int
}

func keyOf(j *job) jobKey { return jobKey{j.pair, j.inst, j.method, j.rhoIdx} }

// selectSettings chooses, from the selection jobs' scores, each method's best sub-setting
// at each ρ̄ and its best setting overall, by median, and makes the reporting jobs. Strictly
// lower wins, so ties go to the earlier grid point (smaller ρ̄, then smaller β or p); an
// ADMM-S alias therefore never displaces a non-alias β with the same median, all aliases
// being larger.
func selectSettings(cfg Config, insts [][]*Instance, sel []*job) []*pick {
	byKey := map[jobKey]*job{}
	for _, j := range sel {
		byKey[keyOf(j)] = j
	}
	S := cfg.SelectStarts
	var out []*pick
	for pi := range cfg.Pairs {
		for ii := range insts[pi] {
			for _, m := range Methods() {
				pk := &pick{pair: pi, inst: ii, method: m}
				for ri, rb := range cfg.RhoBars {
					j := byKey[jobKey{pi, ii, m, ri}]
					groups := map[float64][]float64{}
					for g, sub := range j.subs {
						groups[sub] = j.scores[g*S : (g+1)*S]
					}
					aliases := map[float64]bool{}
					for _, beta := range j.aliasQ {
						groups[beta] = byKey[jobKey{pi, ii, admmq.ADMMQ, ri}].scores
						aliases[beta] = true
					}
					subs := []float64{0}
					switch m {
					case admmq.ADMMS:
						subs = cfg.Betas
					case admmq.ADMMR:
						subs = cfg.Ps
					}
					var all, na rhoPick
					for _, sub := range subs {
						_, med, _, _ := summarize(groups[sub])
						st := Setting{Method: m, RhoBar: rb}
						switch m {
						case admmq.ADMMS:
							st.Beta = sub
						case admmq.ADMMR:
							st.P = sub
						}
						pk.grid = append(pk.grid, GridPoint{Setting: st, Median: Score(med)})
						if !all.ok || med < all.med {
							all = rhoPick{st: st, med: med, alias: aliases[sub], ok: true}
						}
						if !aliases[sub] && (!na.ok || med < na.med) {
							na = rhoPick{st: st, med: med, ok: true}
						}
					}
					pk.perRho = append(pk.perRho, all)
					if m == admmq.ADMMS {
						pk.perRhoNA = append(pk.perRhoNA, na)
					}
					if all.med < pk.perRho[pk.best].med {
						pk.best = ri
					}
					// The reporting run at this ρ̄: ADMM-S runs its best non-alias β (which
					// is also its best β unless an alias won, whose scores are ADMM-Q's).
					run := all
					if m == admmq.ADMMS {
						run = na
					}
					if run.ok {
						sub := run.st.Beta + run.st.P
						pk.jobs = append(pk.jobs, &job{pair: pi, inst: ii, method: m, rhoIdx: ri, subs: []float64{sub}})
					}
				}
				out = append(out, pk)
			}
		}
	}
	return out
}

func quartiles(sc []float64) (q25, med, q75 Score) {
	a, b, c, _ := summarize(sc)
	return Score(a), Score(b), Score(c)
}

// assemble collects the reporting scores of each method at its selected setting, at each
// ρ̄ and at the theory-valid ρ, and computes the paired differences.
func assemble(cfg Config, insts [][]*Instance, picks []*pick, rep []*job, backend string) *Results {
	res := &Results{Config: cfg, BLAS: backend}
	byKey := map[jobKey]*job{}
	for _, j := range rep {
		byKey[keyOf(j)] = j
	}
	picked := map[jobKey]*pick{}
	for _, pk := range picks {
		picked[jobKey{pk.pair, pk.inst, pk.method, 0}] = pk
	}
	S := cfg.Starts
	for pi, p := range cfg.Pairs {
		pr := PairResult{Pair: p}
		for ii, in := range insts[pi] {
			ir := InstanceResult{Index: ii + 1, LMax: in.LMax, LMin: in.LMin}
			ir.FRelaxed, ir.FRounded = relaxed(in)
			// scoresAt returns the reporting scores of method m's choice rp at ρ̄ index ri.
			scoresAt := func(m admmq.Method, ri int, rp rhoPick) []float64 {
				if rp.alias {
					m = admmq.ADMMQ
				}
				return byKey[jobKey{pi, ii, m, ri}].scores
			}
			best := map[admmq.Method][]float64{}
			for _, m := range Methods() {
				pk := picked[jobKey{pi, ii, m, 0}]
				mr := MethodResult{Method: m, Grid: pk.grid}
				bp := pk.perRho[pk.best]
				mr.Best, mr.SelectMedian = bp.st, Score(bp.med)
				sc := scoresAt(m, pk.best, bp)
				q25, med, q75, sorted := summarize(sc)
				mr.Q25, mr.Median, mr.Q75 = Score(q25), Score(med), Score(q75)
				mr.Min, mr.Max = Score(sorted[0]), Score(sorted[len(sorted)-1])
				for _, v := range sc {
					if math.IsInf(v, 1) {
						mr.Diverged++
					}
				}
				mr.Scores = toScores(sc)
				best[m] = sc
				for ri, rp := range pk.perRho {
					r := RhoResult{Setting: rp.st, Alias: rp.alias, SelectMedian: Score(rp.med)}
					r.Q25, r.Median, r.Q75 = quartiles(scoresAt(m, ri, rp))
					mr.PerRho = append(mr.PerRho, r)
				}
				for ri, rp := range pk.perRhoNA {
					if !rp.ok {
						continue
					}
					r := RhoResult{Setting: rp.st, SelectMedian: Score(rp.med)}
					r.Q25, r.Median, r.Q75 = quartiles(scoresAt(m, ri, rp))
					mr.PerRhoNoAlias = append(mr.PerRhoNoAlias, r)
				}
				ir.Methods = append(ir.Methods, mr)
			}
			for _, m := range Methods()[1:] {
				d := make([]float64, S)
				for s := range d {
					d[s] = best[m][s] - best[admmq.ADMMQ][s]
				}
				ir.Diffs = append(ir.Diffs, Diff{Method: m, Values: toScores(d)})
			}
			for k, c := range cfg.TheoryC {
				for _, m := range []admmq.Method{admmq.ADMMQ, admmq.PGD} {
					t := TheoryResult{Method: m, C: c, Rho: c * in.LMax}
					t.Q25, t.Median, t.Q75 = quartiles(byKey[jobKey{pi, ii, m, len(cfg.RhoBars) + k}].scores)
					ir.Theory = append(ir.Theory, t)
				}
			}
			pr.Instances = append(pr.Instances, ir)
		}
		res.Pairs = append(res.Pairs, pr)
	}
	return res
}

// relaxed returns min over ℝ^d of f (at x* = −Q⁻¹b) and f(P_A(x*)).
func relaxed(in *Instance) (Score, Score) {
	d := len(in.B)
	var x mat.VecDense
	q := mat.NewSymDense(d, slices.Clone(in.Q))
	var ch mat.Cholesky
	if !ch.Factorize(q) {
		return Score(math.NaN()), Score(math.NaN())
	}
	bneg := make([]float64, d)
	for i, v := range in.B {
		bneg[i] = -v
	}
	if err := ch.SolveVecTo(&x, mat.NewVecDense(d, bneg)); err != nil {
		return Score(math.NaN()), Score(math.NaN())
	}
	xs := x.RawVector().Data
	r := make([]float64, d)
	for i, v := range xs {
		r[i] = in.Pair.V * math.Round(v/in.Pair.V)
	}
	return Score(in.Value(xs)), Score(in.Value(r))
}

// Method returns the result of method m.
func (ir *InstanceResult) Method(m admmq.Method) *MethodResult {
	for i := range ir.Methods {
		if ir.Methods[i].Method == m {
			return &ir.Methods[i]
		}
	}
	return nil
}

// Diff returns the paired differences f(m) − f(ADMM-Q).
func (ir *InstanceResult) Diff(m admmq.Method) []Score {
	for _, d := range ir.Diffs {
		if d.Method == m {
			return d.Values
		}
	}
	return nil
}
