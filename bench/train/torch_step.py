#!/usr/bin/python3
"""Times PyTorch training steps for bench/train (the qtool side is main.go in this folder).

One step is what train.Fit does: zero the gradients, a training-mode forward pass, softmax
cross-entropy, backward, and an Adam update, on random float32 inputs and labels of a fixed
batch. The architectures are the ones testmodels/make.py exports (imported from it, so
they cannot drift): FMNISTMLP at width 4096 is the paper's MLP 784-4096-4096-4096-10 with
BatchNorm and Dropout; FMNISTCNN and FMNISTResNet are fmnist-cnn and fmnist-resnet.

Prints one JSON line per model: model, batch, threads, ms (median step time over the timed
steps), min_ms (the fastest step), cpu_ms (process CPU time per timed step, all threads),
steps, flops (3 x the forward multiply-adds x 2 of Conv and Linear layers, counted
with forward hooks) and torch's version.

  /usr/bin/python3 bench/train/torch_step.py --model mlp --batch 256 --steps 10
"""
import argparse
import importlib.util
import json
import os
import statistics
import time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "..", "..", "testmodels", "make.py")


def load_make():
    spec = importlib.util.spec_from_file_location("testmodels_make", MAKE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(make, name, width):
    if name == "mlp":
        return make.FMNISTMLP(width=width), (784,)
    if name == "cnn":
        return make.FMNISTCNN(), (1, 28, 28)
    if name == "resnet":
        return make.FMNISTResNet(), (1, 28, 28)
    raise SystemExit("unknown model %r (mlp, cnn or resnet)" % name)


def forward_flops(model, x):
    """Counts 2 x multiply-adds of Conv2d and Linear layers in one forward pass."""
    total = [0]

    def conv_hook(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
        total[0] += 2 * out.numel() * k

    def linear_hook(m, inp, out):
        total[0] += 2 * out.numel() * m.in_features

    hooks = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return total[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--width", type=int, default=4096)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    make = load_make()
    for name in a.model.split(","):
        model, shape = build(make, name, a.width)
        g = torch.Generator().manual_seed(1)
        x = torch.rand((a.batch,) + shape, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
        flops = 3 * forward_flops(model.eval(), x)
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        times = []
        for i in range(a.warmup + a.steps):
            if i == a.warmup:
                cpu0 = time.process_time()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            dt = time.perf_counter() - t0
            if i >= a.warmup:
                times.append(dt)
        cpu = (time.process_time() - cpu0) / a.steps
        print(json.dumps({"model": name, "batch": a.batch, "threads": torch.get_num_threads(),
                          "ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times), "cpu_ms": 1000 * cpu, "steps": a.steps,
                          "flops": flops, "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
