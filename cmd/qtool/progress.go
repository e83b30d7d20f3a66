package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/qtool/qtool/admmq/network"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a run's advance on stderr: a bar over all inner epochs with the outer
// iteration, loss, accuracy and ETA when stderr is a terminal, and otherwise one plain
// line every interval (and one per finished outer iteration), which is what CI logs want.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	every    time.Duration
	last     time.Time
	start    time.Time
	label    string
	total    int
	done     int
	acc      string
	quiet    bool
	finished bool
}

// newProgress returns a reporter for a run of total inner epochs. label prefixes each
// line (the algorithm, and the seed in compare).
func newProgress(w io.Writer, label string, total int, every time.Duration, quiet bool) *progress {
	p := &progress{w: w, every: every, start: time.Now(), last: time.Now(), label: label, total: total, quiet: quiet}
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

// update is network.Config.Progress.
func (p *progress) update(e network.Progress) {
	if p.quiet {
		return
	}
	if e.Done {
		if e.Stats != nil && e.Stats.HasAccuracy {
			p.acc = fmt.Sprintf(" acc %.2f%%", 100*e.Stats.Accuracy)
		}
		if p.bar == nil {
			s := e.Stats
			fmt.Fprintf(p.w, "%s: iter %d/%d  loss %.4f  f(y) %.4f  L %.4g  |x-y| %.4g  changed %.3g%%%s  (%s)\n",
				p.label, e.Iter, e.Iters, s.TrainLoss, s.FY, s.Lagrangian, s.Residual, 100*s.Changed, p.acc, time.Since(p.start).Round(time.Second))
			p.last = time.Now()
		}
		return
	}
	p.done++
	desc := fmt.Sprintf("%s iter %d/%d epoch %d/%d loss %.4f%s", p.label, e.Iter, e.Iters, e.Epoch, e.Of, e.Loss, p.acc)
	if p.bar != nil {
		p.bar.Describe(desc)
		_ = p.bar.Set(p.done)
		return
	}
	if time.Since(p.last) >= p.every {
		fmt.Fprintf(p.w, "%s  (%d/%d epochs, %s)\n", desc, p.done, p.total, time.Since(p.start).Round(time.Second))
		p.last = time.Now()
	}
}

// finish clears the bar.
func (p *progress) finish() {
	if p.bar != nil && !p.finished {
		_ = p.bar.Finish()
		p.finished = true
	}
}
