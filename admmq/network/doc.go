// Package network runs the ADMM-Q family of algorithms and the PGD and GD+Proj baselines
// on the weights of an ONNX network built by the engine, fine-tuning them onto a binary
// (or ternary or k-bit) grid against calibration data. Algorithms carry admmq's names
// (Methods): what users call ADMM-Q is admmq.IADMMQ here, since a network has no exact
// x-update, besides admmq.ADMMR, admmq.ADMMS, admmq.PGD and admmq.GDProj.
//
// The package reads data only through train.Batcher and returns the binarized weights as
// its own Weight, so it depends on neither the data readers (calib) nor the file format
// (export); package binarize wires the three together and is what most callers want.
//
// The x-update of I-ADMM-Q is K inner epochs (or steps) of the training optimizer on
// f(x) + ⟨λ, x − y⟩ + ρ/2‖x − y‖², the penalty's gradient λ + ρ(x − y) being added to the
// loss gradient of each targeted weight by train.Fit's gradient hook; the other trainable
// parameters (biases, normalisation scale and shift) are trained on f alone, as in the
// paper's code. The y-update (projection, masked projection or soft projection) and the
// multiplier update run between x-updates with admmq's step functions:
//
//	for r := 0; r < Iters; r++ {
//		y = P_A(x + λ/ρ_r)          // ADMM-R: on a Bernoulli(p) mask; ADMM-S: soft
//		x = K epochs of Adam on L(·, y, λ) from the current x
//		λ += ρ_r (x − y)
//	}
//
// Config.StartOnGrid starts x at y⁰ = P_A(x⁰), the paper's x⁰ = y⁰ ∈ A, rather than at
// the pretrained weights (the paper's code). Precondition first rescales each weight that
// BatchNorm follows to mean |w| = 1 per output channel, so that the unscaled ±1 grid sits
// at the weights' scale; the network's function is unchanged.
//
// Alternatively the x-update stops at the checkable criterion of Alg. 2,
// ‖∇ₓL‖ ≤ ρ·γ·min{‖x − y‖, ‖x − x_prev‖}, tested after every inner epoch (at most K
// of them), with ∇ₓf evaluated in inference mode over a fixed subset of the calibration
// data (the first Config.StatSamples samples, rounded up to whole batches).
//
// PGD follows the paper's code: after every optimizer step the targeted weights are
// projected, x = P_A(x − step). With Adam at a learning rate far below the distance
// between grid points, most weights keep the sign of the first projection; PGD then
// mostly re-trains biases and normalisation around it, which is what the reference
// code did too. GD+Proj fine-tunes without constraint and projects once at the end.
//
// After the algorithm (Finish) the targeted weights are set to y — exactly on the grid,
// never a rounded x (for ADMM-S, whose y may lie off the grid, to P_A(y)) — and the
// BatchNorm running statistics are re-estimated over the calibration data with those
// weights. Runs are deterministic per seed, cancellable between optimizer steps, and
// checkpoint at the end of each outer iteration with everything needed to resume
// bit-identically.
package network
