#!/bin/sh
# The paper's full-width MLP (784-4096×3-10 + BN + Dropout), pretrained by Debian's PyTorch
# on a seeded subset of Fashion-MNIST, then binarized by every algorithm with qtool compare.
# Budget for a shared 2-core machine: pretraining 1 epoch on 5 000 images; binarization on
# 2 000 calibration images and 2 000 held-out test images, 2 outer iterations × 1 epoch,
# one seed, GD+Proj, PGD and ADMM-Q. Usage: bench/binarize/paper.sh (from the repository root).
set -eu
FM=/usr/share/datasets/fashion-mnist
OUT=docs/results/binarize
QTOOL=${QTOOL:-/tmp/qtool-bench}
MODEL=${TMPDIR:-/tmp}/papermlp-4096.onnx
mkdir -p "$OUT"
[ -x "$QTOOL" ] || go build -o "$QTOOL" ./cmd/qtool
[ -f "$MODEL" ] || /usr/bin/python3 bench/binarize/pretrain_papermlp.py "$MODEL" 5000 1 > $OUT/papermlp-4096-pretrain.log 2>&1
$QTOOL compare "$MODEL" --data $FM/train-images-idx3-ubyte.gz --limit 2000 --eval-data $FM/t10k-images-idx3-ubyte.gz \
	--algos gd-proj,pgd,admm-q --seeds 1 --iters 2 --inner-epochs 1 --batch-size 256 --out $OUT/papermlp-4096 --log-every 60s \
	> $OUT/papermlp-4096.txt 2> $OUT/papermlp-4096.log
