// Package engine executes ONNX graphs in float32 and differentiates them.
//
// Build turns an onnxio.Model into a Graph: it orders the nodes topologically, checks
// every node against the supported ops and reports all unsupported ops and attribute
// values in one error. Forward runs the graph; the first run for an input signature
// (shapes, mode, and the values of integer inputs) plans it — shape inference with a
// free batch dimension, constant folding of the shape arithmetic exporters emit (Shape →
// Gather → Unsqueeze → Concat → Reshape), and buffer assignment with reuse of dead
// values — and later runs with that signature allocate nothing. Plans that record nothing
// also fold through frozen float parameters the nodes that read a constant too (the
// packed export's Cast → Gather(lookup table) → Reshape → Mul(scales), DequantizeLinear of
// int8 codes): the weight is unpacked once, shared by the plans of every signature, and
// the plans are remade when Param.Changed says a folded parameter was written.
// MatMulNBits' codes stay in bytes, four bits a weight at 4 bits; each run dequantizes
// its weight a chunk of rows at a time.
//
// Training: SetTrainable marks initializers (weights, biases, BatchNorm scale and bias,
// or any other float tensor) as trainable. Forward then also keeps what Backward needs,
// and Backward adds the loss gradients of the trainable parameters into Param.Grad.
// Context.Training selects training behaviour (BatchNormalization on batch statistics
// with running-statistic updates, Dropout drawing from Context.Rand) independently of
// gradient recording, so gradients of the deployed (inference-mode) model are available
// too; Context.NoGrad turns recording off for evaluation runs. Param.Value is the tensor the executor reads: optimizers update it in place, and
// WriteParams stores the values back into a model. Kernels keep packed forms of the weights
// of frozen (not trainable) parameters between runs, so whoever writes such a parameter in
// place calls Param.Changed (or Graph.ParamsChanged) before the next run.
//
// A typical training step:
//
//	g, err := engine.Build(model, engine.Options{BLAS: impl})
//	err = g.SetTrainable(names...)
//	ctx := &engine.Context{Training: true, Rand: rand.New(rand.NewPCG(seed, 0))}
//	g.ZeroGrad()
//	outs, err := g.Forward(ctx, x)       // outs[0]: logits, owned by g
//	loss, dlogits := lossAndGrad(outs[0]) // the caller's loss
//	err = g.Backward(ctx, dlogits)
//	for _, p := range g.Params() { if p.Trainable { update(p.Value.F, p.Grad.F) } }
//
// Each supported ONNX op is one row of the op table (registry in ops.go; README.md in
// this directory shows how to add one) and has a Kernel (shape inference and a forward
// pass that writes into buffers the executor owns and reuses) and, where a gradient can
// flow through it, a vector-Jacobian product (Differentiable) next to its forward pass. Matrix work goes through gonum's blas32
// interface (package engine/blas chooses pure Go or OpenBLAS); other kernels split their
// work over Context.Workers goroutines. A graph's nodes run one at a time, so the large
// scratch of its kernels (the convolutions' column matrices, gradient slots and Winograd
// buffers) is one arena they share, as large as the largest call needs (a Graph is not
// safe for concurrent use in any case).
package engine
