package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:      "version",
		Usage:     "print qtool's version, the Go runtime and the BLAS in use",
		UsageText: "qtool version\n\nExample:\n   QTOOL_BLAS=go qtool version",
		Action: func(c *cli.Context) error {
			be, err := selectBackend(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "qtool %s (%s, %s/%s, %d CPUs)\nBLAS: %s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), be.Info)
			return nil
		},
	}
}
