#!/usr/bin/python3
# grouped.py writes grouped.onnx for network's TestKeepDepthwise, a PyTorch 1.13 export
# (opset 13). Run once from this folder:
#     /usr/bin/python3 grouped.py
#
# Convolutions of every kind of grouping, by PyTorch's definition of depthwise (groups equal
# to the input channels, so every output channel reads one input channel): dw (groups = 4,
# 4 → 4) and dw_mult (groups = 4, 4 → 8, channel multiplier 2) are depthwise; stem and pw
# (groups = 1) and grouped (groups = 2, two input channels per output) are not.
import os

import onnx
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261123)


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.grouped = nn.Conv2d(4, 4, 3, padding=1, groups=2)
        self.dw_mult = nn.Conv2d(4, 8, 3, padding=1, groups=4)
        self.pw = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = torch.relu(self.grouped(torch.relu(self.dw(h))))
        h = torch.relu(self.pw(torch.relu(self.dw_mult(h))))
        return self.fc(h.mean((2, 3)))


path = os.path.join(HERE, "grouped.onnx")
model = Grouped().eval()
for name in ("dw", "dw_mult"):
    m = getattr(model, name)
    assert m.groups == m.in_channels, name
torch.onnx.export(model, (torch.zeros(1, 1, 6, 6),), path, opset_version=13, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
onnx.checker.check_model(onnx.load(path))
