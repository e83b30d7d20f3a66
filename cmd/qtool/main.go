// Command qtool binarizes pretrained ONNX networks after training with the ADMM-Q family
// of algorithms, and writes 1-bit ONNX models that stock runtimes run.
//
// Run "qtool help" for the list of commands, and "qtool help COMMAND" for examples.
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes are part of qtool's interface for CI pipelines.
const (
	exitOK         = 0
	exitInput      = 1   // bad or missing input file, or a failure while processing it
	exitUsage      = 2   // bad flags or arguments
	exitGateFail   = 3   // --max-drop accuracy gate failed
	exitCancelled  = 130 // SIGINT (Ctrl-C), as shells report 128+2
	exitTerminated = 143 // SIGTERM, as shells report 128+15
)

// version is overridden at link time by release builds (-ldflags "-X main.version=...").
var version = "0.1.0-dev"

func newApp() *cli.App {
	app := &cli.App{
		Name:    "qtool",
		Usage:   "binarize pretrained ONNX networks with ADMM-Q",
		Version: version,
		Description: "qtool fine-tunes the weights of a full-precision ONNX model onto {-1,+1} " +
			"(or a ternary or k-bit grid) with ADMM-Q, ADMM-R, ADMM-S or PGD, and writes a " +
			"binarized ONNX model that any ONNX runtime can run.",
		HideVersion:          false,
		EnableBashCompletion: true,
		Commands:             commands(),
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // main decides the exit code
		// Without an Action urfave/cli runs "help" on an unknown command, which fails with
		// its own exit code; a mistyped command is a usage error.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return unknownCommand(c.App, c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
	markUsageErrors(app.Commands)
	return app
}

// markUsageErrors makes flag-parsing errors of every command usage errors (exit 2);
// urfave/cli reports them per command, not through the app's handler.
func markUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
		}
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			if err := finiteFloats(ctx); err != nil {
				return err
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
		markUsageErrors(c.Subcommands)
	}
}

// finiteFloats refuses NaN and ±Inf in every float flag: strconv accepts them, and a NaN
// learning rate or ρ would train for the whole run to a meaningless result.
func finiteFloats(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		if ff, ok := f.(*cli.Float64Flag); ok {
			name := ff.Names()[0]
			if v := c.Float64(name); math.IsNaN(v) || math.IsInf(v, 0) {
				return usagef("--%s %v: want a finite number", name, v)
			}
		}
	}
	return nil
}

// commands lists every subcommand; each lives in its own file.
func commands() []*cli.Command {
	return []*cli.Command{
		versionCommand(),
		benchCommand(),
		inspectCommand(),
		analyzeCommand(),
		evalCommand(),
		reportCommand(),
		binarizeCommand(),
		compareCommand(),
	}
}

// usageError marks errors caused by how qtool was invoked rather than by its input.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error, which exits with code 2.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError carries an explicit exit code, such as a failed accuracy gate.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitInput
}

// unknownCommand is the usage error of a command name qtool does not have.
func unknownCommand(app *cli.App, name string) error {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return usagef("unknown command %q; the commands are: %s (qtool help COMMAND for one)", name, strings.Join(names, ", "))
}

// run runs app on args (os.Args form) as main does: positional arguments may come before
// flags, "qtool help NOSUCH" is the same usage error as "qtool NOSUCH", and library errors
// get their flag advice (cliError) whichever command returns them.
func run(ctx context.Context, app *cli.App, args []string) error {
	err := app.RunContext(ctx, interspersed(app, args))
	var ec cli.ExitCoder
	if errors.As(err, &ec) && strings.HasPrefix(err.Error(), "No help topic for '") {
		name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), "No help topic for '"), "'")
		return unknownCommand(app, name)
	}
	return cliError(err)
}

// signalled is the cause of a context cancelled by a signal.
type signalled struct{ sig os.Signal }

func (s signalled) Error() string { return s.sig.String() + " signal received" }

// withSignals returns a context that SIGINT and SIGTERM cancel instead of killing qtool,
// so that a command cleans up (temporary folders, partial outputs) and exits with
// interrupted's code. Commands call it before any work, loading included.
func withSignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(signalled{s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interrupted turns err into exit 143 after SIGTERM or 130 after SIGINT (or a cancelled
// parent context) when ctx was cancelled; what says what was (not) written.
func interrupted(ctx context.Context, err error, what string) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	code := exitCancelled
	var s signalled
	if errors.As(context.Cause(ctx), &s) && s.sig == syscall.SIGTERM {
		code = exitTerminated
	}
	msg := "interrupted"
	if what != "" {
		msg += ": " + what
	}
	return exitError{code: code, err: errors.New(msg)}
}

func main() {
	err := run(context.Background(), newApp(), os.Args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "qtool:", err)
	}
	os.Exit(exitCode(err))
}
