// Package onnxio reads and writes ONNX models.
//
// A Model wraps the decoded protobuf (package onnxpb) together with the folder that
// external tensor data is relative to.
//
// Loading (Load, Read, Parse) checks what qtool can execute — IR versions 3 to 10,
// default-domain opsets 7 to 21 — and, without reading any tensor data, that every
// tensor's stored bytes match its shape and that every external data file exists, stays
// inside the model's folder and is long enough. Each problem is reported as one line
// naming the file and, where there is one, the tensor: not a protobuf, a truncated file,
// a version out of range, a missing or short external file, a tensor whose byte length
// does not match its shape, negative or overflowing dimensions. Because lengths are
// checked before anything is allocated, what a hostile file makes the loader and the
// decoder allocate stays in proportion to its own size (and that of its external data).
// Decode skips the checks, for tools that only carry a model.
//
// Saving (Save, SaveWith, Write, Marshal) is lossless and deterministic: whatever qtool
// did not change — metadata, doc strings, value_info, other domains and opsets, unknown
// fields — is written back, a load followed by a save gives a model equal as a protobuf,
// and the same model always gives the same bytes. Files are written atomically
// (temporary file in the same folder, then rename). External data stays where it is, is
// copied when the model is saved into another folder, and models over the 2 GiB
// protobuf limit (DefaultExternalThreshold, or SaveOptions.ExternalThreshold) are
// written with their large tensors in path+".data".
//
// Parameters are seen through one lens whatever the exporter did: Params lists graph
// initializers and the tensors of Constant nodes alike, SetParam writes a new value back
// to wherever the original lived, and ParamRoles says which of them binarization
// targets (the weights of Conv, ConvTranspose, Gemm and MatMul) and why the others are
// kept (bias, normalization, other).
//
// The layer schema (Layers, LayerOf) is the one place that knows, per operator type,
// which input is a weight, a bias or a normalisation parameter, and Use.ChannelAxis which
// axis of a weight holds its output channels — the axis per-channel scales run along,
// after Gemm's transA and transB; a grouped ConvTranspose has none. ParamRoles, target
// selection, the grids and qtool inspect read it, so that the algorithms themselves
// (package admmq) only ever see a tensor and an axis.
//
// Tensor data is decoded by DecodeTensor into float32 (FLOAT, DOUBLE, and FLOAT16 and
// BFLOAT16 widened exactly) or int64 (every integer type and BOOL), from raw_data, the
// typed fields or external files. Inputs and Outputs describe the graph's declared
// types, symbolic dimensions by name.
package onnxio
