#!/usr/bin/python3
"""Export masked-attention.onnx: a tiny attention block with a padding mask, written the
way ViT- and BERT-style PyTorch code does it, so that the engine's comparison, logic and
Where kernels are checked on the graph a real exporter emits rather than on hand-built
nodes. Run with Debian's python3 (torch 1.13, onnx 1.12):

    /usr/bin/python3 engine/testdata/masked/make.py

The weights are seeded, so the file is reproducible. The exported graph holds Equal,
Not, Less, And, Where (from masked_fill and torch.where), Greater, GreaterOrEqual and
Cast from bool, around MatMul and Softmax.
"""
import os

import torch
from torch import nn

torch.manual_seed(0)
D = 8


class MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D)
        self.k = nn.Linear(D, D)
        self.v = nn.Linear(D, D)
        self.out = nn.Linear(D, 3)

    def forward(self, x, mask):
        # x: [N, T, D] tokens; mask: [N, T] int64, non-zero for real tokens.
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = q @ k.transpose(1, 2) / D ** 0.5
        att = att.masked_fill(mask[:, None, :] == 0, -1e9)  # Equal, Where
        h = att.softmax(-1) @ v
        h = torch.where(h > 0, h, 0.1 * h)  # Greater, Where
        # mask != 0 exports as Not(Equal); & as And; the pooled tokens must also be < 5.
        keep = (mask != 0) & (mask < 5) & (mask >= 1)
        w = keep.float()[:, :, None]  # Cast from bool
        pooled = (h * w).sum(1) / w.sum(1).clamp(min=1)
        return self.out(pooled)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    m = MaskedAttention().eval()
    x = torch.randn(2, 5, D)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 2, 1, 1, 7]])
    torch.onnx.export(m, (x, mask), os.path.join(here, "masked-attention.onnx"),
                      input_names=["x", "mask"], output_names=["y"], opset_version=13,
                      dynamic_axes={"x": {0: "n", 1: "t"}, "mask": {0: "n", 1: "t"}, "y": {0: "n"}})


if __name__ == "__main__":
    main()
