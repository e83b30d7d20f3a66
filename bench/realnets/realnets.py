#!/usr/bin/python3
"""The PyTorch side of bench/realnets (main.go in this folder runs it).

  realnets.py export OUTDIR NAME...   writes OUTDIR/NAME.onnx (inference: eval mode, BatchNorm
                                      folded by the exporter, as users ship models) and
                                      OUTDIR/NAME-train.onnx (BatchNorm kept, logits out, for
                                      training), and OUTDIR/NAME.json (input shape, classes)
  realnets.py train NAME... --batch 32 --steps 5 --warmup 2 --threads 2 [--mem]
                                      times PyTorch training steps (zero_grad, training-mode
                                      forward, cross-entropy, backward, Adam) and prints one
                                      JSON line per model; with --mem also the process's
                                      resident memory before building the model (base_rss)
                                      and its high-water mark after the steps (peak_rss), in
                                      bytes: give one model per process for a peak of its own

Weights are random with fixed seeds (torch.manual_seed per model), BatchNorm statistics
estimated on random inputs, so the same command writes the same files. The OCR classifier is
bench/memory/make.py's and the transformer testmodels/corpus/make.py's (imported, so that
they cannot drift).
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def ocr():
    mem = load("memory_make", os.path.join(ROOT, "bench", "memory", "make.py"))

    class Logits(mem.OCRCls):
        # Training needs logits; the softmax of the shipped classifier stays in inference.
        def __init__(self, softmax):
            super().__init__()
            self.softmax = softmax

        def forward(self, x):
            y = self.fc(torch.flatten(self.pool(self.features(x)), 1))
            return torch.softmax(y, 1) if self.softmax else y

    return Logits


def transformer(mask=False):
    corpus = load("corpus_make", os.path.join(ROOT, "testmodels", "corpus", "make.py"))
    return corpus.TransformerCls(mask)


tv = torchvision.models
# name: (constructor, one sample's shape, classes)
MODELS = {
    "resnet18-32": (lambda: tv.resnet18(num_classes=10), (3, 32, 32), 10),
    "resnet18-224": (lambda: tv.resnet18(), (3, 224, 224), 1000),
    "mobilenet_v2": (lambda: tv.mobilenet_v2(), (3, 224, 224), 1000),
    "mobilenet_v2-96": (lambda: tv.mobilenet_v2(num_classes=10), (3, 96, 96), 10),
    "mobilenet_v3_small": (lambda: tv.mobilenet_v3_small(), (3, 224, 224), 1000),
    "efficientnet_b0": (lambda: tv.efficientnet_b0(), (3, 224, 224), 1000),
    "shufflenet_v2": (lambda: tv.shufflenet_v2_x1_0(), (3, 224, 224), 1000),
    "squeezenet": (lambda: tv.squeezenet1_1(), (3, 224, 224), 1000),
    "transformer": (transformer, (16, 64), 10),
    "ocr": (None, (3, 48, 192), 2),  # made by ocr()
}


def build(name, train=False):
    torch.manual_seed(16)
    make, shape, classes = MODELS[name]
    if name == "ocr":
        return ocr()(softmax=not train), shape, classes
    return make(), shape, classes


def estimate_bn(net, shape):
    bns = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    net.train()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(2 if bns else 0):
            net(torch.rand((16,) + shape, generator=g))
    net.eval()


def export(out, names):
    os.makedirs(out, exist_ok=True)
    for name in names:
        net, shape, classes = build(name)
        estimate_bn(net, shape)
        x = torch.rand((1,) + shape)
        dyn = {"x": {0: "n"}, "y": {0: "n"}}
        torch.onnx.export(net, x, os.path.join(out, name + ".onnx"), input_names=["x"], output_names=["y"],
                          dynamic_axes=dyn, opset_version=13, do_constant_folding=True)
        net, _, _ = build(name, train=True)
        estimate_bn(net, shape)
        # PRESERVE on an eval-mode model keeps BatchNorm nodes (not folded into the
        # convolutions), which qtool then runs in training mode, as PyTorch trains.
        torch.onnx.export(net, x, os.path.join(out, name + "-train.onnx"), input_names=["x"], output_names=["y"],
                          dynamic_axes=dyn, opset_version=13, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.PRESERVE)
        params = sum(p.numel() for p in net.parameters())
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"name": name, "shape": list(shape), "classes": classes, "params": params}, f)
        print(f"{name}: {params} parameters", file=sys.stderr)


def proc_status(field):
    """A kB field of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def train(names, batch, steps, warmup, threads, mem=False):
    torch.set_num_threads(threads)
    base = proc_status("VmRSS")
    for name in names:
        net, shape, classes = build(name, train=True)
        g = torch.Generator().manual_seed(1)
        x = torch.rand((batch,) + shape, generator=g)
        y = torch.randint(0, classes, (batch,), generator=g)
        net.train()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            loss_fn(net(x), y).backward()
            opt.step()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        rec = {"model": name, "ms": 1000 * statistics.median(times), "min_ms": 1000 * min(times),
               "torch": torch.__version__}
        if mem:
            rec.update(base_rss=base, peak_rss=proc_status("VmHWM"))
        print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["export", "train"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mem", action="store_true")
    a = ap.parse_args()
    if a.mode == "export":
        export(a.args[0], a.args[1:])
    else:
        train(a.args, a.batch, a.steps, a.warmup, a.threads, a.mem)


if __name__ == "__main__":
    main()
