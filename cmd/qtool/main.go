// Command qtool binarizes pretrained ONNX networks after training with the ADMM-Q family
// of algorithms, and writes 1-bit ONNX models that stock runtimes run.
//
// Run "qtool help" for the list of commands, and "qtool help COMMAND" for examples.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Exit codes are part of qtool's interface for CI pipelines.
const (
	exitOK        = 0
	exitInput     = 1 // bad or missing input file, or a failure while processing it
	exitUsage     = 2 // bad flags or arguments
	exitGateFail  = 3 // --max-drop accuracy gate failed
	exitCancelled = 130
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
		markUsageErrors(c.Subcommands)
	}
}

// commands lists every subcommand; each lives in its own file.
func commands() []*cli.Command {
	return []*cli.Command{
		versionCommand(),
		benchCommand(),
		inspectCommand(),
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

func main() {
	app := newApp()
	err := app.Run(interspersed(app, os.Args))
	if err != nil {
		fmt.Fprintln(os.Stderr, "qtool:", err)
	}
	os.Exit(exitCode(err))
}
