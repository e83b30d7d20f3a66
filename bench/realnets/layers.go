//go:build cgo

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/internal/ortref"
)

// nodeTimes sums the time of each node over runs.
type nodeTimes struct {
	runs int
	time map[string]time.Duration // by node name
	op   map[string]string
}

func newNodeTimes() *nodeTimes {
	return &nodeTimes{time: map[string]time.Duration{}, op: map[string]string{}}
}

func (n *nodeTimes) add(name, op string, d time.Duration) {
	n.time[name] += d
	n.op[name] = op
}

// print writes the time per run of each op and of the top nodes, the largest first.
func (n *nodeTimes) print(w io.Writer, engineName string, top int) {
	if n.runs == 0 {
		return
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(n.runs) }
	var total time.Duration
	byOp := map[string]time.Duration{}
	for name, d := range n.time {
		total += d
		byOp[n.op[name]] += d
	}
	fmt.Fprintf(w, "  %s: %.2f ms a run in its nodes (%d runs)\n", engineName, per(total), n.runs)
	ops := slices.SortedFunc(maps.Keys(byOp), func(a, b string) int { return cmp.Or(cmp.Compare(byOp[b], byOp[a]), cmp.Compare(a, b)) })
	for _, op := range ops {
		fmt.Fprintf(w, "    op   %-34s %8.2f ms %5.1f %%\n", op, per(byOp[op]), 100*byOp[op].Seconds()/total.Seconds())
	}
	names := slices.SortedFunc(maps.Keys(n.time), func(a, b string) int { return cmp.Or(cmp.Compare(n.time[b], n.time[a]), cmp.Compare(a, b)) })
	for _, name := range names[:min(top, len(names))] {
		fmt.Fprintf(w, "    node %-60s %-22s %8.3f ms\n", name, n.op[name], per(n.time[name]))
	}
}

// profileLayers times every node of both engines on the same input for about seconds
// each: qtool's through engine.Context.NodeTime, onnxruntime's from its own profiler's
// trace. onnxruntime fuses and renames nodes (a Conv and the Relu after it become one
// node named for the Relu's output, in its blocked layout), so the two lists are set
// side by side by the reader, not matched here.
func profileLayers(w io.Writer, raw []byte, g *engine.Graph, ctx engine.Context, x *engine.Tensor, ins []ortref.Tensor, child *ortChild, threads int, seconds float64, top int) error {
	q := newNodeTimes()
	ctx.NodeTime = q.add
	for start := time.Now(); time.Since(start).Seconds() < seconds; q.runs++ {
		if _, err := g.Forward(&ctx, x); err != nil {
			return err
		}
	}
	q.print(w, "qtool", top)
	if ins == nil && child == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "realnets-ort-profile")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var trace string
	o := newNodeTimes()
	if child != nil {
		if trace, o.runs, err = child.profile(seconds, dir); err != nil {
			return err
		}
	} else if trace, o.runs, err = ortref.Profile(raw, ortref.Options{IntraOpThreads: threads, NoSpinning: true}, ins, seconds, dir); err != nil {
		return err
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		return err
	}
	var events []struct {
		Cat  string         `json:"cat"`
		Name string         `json:"name"`
		Dur  int64          `json:"dur"` // microseconds
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		return fmt.Errorf("onnxruntime's profile %s: %w", trace, err)
	}
	for _, e := range events {
		name, ok := strings.CutSuffix(e.Name, "_kernel_time")
		if e.Cat != "Node" || !ok {
			continue
		}
		op, _ := e.Args["op_name"].(string)
		o.add(name, op, time.Duration(e.Dur)*time.Microsecond)
	}
	name := "onnxruntime"
	if child != nil {
		name += " (AVX2 kernels)"
	}
	o.print(w, name, top)
	return nil
}
