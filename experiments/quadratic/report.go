package quadratic

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qtool/qtool/admmq"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Meta describes how a run was made; it only goes into the Markdown summary, so that the
// CSV, JSON and PNG outputs depend on the configuration and seed alone.
type Meta struct {
	Command string
	Elapsed time.Duration // 0 when unknown
	Workers int
	Note    string // free text placed under the header, such as per-part timings of a merge
}

func fmtScore(s Score) string {
	f := float64(s)
	if math.IsInf(f, 1) {
		return "diverged"
	}
	return strconv.FormatFloat(f, 'g', 10, 64)
}

// WriteCSV writes one row per (pair, instance, method) with the best setting and quartiles.
func WriteCSV(w io.Writer, r *Results) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"v", "d", "sigma2", "instance", "method", "rho_bar", "beta", "p",
		"q25", "median", "q75", "min", "max", "diverged", "f_relaxed", "f_rounded", "lambda_max"}); err != nil {
		return err
	}
	for _, pr := range r.Pairs {
		for _, in := range pr.Instances {
			for _, m := range in.Methods {
				rec := []string{fmtG(pr.Pair.V), strconv.Itoa(pr.Pair.D), fmtG(pr.Pair.Sigma2), strconv.Itoa(in.Index),
					Label(m.Method), fmtG(m.Best.RhoBar), fmtOpt(m.Best.Beta), fmtOpt(m.Best.P),
					fmtScore(m.Q25), fmtScore(m.Median), fmtScore(m.Q75), fmtScore(m.Min), fmtScore(m.Max),
					strconv.Itoa(m.Diverged), fmtScore(in.FRelaxed), fmtScore(in.FRounded), fmtG(in.LMax)}
				if err := cw.Write(rec); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func fmtG(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func fmtOpt(f float64) string {
	if f == 0 {
		return ""
	}
	return fmtG(f)
}

// WriteJSON writes the complete results, every start's score included.
func WriteJSON(w io.Writer, r *Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// ReadJSON reads results written by WriteJSON.
func ReadJSON(rd io.Reader) (*Results, error) {
	var r Results
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("quadratic: decoding results: %w", err)
	}
	r.renameOldMethods()
	return &r, nil
}

// oldGDProj is admmq.GDProj's name before it became the project-wide "gd-proj".
const oldGDProj admmq.Method = "gd+proj"

// renameOldMethods gives GD+Proj its current name in results written before the rename,
// so that --merge can combine parts of a long run made on either side of it: the report
// finds methods by name and would otherwise miss GD+Proj in the older parts.
func (r *Results) renameOldMethods() {
	rename := func(m *admmq.Method) {
		if *m == oldGDProj {
			*m = admmq.GDProj
		}
	}
	for pi := range r.Pairs {
		for ii := range r.Pairs[pi].Instances {
			in := &r.Pairs[pi].Instances[ii]
			for mi := range in.Methods {
				mr := &in.Methods[mi]
				rename(&mr.Method)
				rename(&mr.Best.Method)
				for gi := range mr.Grid {
					rename(&mr.Grid[gi].Method)
				}
			}
			for di := range in.Diffs {
				rename(&in.Diffs[di].Method)
			}
		}
	}
}

// Merge combines results of runs that used the same protocol on different pairs (pairs are
// keyed by their values, so a pair's instances do not depend on which other pairs ran).
func Merge(parts []*Results) (*Results, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("quadratic: nothing to merge")
	}
	out := &Results{Config: parts[0].Config, BLAS: parts[0].BLAS}
	out.Config.Pairs = nil
	for i, r := range parts {
		a, b := r.Config, parts[0].Config
		a.Pairs, b.Pairs = nil, nil
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			return nil, fmt.Errorf("quadratic: part %d was run with a different protocol (%s, not %s)", i+1, ja, jb)
		}
		for _, pr := range r.Pairs {
			for _, have := range out.Config.Pairs {
				if have == pr.Pair {
					return nil, fmt.Errorf("quadratic: pair %v appears in more than one part", pr.Pair)
				}
			}
			out.Config.Pairs = append(out.Config.Pairs, pr.Pair)
			out.Pairs = append(out.Pairs, pr)
		}
	}
	return out, nil
}

// writeAtomic writes a file through a temporary file in the same folder and a rename, so
// that a reader never sees a half-written file.
func writeAtomic(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriter(f)
	if err = write(bw); err != nil {
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	if err = f.Chmod(0o644); err != nil { // CreateTemp makes 0600; these are published files
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("quadratic: writing %s: %w", path, err)
	}
	return nil
}

// pairSlug names a pair's files, e.g. "v8_d16_s30".
func pairSlug(p Pair) string { return fmt.Sprintf("v%g_d%d_s%g", p.V, p.D, p.Sigma2) }

// WriteAll writes results.csv, results.json, summary.md and the figures into dir.
func WriteAll(dir string, r *Results, meta Meta) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("quadratic: creating %s: %w", dir, err)
	}
	if err := writeAtomic(filepath.Join(dir, "results.csv"), func(w io.Writer) error { return WriteCSV(w, r) }); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "results.json"), func(w io.Writer) error { return WriteJSON(w, r) }); err != nil {
		return err
	}
	for _, pr := range r.Pairs {
		// Left: the paper's Figure 1 with PGD; right: the ADMM variants alone, whose
		// differences PGD's scale would hide.
		all, err := QuartilePlot(pr, []admmq.Method{admmq.ADMMQ, admmq.ADMMS, admmq.ADMMR, admmq.PGD})
		if err != nil {
			return err
		}
		zoom, err := QuartilePlot(pr, []admmq.Method{admmq.ADMMQ, admmq.ADMMS, admmq.ADMMR})
		if err != nil {
			return err
		}
		zoom.Title.Text = "ADMM variants only (same data)"
		name := filepath.Join(dir, "quartiles_"+pairSlug(pr.Pair)+".png")
		if err := writeAtomic(name, func(w io.Writer) error { return writePNG(w, []*plot.Plot{all, zoom}, 15*vg.Inch, 5.5*vg.Inch) }); err != nil {
			return err
		}
		hp, err := HistogramPlots(pr, []admmq.Method{admmq.ADMMS, admmq.ADMMR, admmq.PGD})
		if err != nil {
			return err
		}
		name = filepath.Join(dir, "differences_"+pairSlug(pr.Pair)+".png")
		if err := writeAtomic(name, func(w io.Writer) error { return writePNG(w, hp, 15*vg.Inch, 4*vg.Inch) }); err != nil {
			return err
		}
	}
	return writeAtomic(filepath.Join(dir, "summary.md"), func(w io.Writer) error { return WriteSummary(w, r, meta) })
}

