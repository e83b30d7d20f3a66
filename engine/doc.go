// Package engine executes ONNX graphs in float32 and differentiates them.
//
// Each supported ONNX op has a Kernel (shape inference and a forward pass that writes into
// buffers the executor owns and reuses) and, where a gradient can flow through it, a
// vector-Jacobian product (Differentiable). Matrix work goes through gonum's blas32
// interface (package engine/blas chooses pure Go or OpenBLAS); other kernels split their
// work over Context.Workers goroutines.
package engine
