package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/binarize"
)

// This file holds compare's statistics: the paired per-seed differences between two
// algorithms with a t interval, McNemar's test on the held-out samples, and the check
// for algorithms that exported the same weights.

// pairedInterval returns the mean of the paired differences d (one per seed) and, with at
// least two, the two-sided 95 % t interval d̄ ± t(0.975; n−1)·s_d/√n, s_d the sample
// standard deviation. The seeds share the data and the starting weights, so the
// differences, not the two algorithms' separate spreads, carry the comparison; the t
// interval assumes they are roughly normal, which a handful of seeds cannot check. With
// one seed there is no spread to estimate and ok is false.
func pairedInterval(d []float64) (mean, lo, hi float64, ok bool) {
	n := float64(len(d))
	if len(d) == 0 {
		return 0, 0, 0, false
	}
	for _, v := range d {
		mean += v / n
	}
	if len(d) < 2 {
		return mean, 0, 0, false
	}
	var ss float64
	for _, v := range d {
		ss += (v - mean) * (v - mean)
	}
	half := tQuantile975(len(d)-1) * math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	return mean, mean - half, mean + half, true
}

// tQuantile975 is the 97.5 % quantile of Student's t with df degrees of freedom.
func tQuantile975(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(0.975)
}

// mcnemarExactBelow is the number of discordant samples below which McNemar's test uses
// the exact binomial distribution: the usual rule (e.g. Wikipedia's "McNemar's test") is
// that the chi-squared approximation is adequate from b + c ≥ 25.
const mcnemarExactBelow = 25

// mcnemar tests whether two classifiers evaluated on the same samples are equally
// accurate, from the discordant counts only: b samples only the first classifies
// correctly, c only the second. Under the null hypothesis each discordant sample is a fair
// coin (McNemar 1947). For b + c < 25 the p-value is the exact two-sided binomial one,
//
//	p = min(1, 2·Σ_{k=0}^{min(b,c)} C(b+c, k)·2^−(b+c)),
//
// and otherwise the chi-squared one with Edwards' (1948) continuity correction,
//
//	χ² = (|b − c| − 1)² / (b + c),  p = P(χ²₁ ≥ χ²) = erfc(√(χ²/2)).
//
// With no discordant sample the two are indistinguishable and p = 1.
func mcnemar(b, c int) (p float64, method string) {
	n := b + c
	if n == 0 {
		return 1, "exact-binomial"
	}
	if n < mcnemarExactBelow {
		var tail float64
		lg := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
		for k := 0; k <= min(b, c); k++ {
			tail += math.Exp(lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2)
		}
		return math.Min(1, 2*tail), "exact-binomial"
	}
	d := math.Abs(float64(b-c)) - 1
	chi := d * d / float64(n)
	if b == c {
		chi = 0 // |b − c| − 1 < 0: the correction overshoots; no evidence either way
	}
	return math.Erfc(math.Sqrt(chi / 2)), "chi-squared-cc"
}

// mcnemarSeed is McNemar's test between two algorithms' runs of one seed.
type mcnemarSeed struct {
	Seed uint64 `json:"seed"`
	// AOnly and BOnly are the held-out samples (positions, for sequence outputs) only A,
	// or only B, gets right; the test uses only these.
	AOnly int     `json:"a_only_correct"`
	BOnly int     `json:"b_only_correct"`
	P     float64 `json:"p_value"`
	// Method is "exact-binomial" or "chi-squared-cc" (see mcnemar).
	Method string `json:"method"`
}

// pairStat compares two algorithms, A − B, seed by seed.
type pairStat struct {
	A string `json:"a"`
	B string `json:"b"`
	// DiffsPct are A's accuracy minus B's for each seed, in percentage points.
	DiffsPct []float64 `json:"diffs_pct"`
	MeanPct  float64   `json:"mean_diff_pct"`
	// CI95Pct is the paired t interval of the mean difference (pairedInterval); absent
	// with one seed.
	CI95Pct *[2]float64 `json:"ci95_pct,omitempty"`
	// Wins, Losses and Ties count seeds with A above, below and level with B.
	Wins   int `json:"wins"`
	Losses int `json:"losses"`
	Ties   int `json:"ties"`
	// McNemar holds one test per seed; absent when per-sample results were unavailable.
	McNemar []mcnemarSeed `json:"mcnemar,omitempty"`
	// Identical is set when A and B exported the same binary weights on every seed.
	Identical bool `json:"identical_weights,omitempty"`
}

// pairStats compares every two rows, in row order.
func pairStats(rows []*compareRow, labelled bool) []*pairStat {
	var ps []*pairStat
	for i, a := range rows {
		for _, b := range rows[i+1:] {
			if len(a.Runs) != len(b.Runs) {
				continue
			}
			p := &pairStat{A: a.Algo, B: b.Algo, Identical: true}
			for k, ra := range a.Runs {
				rb := b.Runs[k]
				d := 100 * (ra.value(labelled) - rb.value(labelled))
				p.DiffsPct = append(p.DiffsPct, roundTo(d, 4))
				switch {
				case d > 0:
					p.Wins++
				case d < 0:
					p.Losses++
				default:
					p.Ties++
				}
				p.Identical = p.Identical && ra.WeightsSHA256 != "" && ra.WeightsSHA256 == rb.WeightsSHA256
				if ra.correct != nil && len(ra.correct) == len(rb.correct) {
					var onlyA, onlyB int
					for s, ok := range ra.correct {
						switch {
						case ok && !rb.correct[s]:
							onlyA++
						case !ok && rb.correct[s]:
							onlyB++
						}
					}
					pv, method := mcnemar(onlyA, onlyB)
					p.McNemar = append(p.McNemar, mcnemarSeed{Seed: ra.Seed, AOnly: onlyA, BOnly: onlyB, P: pv, Method: method})
				}
			}
			if len(p.McNemar) != len(a.Runs) {
				p.McNemar = nil // a partial list would read as all seeds
			}
			// The interval is of the unrounded differences.
			var d []float64
			for k := range a.Runs {
				d = append(d, 100*(a.Runs[k].value(labelled)-b.Runs[k].value(labelled)))
			}
			mean, lo, hi, ok := pairedInterval(d)
			p.MeanPct = roundTo(mean, 4)
			if ok {
				p.CI95Pct = &[2]float64{roundTo(lo, 4), roundTo(hi, 4)}
			}
			ps = append(ps, p)
		}
	}
	return ps
}

