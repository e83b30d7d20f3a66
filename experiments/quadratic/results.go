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
	// Diffs are the paired differences f(method) − f(ADMM-Q) for the same start, each method
	// at its best setting.
	Diffs []Diff `json:"paired_differences"`
}

// MethodResult is one method on one instance, at its best setting by median.
type MethodResult struct {
	Method admmq.Method `json:"method"`
	Best   Setting      `json:"best"`
	Q25    Score        `json:"q25"`
	Median Score        `json:"median"`
	Q75    Score        `json:"q75"`
	Min    Score        `json:"min"`
	Max    Score        `json:"max"`
	// Diverged counts the starts whose run diverged at the best setting.
	Diverged int     `json:"diverged"`
	Scores   []Score `json:"scores"`
	// Grid is the median score of every setting tried.
	Grid []GridPoint `json:"grid"`
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

// assemble picks each method's best setting by median per instance and computes the paired
// differences.
func assemble(cfg Config, insts [][]*Instance, jobs []*job, backend string) *Results {
	res := &Results{Config: cfg, BLAS: backend}
	S := cfg.Starts
	for pi, p := range cfg.Pairs {
		pr := PairResult{Pair: p}
		for ii, in := range insts[pi] {
			ir := InstanceResult{Index: ii + 1, LMax: in.LMax, LMin: in.LMin}
			ir.FRelaxed, ir.FRounded = relaxed(in)
			best := map[admmq.Method][]float64{}
			for _, m := range Methods() {
				mr := MethodResult{Method: m}
				bestMed := math.Inf(1)
				var bestScores []float64
				var qjobs []*job // ADMM-Q jobs of this instance, by ρ̄ index
				for _, j := range jobs {
					if j.pair == pi && j.inst == ii && j.method == admmq.ADMMQ {
						qjobs = append(qjobs, j)
					}
				}
				for _, j := range jobs {
					if j.pair != pi || j.inst != ii || j.method != m {
						continue
					}
					groups := map[float64][]float64{}
					for g, sub := range j.subs {
						groups[sub] = j.scores[g*S : (g+1)*S]
					}
					for _, beta := range j.aliasQ {
						groups[beta] = qjobs[j.rhoIdx].scores
					}
					subs := []float64{0}
					switch m {
					case admmq.ADMMS:
						subs = cfg.Betas
					case admmq.ADMMR:
						subs = cfg.Ps
					}
					for _, sub := range subs {
						sc := groups[sub]
						_, med, _, _ := summarize(sc)
						st := Setting{Method: m, RhoBar: cfg.RhoBars[j.rhoIdx]}
						switch m {
						case admmq.ADMMS:
							st.Beta = sub
						case admmq.ADMMR:
							st.P = sub
						}
						mr.Grid = append(mr.Grid, GridPoint{Setting: st, Median: Score(med)})
						// Strictly lower wins, so ties go to the earlier grid point
						// (smaller ρ̄, then smaller β or p).
						if med < bestMed || bestScores == nil {
							bestMed, bestScores, mr.Best = med, sc, st
						}
					}
				}
				q25, med, q75, sorted := summarize(bestScores)
				mr.Q25, mr.Median, mr.Q75 = Score(q25), Score(med), Score(q75)
				mr.Min, mr.Max = Score(sorted[0]), Score(sorted[len(sorted)-1])
				for _, v := range bestScores {
					if math.IsInf(v, 1) {
						mr.Diverged++
					}
				}
				mr.Scores = toScores(bestScores)
				best[m] = bestScores
				ir.Methods = append(ir.Methods, mr)
			}
			for _, m := range Methods()[1:] {
				d := make([]float64, S)
				for s := range d {
					d[s] = best[m][s] - best[admmq.ADMMQ][s]
				}
				ir.Diffs = append(ir.Diffs, Diff{Method: m, Values: toScores(d)})
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
