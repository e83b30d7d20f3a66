package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/qtool/qtool/train"
	"github.com/urfave/cli/v2"
)

// objectiveFlags are the flags that describe a model's outputs to the objective and the
// fidelity metrics (binarize.Options.ClassAxis and OutputWeights).
func objectiveFlags(cat string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "class-axis", Category: cat, Usage: "declare the class axis of the outputs: `AXIS` for every output, or NAME=AXIS,… per output (negative from the end; none: no class axis, e.g. an [N, D] embedding)"},
		&cli.StringFlag{Name: "output-weights", Category: cat, Usage: "weigh outputs in the objective: `NAME=W`,… (others 1, 0 leaves one out)"},
	}
}

// parseClassAxis reads --class-axis.
func parseClassAxis(s string) (map[string]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]int{}
	for _, f := range splitList(s) {
		name, v, ok := strings.Cut(f, "=")
		if !ok {
			name, v = "", f
		}
		name, v = strings.TrimSpace(name), strings.TrimSpace(v)
		if strings.EqualFold(v, "none") {
			out[name] = train.NoClassAxis
			continue
		}
		a, err := strconv.Atoi(v)
		if err != nil {
			return nil, usagef("--class-axis %s: want AXIS or NAME=AXIS (an integer or none), comma-separated", s)
		}
		out[name] = a
	}
	return out, nil
}

// parseWeights reads --output-weights.
func parseWeights(s string) (map[string]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for _, f := range splitList(s) {
		name, v, ok := strings.Cut(f, "=")
		w, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(w >= 0) || math.IsInf(w, 0) {
			return nil, usagef("--output-weights %s: want NAME=W with W ≥ 0, comma-separated", s)
		}
		out[strings.TrimSpace(name)] = w
	}
	return out, nil
}

// outputRecord is one output's fidelity to the full-precision model in qtool's JSON.
type outputRecord struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// SQNRdB is nil when the outputs are identical (an infinite SQNR, which JSON cannot
	// hold); Identical says so.
	SQNRdB       *float64 `json:"sqnr_db"`
	Identical    bool     `json:"identical,omitempty"`
	Cosine       float64  `json:"cosine"`
	MaxAbsErr    float64  `json:"max_abs_err"`
	AgreementPct *float64 `json:"agreement_pct,omitempty"`
	Positions    int      `json:"positions,omitempty"`
}

func outputRecords(fs []train.Fidelity) []outputRecord {
	out := make([]outputRecord, 0, len(fs))
	for _, f := range fs {
		r := outputRecord{Name: f.Name, Kind: f.Kind.String(), Cosine: roundTo(f.Cosine, 8), MaxAbsErr: f.MaxAbsErr}
		if math.IsInf(f.SQNR, 1) {
			r.Identical = true
		} else {
			v := roundTo(f.SQNR, 3)
			r.SQNRdB = &v
		}
		if f.HasAgreement {
			r.AgreementPct, r.Positions = pctOf(&f.Agreement), f.Positions
		}
		out = append(out, r)
	}
	return out
}

// worstSQNR is the lowest SQNR over the outputs (+Inf when all are identical).
func worstSQNR(fs []train.Fidelity) float64 {
	w := math.Inf(1)
	for _, f := range fs {
		if f.SQNR < w || f.SQNR != f.SQNR {
			w = f.SQNR
		}
	}
	return w
}

// worstAgreement is the lowest agreement over the outputs with classes or decisions.
func worstAgreement(fs []train.Fidelity) (float64, bool) {
	w, ok := 1.0, false
	for _, f := range fs {
		if f.HasAgreement {
			w, ok = math.Min(w, f.Agreement), true
		}
	}
	return w, ok
}

// gateRecord is one CI gate's verdict in qtool's JSON.
type gateRecord struct {
	Gate      string   `json:"gate"`
	Threshold float64  `json:"threshold"`
	Value     *float64 `json:"value"`
	Passed    bool     `json:"passed"`
	Reason    string   `json:"reason,omitempty"`
}

func (g gateRecord) String() string {
	v := "n/a"
	if g.Value != nil {
		v = fmt.Sprintf("%.4g", *g.Value)
	}
	verdict := "passed"
	if !g.Passed {
		verdict = "FAILED"
	}
	s := fmt.Sprintf("%s %g: %s (%s)", g.Gate, g.Threshold, verdict, v)
	if g.Reason != "" {
		s += ": " + g.Reason
	}
	return s
}

// fidelityGates evaluates --min-sqnr (dB, worst output) and --min-agreement (percent,
// worst output with classes or decisions). A gate that cannot be measured fails: a CI
// gate that passes because nothing was measured is what made 1-class heads pass before.
func fidelityGates(c *cli.Context, fs []train.Fidelity) []gateRecord {
	var gs []gateRecord
	if c.IsSet("min-sqnr") {
		g := gateRecord{Gate: "--min-sqnr", Threshold: c.Float64("min-sqnr")}
		w := worstSQNR(fs)
		switch {
		case len(fs) == 0:
			g.Reason = "no output was compared"
		case math.IsInf(w, 1):
			g.Passed, g.Reason = true, "every output is identical"
		default:
			v := roundTo(w, 3)
			g.Value, g.Passed = &v, w >= g.Threshold
		}
		gs = append(gs, g)
	}
	if c.IsSet("min-agreement") {
		g := gateRecord{Gate: "--min-agreement", Threshold: c.Float64("min-agreement")}
		if w, ok := worstAgreement(fs); ok {
			v := toPct(w)
			g.Value, g.Passed = &v, v >= g.Threshold
		} else {
			g.Reason = "no output has classes or decisions to agree on"
		}
		gs = append(gs, g)
	}
	return gs
}

// gateFlags are binarize's CI gates beyond --max-drop.
func gateFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "min-sqnr", Usage: "exit with code 3 when an output's SQNR against the full-precision model is below `DB`"},
		&cli.Float64Flag{Name: "min-agreement", Usage: "exit with code 3 when an output's top-1 (or decision) agreement with the full-precision model is below `PCT` percent"},
	}
}
