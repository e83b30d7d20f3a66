package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/qtool/qtool/admmq/network"
)

// feed sends the events of a run of iters outer iterations of epochs inner epochs.
func feed(p *progress, iters, epochs int) {
	for it := 1; it <= iters; it++ {
		for e := 1; e <= epochs; e++ {
			p.update(network.Progress{Iter: it, Iters: iters, Epoch: e, Of: epochs, Loss: 1 / float64(it*e)})
		}
		p.update(network.Progress{Iter: it, Iters: iters, Epoch: epochs, Of: epochs, Loss: 0.5, Done: true,
			Stats: &network.IterStats{Iter: it, TrainLoss: 0.5, HasAccuracy: true, Accuracy: 0.8 + 0.01*float64(it)}})
	}
	p.finish()
}

// On a terminal the outer and inner bars are two lines redrawn in place: every frame
// clears both lines and returns to the first, and the last frame shows both bars full.
func TestProgressTerminalDrawsTwoBars(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressTo(&buf, "admm-q", 3*4, time.Hour, false, true, 100)
	feed(p, 3, 4)
	out := buf.String()
	frames := strings.Split(out, "\033[2K")
	// 12 epoch frames + 3 iteration frames, each "outer\n" + "inner" (2 clears), plus the
	// final clear (2 clears) and the empty text before the first.
	if got, want := len(frames), 1+2*(12+3)+2; got != want {
		t.Fatalf("%d line clears, want %d:\n%q", got-1, want-1, out)
	}
	if !strings.HasSuffix(out, "\r\033[2K\n\033[2K\033[1A\r") {
		t.Errorf("finish does not clear both lines: %q", out[max(0, len(out)-40):])
	}
	last := frames[len(frames)-4] // the last drawn outer line, before the final clear
	for _, want := range []string{"admm-q iter 3/3 loss 0.5000 acc 83.00%", "100%"} {
		if !strings.Contains(last, want) {
			t.Errorf("last outer line %q lacks %q", last, want)
		}
	}
	inner := frames[len(frames)-3]
	for _, want := range []string{"iter 3 epochs", "(4/4", "100%"} {
		if !strings.Contains(inner, want) {
			t.Errorf("last inner line %q lacks %q", inner, want)
		}
	}
	mid := frames[2*5+2] // after iteration 1's four epochs and its Done frame, epoch 1 of iteration 2
	if !strings.Contains(mid, "(1/4") || !strings.Contains(mid, "iter 2 epochs") {
		t.Errorf("inner bar does not restart with iteration 2: %q", mid)
	}
	for _, cols := range []int{100, 40} {
		buf.Reset()
		feed(newProgressTo(&buf, "admm-q seed 12345", 3*4, time.Hour, false, true, cols), 3, 4)
		for i, f := range strings.Split(buf.String(), "\033[2K") {
			line := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(f, "\r"), "\n"), "\033[1A\r")
			if n := len([]rune(line)); n >= cols {
				t.Errorf("frame %d is %d columns wide, terminal has %d: %q", i, n, cols, line)
			}
		}
	}
}

// Without a terminal there are no escape codes: one line per finished iteration (the
// interval here is too long for any other).
func TestProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressTo(&buf, "pgd seed 2", 2*3, time.Hour, false, false, 0)
	feed(p, 2, 3)
	out := buf.String()
	if strings.Contains(out, "\033") || strings.Contains(out, "\r") {
		t.Fatalf("escape codes in plain output: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "pgd seed 2: iter 2/2") || !strings.Contains(lines[1], "acc 82.00%") {
		t.Fatalf("plain output:\n%s", out)
	}
	buf.Reset()
	p = newProgressTo(&buf, "pgd", 6, 0, false, false, 0)
	feed(p, 2, 3)
	if n := strings.Count(buf.String(), "\n"); n != 2*3+2 {
		t.Errorf("interval 0: %d lines, want one per epoch and per iteration (8):\n%s", n, buf.String())
	}
	buf.Reset()
	p = newProgressTo(&buf, "pgd", 6, 0, true, true, 80)
	feed(p, 2, 3)
	if buf.Len() != 0 {
		t.Errorf("quiet run wrote %q", buf.String())
	}
}
