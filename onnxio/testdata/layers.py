#!/usr/bin/python3
# layers.py writes layers.onnx, PyTorch's (torch 1.13) export of one layer of each weight
# layout qtool's layer schema covers, for onnxio's TestChannelAxisPyTorch. Run once from
# this folder:
#     /usr/bin/python3 layers.py
#
# Each weight element holds 1 + the output channel it contributes to, found by PyTorch's
# autograd (the elements whose gradient of output channel c is non-zero), not by any
# knowledge of the layout. Wherever the exporter moves or transposes the weight, the
# test can then check that the schema's axis is the one whose index is the channel.
# The model is deterministic (fixed seed) and passes onnx.checker.
import io
import os

import onnx
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20260113)


class Layers(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, groups=2)  # Conv, grouped: [6, 2, 3, 3]
        self.conv_bn = nn.BatchNorm2d(6)
        self.deconv = nn.ConvTranspose2d(4, 5, 3)  # ConvTranspose: [4, 5, 3, 3]
        self.deconv_bn = nn.BatchNorm2d(5)
        self.gdeconv = nn.ConvTranspose2d(4, 6, 3, groups=2)  # grouped: [4, 3, 3, 3]
        self.linear = nn.Linear(4, 7)  # Gemm, transB = 1: [7, 4]
        self.linear3 = nn.Linear(36, 9)  # 3-D input: MatMul by the transposed [36, 9]
        self.gemm_b = nn.Parameter(torch.randn(4, 3))  # addmm(x, B): Gemm, transB = 0
        self.gemm_b_bias = nn.Parameter(torch.randn(3))
        self.gemm_a = nn.Parameter(torch.randn(5, 4))  # addmm(A, x): Gemm with A a weight
        self.gemm_a_bias = nn.Parameter(torch.randn(5, 1))
        self.left = nn.Parameter(torch.randn(2, 4))  # matmul(A, x): MatMul's input 0
        for bn in (self.conv_bn, self.deconv_bn):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.data.uniform_(0.5, 2)
            bn.bias.data.uniform_(-1, 1)

    def layers(self, x):
        """Each weight with the layer output it feeds and that output's channel axis."""
        m = x.mean((2, 3))
        f = x.flatten(2)
        return [
            (self.conv.weight, self.conv(x), 1),
            (self.deconv.weight, self.deconv(x), 1),
            (self.gdeconv.weight, self.gdeconv(x), 1),
            (self.linear.weight, self.linear(m), 1),
            (self.linear3.weight, self.linear3(f), 2),
            (self.gemm_b, torch.addmm(self.gemm_b_bias, m, self.gemm_b), 1),
            (self.gemm_a, torch.addmm(self.gemm_a_bias, self.gemm_a, m.t()), 0),
            (self.left, torch.matmul(self.left, f), 1),
        ]

    def forward(self, x):
        outs = [y for _, y, _ in self.layers(x)]
        outs[0] = self.conv_bn(outs[0])
        outs[1] = self.deconv_bn(outs[1])
        return tuple(outs)


model = Layers().eval()
x = torch.rand(1, 4, 6, 6) + 0.1
with torch.no_grad():
    ids = {}
for w, y, axis in model.layers(x):
    channel = torch.full_like(w, -1)
    for c in range(y.shape[axis]):
        model.zero_grad()
        y.select(axis, c).sum().backward(retain_graph=True)
        hit = w.grad != 0
        assert (channel[hit] == -1).all(), "an element feeds two output channels"
        channel[hit] = c
    assert (channel >= 0).all(), "an element feeds no output channel"
    ids[w] = channel
with torch.no_grad():
    for w, channel in ids.items():
        w.copy_(channel + 1)

buf = io.BytesIO()
torch.onnx.export(
    model, x, buf, opset_version=13,
    input_names=["x"],
    output_names=["conv", "deconv", "gdeconv", "linear", "linear3", "gemm_b", "gemm_a", "left"],
    # PRESERVE on an eval-mode model skips the peephole pass that folds BatchNorm into the
    # convolution before it, which would hide the Conv → BatchNormalization pattern.
    training=torch.onnx.TrainingMode.PRESERVE,
    do_constant_folding=True,  # as by default: folds the transposed Linear weight
)
m = onnx.load_from_string(buf.getvalue())
m.doc_string = "written by onnxio/testdata/layers.py: weight values are 1 + output channel"
onnx.checker.check_model(m)
onnx.save(m, os.path.join(HERE, "layers.onnx"))
