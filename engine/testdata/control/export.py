"""Exports control.onnx and while.onnx: small models with scripted control flow, as
torch.onnx emits it.

Run with Debian's python3 (torch 1.13, onnx 1.12): python3 export.py
engine/control_ort_test.go compares qtool with onnxruntime on it, forward and gradients.

- `if x.size(0) == 1` becomes an If whose condition qtool folds from shapes when
  planning, so that batches of one and of more take different branches;
- `if h.sum() > 0` becomes an If on a tensor value, decided per run, whose branches use
  different layers (the weights are outer-scope initializers read inside the branches);
- `for i in range(x.size(1) // 2)` becomes a Loop over a layer whose trip count (3) is
  computed from shapes; torch unrolls a literal `range(3)` itself, so the trip count is
  taken from the input's fixed feature width to keep the Loop in the graph.

while.onnx holds a `while` loop whose condition is computed from the data (the mean
activation against a threshold, and an iteration cap): a Loop whose trip count qtool learns
only at run time, with an If in its body for the short-circuit `and`.
"""
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Linear(6, 8)
        self.pos = torch.nn.Linear(8, 8)
        self.neg = torch.nn.Linear(8, 8)
        self.rep = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        if x.size(0) == 1:
            h = h * 2.0
        if h.sum() > 0:
            h = torch.relu(self.pos(h))
        else:
            h = torch.sigmoid(self.neg(h)) * 2.0
        for i in range(x.size(1) // 2):
            h = torch.tanh(self.rep(h)) + h * 0.5
        return self.out(h)


class While(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.inp = torch.nn.Linear(6, 8)
        self.step = torch.nn.Linear(8, 8)
        with torch.no_grad():
            self.step.bias.mul_(0.1)  # small, so that the activations decay
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        i = 0
        while bool(h.abs().mean() > 0.02) and i < 6:
            h = torch.tanh(self.step(h)) * 0.8
            i += 1
        return self.out(h)


m = torch.jit.script(Net())
x = torch.randn(2, 6)
torch.onnx.export(m, (x,), "control.onnx", opset_version=13, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})

torch.onnx.export(torch.jit.script(While()), (x,), "while.onnx", opset_version=13, input_names=["x"],
                  output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})

import onnx
for f in ["control.onnx", "while.onnx"]:
    g = onnx.load(f).graph
    print(f, [n.op_type for n in g.node], [i.name for i in g.initializer])
