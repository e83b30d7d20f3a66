#!/usr/bin/python3
"""Export lstm-classifier.onnx and gru-classifier.onnx: sequence classifiers written the
way PyTorch code writes them (nn.LSTM / nn.GRU with batch_first=True, bidirectional, the
last time step, then nn.Linear), exported with dynamic batch and sequence axes, so that
the engine's LSTM and GRU kernels are checked on the graph a real exporter emits. Run
with Debian's python3 (torch 1.13, onnx 1.12):

    /usr/bin/python3 engine/testdata/rnn/make.py

For each model it also writes <name>.npz, PyTorch's reference: an input x [N, T, I], the
logits, a random loss weighting `wts` (loss = Σ wts·logits) and the gradients of that
loss with respect to the recurrent node's W, R and B and the Linear layer's weight,
already in ONNX's layout (gates reordered from PyTorch's i,f,g,o / r,z,n to ONNX's
i,o,f,c / z,r,h, directions stacked, B = [Wb, Rb]) so that the Go test compares them
with the engine's parameter gradients directly. Weights are seeded: reproducible.
"""
import os

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
I, H, C = 6, 8, 4
N, T = 3, 5
HERE = os.path.dirname(os.path.abspath(__file__))


class Classifier(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn
        self.fc = nn.Linear(2 * H, C)

    def forward(self, x):
        y, _ = self.rnn(x)  # [N, T, 2H]
        return self.fc(y[:, -1, :])


def onnx_gates(g, order):
    """Reorders the gate blocks of a [G·H, ...] PyTorch tensor into ONNX's order."""
    return torch.cat([g[k * H:(k + 1) * H] for k in order], 0)


def export(name, rnn, order):
    model = Classifier(rnn).eval()
    path = os.path.join(HERE, name + ".onnx")
    x = torch.randn(N, T, I)
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "logits": {0: "batch"}},
                      opset_version=14, do_constant_folding=True)
    logits = model(x)
    wts = torch.randn_like(logits)
    (logits * wts).sum().backward()
    grads = {}
    for part, sfx in (("W", "weight_ih"), ("R", "weight_hh")):
        grads[part] = torch.stack([onnx_gates(getattr(rnn, sfx + "_l0" + d).grad, order)
                                   for d in ("", "_reverse")])
    grads["B"] = torch.stack([torch.cat([onnx_gates(getattr(rnn, "bias_ih_l0" + d).grad, order),
                                         onnx_gates(getattr(rnn, "bias_hh_l0" + d).grad, order)])
                              for d in ("", "_reverse")])
    grads["fc_weight"] = model.fc.weight.grad
    np.savez(os.path.join(HERE, name + ".npz"), x=x.numpy(), logits=logits.detach().numpy(),
             wts=wts.numpy(), **{"grad_" + k: v.numpy() for k, v in grads.items()})


export("lstm-classifier", nn.LSTM(I, H, batch_first=True, bidirectional=True), [0, 3, 1, 2])
export("gru-classifier", nn.GRU(I, H, batch_first=True, bidirectional=True), [1, 0, 2])
