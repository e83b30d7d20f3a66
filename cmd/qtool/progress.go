package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/qtool/qtool/admmq/network"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a run's advance on stderr. On a terminal it draws two bars: the outer
// (ADMM) iterations, filled by inner epochs so that its ETA moves between iterations, with
// the last iteration's loss and accuracy; and below it the current x-update's inner epochs
// with the running loss. Otherwise it writes one plain line every interval and one per
// finished outer iteration, which is what CI logs want.
type progress struct {
	w     io.Writer
	every time.Duration
	last  time.Time
	start time.Time
	label string
	total int
	done  int
	acc   string
	quiet bool

	// Terminal mode: both bars render into their String() only (their writer discards),
	// and draw composes the two lines, so neither bar's own cursor handling is involved.
	tty          bool
	width        int // terminal columns; lines are cut to fit so that the cursor moves stay right
	outer, inner *progressbar.ProgressBar
	innerIter    int
	lastIter     string
	drawn        bool
}

// newProgress returns a reporter for a run of total inner epochs. label prefixes each
// line (the algorithm, and the seed in compare).
func newProgress(w io.Writer, label string, total int, every time.Duration, quiet bool) *progress {
	tty, width := false, 0
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) {
		tty = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil {
			width = cols
		}
	}
	return newProgressTo(w, label, total, every, quiet, tty, width)
}

// newProgressTo is newProgress with the terminal decision made by the caller (tests draw
// the bars into a buffer). width ≤ 0 means 80 columns.
func newProgressTo(w io.Writer, label string, total int, every time.Duration, quiet, tty bool, width int) *progress {
	p := &progress{w: w, every: every, start: time.Now(), last: time.Now(), label: label, total: max(total, 1), quiet: quiet}
	if tty && !quiet {
		if width <= 0 {
			width = 80
		}
		p.tty, p.width = true, width
		p.outer = newBar(p.total, label, false)
	}
	return p
}

func newBar(max int, desc string, count bool) *progressbar.ProgressBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(io.Discard),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(0),
		progressbar.OptionSetRenderBlankState(true),
	}
	if count {
		opts = append(opts, progressbar.OptionShowCount())
	} else {
		opts = append(opts, progressbar.OptionSetPredictTime(true))
	}
	return progressbar.NewOptions(max, opts...)
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
		if p.tty {
			// The outer line keeps the last finished iteration's loss and accuracy.
			p.lastIter = fmt.Sprintf(" loss %.4f%s", e.Stats.TrainLoss, p.acc)
			p.outer.Describe(fmt.Sprintf("%s iter %d/%d%s", p.label, e.Iter, e.Iters, p.lastIter))
			p.draw()
			return
		}
		s := e.Stats
		fmt.Fprintf(p.w, "%s: iter %d/%d  loss %.4f  f(y) %.4f  L %.4g  |x-y| %.4g  dual %.4g  flipped %.3g%%  scales %.3g%% (Δα %.3g%%)%s  (%s)\n",
			p.label, e.Iter, e.Iters, s.TrainLoss, s.FY, s.Lagrangian, s.Residual, s.DualResidual, 100*s.Flipped, 100*s.ScalesChanged, 100*s.ScaleChange, p.acc, time.Since(p.start).Round(time.Second))
		p.last = time.Now()
		return
	}
	p.done++
	if p.tty {
		if p.inner == nil || e.Iter != p.innerIter {
			p.inner, p.innerIter = newBar(max(e.Of, 1), "", true), e.Iter
		}
		p.inner.Describe(fmt.Sprintf("  iter %d epochs, loss %.4f", e.Iter, e.Loss))
		_ = p.inner.Set(e.Epoch)
		p.outer.Describe(fmt.Sprintf("%s iter %d/%d%s", p.label, e.Iter, e.Iters, p.lastIter))
		_ = p.outer.Set(min(p.done, p.total))
		p.draw()
		return
	}
	if time.Since(p.last) >= p.every {
		fmt.Fprintf(p.w, "%s iter %d/%d epoch %d/%d loss %.4f%s  (%d/%d epochs, %s)\n",
			p.label, e.Iter, e.Iters, e.Epoch, e.Of, e.Loss, p.acc, p.done, p.total, time.Since(p.start).Round(time.Second))
		p.last = time.Now()
	}
}

// draw rewrites the two bar lines in place, leaving the cursor at the start of the first.
func (p *progress) draw() {
	lines := []string{p.fit(p.outer.String()), ""}
	if p.inner != nil {
		lines[1] = p.fit(p.inner.String())
	}
	fmt.Fprintf(p.w, "\r\033[2K%s\n\033[2K%s\033[1A\r", lines[0], lines[1])
	p.drawn = true
}

// fit strips the bar's own carriage returns and line-clearing codes and cuts the line to
// the terminal width: a wrapped line would break the one-line cursor move of draw.
func (p *progress) fit(s string) string {
	s = strings.TrimRight(strings.TrimLeft(strings.ReplaceAll(s, "\033[0K", ""), "\r"), " ")
	if utf8.RuneCountInString(s) < p.width {
		return s
	}
	r := []rune(s)
	return string(r[:p.width-1])
}

// finish clears the bars.
func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[2K\n\033[2K\033[1A\r")
		p.drawn = false
	}
}
