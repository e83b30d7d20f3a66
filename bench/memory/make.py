"""Builds the two memory workloads of issue 14 (see README, Performance):

  ocr.onnx      a MobileNetV3-small-style direction classifier, ~134 k parameters,
                input 3x48x192 (depthwise convolutions, HardSigmoid/HardSwish,
                squeeze-excitation), with ocr-calib.npz: 2000 random images;
  resnet18.onnx torchvision ResNet-18 (random init) at 224 px, with
                resnet18-calib.npz: N images (default 256).

Weights are random; BatchNorm running statistics are estimated on random data so that the
networks' activations are of a normal scale. Everything is seeded: the same command gives
the same files.

    /usr/bin/python3 bench/memory/make.py OUTDIR [--resnet-images N]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torchvision


class SE(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(c, max(8, c // r), 1)
        self.fc2 = nn.Conv2d(max(8, c // r), c, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        s = self.gate(self.fc2(torch.relu(self.fc1(self.pool(x)))))
        return x * s


class Block(nn.Module):
    """MobileNetV3 inverted residual: expand 1x1, depthwise kxk, optional SE, project."""

    def __init__(self, cin, exp, cout, k, stride, se, act):
        super().__init__()
        A = nn.Hardswish if act == "hs" else nn.ReLU
        layers = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), A()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), A()]
        if se:
            layers.append(SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


class OCRCls(nn.Module):
    # Channel widths of MobileNetV3-small at scale 0.35 (as text-direction
    # classifiers use), the widest blocks narrowed to about 134 k parameters in all.
    cfg = [  # exp, out, k, stride, se, act
        (16, 8, 3, 2, True, "re"),
        (40, 16, 3, (2, 1), False, "re"),
        (48, 16, 3, 1, False, "re"),
        (48, 24, 5, (2, 1), True, "hs"),
        (96, 24, 5, 1, True, "hs"),
        (96, 24, 5, 1, True, "hs"),
        (64, 24, 5, 1, True, "hs"),
        (72, 24, 5, 1, True, "hs"),
        (96, 48, 5, (2, 1), True, "hs"),
        (144, 48, 5, 1, True, "hs"),
        (144, 48, 5, 1, True, "hs"),
    ]

    def __init__(self, classes=2):
        super().__init__()
        layers = [nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish()]
        c = 8
        for exp, out, k, s, se, act in self.cfg:
            layers.append(Block(c, exp, out, k, s, se, act))
            c = out
        layers += [nn.Conv2d(c, 288, 1, bias=False), nn.BatchNorm2d(288), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(288, classes)

    def forward(self, x):
        return torch.softmax(self.fc(torch.flatten(self.pool(self.features(x)), 1)), 1)


def estimate_bn(net, shape, batches=8, batch=32):
    net.train()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the batches
            m.reset_running_stats()
    with torch.no_grad():
        for _ in range(batches):
            net(torch.rand(batch, *shape))
    net.eval()


def export(net, shape, path):
    torch.onnx.export(net, torch.rand(1, *shape), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, opset_version=13)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ocr-images", type=int, default=2000)
    ap.add_argument("--resnet-images", type=int, default=256)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    shape = (3, 48, 192)
    net = OCRCls()
    n = sum(p.numel() for p in net.parameters())
    estimate_bn(net, shape)
    export(net, shape, os.path.join(a.out, "ocr.onnx"))
    x = rng.random((a.ocr_images, *shape), dtype=np.float32)
    np.savez(os.path.join(a.out, "ocr-calib.npz"), x=x)
    print(f"ocr.onnx: {n} parameters; ocr-calib.npz: {x.shape}")

    shape = (3, 224, 224)
    net = torchvision.models.resnet18(num_classes=1000)
    n = sum(p.numel() for p in net.parameters())
    estimate_bn(net, shape, batches=4, batch=16)
    export(net, shape, os.path.join(a.out, "resnet18.onnx"))
    x = rng.random((a.resnet_images, *shape), dtype=np.float32)
    np.savez(os.path.join(a.out, "resnet18-calib.npz"), x=x)
    print(f"resnet18.onnx: {n} parameters; resnet18-calib.npz: {x.shape}")


if __name__ == "__main__":
    main()
