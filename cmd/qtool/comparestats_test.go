package main

import (
	"bytes"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/qtool/qtool/admmq/network"
)

// TestMcNemarTextbook checks McNemar's p-values against values worked by hand.
func TestMcNemarTextbook(t *testing.T) {
	for _, c := range []struct {
		b, c   int
		p      float64
		method string
	}{
		// Exact: 2·(C(12,0)+C(12,1)+C(12,2))/2¹² = 2·79/4096.
		{10, 2, 2 * 79.0 / 4096, "exact-binomial"},
		{2, 10, 2 * 79.0 / 4096, "exact-binomial"},
		{0, 5, 2.0 / 32, "exact-binomial"}, // 2·(1/2)⁵
		{3, 3, 1, "exact-binomial"},        // the doubled tail exceeds 1
		{0, 0, 1, "exact-binomial"},
		// 24 discordant samples are still exact: 2·Σ_{k≤4} C(24,k)/2²⁴ = 2·12951/16777216.
		{20, 4, 2 * 12951.0 / 16777216, "exact-binomial"},
		// χ² with continuity correction from 25 on: (|121−59|−1)²/180 = 20.672…, and the
		// survival of χ²₁ is 2·(1 − Φ(√χ²)), integrated below without erfc.
		{121, 59, 2 * (0.5 - normalCDFHalf(math.Sqrt(61.0*61/180))), "chi-squared-cc"},
		{30, 10, 2 * (0.5 - normalCDFHalf(math.Sqrt(19.0*19/40))), "chi-squared-cc"},
		{20, 20, 1, "chi-squared-cc"},
	} {
		p, m := mcnemar(c.b, c.c)
		if m != c.method || math.Abs(p-c.p) > 1e-6*c.p {
			t.Errorf("mcnemar(%d, %d) = %.10g %s, want %.10g %s", c.b, c.c, p, m, c.p, c.method)
		}
	}
	// The values quoted in README and the brief.
	if p, _ := mcnemar(10, 2); math.Abs(p-0.0386) > 5e-5 {
		t.Errorf("b=10, c=2: p = %.5f, want 0.0386", p)
	}
	if p, _ := mcnemar(121, 59); math.Abs(p-5.450e-6)/5.450e-6 > 1e-3 {
		t.Errorf("b=121, c=59: p = %.4g, want 5.450e-6", p)
	}
}

// normalCDFHalf is Φ(z) − ½ for z ≥ 0 by Simpson's rule on the normal density, an
// independent route to the chi-squared p-value.
func normalCDFHalf(z float64) float64 {
	const n = 20000
	h := z / n
	f := func(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
	s := f(0) + f(z)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		s += w * f(float64(i)*h)
	}
	return s * h / 3
}

// TestPairedInterval checks the paired t interval against a hand calculation and the t
// quantiles against the printed table.
func TestPairedInterval(t *testing.T) {
	for df, want := range map[int]float64{1: 12.7062, 2: 4.3027, 4: 2.7764, 9: 2.2622, 30: 2.0423} {
		if got := tQuantile975(df); math.Abs(got-want) > 1e-4 {
			t.Errorf("t(0.975; %d) = %.5f, want %.4f", df, got, want)
		}
	}
	// d = 1..5: mean 3, s = √2.5, half-width 2.776445·√2.5/√5 = 1.963243.
	mean, lo, hi, ok := pairedInterval([]float64{1, 2, 3, 4, 5})
	if !ok || mean != 3 || math.Abs(lo-1.036757) > 1e-5 || math.Abs(hi-4.963243) > 1e-5 {
		t.Errorf("interval of 1..5: %v [%v, %v] %v, want 3 [1.036757, 4.963243]", mean, lo, hi, ok)
	}
	// Two seeds: d = (0.5, 1.5), s = √0.5, half-width 12.7062·√0.5/√2 = 6.35310.
	if _, lo, hi, ok = pairedInterval([]float64{0.5, 1.5}); !ok || math.Abs(lo+5.35310) > 1e-4 || math.Abs(hi-7.35310) > 1e-4 {
		t.Errorf("interval of (0.5, 1.5): [%v, %v], want [−5.3531, 7.3531]", lo, hi)
	}
	if mean, _, _, ok = pairedInterval([]float64{0.7}); ok || mean != 0.7 {
		t.Errorf("one seed: mean %v, interval available %v; want 0.7 and unavailable", mean, ok)
	}
}

