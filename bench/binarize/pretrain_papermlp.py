"""Pretrains the paper's full-width MNIST network (784-4096x3-10 with BatchNorm and Dropout,
testmodels/make.py's FMNISTMLP at width 4096) on a seeded subset of Fashion-MNIST and
exports it to ONNX the way make.py exports fmnist-mlp, for bench/binarize/run.sh paper.

Run with Debian's PyTorch: /usr/bin/python3 bench/binarize/pretrain_papermlp.py OUT.onnx [N] [EPOCHS]
"""
import os
import sys

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testmodels"))
import make  # noqa: E402  the test models' own training and export code

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.set_num_threads(2)
xtr, ytr, xte, yte = make.load_fmnist()
idx = np.random.default_rng(7).permutation(len(ytr))[:n]
x, y = xtr[idx].reshape(n, -1), ytr[idx]
torch.manual_seed(7)
model = make.FMNISTMLP(width=4096)
secs = make.train(model, x, y, epochs, 512, 1e-3, 8)
acc = make.count_correct(make.predict(model, xte.reshape(len(xte), -1)), yte) / len(yte)
print(f"pretrained {epochs} epochs on {n} images in {secs:.0f} s: test accuracy {acc:.4f}", flush=True)
m = make.export(model, torch.from_numpy(x[:2]), 13, "the paper's MNIST network at width 4096, pretrained on Fashion-MNIST", keep_dropout=True)
tmp = out + ".tmp"
onnx.save(m, tmp)
os.replace(tmp, out)
