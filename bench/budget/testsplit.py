#!/usr/bin/python3
"""Splits the Fashion-MNIST test set into calibration data the shipped models never saw and a
held-out half: a seeded permutation of the 10 000 test images, the first half written to
OUT/test-calib.npz and the second to OUT/test-heldout.npz (x: uint8 [N, 1, 28, 28], y: int64).

  bench/budget/testsplit.py OUT [--seed 1]

The shipped fmnist nets were pretrained on the training set, so calibration images drawn from
it are ones the model fitted: validation then overstates the binarized file's quality.
"""
import argparse
import gzip
import os

import numpy as np

FM = "/usr/share/datasets/fashion-mnist"


def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    x = idx(os.path.join(FM, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    y = idx(os.path.join(FM, "t10k-labels-idx1-ubyte.gz"), 8).astype(np.int64)
    p = np.random.default_rng(a.seed).permutation(len(y))
    half = len(y) // 2
    os.makedirs(a.out, exist_ok=True)
    np.savez(os.path.join(a.out, "test-calib.npz"), x=x[p[:half]], y=y[p[:half]])
    np.savez(os.path.join(a.out, "test-heldout.npz"), x=x[p[half:]], y=y[p[half:]])


if __name__ == "__main__":
    main()