// count returns how many instances of pr satisfy pred.
func count(pr PairResult, pred func(in *InstanceResult) bool) int {
	n := 0
	for i := range pr.Instances {
		if pred(&pr.Instances[i]) {
			n++
		}
	}
	return n
}

func med(in *InstanceResult, m admmq.Method) float64 { return float64(in.Method(m).Median) }

func iqr(in *InstanceResult, m admmq.Method) float64 {
	mr := in.Method(m)
	return float64(mr.Q75) - float64(mr.Q25)
}

// pooled returns the paired differences f(m) − f(ADMM-Q) of all instances of pr.
func pooled(pr PairResult, m admmq.Method) []float64 {
	var v []float64
	for i := range pr.Instances {
		for _, s := range pr.Instances[i].Diff(m) {
			v = append(v, float64(s))
		}
	}
	return v
}

// signs returns the fractions of values < 0, = 0 and > 0 (NaN, from two diverged runs,
// counts as a tie).
func signs(v []float64) (neg, zero, pos float64) {
	for _, x := range v {
		switch {
		case x < 0:
			neg++
		case x > 0:
			pos++
		default:
			zero++
		}
	}
	n := float64(max(len(v), 1))
	return neg / n, zero / n, pos / n
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.SortFunc(s, func(a, b float64) int {
		switch {
		case a < b || (math.IsNaN(b) && !math.IsNaN(a)):
			return -1
		case a > b || math.IsNaN(a):
			return 1
		}
		return 0
	})
	return Quantile(s, 0.5)
}

func verdict(k, n int) string {
	switch {
	case k == n:
		return "holds"
	case 2*k > n:
		return "holds on most"
	case k > 0:
		return "mostly not"
	}
	return "does not hold"
}

