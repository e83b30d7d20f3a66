// Package binarize is qtool's pipeline as a library: it fine-tunes the weights of a
// pretrained ONNX network onto a binary (or ternary or k-bit) grid with the ADMM-Q family
// of algorithms (Huang et al., AISTATS 2021) and exports a standard ONNX file.
//
// Run takes a model, calibration and held-out data and Options, whose zero value (or
// Defaults) is what `qtool binarize` does without flags: I-ADMM-Q with ρ = 1, 8 outer
// iterations of 5 Adam epochs at a step-decayed learning rate of 1e-2, batches of 512,
// starting on the grid, the binary-grid weights first rescaled where BatchNorm follows,
// BatchNorm statistics re-estimated with the binary weights, and the packed format.
// It returns the trained weights, the statistics of every outer iteration, the accuracy
// of the full-precision model and of the exported file (read back and run by the
// engine), and the file's bytes; with Options.Output it also writes the file, replacing
// an existing one only once the new one has been read back from disk and checked.
//
// Run does, in order: clone the model, build it (engine), select the targets
// (network.Targets), rescale them (network.Precondition), run the algorithm
// (network.Run), put the weights on the grid and re-estimate BatchNorm (Run.Finish),
// write them back, export (export.Export), parse the exported bytes again and evaluate
// them against the full-precision model. Errors a caller can act on are typed
// (*OptionError, *network.SelectionError, *LabelsError, *OpsetError, *ResumeError); no
// message names a command-line flag, so qtool's CLI turns them into flag advice.
//
// The dependencies point one way: cmd/qtool → binarize → admmq/network, export, calib,
// train → engine → onnxio.
package binarize
