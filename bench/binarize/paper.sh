#!/bin/sh
# The paper's full-width MLP (784-4096×3-10 + BN + Dropout), pretrained by
# bench/papermlp/pretrain.py (Debian's PyTorch, on all 60 000 Fashion-MNIST training images),
# then binarized by GD+Proj, PGD, ADMM-Q, ADMM-R and ADMM-S with qtool compare, 5 seeds,
# ρ = 1e-5 as for the width-256 MLP (the default, 1, makes ADMM-Q behave like PGD).
# Budget for a shared 2-core machine: 2 000 calibration images and 2 000 held-out test
# images, 2 outer iterations × 1 epoch. Usage: bench/binarize/paper.sh (from the repository
# root); ALGOS, SEEDS and NAME select a part of the table (docs/results/binarize made it in
# two parts: ALGOS=gd-proj,pgd,admm-q SEEDS=5, then ALGOS=admm-r,admm-s SEEDS=1).
set -eu
FM=/usr/share/datasets/fashion-mnist
OUT=docs/results/binarize
QTOOL=${QTOOL:-/tmp/qtool-bench}
# The tables were measured with every tensor at the same absolute ρ and the last iterate
# exported; the defaults are now a scale-free ρ and the best held-out iterate.
PAPER_RHO=${PAPER_RHO:---absolute-rho --last-iterate}
MODEL=.cache/papermlp/fmnist-mlp-4096.onnx
ALGOS=${ALGOS:-gd-proj,pgd,admm-q,admm-r,admm-s}
SEEDS=${SEEDS:-5}
NAME=${NAME:-papermlp-4096}
mkdir -p "$OUT"
[ -x "$QTOOL" ] || go build -o "$QTOOL" ./cmd/qtool
[ -f "$MODEL" ] || nice -n 5 /usr/bin/python3 bench/papermlp/pretrain.py --out "$MODEL"
$QTOOL compare $PAPER_RHO "$MODEL" --data $FM/train-images-idx3-ubyte.gz --limit 2000 --eval-data $FM/t10k-images-idx3-ubyte.gz \
	--algos $ALGOS --seeds $SEEDS --rho 1e-5 --iters 2 --inner-epochs 1 --batch-size 256 --out $OUT/$NAME --log-every 60s \
	> $OUT/$NAME.txt 2> $OUT/$NAME.log
