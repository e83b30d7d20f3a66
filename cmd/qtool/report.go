package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "compare a full-precision model with its binarized export: bytes per tensor, file sizes, savings",
		ArgsUsage: "MODEL.onnx BINARIZED.onnx",
		UsageText: "qtool report [--json | --markdown] [--out FILE.json] MODEL.onnx BINARIZED.onnx\n\n" +
			"Examples:\n" +
			"   qtool report testmodels/fmnist-mlp.onnx fmnist-mlp-1bit.onnx\n" +
			"   qtool report --json testmodels/fmnist-mlp.onnx fmnist-mlp-1bit.onnx | jq .totals.saved_percent\n" +
			"   qtool report --out sizes.json testmodels/fmnist-mlp.onnx fmnist-mlp-1bit.onnx   # also writes sizes.md",
		Description: "For every parameter tensor of MODEL.onnx: shape, element count, bytes before and after, bits " +
			"per weight, bytes of scales, and whether it was binarized or kept in full precision and why (bias, " +
			"normalisation, not a linear operator's weight). Totals give the tensor bytes, the unpacking constants " +
			"(LUTs, shapes), the real file sizes on disk and the percentage saved, the theoretical size with every " +
			"binarized weight at exactly 1 bit, and the count the ADMM-Q paper used (trainable parameters only, in " +
			"MiB) with what makes the whole file differ from it. Unpacking happens when the runtime loads the model: " +
			"the saving is on disk and in transfer, not in runtime memory.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout"},
			&cli.BoolFlag{Name: "markdown", Usage: "print the report as Markdown on stdout"},
			&cli.StringFlag{Name: "out", Usage: "also write the report to `FILE.json` and, as Markdown, to FILE.md"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("report takes two model files, the original and its binarized export, got %d arguments; run: qtool report MODEL.onnx BINARIZED.onnx", c.NArg())
			}
			if c.Bool("json") && c.Bool("markdown") {
				return usagef("report: --json and --markdown both print to stdout; choose one")
			}
			origPath, quantPath := c.Args().Get(0), c.Args().Get(1)
			orig, err := onnxio.Load(origPath)
			if err != nil {
				return err
			}
			quant, err := onnxio.Load(quantPath)
			if err != nil {
				return err
			}
			rep, err := export.Compare(orig, quant, origPath, quantPath, export.CompareOptions{})
			if err != nil {
				return err
			}
			if out := c.String("out"); out != "" {
				if err := rep.WriteFiles(out, strings.TrimSuffix(out, ".json")+".md"); err != nil {
					return err
				}
			}
			switch {
			case c.Bool("json"):
				return rep.WriteJSON(c.App.Writer)
			case c.Bool("markdown"):
				return rep.WriteMarkdown(c.App.Writer)
			}
			return rep.WriteText(c.App.Writer)
		},
	}
}
