package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/qtool/qtool/admmq/quadexp"
	"github.com/urfave/cli/v2"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "reproduce the paper's experiments",
		Subcommands: []*cli.Command{
			{
				Name:  "quadratic",
				Usage: "reproduce the quadratic experiment (paper §6.1, appendix F): ADMM-Q/S/R vs PGD and GD+Proj over 8ℤ^d",
				UsageText: "qtool bench quadratic [--out DIR] [--seed N] [--quick] [--workers N]\n\n" +
					"Examples:\n" +
					"   qtool bench quadratic                 # full protocol, writes docs/quadratic/\n" +
					"   qtool bench quadratic --quick --out /tmp/q   # reduced protocol, under 30 s",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Value: "docs/quadratic", Usage: "output folder for results.csv, results.json, summary.md and the PNG figures"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the problem instances, starts and ADMM-R masks"},
					&cli.BoolFlag{Name: "quick", Usage: "reduced protocol (2 instances, 10 starts, 1000 iterations, PGD 3000)"},
					&cli.IntFlag{Name: "workers", Value: runtime.NumCPU(), Usage: "parallel jobs; results do not depend on it"},
					&cli.BoolFlag{Name: "pure-go", Usage: "use gonum's Dgemm instead of OpenBLAS (also QTOOL_BLAS=go)"},
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
		return usagef("--out must name a folder")
	}
	cfg := quadexp.PaperConfig(c.Uint64("seed"))
	cmd := "qtool bench quadratic"
	if c.Bool("quick") {
		cfg = quadexp.QuickConfig(c.Uint64("seed"))
		cmd += " --quick"
	}
	cmd += fmt.Sprintf(" --seed %d --out %s", cfg.Seed, out)
	start := time.Now()
	last := time.Time{}
	res, err := quadexp.Run(c.Context, cfg, quadexp.Options{
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
	if err := quadexp.WriteAll(out, res, quadexp.Meta{Command: cmd, Elapsed: elapsed, Workers: c.Int("workers")}); err != nil {
		return fmt.Errorf("bench quadratic: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "bench quadratic: %d pairs × %d instances × %d starts in %s (%s); wrote %s/summary.md\n",
		len(cfg.Pairs), cfg.Instances, cfg.Starts, elapsed.Round(time.Second), res.BLAS, out)
	return nil
}
