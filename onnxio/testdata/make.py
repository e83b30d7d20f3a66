#!/usr/bin/python3
# make.py writes the small ONNX files that onnxio's tests read, with the official onnx
# Python package (Debian python3-onnx 1.12) and numpy, so that the Go loader is checked
# against files and values it did not produce itself. Run once from this folder:
#     /usr/bin/python3 make.py
# Every file is deterministic (fixed seeds) and passes onnx.checker.
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, external_data_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20260101)


def save(model, *path):
    onnx.checker.check_model(model)
    p = os.path.join(HERE, *path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    onnx.save(model, p)
    return p


def mlp_graph(weights_as_constants):
    """x[batch,6] -> Gemm(W1,b1) -> Relu -> MatMul(W2) + b2 -> y[batch,3], with a
    symbolic batch dimension."""
    W1 = rng.standard_normal((4, 6)).astype(np.float32)
    b1 = rng.standard_normal(4).astype(np.float32)
    W2 = rng.standard_normal((4, 3)).astype(np.float32)
    b2 = rng.standard_normal(3).astype(np.float32)
    tensors = [numpy_helper.from_array(a, n) for a, n in ((W1, "W1"), (b1, "b1"), (W2, "W2"), (b2, "b2"))]
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "W2"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "b2"], ["y"], name="fc2_bias"),
    ]
    inits = tensors
    if weights_as_constants:
        consts = [helper.make_node("Constant", [], [t.name], name=t.name + "/Constant", value=t) for t in tensors]
        nodes = consts + nodes
        inits = []
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=inits,
        doc_string="a two-layer perceptron",
    )
    return g


# constants.onnx: weights held by Constant nodes, as older converters write them, at
# opset 9 and IR version 4.
m = helper.make_model(mlp_graph(True), opset_imports=[helper.make_opsetid("", 9)],
                      producer_name="onnxio-testdata", producer_version="1")
m.ir_version = 4
save(m, "constants.onnx")

# mlp.onnx: the same architecture with initializers, opset 13, plus metadata and an
# extra domain import that a round trip must keep.
m = helper.make_model(mlp_graph(False), opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)],
                      producer_name="onnxio-testdata", producer_version="1", doc_string="test model")
m.ir_version = 7
helper.set_model_props(m, {"author": "onnxio", "purpose": "tests"})
save(m, "mlp.onnx")

# external/model.onnx: the same model with every tensor in one external file written by
# onnx's own external-data code, so offsets and lengths are onnx's, not qtool's.
m = helper.make_model(mlp_graph(False), opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxio-testdata")
m.ir_version = 7
expected = {t.name: numpy_helper.to_array(t).copy() for t in m.graph.initializer}
# The same model with its tensors inline, for the Go test to compare values against.
save(m, "external-inline.onnx")
external_data_helper.convert_model_to_external_data(m, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
os.makedirs(os.path.join(HERE, "external"), exist_ok=True)
for f in ("model.onnx", "weights.bin"):
    if os.path.exists(os.path.join(HERE, "external", f)):
        os.remove(os.path.join(HERE, "external", f))
onnx.save_model(m, os.path.join(HERE, "external", "model.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
onnx.checker.check_model(os.path.join(HERE, "external", "model.onnx"))
back = onnx.load(os.path.join(HERE, "external", "model.onnx"))
for t in back.graph.initializer:
    assert np.array_equal(numpy_helper.to_array(t), expected[t.name]), t.name

# halfs.onnx: float16 and bfloat16 tensors, in raw_data and in int32_data, with the
# float32 values numpy widens them to stored beside them as FLOAT tensors. The float16
# values cover normals, subnormals, the extremes, signed zeros, infinities and NaN.
f16_bits = np.array([
    0x0000, 0x8000, 0x3C00, 0xBC00, 0x3555, 0x7BFF, 0xFBFF,  # 0, -0, 1, -1, ~1/3, ±65504
    0x0001, 0x8001, 0x03FF, 0x0200, 0x0400,  # smallest subnormal, -it, largest subnormal, 2^-15, smallest normal
    0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00,  # +inf, -inf, quiet NaN, signalling NaN, -NaN
], dtype=np.uint16)
f16 = f16_bits.view(np.float16)
bf16_bits = np.array([0x0000, 0x8000, 0x3F80, 0xBF80, 0x4049, 0x7F7F, 0x0001, 0x0080,
                      0x7F80, 0xFF80, 0x7FC0, 0xC2F7], dtype=np.uint16)
bf16_f32 = (bf16_bits.astype(np.uint32) << 16).view(np.float32)


def typed(name, data_type, bits):
    """A tensor whose int32_data holds the given bit patterns as they are; onnx's
    make_tensor would read them as numbers to convert."""
    t = TensorProto()
    t.name = name
    t.data_type = data_type
    t.dims.append(len(bits))
    t.int32_data.extend(int(b) for b in bits)
    return t


inits = [
    helper.make_tensor("f16_raw", TensorProto.FLOAT16, [len(f16)], f16.tobytes(), raw=True),
    typed("f16_typed", TensorProto.FLOAT16, f16_bits),
    helper.make_tensor("f16_want", TensorProto.FLOAT, [len(f16)], f16.astype(np.float32).tobytes(), raw=True),
    helper.make_tensor("bf16_raw", TensorProto.BFLOAT16, [len(bf16_bits)], bf16_bits.tobytes(), raw=True),
    typed("bf16_typed", TensorProto.BFLOAT16, bf16_bits),
    helper.make_tensor("bf16_want", TensorProto.FLOAT, [len(bf16_bits)], bf16_f32.tobytes(), raw=True),
]
g = helper.make_graph(
    [helper.make_node("Cast", ["f16_raw"], ["y"], to=TensorProto.FLOAT)], "halfs", [],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [len(f16)])], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="onnxio-testdata")
m.ir_version = 7
save(m, "halfs.onnx")
