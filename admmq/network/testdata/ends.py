#!/usr/bin/python3
# ends.py writes the models of network's TestKeepFirstLast, PyTorch 1.13 exports (opset 13).
# Run once from this folder:
#     /usr/bin/python3 ends.py
#
# two_heads.onnx: two inputs, each through its own encoder (enc_a, enc_b), concatenated into
# a shared trunk, then two heads (head_a, head_b), each a graph output. In graph order the
# first weight is enc_a's and the last head_b's; by the paths, both encoders are first and
# both heads last, and the trunk is neither.
# chain.onnx: a plain three-layer MLP, where both readings agree (fc1 first, fc3 last) — the
# negative control: fc2 must stay targeted.
import os

import onnx
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261123)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc_a = nn.Linear(6, 8)
        self.enc_b = nn.Linear(5, 8)
        self.trunk = nn.Linear(16, 12)
        self.head_a = nn.Linear(12, 3)
        self.head_b = nn.Linear(12, 4)

    def forward(self, a, b):
        h = torch.relu(self.trunk(torch.cat([torch.relu(self.enc_a(a)), torch.relu(self.enc_b(b))], 1)))
        return self.head_a(h), self.head_b(h)


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def export(model, args, inputs, outputs, name):
    path = os.path.join(HERE, name)
    torch.onnx.export(model.eval(), args, path, opset_version=13, input_names=inputs, output_names=outputs,
                      dynamic_axes={n: {0: "batch"} for n in inputs + outputs})
    onnx.checker.check_model(onnx.load(path))


export(TwoHeads(), (torch.zeros(1, 6), torch.zeros(1, 5)), ["a", "b"], ["out_a", "out_b"], "two_heads.onnx")
export(Chain(), (torch.zeros(1, 6),), ["x"], ["y"], "chain.onnx")