// TestIdenticalGroups: rows with the same weights on every seed form one group, named by
// the first; a coincidence on some seeds is reported as such; other rows are left alone.
func TestIdenticalGroups(t *testing.T) {
	row := func(algo string, digests ...string) *compareRow {
		r := &compareRow{Algo: algo}
		for i, d := range digests {
			r.Runs = append(r.Runs, &algoResult{Algo: algo, Seed: uint64(i), WeightsSHA256: d, NetworkSHA256: d + algo})
		}
		return r
	}
	rows := []*compareRow{row("gd-proj", "a", "b"), row("pgd", "c", "d"), row("i-admm-q", "c", "d"), row("admm-r", "c", "e"), row("admm-s", "c", "d")}
	gs := identicalGroups(rows)
	if len(gs) != 4 || !slices.Equal(gs[0].Algos, []string{"pgd", "i-admm-q", "admm-s"}) || gs[0].Seeds != 2 || gs[0].WholeNetwork {
		t.Fatalf("groups %+v", gs)
	}
	for _, g := range gs[1:] {
		if g.Seeds != 1 || g.SeedsRun != 2 || !slices.Contains(g.Algos, "admm-r") {
			t.Errorf("partial group %+v, want admm-r with one of pgd, i-admm-q, admm-s on 1 of 2 seeds", g)
		}
	}
	if rows[0].IdenticalTo != "" || rows[1].IdenticalTo != "" || rows[2].IdenticalTo != "pgd" || rows[3].IdenticalTo != "" || rows[4].IdenticalTo != "pgd" {
		t.Errorf("identical_to: %q %q %q %q %q", rows[0].IdenticalTo, rows[1].IdenticalTo, rows[2].IdenticalTo, rows[3].IdenticalTo, rows[4].IdenticalTo)
	}
	if w := gs[0].warning(); !strings.Contains(w, "pgd, i-admm-q, admm-s") || !strings.Contains(w, "every seed") {
		t.Errorf("warning %q", w)
	}
	if gs := identicalGroups(rows[:2]); len(gs) != 0 {
		t.Errorf("different weights grouped: %+v", gs)
	}
}

// TestCompareFigures inspects the plots' structure: every line has its own colour and
// dash pattern, a curve equal to an earlier one says so in its legend entry, the
// accuracy plot says it is measured with BatchNorm re-estimated and marks the table's
// values, the primal and dual residual plots hold the ADMM variants' values, and the
// legend is laid out beside the data, not over it.
func TestCompareFigures(t *testing.T) {
	hist := func(accs ...float64) []network.IterStats {
		var h []network.IterStats
		for i, a := range accs {
			h = append(h, network.IterStats{Iter: i, Accuracy: a, HasAccuracy: true, Residual: 1 / float64(i+1), DualResidual: float64(i)})
		}
		return h
	}
	run := func(h []network.IterStats) []*algoResult { return []*algoResult{{History: h}} }
	res := &compareResult{Labelled: true, BNRecalibrated: true, Rows: []*compareRow{
		{Algo: "gd-proj", AccMean: 0.80, Runs: run(hist(0.7, 0.75))},
		{Algo: "pgd", AccMean: 0.86, Runs: run(hist(0.8, 0.85))},
		{Algo: "i-admm-q", AccMean: 0.86, Runs: run(hist(0.8, 0.85))},
		{Algo: "admm-s", AccMean: 0.87, Runs: run(hist(0.81, 0.86))},
	}}
	figs := res.figures()
	if len(figs) != 4 || figs[0].file != "accuracy.png" || figs[3].file != "dual.png" {
		t.Fatalf("%d figures", len(figs))
	}
	acc := figs[0]
	if len(acc.curves) != 4 {
		t.Fatalf("%d curves on the accuracy plot, want 4", len(acc.curves))
	}
	for i, a := range acc.curves {
		for _, b := range acc.curves[i+1:] {
			if sameColor(a.line.Color, b.line.Color) || slices.Equal(a.line.Dashes, b.line.Dashes) || a.glyph.Shape == b.glyph.Shape {
				t.Errorf("%s and %s share a colour, dash pattern or glyph", a.algo, b.algo)
			}
		}
	}
	if c := acc.curves[2]; c.identicalTo != "pgd" || c.label != "i-admm-q (identical to pgd)" {
		t.Errorf("the curve equal to pgd's is %q (identical to %q)", c.label, c.identicalTo)
	}
	if acc.curves[3].identicalTo != "" || acc.curves[1].identicalTo != "" {
		t.Error("a distinct curve is marked identical")
	}
	if !strings.Contains(acc.title, "BatchNorm re-estimated") || len(acc.marks) != 4 || acc.marks[3].pts[0].Y != 87 || acc.marks[3].pts[0].X != 2 {
		t.Errorf("accuracy plot: title %q, marks %+v", acc.title, acc.marks)
	}
	// The residual plot shows the ADMM variants only; their residuals coincide here.
	if res := figs[2]; len(res.curves) != 2 || res.curves[0].algo != "i-admm-q" || res.curves[1].identicalTo != "i-admm-q" {
		t.Errorf("residual plot curves %+v", res.curves)
	}
	// The dual residual plot: the ADMM variants' ‖ρ(y − y_prev)‖, the mean over seeds per
	// iteration, here 0 then 1.
	if d := figs[3]; len(d.curves) != 2 || d.curves[0].algo != "i-admm-q" || len(d.curves[0].pts) != 2 ||
		d.curves[0].pts[0].Y != 0 || d.curves[0].pts[1].Y != 1 || d.curves[0].pts[1].X != 2 {
		t.Errorf("dual residual plot curves %+v", d.curves)
	}
	p, leg, err := acc.plot()
	if err != nil {
		t.Fatal(err)
	}
	_ = p
	dc := draw.New(vgimg.New(figureWidth, figureHeight))
	plotArea, legendArea := layout(dc, leg)
	if legendArea.Min.X < plotArea.Max.X || plotArea.Max.X-plotArea.Min.X < (dc.Max.X-dc.Min.X)/2 {
		t.Errorf("legend %v overlaps or crowds the plot %v", legendArea.Rectangle, plotArea.Rectangle)
	}
	var png bytes.Buffer
	if err := acc.render(&png); err != nil || !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")) {
		t.Errorf("render: %v, %d bytes", err, png.Len())
	}
}

func sameColor(a, b color.Color) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}
