package quadratic

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/qtool/qtool/admmq"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// methodStyle returns the colour, glyph and x offset of a method, fixed so that every figure
// reads the same.
func methodStyle(m admmq.Method) (col color.Color, shape draw.GlyphDrawer, off float64) {
	switch m {
	case admmq.ADMMQ:
		return color.RGBA{R: 31, G: 119, B: 180, A: 255}, draw.CircleGlyph{}, -0.24
	case admmq.ADMMS:
		return color.RGBA{R: 255, G: 127, B: 14, A: 255}, draw.SquareGlyph{}, -0.08
	case admmq.ADMMR:
		return color.RGBA{R: 44, G: 160, B: 44, A: 255}, draw.TriangleGlyph{}, 0.08
	case admmq.PGD:
		return color.RGBA{R: 214, G: 39, B: 40, A: 255}, draw.CrossGlyph{}, 0.24
	}
	return color.RGBA{R: 148, G: 103, B: 189, A: 255}, draw.PlusGlyph{}, 0.36
}

// Label returns the paper's name of a method.
func Label(m admmq.Method) string {
	switch m {
	case admmq.ADMMQ:
		return "ADMM-Q"
	case admmq.ADMMS:
		return "ADMM-S"
	case admmq.ADMMR:
		return "ADMM-R"
	case admmq.PGD:
		return "PGD"
	case admmq.GDProj:
		return "GD+Proj"
	}
	return string(m)
}

// quartileBars implements plotter.XYer and plotter.YErrorer: medians with 25/75 % bars.
type quartileBars struct{ x, med, lo, hi []float64 }

func (q quartileBars) Len() int                    { return len(q.x) }
func (q quartileBars) XY(i int) (float64, float64) { return q.x[i], q.med[i] }
func (q quartileBars) YError(i int) (float64, float64) {
	return q.med[i] - q.lo[i], q.hi[i] - q.med[i]
}

// QuartilePlot draws the paper's Figure 1 for one pair: per instance and method the median
// objective with a bar from the 25 % to the 75 % quantile. Methods whose median diverged on an
// instance are left out of that instance and named in the title.
func QuartilePlot(pr PairResult, methods []admmq.Method) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: final objective, median and 25/75%% quantiles", pr.Pair)
	p.X.Label.Text = "problem instance"
	p.Y.Label.Text = "final objective f"
	p.Legend.Top = true
	missing := 0
	for _, m := range methods {
		col, shape, off := methodStyle(m)
		var q quartileBars
		for _, in := range pr.Instances {
			mr := in.Method(m)
			if mr == nil || math.IsInf(float64(mr.Q75), 0) || math.IsInf(float64(mr.Median), 0) {
				missing++
				continue
			}
			q.x = append(q.x, float64(in.Index)+off)
			q.med = append(q.med, float64(mr.Median))
			q.lo = append(q.lo, float64(mr.Q25))
			q.hi = append(q.hi, float64(mr.Q75))
		}
		if q.Len() == 0 {
			continue
		}
		bars, err := plotter.NewYErrorBars(q)
		if err != nil {
			return nil, fmt.Errorf("quadratic: %s error bars: %w", m, err)
		}
		bars.LineStyle.Color = col
		bars.LineStyle.Width = vg.Points(1.5)
		pts, err := plotter.NewScatter(q)
		if err != nil {
			return nil, fmt.Errorf("quadratic: %s points: %w", m, err)
		}
		pts.GlyphStyle.Color = col
		pts.GlyphStyle.Shape = shape
		pts.GlyphStyle.Radius = vg.Points(3.5)
		p.Add(bars, pts)
		p.Legend.Add(Label(m), pts)
	}
	if missing > 0 {
		p.Title.Text += fmt.Sprintf(" — %d diverged medians not shown", missing)
	}
	p.X.Min, p.X.Max = 0.4, float64(len(pr.Instances))+0.6
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var t []plot.Tick
		for i := 1; i <= len(pr.Instances); i++ {
			t = append(t, plot.Tick{Value: float64(i), Label: fmt.Sprint(i)})
		}
		return t
	})
	p.Add(plotter.NewGrid())
	return p, nil
}

// HistogramPlots draws, for one pair, the histograms of the paired differences
// f(method) − f(ADMM-Q) pooled over instances and starts, one panel per method.
func HistogramPlots(pr PairResult, methods []admmq.Method) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, m := range methods {
		var vals plotter.Values
		dropped := 0
		for _, in := range pr.Instances {
			for _, v := range in.Diff(m) {
				if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
					dropped++
				} else {
					vals = append(vals, f)
				}
			}
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("f(%s) − f(ADMM-Q), %s", Label(m), pr.Pair)
		if dropped > 0 {
			p.Title.Text += fmt.Sprintf(" (%d diverged runs left out)", dropped)
		}
		p.X.Label.Text = "difference of final objectives, same start"
		p.Y.Label.Text = "runs"
		if len(vals) > 0 {
			h, err := plotter.NewHist(vals, 30)
			if err != nil {
				return nil, fmt.Errorf("quadratic: histogram of %s: %w", m, err)
			}
			h.FillColor, _, _ = methodStyle(m)
			p.Add(h)
			// Mark x = 0, where the two methods tie.
			var top float64
			for _, b := range h.Bins {
				top = max(top, b.Weight)
			}
			zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: top}})
			if err != nil {
				return nil, fmt.Errorf("quadratic: histogram of %s: %w", m, err)
			}
			zero.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(zero)
		}
		out = append(out, p)
	}
	return out, nil
}

// writePNG renders plots side by side in one PNG.
func writePNG(w io.Writer, plots []*plot.Plot, width, height vg.Length) error {
	img := vgimg.New(width, height)
	dc := draw.New(img)
	t := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	cs := plot.Align([][]*plot.Plot{plots}, t, dc)
	for i, p := range plots {
		p.Draw(cs[0][i])
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("quadratic: encoding PNG: %w", err)
	}
	return nil
}