// WriteSummary writes the Markdown report: the protocol, each claim of the paper checked
// against the numbers, and per-pair tables and figures.
func WriteSummary(w io.Writer, r *Results, meta Meta) error {
	b := &strings.Builder{}
	c := r.Config
	fmt.Fprintf(b, "# Quadratic experiment of the ADMM-Q paper (section 6.1, appendix F), reproduced\n\n")
	fmt.Fprintf(b, "min ½xᵀQx + bᵀx over x ∈ vℤ^d with Q = Q̃ᵀQ̃ + q̃q̃ᵀ, Q̃_ij ~ N(0,1), q̃_i ~ N(0,σ²), b = 20·N(0,1), "+
		"starts x⁰ = 10·N(0,1), λ⁰ = 0. %d instances per pair, %d starts per instance, %d iterations (PGD %d); "+
		"a run's score is the best objective over its last %d iterates (ADMM-S is scored at P_A(z), the feasible point of its iteration). "+
		"Each method's hyper-parameters are chosen per instance by the median over the starts: ρ = ρ̄·λ_max(Q) with ρ̄ ∈ {%s}, "+
		"ADMM-S β ∈ 10^{−5..5} in half decades (%d values), ADMM-R p ∈ {%s}; PGD and GD+Proj use step 1/ρ over the same ρ̄ grid. "+
		"Seed %d; BLAS: %s.\n\n",
		c.Instances, c.Starts, c.Iters, c.PGDIters, c.Last, joinG(c.RhoBars), len(c.Betas), joinG(c.Ps), c.Seed, r.BLAS)
	switch {
	case meta.Command != "" && meta.Elapsed > 0:
		fmt.Fprintf(b, "Made with `%s` in %s of wall time with %d workers.\n\n", meta.Command, meta.Elapsed.Round(time.Second), meta.Workers)
	case meta.Command != "":
		fmt.Fprintf(b, "Made with `%s`.\n\n", meta.Command)
	}
	if meta.Note != "" {
		fmt.Fprintf(b, "%s\n\n", meta.Note)
	}
	n := c.Instances

	// Claim 1.
	fmt.Fprintf(b, "## Claim 1: ADMM-Q beats PGD and GD+Proj by large margins\n\n")
	fmt.Fprintf(b, "Instances where ADMM-Q's median is lower; the median over all %d paired runs of f(baseline) − f(ADMM-Q), "+
		"and the share of paired runs where ADMM-Q ends strictly lower.\n\n", n*c.Starts)
	fmt.Fprintf(b, "| pair | ADMM-Q < PGD | median f(PGD) − f(ADMM-Q) | ADMM-Q better | ADMM-Q < GD+Proj | median f(GD+Proj) − f(ADMM-Q) | ADMM-Q better | verdict |\n|---|---|---|---|---|---|---|---|\n")
	held1 := 0
	for _, pr := range r.Pairs {
		kp := count(pr, func(in *InstanceResult) bool { return med(in, admmq.ADMMQ) < med(in, admmq.PGD) })
		kg := count(pr, func(in *InstanceResult) bool { return med(in, admmq.ADMMQ) < med(in, admmq.GDProj) })
		dp, dg := pooled(pr, admmq.PGD), pooled(pr, admmq.GDProj)
		_, _, pp := signs(dp)
		_, _, pg := signs(dg)
		v := verdict(min(kp, kg), n)
		if kp == n && kg == n {
			held1++
		}
		fmt.Fprintf(b, "| %s | %d/%d | %s | %.0f%% | %d/%d | %s | %.0f%% | %s |\n", pr.Pair, kp, n, fmtF(medianOf(dp)), 100*pp, kg, n, fmtF(medianOf(dg)), 100*pg, v)
	}
	fmt.Fprintf(b, "\nADMM-Q has the lower median against both baselines on every instance in %d of %d pairs.\n\n", held1, len(r.Pairs))

	// Claim 2.
	fmt.Fprintf(b, "## Claim 2: ADMM-S and ADMM-R have lower medians and smaller spread than ADMM-Q on most instances\n\n")
	fmt.Fprintf(b, "Instances (of %d) where the variant's median is lower / equal / higher than ADMM-Q's, and where its interquartile range "+
		"(q75 − q25) is smaller / equal / larger; \"median = q25\" counts instances where at least a quarter of the starts end at the median "+
		"value, which the paper also remarks on. The verdict needs a strictly lower median and a strictly smaller spread on a majority of instances.\n\n", n)
	fmt.Fprintf(b, "| pair | ADMM-S median < / = / > | ADMM-S spread < / = / > | ADMM-S median = q25 | ADMM-R median < / = / > | ADMM-R spread < / = / > | ADMM-R median = q25 | verdict |\n|---|---|---|---|---|---|---|---|\n")
	var heldS, heldR int
	for _, pr := range r.Pairs {
		fmt.Fprintf(b, "| %s |", pr.Pair)
		var ok [2]bool
		for k, m := range []admmq.Method{admmq.ADMMS, admmq.ADMMR} {
			lower := count(pr, func(in *InstanceResult) bool { return med(in, m) < med(in, admmq.ADMMQ) })
			same := count(pr, func(in *InstanceResult) bool { return med(in, m) == med(in, admmq.ADMMQ) })
			tighter := count(pr, func(in *InstanceResult) bool { return iqr(in, m) < iqr(in, admmq.ADMMQ) })
			sameIQR := count(pr, func(in *InstanceResult) bool { return iqr(in, m) == iqr(in, admmq.ADMMQ) })
			flat := count(pr, func(in *InstanceResult) bool { return in.Method(m).Median == in.Method(m).Q25 })
			fmt.Fprintf(b, " %d / %d / %d | %d / %d / %d | %d/%d |", lower, same, n-lower-same, tighter, sameIQR, n-tighter-sameIQR, flat, n)
			ok[k] = 2*lower > n && 2*tighter > n
		}
		if ok[0] {
			heldS++
		}
		if ok[1] {
			heldR++
		}
		v := map[[2]bool]string{{true, true}: "holds for both", {true, false}: "holds for ADMM-S only", {false, true}: "holds for ADMM-R only", {false, false}: "does not hold"}[ok]
		fmt.Fprintf(b, " %s |\n", v)
	}
	fmt.Fprintf(b, "\nBoth lower median and smaller spread on a majority of instances: ADMM-S in %d of %d pairs, ADMM-R in %d of %d pairs.\n\n", heldS, len(r.Pairs), heldR, len(r.Pairs))

	// Claim 3.
	fmt.Fprintf(b, "## Claim 3 (Figure 2): for the same start, ADMM-S and ADMM-R beat ADMM-Q on almost all runs, PGD is much worse, ADMM-R slightly beats ADMM-S\n\n")
	fmt.Fprintf(b, "Shares of the %d paired runs per pair where the difference is negative (the variant ends lower than ADMM-Q), zero, or positive.\n\n", n*c.Starts)
	fmt.Fprintf(b, "| pair | f(ADMM-S) − f(ADMM-Q): < 0 / = 0 / > 0 | f(ADMM-R) − f(ADMM-Q): < 0 / = 0 / > 0 | f(PGD) − f(ADMM-Q) > 0 | instances with median ADMM-R < ADMM-S |\n|---|---|---|---|---|\n")
	for _, pr := range r.Pairs {
		sn, sz, sp := signs(pooled(pr, admmq.ADMMS))
		rn, rz, rp := signs(pooled(pr, admmq.ADMMR))
		_, _, pp := signs(pooled(pr, admmq.PGD))
		rs := count(pr, func(in *InstanceResult) bool { return med(in, admmq.ADMMR) < med(in, admmq.ADMMS) })
		fmt.Fprintf(b, "| %s | %.0f%% / %.0f%% / %.0f%% | %.0f%% / %.0f%% / %.0f%% | %.0f%% | %d/%d |\n", pr.Pair, 100*sn, 100*sz, 100*sp, 100*rn, 100*rz, 100*rp, 100*pp, rs, n)
	}
	b.WriteString("\n")

	// Per pair.
	fmt.Fprintf(b, "## Results per parameter pair\n\n")
	fmt.Fprintf(b, "Median [q25, q75] of the score at each method's best setting (ρ̄, and β or p). "+
		"f_relaxed is min f over ℝ^d (a lower bound); f_rounded is f at the rounded relaxed minimiser.\n\n")
	for _, pr := range r.Pairs {
		slug := pairSlug(pr.Pair)
		fmt.Fprintf(b, "### %s\n\n![quartiles](quartiles_%s.png)\n\n![paired differences](differences_%s.png)\n\n", pr.Pair, slug, slug)
		fmt.Fprintf(b, "| instance | f_relaxed | f_rounded |")
		for _, m := range Methods() {
			fmt.Fprintf(b, " %s |", Label(m))
		}
		b.WriteString("\n|---|---|---|")
		for range Methods() {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for i := range pr.Instances {
			in := &pr.Instances[i]
			fmt.Fprintf(b, "| %d | %s | %s |", in.Index, fmtScore(in.FRelaxed), fmtScore(in.FRounded))
			for _, m := range Methods() {
				mr := in.Method(m)
				fmt.Fprintf(b, " %s [%s, %s] %s |", fmtScore(mr.Median), fmtScore(mr.Q25), fmtScore(mr.Q75), settingText(mr.Best))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func settingText(s Setting) string {
	t := "ρ̄=" + fmtG(s.RhoBar)
	if s.Beta != 0 {
		t += ", β=" + strconv.FormatFloat(s.Beta, 'g', 3, 64)
	}
	if s.P != 0 {
		t += ", p=" + fmtG(s.P)
	}
	return "(" + t + ")"
}

func fmtF(f float64) string {
	switch {
	case math.IsNaN(f):
		return "n/a"
	case math.IsInf(f, 1):
		return "+∞ (diverged)"
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

func joinG(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', 3, 64)
	}
	return strings.Join(s, ", ")
}
