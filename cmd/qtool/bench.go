package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/qtool/qtool/experiments/quadratic"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "reproduce the paper's experiments",
		UsageText: "qtool bench quadratic --out DIR [flags]\n\nExample:\n   qtool bench quadratic --quick --out /tmp/q",
		Subcommands: []*cli.Command{
			{
				Name:  "quadratic",
				Usage: "reproduce the quadratic experiment (paper §6.1, appendix F): ADMM-Q/S/R vs PGD and GD+Proj over 8ℤ^d",
				UsageText: "qtool bench quadratic --out DIR [--seed N] [--quick] [--workers N]\n\n" +
					"Examples:\n" +
					"   qtool bench quadratic --quick --out /tmp/q   # reduced protocol, under 30 s\n" +
					"   qtool bench quadratic --out docs/quadratic   # full protocol (10–20 minutes on 2 cores), replaces the committed results\n\n" +
					"Hyper-parameters are chosen on selection starts; every reported number comes from other, reporting starts.",
				Flags: []cli.Flag{
					// No default: a default folder would be docs/quadratic, and a trial run
					// from the repository would silently replace the committed results.
					&cli.StringFlag{Name: "out", Usage: "output folder for results.csv, results.json, summary.md and the PNG figures (required)"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the problem instances, starts and ADMM-R masks"},
					&cli.BoolFlag{Name: "quick", Usage: "reduced protocol (2 instances, 10 reporting + 10 selection starts, 1000 iterations, PGD 3000)"},
					&cli.IntFlag{Name: "workers", Value: runtime.NumCPU(), Usage: "parallel jobs; results do not depend on it"},
					&cli.BoolFlag{Name: "pure-go", Usage: "use the portable Go kernels instead of the AVX-512/AVX2 assembly: same bits, slower (also QTOOL_BLAS=go)"},
					&cli.StringFlag{Name: "pairs", Usage: "run only these (v,d,σ²) pairs, e.g. \"8,16,30;8,8,30\"; a pair's results do not depend on the others"},
					&cli.StringSliceFlag{Name: "merge", Usage: "instead of running, combine the results.json files of runs over different pairs"},
					&cli.StringFlag{Name: "note", Usage: "text to put under the summary's header (for --merge: how the parts were run)"},
				},
				Action: benchQuadratic,
			},
		},
	}
}

func benchQuadratic(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("bench quadratic takes no arguments, got %q", strings.Join(c.Args().Slice(), " "))
	}
	if c.Int("workers") < 1 {
		return usagef("--workers must be at least 1, got %d", c.Int("workers"))
	}
	out := c.String("out")
	if out == "" {
		return usagef("bench quadratic needs --out DIR (e.g. --out /tmp/q; --out docs/quadratic replaces the committed results)")
	}
	if files := c.StringSlice("merge"); len(files) > 0 {
		return mergeQuadratic(c, files, out)
	}
	cfg := quadratic.PaperConfig(c.Uint64("seed"))
	cmd := "qtool bench quadratic"
	if c.Bool("quick") {
		cfg = quadratic.QuickConfig(c.Uint64("seed"))
		cmd += " --quick"
	}
	if spec := c.String("pairs"); spec != "" {
		pairs, err := parsePairs(spec)
		if err != nil {
			return usagef("--pairs: %v", err)
		}
		cfg.Pairs = pairs
		cmd += fmt.Sprintf(" --pairs %q", spec)
	}
	cmd += fmt.Sprintf(" --seed %d --out %s", cfg.Seed, out)
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	// Fail before hours of computation, not after.
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("bench quadratic: output folder: %w", err)
	}
	start := time.Now()
	last := time.Time{}
	res, err := quadratic.Run(c.Context, cfg, quadratic.Options{
		Workers: c.Int("workers"),
		PureGo:  c.Bool("pure-go"),
		Progress: func(done, total int) {
			if now := time.Now(); now.Sub(last) > 5*time.Second || done == total {
				last = now
				fmt.Fprintf(os.Stderr, "qtool: bench quadratic: %d/%d jobs, %s\n", done, total, now.Sub(start).Round(time.Second))
			}
		},
	})
	if err != nil {
		if errors.Is(err, c.Context.Err()) && c.Context.Err() != nil {
			return exitError{code: exitCancelled, err: err}
		}
		return fmt.Errorf("bench quadratic: %w", err)
	}
	elapsed := time.Since(start)
	if err := quadratic.WriteAll(out, res, quadratic.Meta{Command: cmd, Elapsed: elapsed, Workers: c.Int("workers"), Note: c.String("note")}); err != nil {
		return fmt.Errorf("bench quadratic: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "bench quadratic: %d pairs × %d instances × (%d reporting + %d selection starts) in %s (%s); wrote %s/summary.md\n",
		len(cfg.Pairs), cfg.Instances, cfg.Starts, cfg.SelectStarts, elapsed.Round(time.Second), res.Kernels, out)
	return nil
}

// parsePairs reads "v,d,σ²;v,d,σ²".
func parsePairs(spec string) ([]quadratic.Pair, error) {
	var out []quadratic.Pair
	for _, part := range strings.Split(spec, ";") {
		f := strings.Split(strings.TrimSpace(part), ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("pair %q: want v,d,sigma2", part)
		}
		v, err1 := strconv.ParseFloat(strings.TrimSpace(f[0]), 64)
		d, err2 := strconv.Atoi(strings.TrimSpace(f[1]))
		s2, err3 := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("pair %q: %w", part, err)
		}
		out = append(out, quadratic.Pair{V: v, D: d, Sigma2: s2})
	}
	return out, nil
}

// mergeQuadratic combines results.json files of runs over different pairs and writes the
// combined outputs.
func mergeQuadratic(c *cli.Context, files []string, out string) error {
	var parts []*quadratic.Results
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("bench quadratic --merge: %w", err)
		}
		r, err := quadratic.ReadJSON(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("bench quadratic --merge %s: %w", name, err)
		}
		parts = append(parts, r)
	}
	res, err := quadratic.Merge(parts)
	if err != nil {
		return fmt.Errorf("bench quadratic --merge: %w", err)
	}
	meta := quadratic.Meta{Command: "qtool bench quadratic --merge " + strings.Join(files, ",") + " --out " + out, Note: c.String("note")}
	if err := quadratic.WriteAll(out, res, meta); err != nil {
		return fmt.Errorf("bench quadratic: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "bench quadratic: merged %d pairs from %d files into %s\n", len(res.Pairs), len(files), out)
	return nil
}
