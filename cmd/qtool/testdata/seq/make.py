"""Makes seq/tagger.onnx and seq/data.npz: a small sequence tagger for qtool's per-position
labels test (cmd/qtool/seq_test.go).

The task is synthetic but learnable: a sequence of T = 16 steps of F = 4 features is a noisy
one-hot code of a symbol in {0, 1, 2} plus a constant channel; the label of step t is the
symbol of step t−1 (a delay the convolution must learn), −1 at step 0 and on the padding
after each sequence's length (variable lengths, 6..16). The tagger is Conv1d(4→16, k=3) →
ReLU → Conv1d(16→C=4, k=3) over [N, F, T], transposed to [N, T, C] and log_softmax'ed, so
binarizing it with the labels trains with per-position NLL and reports per-position accuracy.

Run with Debian's python3 (torch 1.13): /usr/bin/python3 make.py, from this folder.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T, FEAT, C = 16, 4, 4
torch.manual_seed(0)
rng = np.random.default_rng(0)


def make(n):
    sym = rng.integers(0, 3, size=(n, T))
    x = rng.normal(0, 0.6, size=(n, FEAT, T)).astype(np.float32)
    for c in range(3):
        x[:, c, :] += (sym == c)
    x[:, 3, :] += 1
    y = np.full((n, T), -1, dtype=np.int64)
    y[:, 1:] = sym[:, :-1]
    lengths = rng.integers(6, T + 1, size=n)
    for i, L in enumerate(lengths):
        y[i, L:] = -1
        x[i, :, L:] = 0  # padding
    return x, y


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(FEAT, 16, 3, padding=1)
        self.c2 = nn.Conv1d(16, C, 3, padding=1)

    def forward(self, x):  # [N, F, T]
        h = self.c2(F.relu(self.c1(x)))  # [N, C, T]
        return F.log_softmax(h.transpose(1, 2), dim=2)  # [N, T, C]


xtr, ytr = make(2000)
xte, yte = make(256)
m = Tagger()
opt = torch.optim.Adam(m.parameters(), lr=1e-2)
xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
for epoch in range(30):
    perm = torch.randperm(len(xt))
    for i in range(0, len(xt), 100):
        b = perm[i:i + 100]
        loss = F.nll_loss(m(xt[b]).reshape(-1, C), yt[b].reshape(-1), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
m.eval()
with torch.no_grad():
    pred = m(torch.from_numpy(xte)).argmax(2).numpy()
mask = yte >= 0
print("held-out per-position accuracy %.4f (%d/%d)" % ((pred == yte)[mask].mean(), (pred == yte)[mask].sum(), mask.sum()))
torch.onnx.export(m, torch.from_numpy(xte[:1]), "tagger.onnx", input_names=["x"], output_names=["logp"],
                  dynamic_axes={"x": {0: "N"}, "logp": {0: "N"}}, opset_version=13)
# The calibration data are the first 512 training sequences; the held-out ones are separate.
np.savez("calib.npz", x=xtr[:512], y=ytr[:512])
np.savez("heldout.npz", x=xte, y=yte)
