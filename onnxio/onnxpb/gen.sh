#!/bin/sh
# Regenerates onnx.pb.go from the official onnx.proto shipped by Debian's python3-onnx
# (onnx 1.12, IR version 8). Needs protoc (apt protobuf-compiler) and
# protoc-gen-go (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
#
# Three edits are made to the upstream file, and only these:
#   - the proto package becomes qtool.onnx, so that the descriptors registered at init
#     cannot clash with another ONNX binding (package "onnx") linked into the same binary;
#   - the C++-only LITE_RUNTIME option is dropped and a go_package option added;
#   - the data types and fields that IR versions 9 and 10 added after onnx 1.12
#     (float8 types, UINT4/INT4; NodeProto.overload and the metadata_props lists),
#     with the numbers the ONNX IR specification gives them, so that IR 10 models
#     are understood rather than carried as unknown fields.
set -eu
src=${ONNX_PROTO:-/usr/lib/python3/dist-packages/onnx/onnx.proto}
cd "$(dirname "$0")"
sed \
  -e 's/^package onnx;/package qtool.onnx;\noption go_package = "github.com\/qtool\/qtool\/onnxio\/onnxpb";/' \
  -e '/^option optimize_for = LITE_RUNTIME;/d' \
  -e 's/^\(    BFLOAT16 = 16;.*\)$/\1\n\n    \/\/ Added in IR version 9.\n    FLOAT8E4M3FN = 17;\n    FLOAT8E4M3FNUZ = 18;\n    FLOAT8E5M2 = 19;\n    FLOAT8E5M2FNUZ = 20;\n\n    \/\/ Added in IR version 10.\n    UINT4 = 21;\n    INT4 = 22;/' \
  "$src" > onnx.proto
# IR 10 fields, inserted after the last field of each message.
awk '
  /^message NodeProto \{/ { msg = "node" }
  /^message GraphProto \{/ { msg = "graph" }
  /^message FunctionProto \{/ { msg = "func" }
  /^message ValueInfoProto \{/ { msg = "vi" }
  /^\}/ {
    if (msg == "node") print "\n  // Added in IR version 10.\n  optional string overload = 8;\n  repeated StringStringEntryProto metadata_props = 9;"
    if (msg == "graph") print "\n  // Added in IR version 10.\n  repeated StringStringEntryProto metadata_props = 16;"
    if (msg == "vi") print "\n  // Added in IR version 10.\n  repeated StringStringEntryProto metadata_props = 4;"
    if (msg == "func") print "\n  // Added in IR version 10.\n  repeated ValueInfoProto value_info = 12;\n  optional string overload = 13;\n  repeated StringStringEntryProto metadata_props = 14;"
    msg = ""
  }
  { print }
' onnx.proto > onnx.proto.tmp && mv onnx.proto.tmp onnx.proto
protoc --go_out=. --go_opt=paths=source_relative onnx.proto
