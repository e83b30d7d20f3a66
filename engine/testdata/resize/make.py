"""Exports the small real models of engine's Resize and Einsum tests.

Run with Debian's python3 (torch 1.13, onnx 1.12):  /usr/bin/python3 make.py
It writes unet.onnx (Conv -> MaxPool -> Conv -> bilinear and nearest F.interpolate ->
concat skip -> Conv, at opset 13) and einsum.onnx (attention-style torch.einsum).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class UNetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 4, 3, padding=1)
        self.mid = nn.Conv2d(4, 4, 3, padding=1)
        self.dec = nn.Conv2d(12, 2, 3, padding=1)

    def forward(self, x):
        skip = torch.relu(self.enc(x))
        h = torch.relu(self.mid(F.max_pool2d(skip, 2)))
        up_lin = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
        up_near = F.interpolate(h, scale_factor=2, mode="nearest")
        return self.dec(torch.cat([skip, up_lin, up_near], 1))


class EinsumNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)

    def forward(self, x):  # x: [N, T, 8], two heads of 4
        n, t, _ = x.shape
        q = self.q(x).reshape(n, t, 2, 4).transpose(1, 2)
        k = self.k(x).reshape(n, t, 2, 4).transpose(1, 2)
        v = self.v(x).reshape(n, t, 2, 4).transpose(1, 2)
        a = torch.softmax(torch.einsum("bhid,bhjd->bhij", q, k) / 2, -1)
        o = torch.einsum("bhij,bhjd->bhid", a, v)
        return torch.einsum("...ij->...j", o)


torch.onnx.export(UNetBlock().eval(), torch.randn(1, 3, 8, 8), "unet.onnx", opset_version=13,
                  input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
torch.onnx.export(EinsumNet().eval(), torch.randn(2, 5, 8), "einsum.onnx", opset_version=12,
                  input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
