package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's positional arguments after its flags.
//
// urfave/cli v2 stops reading flags at the first positional argument, so
// "qtool eval model.onnx --data x.npz" would treat --data as an argument. Users write
// the model first; this rewrite lets them. It knows which flags take a value from the
// command's own flag definitions, so a value that looks like a path is never mistaken
// for a positional argument.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds := app.Commands
	flags := app.Flags
	i := 1
	// Global flags, then the command path (e.g. "bench quadratic").
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
			if takesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			i++
			continue
		}
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(a) {
				next = c
			}
		}
		if next == nil {
			break
		}
		out = append(out, a)
		cmds, flags = next.Subcommands, next.Flags
		i++
		if len(cmds) == 0 {
			break
		}
	}
	var pos []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			out = append(out, a)
			if takesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}

// takesValue reports whether flag argument a (such as "--data" or "-o") needs the next
// argument as its value.
func takesValue(flags []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if _, ok := f.(*cli.BoolFlag); ok {
				return false
			}
			return true
		}
	}
	return false
}
