#!/usr/bin/python3
# pretrain.py trains the paper's full-width MNIST network on Fashion-MNIST and exports it to
# ONNX, the "with pre-training" starting point of qtool's paper-table benchmark.
#
# How to run it (from the repository root; Debian's PyTorch, not a pyenv python3):
#
#     apt-get install -y python3-torch python3-onnx python3-sklearn dataset-fashion-mnist
#     nice -n 5 /usr/bin/python3 bench/papermlp/pretrain.py --out .cache/papermlp/fmnist-mlp-4096.onnx
#
# It writes the ONNX file (about 147 MB; .cache/ is git-ignored, never commit it) and, next to
# it, a .json with the full-test-set accuracy and the training settings and time. Then check
# the file with qtool itself; the correct count must equal the JSON's:
#
#     go run ./cmd/qtool eval .cache/papermlp/fmnist-mlp-4096.onnx \
#         --data /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz --json
#
# The network is testmodels/make.py's FMNISTMLP at width 4096 (784-4096-4096-4096-10: Dropout
# .2, 3 x [Linear, BatchNorm1d, ReLU, Dropout .5], Linear 10 + BatchNorm1d; 36 843 550
# trainable parameters), trained and exported by make.py's own functions, so the file follows
# the conventions of testmodels/fmnist-mlp.onnx: input "input" [batch, 784] of pixel/255,
# output "logits", Gemm with transB=1, BatchNorm not fused, Dropout kept in inference form,
# PyTorch parameter names. All seeds are fixed; see bench/papermlp/README.md for the measured
# accuracy and time.

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "testmodels"))
import make  # noqa: E402  testmodels' data loading, model, training and export; main() is guarded

WIDTH = 4096
OPSET = 13  # as fmnist-mlp.onnx
SEED = 20210414  # make.py uses 20210413; every seed here derives from this one
REF_N = 1000  # test images on which make.py's float64 numpy evaluator checks the logits


def parse_args():
    p = argparse.ArgumentParser(description="Pretrains the paper's MNIST network on Fashion-MNIST and exports it to ONNX.")
    p.add_argument("--out", required=True, help="output .onnx path; the .json goes next to it")
    p.add_argument("--width", type=int, default=WIDTH, help="hidden width; other than 4096 only for a quick smoke test")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--train-images", type=int, default=60000,
                   help="train on a seeded subset of this many of the 60 000 training images")
    p.add_argument("--threads", type=int, default=2)
    return p.parse_args()


def progress(every, batch, steps_total):
    """A forward pre-hook that prints the step count and elapsed time every few training
    steps: one epoch of this network takes many minutes, and make.train reports per epoch."""
    state = {"n": 0, "t0": time.time()}

    def hook(module, inputs):
        if not module.training:
            return
        state["n"] += 1
        n = state["n"]
        if n % every == 0 or n == steps_total:
            secs = time.time() - state["t0"]
            print(f"  step {n}/{steps_total} ({n * batch} images) {secs:.0f} s, "
                  f"{secs / n:.2f} s/step", flush=True)

    return hook


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    out = os.path.abspath(args.out)
    out_dir = os.path.dirname(out)
    os.makedirs(out_dir, exist_ok=True)
    # make.export writes its temporary file into make.HERE (testmodels/); send it to the output
    # folder so that a concurrent make.py run in testmodels/ cannot collide with it.
    make.HERE = out_dir
    # make.check_exported caps files at make.py's 2 MB; this network is ~147 MB by design.
    make.MAX_ONNX_BYTES = 200 << 20
    t0 = time.time()

    xtr, ytr, xte, yte = make.load_fmnist()
    xtr, xte = xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)
    if args.train_images < len(ytr):
        idx = np.sort(np.random.default_rng(SEED).permutation(len(ytr))[:args.train_images])
        xtr, ytr = xtr[idx], ytr[idx]

    torch.manual_seed(SEED)
    model = make.FMNISTMLP(width=args.width)
    steps = args.epochs * (len(ytr) // args.batch)
    hook = model.register_forward_pre_hook(progress(10, args.batch, steps))
    print(f"training {make.param_count(model):,} parameters: {args.epochs} epoch(s) of "
          f"{len(ytr)} images, batch {args.batch}, Adam lr {args.lr:g} cosine, "
          f"{args.threads} threads", flush=True)
    secs = make.train(model, xtr, ytr, args.epochs, args.batch, args.lr, SEED + 1)
    hook.remove()

    t = time.time()
    logits = make.predict(model, xte)
    correct = make.count_correct(logits, yte)
    print(f"PyTorch eval-mode test accuracy {correct}/{len(yte)} ({time.time() - t:.0f} s)", flush=True)

    doc = ("qtool paper benchmark model fmnist-mlp-4096: the paper's MNIST network at width "
           f"{args.width}, pretrained on Fashion-MNIST: " + " ".join(make.FMNISTMLP.__doc__.split()))
    m = make.export(model, torch.from_numpy(xte[:2]), OPSET, doc, keep_dropout=True)
    for p in m.metadata_props:
        if p.key == "source":
            p.value = "qtool bench/papermlp/pretrain.py"
    # Asserts the naming, Gemm and BatchNorm conventions and that every PyTorch tensor is the
    # ONNX tensor of its name, runs onnx.checker (full_check) and saves atomically to out.
    size = make.check_exported(f"fmnist-mlp-{args.width}", m, model, out)

    # Independent check of the file: make.py's float64 numpy evaluator of the ONNX graph
    # against PyTorch's logits, on the first REF_N test images (the full set would cost as much
    # as a quarter epoch; qtool eval covers all 10 000).
    t = time.time()
    ref = make.run_onnx_batched(m, xte[:REF_N])
    err = np.abs(ref - logits[:REF_N]) / (1 + np.abs(ref))
    assert err.max() < 1e-4, err.max()
    assert (ref.argmax(1) == logits[:REF_N].argmax(1)).all()
    print(f"exported {size:,} bytes; numpy evaluation of the file on {REF_N} test images: max rel. "
          f"logit difference to PyTorch {err.max():.2e} ({time.time() - t:.0f} s)", flush=True)

    h = hashlib.sha256()
    with open(out, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    make.write_json(os.path.splitext(out)[0] + ".json", dict(
        model=os.path.basename(out), sha256=h.hexdigest(), bytes=size,
        correct=correct, total=len(yte), accuracy=round(correct / len(yte), 6),
        dataset="Fashion-MNIST t10k, pixel/255, PyTorch eval mode, float32",
        width=args.width, params=make.param_count(model), opset=OPSET,
        epochs=args.epochs, train_images=len(ytr), batch=args.batch, steps=steps, lr=args.lr,
        optimizer="Adam, cosine decay to 0 over all steps", seed=SEED, threads=args.threads,
        train_seconds=round(secs), total_seconds=round(time.time() - t0),
        torch=torch.__version__, ref_max_rel_logit_diff=float(err.max()), ref_images=REF_N,
    ))
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
