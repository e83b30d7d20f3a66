#!/usr/bin/python3
"""Pretrains torchvision MobileNetV2 and ResNet-18 on Fashion-MNIST for bench/budget and
exports them to ONNX (.cache/budget/<name>-fmnist.onnx).

Usage (from the repository root): nice -n 10 /usr/bin/python3 bench/budget/pretrain.py [NAME...]
Needs: Debian's python3-torch (1.13), python3-torchvision, python3-onnx and
dataset-fashion-mnist.

The models read qtool's view of the idx files, [N, 1, 28, 28] in [0, 1], and zero-pad
them to 32 × 32 inside the graph; the first convolution is torchvision's with one input
channel instead of three (the rest of the network is torchvision's, num_classes=10). A short
training on a seeded subset of the training images only (the test images are never read
here), so that a 2-core machine trains each model in minutes; the accuracies it prints are
on the last 2 000 training images of the permutation, which training does not see.
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

FM = "/usr/share/datasets/fashion-mnist"
OUT = ".cache/budget"
SEED = 1
TRAIN_IMAGES = int(os.environ.get("TRAIN_IMAGES", "20000"))
EPOCHS = int(os.environ.get("EPOCHS", "2"))
BATCH = 128


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


class Padded(nn.Module):
    """Pads [N, 1, 28, 28] to 32 × 32 and runs the torchvision network."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(F.pad(x, (2, 2, 2, 2)))


def build(name):
    if name == "resnet18":
        net = torchvision.models.resnet18(num_classes=10)
        net.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    elif name == "mobilenet_v2":
        net = torchvision.models.mobilenet_v2(num_classes=10)
        net.features[0][0] = nn.Conv2d(1, 32, 3, 2, 1, bias=False)
    else:
        sys.exit(f"pretrain.py: unknown model {name} (resnet18, mobilenet_v2)")
    return Padded(net)


def main():
    torch.set_num_threads(2)
    x = torch.from_numpy(idx(f"{FM}/train-images-idx3-ubyte.gz").astype(np.float32) / 255).unsqueeze(1)
    y = torch.from_numpy(idx(f"{FM}/train-labels-idx1-ubyte.gz").astype(np.int64))
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(SEED))
    tr, va = perm[:TRAIN_IMAGES], perm[-2000:]
    os.makedirs(OUT, exist_ok=True)
    for name in sys.argv[1:] or ["mobilenet_v2", "resnet18"]:
        torch.manual_seed(SEED)
        model = build(name)
        steps = EPOCHS * (TRAIN_IMAGES // BATCH)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=steps)
        start = time.time()
        g = torch.Generator().manual_seed(SEED)
        for epoch in range(EPOCHS):
            model.train()
            order = tr[torch.randperm(len(tr), generator=g)]
            for i in range(TRAIN_IMAGES // BATCH):
                b = order[i * BATCH:(i + 1) * BATCH]
                loss = F.cross_entropy(model(x[b]), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
            model.eval()
            with torch.no_grad():
                acc = (model(x[va]).argmax(1) == y[va]).float().mean().item()
            print(f"{name}: epoch {epoch + 1}/{EPOCHS}, loss {loss.item():.3f}, "
                  f"accuracy on 2000 unseen training images {100 * acc:.2f} %, {time.time() - start:.0f} s", flush=True)
        model.eval()
        path = f"{OUT}/{name}-fmnist.onnx"
        torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path, opset_version=13, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
        print(f"{name}: wrote {path} ({sum(p.numel() for p in model.parameters())} parameters)", flush=True)


if __name__ == "__main__":
    main()
