// Package onnxio reads and writes ONNX models.
//
// A Model wraps the decoded protobuf (package onnxpb) together with the folder that
// external tensor data is relative to. Loading checks what qtool can execute (IR versions
// 3 to 10, default-domain opsets 7 to 21) and reports problems as one line naming the
// file. Saving is lossless: whatever qtool did not change — metadata, doc strings,
// value_info, other domains and opsets, unknown fields — is written back unchanged, and
// writes are atomic.
//
// Parameters are seen through one lens whatever the exporter did: Params lists graph
// initializers and the tensors of Constant nodes alike, and SetParam writes a new value
// back to wherever the original lived.
//
// Tensor data is decoded by DecodeTensor into float32 (FLOAT, DOUBLE, FLOAT16 and
// BFLOAT16 are converted) or int64 (every integer type and BOOL), from raw_data, the typed
// fields or external files.
package onnxio
