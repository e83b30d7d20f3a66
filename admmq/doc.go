// Package admmq implements the ADMM-Q family of algorithms for optimisation over discrete
// sets, from T. Huang, P. Singhania, M. Sanjabi, P. Mitra and M. Razaviyayn, "Alternating
// Direction Method of Multipliers for Quantization", AISTATS 2021: ADMM-Q (Alg. 1), the
// inexact I-ADMM-Q (Alg. 2), ADMM-R with random masks (Alg. 3), ADMM-S with soft projection
// (Alg. 4), and the baselines PGD, GD+Proj ("gd-proj", the name used across qtool) and
// BinaryConnect's straight-through estimator ("ste").
//
// The package is pure math over float vectors and tensors: it knows nothing of ONNX or of
// the engine, so that the algorithms can be tested and reused apart from any model format.
// admmq/network drives it on ONNX networks, and experiments/quadratic on the paper's
// quadratic problems.
//
// The package has three layers.
//
// Sets. A [Set] is a quantization set with a cheap Euclidean projection: {−1,+1}, ±α
// (per tensor or per output channel, α fixed or jointly optimal), ternary {−α,0,+α}
// with its exact projection, symmetric k-bit grids, the integer box {a..b}^d and the
// lattice vℤ^d. Sets project float64 vectors and float32 tensors with a shape; a
// per-channel set takes its channel axis in the [Layout], so the package knows nothing
// of model formats (onnxio's layer schema gives the axis of an ONNX weight).
//
// Steps. The y-update of each variant ([UpdateYQ], [UpdateYR], [SoftPrepare] with
// [SoftFactor] and [SoftApply]), the dual update [UpdateDual], the penalty gradient
// [AddPenaltyGrad] and value [Penalty], and the ρ [Schedule] work on one tensor at a time
// in float32 or float64, so that an external training loop (K inner Adam epochs per ADMM
// iteration) can drive ADMM on network weights without this package owning the loop.
//
// Drivers. [Run] drives any of the seven methods over a [Problem] on float64 vectors,
// built from the same steps, and records [Stats] per iteration. The whole state is the
// exported [State] plus the [Options]: random masks are derived from (seed, iteration),
// never from a hidden stream, so a run resumed from a serialized State is bit-identical
// to an uninterrupted one.
//
// Tie rule: where several points of a set are nearest, every projector returns the
// coordinate-wise largest one (ties round toward +∞). For {−1,+1} this is the paper's
// sign(0) = +1 (Example 2.1); the authors' reference code maps 0 to −1 instead.
package admmq
