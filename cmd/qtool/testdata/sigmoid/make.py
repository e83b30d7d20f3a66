"""Makes sigmoid/head.onnx and sigmoid/data.npz: a single-sigmoid binary head, pretrained on
real data, for qtool's sigmoid-head test (cmd/qtool/sigmoid_test.go).

The head tells shirts (Fashion-MNIST class 6, label 1) from T-shirts/tops (class 0, label 0),
a hard pair, so that binarizing it changes some decisions. It is Flatten → Linear(784→32) →
ReLU → Linear(32→1) → Sigmoid: one probability [N, 1], like a wake-word head. It is trained
on the Fashion-MNIST training set; data.npz holds 600 images of each class from the test set
(x uint8 [1200, 1, 28, 28], y int64 [1200, 1] of 0/1).

Run with Debian's python3 (torch 1.13), from this folder, with the dataset-fashion-mnist
package installed: /usr/bin/python3 make.py
"""
import gzip

import numpy as np
import torch
import torch.nn as nn

D = "/usr/share/datasets/fashion-mnist/"


def load(kind):
    with gzip.open(D + kind + "-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(D + kind + "-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    keep = (y == 0) | (y == 6)
    return x[keep], (y[keep] == 6).astype(np.int64)


torch.manual_seed(0)
xtr, ytr = load("train")
xte, yte = load("t10k")
m = nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
xt = torch.from_numpy(xtr).float() / 255
yt = torch.from_numpy(ytr).float()[:, None]
for epoch in range(8):
    perm = torch.randperm(len(xt))
    for i in range(0, len(xt), 64):
        b = perm[i:i + 64]
        loss = nn.functional.binary_cross_entropy(m(xt[b]), yt[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
m.eval()
sel = np.concatenate([np.flatnonzero(yte == 0)[:600], np.flatnonzero(yte == 1)[:600]])
sel.sort()
x, y = xte[sel], yte[sel]
with torch.no_grad():
    p = m(torch.from_numpy(x).float() / 255).numpy()[:, 0]
print("accuracy on data.npz %.4f (%d/%d)" % (((p >= 0.5) == y).mean(), ((p >= 0.5) == y).sum(), len(y)))
torch.onnx.export(m, torch.zeros(1, 1, 28, 28), "head.onnx", input_names=["input"], output_names=["prob"],
                  dynamic_axes={"input": {0: "N"}, "prob": {0: "N"}}, opset_version=13)
np.savez_compressed("data.npz", x=x, y=y[:, None])
