// Package export writes quantized weights into ONNX models that stock runtimes run.
//
// The caller gives, for each quantized parameter, the float32 values its algorithm
// produced and the grid they lie on: integer levels ({−1,+1}, {−1,0,+1}, {−7..7}, …),
// an optional float32 scale per tensor or per output channel, and the channel axis
// (onnxio's layer schema gives it: Use.ChannelAxis).
// Export derives each weight's level code and checks that the value equals
// float32(level)·scale bit for bit — exactly what a runtime computes when it unpacks the
// weight — so the exported file reproduces the algorithm's weights exactly.
//
// Four formats are written (Options.Format):
//
//   - Packed (the default) stores the codes bit-packed in a UINT8 initializer, 1 bit per
//     weight for two levels, 2 bits for up to 4, 4 bits for up to 16 and 8 bits for up to
//     256, and unpacks them with standard operators valid from opset 9 to 21:
//     Cast(uint8→int32) → Gather(LUT) → Reshape(−1) → Slice (only when the last byte is
//     padded) → Reshape(shape) → Mul(scale). The LUT is a [256, 8/bits] float32 table
//     whose row b holds the levels of the codes packed in byte b (code j at bits
//     j·bits … j·bits+bits−1, least significant first), shared by every tensor with the
//     same levels and width. The last node's output keeps the parameter's name, so the
//     nodes that consume the weight are untouched.
//   - QDQ stores the levels as INT8 (INT4 when the target opset is 21 or later and the
//     levels lie in [−8, 7]) followed by DequantizeLinear, which needs opset 10; the
//     per-channel axis of DequantizeLinear needs opset 13, so below it a per-tensor
//     DequantizeLinear with scale 1 is followed by a Mul by the scale vector.
//   - Float stores float32 tensors that hold exactly the grid values.
//   - MatMulNBits stores the weights of MatMul and Gemm nodes as onnxruntime's
//     com.microsoft MatMulNBits (4-bit codes for up to 16 levels, 8-bit beyond; the
//     node replaces the MatMul or Gemm), which onnxruntime keeps packed in memory, and
//     every other weight as Packed.
//
// Everything else — graph, names, inputs, outputs, metadata and the parameters left in
// full precision — is kept as it was; qtool's own facts (version, algorithm, grid, seed,
// format) are added to metadata_props under keys starting with "qtool.".
//
// Runtimes fold the unpacking subgraph of constants when they load the model, so the
// Packed saving is on disk and in transfer, not in memory at run time; MatMulNBits
// weights stay at their width in onnxruntime's memory (measured by bench/nbits, whose
// figures the report cites). Compare builds the
// storage report that says so, with the per-tensor and whole-file figures.
package export
