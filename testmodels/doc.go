// Package testmodels holds the small full-precision ONNX models, data subsets and PyTorch
// fixtures that qtool's tests run against, made once by make.py in this folder (see README.md
// there for each model, its accuracy and the fixture keys).
//
// It embeds the default model and its calibration subset so that `qtool binarize` runs with no
// flags on a fresh machine. Tests that need the other files read them from this folder.
package testmodels

import _ "embed" // for go:embed

// FMNISTMLP is fmnist-mlp.onnx: the paper's MNIST network at width 256, trained on
// Fashion-MNIST, opset 13, input "input" [batch, 784] of pixel/255, output "logits" [batch, 10].
// The slice is shared by every caller: treat it as read-only.
//
//go:embed fmnist-mlp.onnx
var FMNISTMLP []byte

// FMNISTCalib is fmnist-calib.npz: key "x" float32 [1000, 1, 28, 28] (the first 1000
// Fashion-MNIST test images, pixel/255) and key "y" int64 [1000] (their labels), as written by
// numpy's savez_compressed. The slice is shared by every caller: treat it as read-only.
//
//go:embed fmnist-calib.npz
var FMNISTCalib []byte
