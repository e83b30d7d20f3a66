#!/usr/bin/env python3
"""The table of docs/results/defaults/sensitive/distill (run.sh defaults-sensitive-distill):
validation accuracy (the split the defaults are decided on) of the exported iterate of each
DIR/<net>-<loss>-<seed>.json, per loss, with the paired difference to cross-entropy.

    python3 bench/binarize/defaults_distill.py DIR
"""
import json
import os
import sys

NETS = ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]
LOSSES = ["ce", "distill", "ce+distill"]
SEEDS = [1, 2, 3]


def validation(path):
    d = json.load(open(path))
    h = d["history"]
    best = [x for x in h if x.get("best")]
    return (best[0] if best else h[-1])["accuracy_pct"]


def main(dir):
    print("# Losses with the current defaults (sensitive weights kept), validation split\n")
    print("Each run: `qtool binarize testmodels/NET.onnx --data train-images-idx3-ubyte.gz --limit 10000 "
          "--eval-data t10k-images-idx3-ubyte.gz --seed S --loss LOSS --json`, every other setting the "
          "default (`bench/binarize/run.sh defaults-sensitive-distill`). Validation accuracy (1 000 "
          "images) of the exported iterate, the split the defaults are decided on; the held-out "
          "figures in the JSONs are not used here.\n")
    print("| net | loss | seed 1 | seed 2 | seed 3 | mean | − ce, per seed |")
    print("|---|---|---:|---:|---:|---:|---|")
    for net in NETS:
        ce = [validation(os.path.join(dir, "%s-ce-%d.json" % (net, s))) for s in SEEDS]
        for loss in LOSSES:
            v = [validation(os.path.join(dir, "%s-%s-%d.json" % (net, loss, s))) for s in SEEDS]
            diff = "" if loss == "ce" else " / ".join("%+.2f" % (a - b) for a, b in zip(v, ce))
            print("| %s | %s | %s | %.2f | %s |" % (net, loss, " | ".join("%.2f" % x for x in v), sum(v) / len(v), diff))


if __name__ == "__main__":
    main(sys.argv[1])