// value is what the table reports for the run: accuracy with labels, else agreement.
func (a *algoResult) value(labelled bool) float64 {
	if labelled && a.Accuracy != nil {
		return *a.Accuracy
	}
	return a.Agree
}

// identicalGroup is a set of algorithms that exported the same binary weights.
type identicalGroup struct {
	Algos []string `json:"algos"`
	// Seeds is the number of seeds on which they coincide, of SeedsRun.
	Seeds    int `json:"seeds"`
	SeedsRun int `json:"seeds_run"`
	// WholeNetwork is set when every parameter of the exported networks coincides
	// (BatchNorm statistics, biases, …), not only the binarized weights.
	WholeNetwork bool `json:"whole_network"`
}

// identicalGroups groups the rows whose runs exported the same binarized weights on the
// same seeds, the first row of each group naming it, and sets each later member's
// IdenticalTo. Algorithms are grouped when they coincide on every seed, and a pair that
// coincides on some seeds only is a group of two with Seeds < SeedsRun. The comparison is
// of the exported weight values and grid scales (a SHA-256 of them), since the files'
// bytes differ in their metadata (the algorithm's name) even when the networks are the
// same.
func identicalGroups(rows []*compareRow) []identicalGroup {
	var gs []identicalGroup
	same := func(a, b *compareRow) (seeds int, whole bool) {
		whole = true
		for k := range a.Runs {
			if k < len(b.Runs) && a.Runs[k].WeightsSHA256 != "" && a.Runs[k].WeightsSHA256 == b.Runs[k].WeightsSHA256 {
				seeds++
				whole = whole && a.Runs[k].NetworkSHA256 == b.Runs[k].NetworkSHA256
			}
		}
		return seeds, whole
	}
	grouped := make([]bool, len(rows))
	for i, a := range rows {
		if grouped[i] {
			continue
		}
		g := identicalGroup{Algos: []string{a.Algo}, Seeds: len(a.Runs), SeedsRun: len(a.Runs), WholeNetwork: true}
		for j := i + 1; j < len(rows); j++ {
			b := rows[j]
			if grouped[j] || len(b.Runs) != len(a.Runs) {
				continue
			}
			if n, whole := same(a, b); n == len(a.Runs) && n > 0 {
				grouped[j] = true
				b.IdenticalTo = a.Algo
				g.Algos = append(g.Algos, b.Algo)
				g.WholeNetwork = g.WholeNetwork && whole
			}
		}
		if len(g.Algos) > 1 {
			gs = append(gs, g)
		}
	}
	// Coincidences on some seeds only, between rows not already grouped together.
	for i, a := range rows {
		for _, b := range rows[i+1:] {
			if n, whole := same(a, b); n > 0 && n < len(a.Runs) {
				gs = append(gs, identicalGroup{Algos: []string{a.Algo, b.Algo}, Seeds: n, SeedsRun: len(a.Runs), WholeNetwork: whole})
			}
		}
	}
	return gs
}

// warning is the group's one line for the table, JSON and stderr.
func (g identicalGroup) warning() string {
	what := "the same binary weights"
	if g.WholeNetwork {
		what = "the same network (every exported parameter equal)"
	}
	if g.Seeds == g.SeedsRun {
		return fmt.Sprintf("%s exported %s on every seed: their rows are one result, not %d", strings.Join(g.Algos, ", "), what, len(g.Algos))
	}
	return fmt.Sprintf("%s exported %s on %d of %d seeds", strings.Join(g.Algos, " and "), what, g.Seeds, g.SeedsRun)
}

// weightsDigest is a SHA-256 of the exported binarized weights: names, values, levels
// and scales, bit for bit.
func weightsDigest(r *binarize.Result) string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	for _, w := range r.Weights {
		put(uint64(len(w.Name)))
		h.Write([]byte(w.Name))
		put(uint64(len(w.Values)))
		for _, v := range w.Values {
			put(uint64(math.Float32bits(v)))
		}
		put(uint64(len(w.Grid.Levels)))
		for _, l := range w.Grid.Levels {
			put(uint64(int64(l)))
		}
		put(uint64(len(w.Grid.Scales)))
		for _, s := range w.Grid.Scales {
			put(uint64(math.Float32bits(s)))
		}
		put(uint64(int64(w.Grid.Axis)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// networkDigest is a SHA-256 of the exported graph, every parameter included, without the
// file's metadata (which names the algorithm); "" when there is no parsed model.
func networkDigest(r *binarize.Result) string {
	if r.Model == nil || r.Model.Proto.GetGraph() == nil {
		return ""
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Model.Proto.GetGraph())
	if err != nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fmtP formats a p-value for the table: small ones in exponent form.
func fmtP(p float64) string {
	if p < 1e-3 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.3f", p)
}
