// Package onnxpb holds the Go bindings of the ONNX protobuf schema (onnx.proto),
// generated with google.golang.org/protobuf under the proto package name qtool.onnx.
//
// Use package onnxio to read and write models; this package is only the wire schema.
package onnxpb

//go:generate sh gen.sh
