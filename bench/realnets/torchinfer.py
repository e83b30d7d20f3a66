#!/usr/bin/python3
"""PyTorch's side of `realnets -torch`: times PyTorch's inference of the models realnets.py
builds (the same random weights and BatchNorm statistics as the exported ONNX files).

  torchinfer.py NAME... --batches 1,32 --seconds 2 --rounds 3 --threads 2

prints one JSON line per model and batch: samples_per_s, the median of `rounds` rates, each
over `seconds` of back-to-back runs of the eval-mode network traced and frozen
(torch.jit.freeze folds BatchNorm into the convolutions, as the ONNX exporter does).
ONEDNN_MAX_CPU_ISA=AVX2 and ATEN_CPU_CAPABILITY=avx2 in the environment keep PyTorch to its
AVX2 kernels. Kept apart from realnets.py, whose text keys the cache of exported models.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("realnets", os.path.join(HERE, "realnets.py"))
realnets = importlib.util.module_from_spec(spec)
sys.modules["realnets"] = realnets
spec.loader.exec_module(realnets)


def infer(names, batches, seconds, rounds, threads):
    torch.set_num_threads(threads)
    for name in names:
        net, shape, _ = realnets.build(name)
        realnets.estimate_bn(net, shape)
        for b in batches:
            g = torch.Generator().manual_seed(1)
            x = torch.rand((b,) + shape, generator=g)
            with torch.no_grad():
                m = torch.jit.freeze(torch.jit.trace(net, x))
                # The JIT's profiling executor runs the first calls unoptimised and then
                # compiles: ResNet-18 settled after 5 calls (1 thread, 2026-11-29).
                for _ in range(10):
                    m(x)
                rates = []
                for _ in range(rounds):
                    n, t0 = 0, time.perf_counter()
                    while True:
                        m(x)
                        n += 1
                        dt = time.perf_counter() - t0
                        if dt >= seconds:
                            break
                    rates.append(n * b / dt)
            print(json.dumps({"model": name, "batch": b, "samples_per_s": statistics.median(rates),
                              "torch": torch.__version__}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    infer(a.names, [int(b) for b in a.batches.split(",")], a.seconds, a.rounds, a.threads)


if __name__ == "__main__":
    main()
