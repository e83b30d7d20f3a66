#!/bin/sh
# Reproduces docs/results/binarize: the paper's network table on Fashion-MNIST ("with
# pre-training"), the CNN/ResNet grids, distillation without labels and the speed run.
# Usage: bench/binarize/run.sh [mlp60k|mlp60k-rho1|mlp60k-nobn|cnn10k|cnn10k-rho1|distill60k|mlp|mlp-admm|cnn|distill|speed|paper|defaults-rho|defaults-subset|defaults-resnet|defaults|defaults-tune|defaults-ste|defaults-depthwise-tune|defaults-depthwise|defaults-augment|defaults-ste-distill-tune|defaults-rho-remeasure|defaults-unseen|defaults-unseen-growing|torchvision-unseen|defaults-sensitive-tune|defaults-sensitive|sensitive-unlabelled|defaults-sensitive-distill]...
# (default: all but the last eighteen, which write docs/results/defaults)
# Needs: apt-get install dataset-fashion-mnist. Runs from the repository root.
set -eu
FM=/usr/share/datasets/fashion-mnist
TRAIN=$FM/train-images-idx3-ubyte.gz
TEST=$FM/t10k-images-idx3-ubyte.gz
OUT=docs/results/binarize
QTOOL=${QTOOL:-/tmp/qtool-bench}
# The tables were measured with every weight binarized, every tensor at the same absolute ρ
# and the last iterate exported; the defaults now keep the first and last layers in float,
# take ρ relative to the gradient and export the best validation iterate (issue 15).
PAPER_RHO=${PAPER_RHO:---absolute-rho --last-iterate --keep none}
mkdir -p "$OUT"
[ -x "$QTOOL" ] || go build -o "$QTOOL" ./cmd/qtool
sections=${*:-"mlp60k mlp60k-rho1 mlp60k-nobn cnn10k cnn10k-rho1 distill60k mlp mlp-admm cnn distill speed paper"}
# tune_run NET TAG SEED ARGS... (sections defaults-tune, defaults-depthwise-tune): one
# binarize run of NET into $D with ARGS changed from the defaults; tune.txt gets its line
# without the held-out column, which no choice reads.
tune_run() {
	net=$1 tag=$2 seed=$3
	shift 3
	$QTOOL binarize testmodels/$net.onnx --data $TRAIN --limit 10000 --eval-data $TEST --seed $seed \
		-o /tmp/defaults-bench-tune.onnx --json "$@" > $D/$net-$tag-$seed.json 2> $D/$net-$tag-$seed.log
	python3 bench/binarize/summary.py $D/$net-$tag-$seed.json $net "$tag" | sed -E 's/ held-out=[0-9.]+//' >> $D/tune.txt
}
for s in $sections; do
case $s in
mlp60k)
	# Table 1 shape with the paper's calibration set: all 60 000 training images, the whole
	# test set held out, 5 seeds, every algorithm, 4 outer iterations × 5 inner epochs (the
	# paper: 8 × 5), ρ = 1e-5 (the best measured for this network; the default is 1).
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --eval-data $TEST --rho 1e-5 \
		--seeds 5 --iters 4 --out $OUT/fmnist-mlp-60k --log-every 60s > $OUT/fmnist-mlp-60k.txt 2> $OUT/fmnist-mlp-60k.log
	;;
mlp)
	# Table 1 shape on testmodels/fmnist-mlp.onnx: 10 000 calibration images (seeded subset
	# of the training set), the whole test set held out, 5 seeds, every algorithm.
	# Budget: 4 outer iterations × 5 inner epochs (the paper: 8 × 5 on 60 000 images).
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --limit 10000 --eval-data $TEST \
		--seeds 5 --iters 4 --out $OUT/fmnist-mlp --log-every 60s > $OUT/fmnist-mlp.txt 2> $OUT/fmnist-mlp.log
	;;
mlp-admm)
	# The ADMM rows of the mlp table again, with the default start x⁰ = y⁰ (--start grid);
	# the mlp section above ran before that default, with --start pretrained.
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --limit 10000 --eval-data $TEST \
		--algos admm-q,admm-r,admm-s --seeds 5 --iters 4 --out $OUT/fmnist-mlp-admm --log-every 60s > $OUT/fmnist-mlp-admm.txt 2> $OUT/fmnist-mlp-admm.log
	;;
cnn)
	# fmnist-cnn and fmnist-resnet: ADMM-Q against PGD on both binary grids, 1 000
	# calibration images, 1 000 held-out test images (--limit applies to both), 1 seed,
	# 2 outer iterations × 2 inner epochs: what fits a shared 2-core machine.
	for m in fmnist-cnn fmnist-resnet; do
		for g in binary binary-channel; do
			$QTOOL compare $PAPER_RHO testmodels/$m.onnx --data $TRAIN --limit 1000 --eval-data $TEST --grid $g \
				--algos pgd,admm-q --seeds 1 --iters 2 --inner-epochs 2 --out $OUT/$m-$g --log-every 60s > $OUT/$m-$g.txt 2> $OUT/$m-$g.log
		done
	done
	;;
mlp60k-rho1)
	# ADMM-Q at the default ρ = 1, with labels and by distillation, 2 seeds.
	for loss in ce distill; do
		$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --eval-data $TEST --loss $loss --rho 1 \
			--algos admm-q --seeds 2 --iters 4 --out $OUT/fmnist-mlp-60k-rho1-$loss --log-every 60s > $OUT/fmnist-mlp-60k-rho1-$loss.txt 2> $OUT/fmnist-mlp-60k-rho1-$loss.log
	done
	;;
mlp60k-nobn)
	# GD+Proj against ADMM-Q as the paper's code runs them: without re-estimating the BatchNorm
	# statistics after binarization.
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --eval-data $TEST --no-bn-recalib --rho 1e-5 \
		--algos gd-proj,admm-q --seeds 2 --iters 4 --out $OUT/fmnist-mlp-60k-nobn --log-every 60s > $OUT/fmnist-mlp-60k-nobn.txt 2> $OUT/fmnist-mlp-60k-nobn.log
	;;
cnn10k)
	# fmnist-cnn and fmnist-resnet at a larger budget: 10 000 calibration images, the whole
	# test set held out (--limit applies to both), 4 outer iterations × 3 inner epochs.
	for m in fmnist-cnn fmnist-resnet; do
		for g in binary binary-channel; do
			$QTOOL compare $PAPER_RHO testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST --grid $g \
				--algos pgd,admm-q --seeds 1 --iters 4 --inner-epochs 3 --out $OUT/$m-$g-10k --log-every 60s > $OUT/$m-$g-10k.txt 2> $OUT/$m-$g-10k.log
		done
	done
	;;
cnn10k-rho1)
	# ADMM-Q on the convolutional nets with ρ = 1: their weights want a ρ five orders of
	# magnitude above the MLP's (measured on fmnist-cnn, binary grid: ρ = 1e-5, 1e-3, 0.1, 1
	# give 75.7, 76.4, 71.5, 83.1 %).
	for m in fmnist-cnn fmnist-resnet; do
		for g in binary binary-channel; do
			$QTOOL compare $PAPER_RHO testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST --grid $g --rho 1 \
				--algos admm-q --seeds 1 --iters 4 --inner-epochs 3 --out $OUT/$m-$g-10k-rho1 --log-every 60s > $OUT/$m-$g-10k-rho1.txt 2> $OUT/$m-$g-10k-rho1.log
		done
	done
	;;
distill60k)
	# Without labels, at the budgets of mlp60k and cnn10k: ADMM-Q trained by distillation
	# from the FP model (the labels only measure accuracy).
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --eval-data $TEST --loss distill --rho 1e-5 \
		--algos admm-q --seeds 3 --iters 4 --out $OUT/fmnist-mlp-60k-distill --log-every 60s > $OUT/fmnist-mlp-60k-distill.txt 2> $OUT/fmnist-mlp-60k-distill.log
	for m in fmnist-cnn fmnist-resnet; do
		$QTOOL compare $PAPER_RHO testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST --grid binary-channel --loss distill --rho 1 \
			--algos admm-q --seeds 1 --iters 4 --inner-epochs 3 --out $OUT/$m-distill-10k --log-every 60s > $OUT/$m-distill-10k.txt 2> $OUT/$m-distill-10k.log
	done
	;;
distill)
	# Without labels: the same runs trained by distillation from the FP model (the labels
	# are only used to measure accuracy).
	$QTOOL compare $PAPER_RHO testmodels/fmnist-mlp.onnx --data $TRAIN --limit 10000 --eval-data $TEST --loss distill \
		--algos admm-q --seeds 3 --iters 4 --out $OUT/fmnist-mlp-distill --log-every 60s > $OUT/fmnist-mlp-distill.txt 2> $OUT/fmnist-mlp-distill.log
	for m in fmnist-cnn fmnist-resnet; do
		$QTOOL compare $PAPER_RHO testmodels/$m.onnx --data $TRAIN --limit 1000 --eval-data $TEST --grid binary-channel --loss distill \
			--algos admm-q --seeds 1 --iters 2 --inner-epochs 2 --out $OUT/$m-distill --log-every 60s > $OUT/$m-distill.txt 2> $OUT/$m-distill.log
	done
	;;
speed)
	# Wall time of the default algorithm on 10 000 calibration images (the paper's 8 × 5 epochs).
	for blas in ${BLAS_MODES:-openblas}; do
		/usr/bin/time -f "%e s wall, %U s user, %M KiB max RSS" env QTOOL_BLAS=$blas $QTOOL binarize $PAPER_RHO testmodels/fmnist-mlp.onnx \
			--data $TRAIN --limit 10000 --eval-data $TEST -o /tmp/qtool-speed.onnx --json --log-every 60s \
			> $OUT/speed-$blas.json 2> $OUT/speed-$blas.log
	done
	;;
paper)
	QTOOL=$QTOOL bench/binarize/paper.sh
	;;
defaults-rho)
	# Issue 15: ρ̄ of --rho-scale gradient (the default) from a ladder, decided on the
	# validation split alone: 10 000 calibration images (9 000 train, 1 000 validation),
	# seeds 1–3 (cnn: 1–2), everything else default. The held-out test set is measured as
	# every run does, but the choice reads the validation column only.
	D=docs/results/defaults
	mkdir -p $D
	: > $D/rho.txt
	for m in fmnist-mlp fmnist-cnn; do
		seeds="1 2 3"; [ $m = fmnist-cnn ] && seeds="1 2"
		for seed in $seeds; do
			for rho in pgd 0.1 1 10; do
				if [ $rho = pgd ]; then a="--algo pgd"; else a="--rho $rho"; fi
				$QTOOL binarize testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST $a \
					--seed $seed -o /tmp/defaults-bench.onnx --json > $D/rho-$m-$rho-$seed.json 2>> $D/rho.log
				python3 bench/binarize/summary.py $D/rho-$m-$rho-$seed.json $m $rho >> $D/rho.txt
			done
		done
	done
	;;
defaults-subset)
	# The no-argument run (embedded fmnist-mlp, its 1000-image subset: 600 train / 200
	# validation / 200 held-out) against PGD, seeds 1–3.
	D=docs/results/defaults
	mkdir -p $D
	: > $D/subset.txt
	for seed in 1 2 3; do
		for a in i-admm-q pgd; do
			$QTOOL binarize --algo $a --seed $seed -o /tmp/defaults-bench.onnx --json > $D/subset-$a-$seed.json 2>> $D/subset.log
			python3 bench/binarize/summary.py $D/subset-$a-$seed.json fmnist-mlp-subset default >> $D/subset.txt
		done
	done
	;;
defaults-resnet)
	# fmnist-resnet's pairs of the defaults section one binarize run at a time (PGD, then
	# ADMM-Q, seed by seed), so that a budget that ends early still leaves whole pairs.
	D=docs/results/defaults
	mkdir -p $D
	for seed in 1 2 3; do
		for a in pgd i-admm-q; do
			$QTOOL binarize testmodels/fmnist-resnet.onnx --data $TRAIN --limit 10000 --eval-data $TEST --algo $a \
				--seed $seed -o /tmp/defaults-bench-resnet.onnx --json > $D/resnet-$a-$seed.json 2>> $D/resnet.log
			python3 bench/binarize/summary.py $D/resnet-$a-$seed.json fmnist-resnet default >> $D/resnet.txt
		done
	done
	;;
defaults-tune)
	# Issue 15: why fmnist-resnet loses 5 pp at the defaults. One setting changed at a time
	# from the defaults, seed 1, 10 000 calibration images; tune.txt keeps the validation
	# column only (the held-out accuracy is in the JSON but no choice reads it). The runs
	# with distillation plus --lr 0.05, and STE with distillation, were stopped after 3
	# iterations for compute (their logs and tune.txt say so).
	D=docs/results/defaults/tune
	mkdir -p $D
	tune_run fmnist-resnet lr0.05 1 --lr 0.05
	tune_run fmnist-resnet distill 1 --loss distill
	tune_run fmnist-resnet rho0.01 1 --rho 0.01
	tune_run fmnist-resnet rho0.1 1 --rho 0.1
	tune_run fmnist-resnet rho0.05g2 1 --rho 0.05 --rho-growth 2
	tune_run fmnist-resnet balance 1 --balance-rho
	;;
defaults-rho-remeasure)
	# Issue 15: ρ's factors measured again at every iteration's y (--rho-remeasure) rather
	# than once at y⁰, the defaults otherwise, seed 1 on the three nets, and the defaults
	# themselves on the same machine (runs differ between CPUs); validation column only.
	D=docs/results/defaults/tune
	mkdir -p $D
	for m in fmnist-resnet fmnist-cnn fmnist-mlp; do
		tune_run $m remeasure 1 --rho-remeasure
		tune_run $m defaults-here 1
	done
	;;
defaults-ste)
	# Issue 15: --algo ste (BinaryConnect) with everything else default, seeds 1–3 on the
	# three nets, and on the no-argument subset against PGD; bench/binarize/defaults_ste.py
	# prints the table against the PGD and ADMM-Q runs of the defaults sections.
	D=docs/results/defaults/tune
	mkdir -p $D
	for m in fmnist-mlp fmnist-cnn fmnist-resnet; do
		for seed in 1 2 3; do
			$QTOOL binarize testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST --seed $seed --algo ste \
				-o /tmp/defaults-bench-tune.onnx --json > $D/$m-ste-$seed.json 2> $D/$m-ste-$seed.log
			python3 bench/binarize/summary.py $D/$m-ste-$seed.json $m ste | sed -E 's/ held-out=[0-9.]+//' >> $D/tune.txt
		done
	done
	for seed in 1 2 3; do
		for a in ste pgd; do
			$QTOOL binarize --algo $a --seed $seed -o /tmp/defaults-bench-tune.onnx --json > $D/subset-$a-$seed.json 2>> $D/subset.log
			python3 bench/binarize/summary.py $D/subset-$a-$seed.json fmnist-mlp-subset default | sed -E 's/ held-out=[0-9.]+//' >> $D/tune.txt
		done
	done
	python3 bench/binarize/defaults_ste.py > $D/table.md
	;;
defaults-depthwise-tune)
	# Issue 15: what closes fmnist-resnet's gap, on the validation split (tune.txt keeps
	# that column only): keeping its depthwise convolutions in float (now the default; the
	# runs tagged keepdw pass it explicitly), distillation, STE, their combinations, a lower
	# rate, a cosine schedule, and int8 STE as a stand-in for fine-tuning in float with the
	# same budget. Distillation and STE with distillation on fmnist-mlp and fmnist-cnn too.
	D=docs/results/defaults/tune
	mkdir -p $D
	DW="--keep first,last,depthwise"
	tune_run fmnist-resnet ste-keepdw 1 --algo ste $DW
	tune_run fmnist-resnet ste-cosine 1 --algo ste --lr-schedule cosine
	tune_run fmnist-resnet ste-distill 1 --algo ste --loss distill
	tune_run fmnist-resnet ste-int8 1 --algo ste --grid int8
	tune_run fmnist-resnet keepdw-lr0.001 1 $DW --lr 0.001
	tune_run fmnist-resnet ste-keepdw-lr0.001 1 --algo ste $DW --lr 0.001
	tune_run fmnist-resnet keepdw-distill-T4 1 $DW --loss distill --temperature 4
	tune_run fmnist-resnet ste-int8-distill 1 --algo ste --grid int8 --loss distill
	tune_run fmnist-resnet ste-keepdw-distill-lr0.003 1 --algo ste $DW --loss distill --lr 0.003
	tune_run fmnist-resnet keepdw-lr0.05 1 $DW --lr 0.05
	tune_run fmnist-resnet keepdw-distill-lr0.05 1 $DW --loss distill --lr 0.05
	for seed in 1 2 3; do
		tune_run fmnist-resnet keepdw $seed $DW
		tune_run fmnist-resnet keepdw-distill $seed $DW --loss distill
		tune_run fmnist-resnet ste-keepdw-distill $seed --algo ste $DW --loss distill
		for m in fmnist-mlp fmnist-cnn; do
			tune_run $m distill $seed --loss distill
			tune_run $m ste-distill $seed --algo ste --loss distill
		done
	done
	;;
defaults-depthwise)
	# Issue 15: the defaults once depthwise convolutions stay in float, ADMM-Q and PGD on
	# fmnist-resnet, ADMM-Q on the other two, seeds 1–3, the whole test set held out and read once per run;
	# bench/binarize/defaults_depthwise.py prints the table against the previous defaults
	# (defaults / defaults-resnet). fmnist-mlp and fmnist-cnn have no depthwise weight:
	# their runs check that nothing changed there.
	D=docs/results/defaults/depthwise
	mkdir -p $D
	one() { # NET ALGO SEED
		$QTOOL binarize testmodels/$1.onnx --data $TRAIN --limit 10000 --eval-data $TEST --algo $2 \
			--seed $3 -o /tmp/defaults-bench-dw.onnx --json > $D/$1-$2-$3.json 2> $D/$1-$2-$3.log
	}
	for seed in 1 2 3; do
		one fmnist-resnet i-admm-q $seed
		one fmnist-resnet pgd $seed
		one fmnist-mlp i-admm-q $seed
		one fmnist-cnn i-admm-q $seed
	done
	python3 bench/binarize/defaults_depthwise.py > $D/table.md
	;;
defaults-sensitive-tune)
	# Issue 15: fmnist-resnet's validation split with the weights whose bare projection
	# costs most (qtool analyze) kept by name on top of first,last,depthwise, seed 1; then
	# on seeds 2 and 3 the weights --keep sensitive picks there (what decided the default).
	D=docs/results/defaults/tune
	mkdir -p $D
	K=first,last,depthwise
	tune_run fmnist-resnet keepc1 1 --keep $K,block1.conv1.weight
	tune_run fmnist-resnet keepc1pw 1 --keep $K,block1.conv1.weight,block1.pw.weight
	tune_run fmnist-resnet keepshort 1 --keep $K,block1.short.weight,block3.short.weight
	tune_run fmnist-resnet sens 2 --keep $K,block1.pw.weight,block1.conv1.weight,block1.short.weight
	tune_run fmnist-resnet sens 3 --keep $K,block1.pw.weight,block1.conv1.weight,block2.pw.weight,block1.short.weight
	# Then the new defaults (sensitive kept) with one setting changed, seed 1.
	tune_run fmnist-resnet sens-rho0.1 1 --rho 0.1
	tune_run fmnist-resnet sens-rho0.3 1 --rho 0.3
	tune_run fmnist-resnet sens-ste 1 --algo ste
	tune_run fmnist-resnet sens-pgd 1 --algo pgd
	;;
defaults-sensitive)
	# Issue 15: the defaults once --keep sensitive joined them (the weights whose bare
	# projection alone costs significant validation accuracy stay in float, at most a
	# quarter of the binarized values), ADMM-Q and PGD on fmnist-resnet, ADMM-Q on the
	# other two, seeds 1–3, the whole test set held out and read once per run;
	# bench/binarize/defaults_sensitive.py prints the table against the depthwise defaults
	# (defaults-depthwise). On fmnist-mlp and fmnist-cnn nothing is kept: their runs check
	# that nothing changed there.
	D=docs/results/defaults/sensitive
	mkdir -p $D
	one() { # NET ALGO SEED
		$QTOOL binarize testmodels/$1.onnx --data $TRAIN --limit 10000 --eval-data $TEST --algo $2 \
			--seed $3 -o /tmp/defaults-bench-sens.onnx --json > $D/$1-$2-$3.json 2> $D/$1-$2-$3.log
	}
	for seed in 1 2 3; do
		one fmnist-resnet i-admm-q $seed
		one fmnist-resnet pgd $seed
		one fmnist-mlp i-admm-q $seed
		one fmnist-cnn i-admm-q $seed
	done
	python3 bench/binarize/defaults_sensitive.py > $D/table.md
	;;
defaults-augment)
	# Issue 15: whether augmenting the training images closes fmnist-resnet's gap
	# (validation first, seed 1; flip on seeds 1–3); bench/binarize/defaults_augment.py
	# prints the table against the defaults and STE with distillation.
	D=docs/results/defaults/augment
	mkdir -p $D
	aug() { # TAG SEED ARGS...
		tag=$1 seed=$2
		shift 2
		$QTOOL binarize testmodels/fmnist-resnet.onnx --data $TRAIN --limit 10000 --eval-data $TEST --seed $seed \
			-o /tmp/defaults-bench-aug.onnx --json "$@" > $D/fmnist-resnet-$tag-$seed.json 2> $D/fmnist-resnet-$tag-$seed.log
	}
	aug shift2 1 --augment shift
	aug shift2-ste-distill 1 --augment shift --algo ste --loss distill
	aug shift1-ste-distill 1 --augment shift=1 --algo ste --loss distill
	aug flip-ste-distill 1 --augment flip --algo ste --loss distill
	for seed in 1 2 3; do
		aug flip $seed --augment flip
	done
	python3 bench/binarize/defaults_augment.py > $D/table.md
	;;
defaults-ste-distill-tune)
	# Issue 15: whether STE with distillation (the best recipe found for fmnist-resnet, 2.33 pp
	# short of the 2 pp goal) gains from its own settings: temperature, batch size, rate,
	# schedule, and twice the budget; validation split, seed 1 (tune.txt).
	D=docs/results/defaults/tune
	mkdir -p $D
	SD="--algo ste --loss distill"
	tune_run fmnist-resnet sd 1 $SD
	tune_run fmnist-resnet sd-T2 1 $SD --temperature 2
	tune_run fmnist-resnet sd-bs64 1 $SD --batch-size 64
	tune_run fmnist-resnet sd-bs64-lr0.003 1 $SD --batch-size 64 --lr 0.003
	tune_run fmnist-resnet sd-cosine 1 $SD --lr-schedule cosine
	tune_run fmnist-resnet sd-lr0.02 1 $SD --lr 0.02
	tune_run fmnist-resnet sd-iters16 1 $SD --iters 16
	# The doubled budget on seeds 2 and 3, and the defaults (ADMM-Q) at it.
	for seed in 2 3; do
		tune_run fmnist-resnet sd $seed $SD
		tune_run fmnist-resnet sd-iters16 $seed $SD --iters 16
	done
	tune_run fmnist-resnet iters16 1 --iters 16
	;;
defaults-sensitive-distill)
	# Distillation and cross-entropy with distillation mixed in (their mean) against
	# cross-entropy, with the current defaults (sensitive weights kept), read on the
	# validation split only.
	D=docs/results/defaults/sensitive/distill
	mkdir -p $D
	for net in fmnist-mlp fmnist-cnn fmnist-resnet; do
		for seed in 1 2 3; do
			for loss in ce distill ce+distill; do
				$QTOOL binarize testmodels/$net.onnx --data $TRAIN --limit 10000 --eval-data $TEST --seed $seed --loss $loss \
					-o /tmp/defaults-bench-distill.onnx --json > $D/$net-$loss-$seed.json 2> $D/$net-$loss-$seed.log
			done
		done
	done
	python3 bench/binarize/defaults_distill.py $D > $D/table.md
	;;
sensitive-unlabelled)
	# --keep sensitive without labels (drops expected from the full-precision model's own
	# probabilities) against with them, on the same validation splits; then fmnist-resnet
	# binarized without labels with the defaults and with the keep they had before (first,
	# last, depthwise: sensitive kept nothing without labels), the test set held out.
	D=docs/results/defaults/sensitive/unlabelled
	U=$(mktemp -d)
	mkdir -p $D
	# The images alone: without the labels-idx1 file next to them the data have no labels.
	cp $TRAIN $U/
	for seed in 1 2 3; do
		for m in fmnist-mlp fmnist-resnet; do
			# The sensitivities are measured before training: one short iteration is enough.
			$QTOOL binarize testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST --seed $seed \
				--iters 1 --inner-epochs 1 -o $U/out.onnx --json > $D/$m-labels-$seed.json 2> $D/$m-labels-$seed.log
			$QTOOL binarize testmodels/$m.onnx --data $U/$(basename $TRAIN) --limit 10000 --eval-data $TEST --seed $seed \
				--iters 1 --inner-epochs 1 -o $U/out.onnx --json > $D/$m-nolabels-$seed.json 2> $D/$m-nolabels-$seed.log
		done
		$QTOOL binarize testmodels/fmnist-resnet.onnx --data $U/$(basename $TRAIN) --limit 10000 --eval-data $TEST \
			--seed $seed -o $U/out.onnx --json > $D/resnet-defaults-$seed.json 2> $D/resnet-defaults-$seed.log
		$QTOOL binarize testmodels/fmnist-resnet.onnx --data $U/$(basename $TRAIN) --limit 10000 --eval-data $TEST \
			--seed $seed --keep first,last,depthwise -o $U/out.onnx --json > $D/resnet-keep-fld-$seed.json 2> $D/resnet-keep-fld-$seed.log
	done
	rm -rf $U
	python3 bench/binarize/sensitive_unlabelled.py $D > $D/table.md
	;;
defaults)
	# Issue 15's goals with the defaults and no per-network flags: ADMM-Q against PGD on the
	# three nets, 10 000 calibration images, the whole test set held out, seeds 1–3.
	D=docs/results/defaults
	mkdir -p $D
	for m in fmnist-mlp fmnist-cnn fmnist-resnet; do
		$QTOOL compare testmodels/$m.onnx --data $TRAIN --limit 10000 --eval-data $TEST \
			--algos pgd,admm-q --seeds 3 --out $D/$m --log-every 60s > $D/$m.txt 2> $D/$m.log
	done
	python3 bench/binarize/defaults_table.py $D > $D/table.md
	;;
defaults-unseen)
	# Issue 15: the ρ̄ ladder again on calibration data the shipped models never trained on
	# (their validation images otherwise come from their own pretraining set, which favours
	# weights that stay where pretraining left them): half of the test set (5 000 images:
	# 4 000 train, 1 000 validation), the other half held out (bench/budget/testsplit.py,
	# seed 1), seeds 1-3, everything else default; defaults_unseen.py prints the table.
	D=docs/results/defaults/unseen
	U=$(mktemp -d)
	mkdir -p $D
	python3 bench/budget/testsplit.py $U
	for m in fmnist-resnet fmnist-cnn fmnist-mlp; do
		for seed in 1 2 3; do
			for tag in defaults pgd rho0.3 rho0.1 rho0.03 rho0.01; do
				case $tag in defaults) a="";; pgd) a="--algo pgd";; *) a="--rho ${tag#rho}";; esac
				$QTOOL binarize testmodels/$m.onnx --data $U/test-calib.npz --eval-data $U/test-heldout.npz \
					--seed $seed $a -o $U/out.onnx --json > $D/$m-$tag-$seed.json 2> $D/$m-$tag-$seed.log
			done
		done
	done
	rm -rf $U
	python3 bench/binarize/defaults_unseen.py $D > $D/table.md
	;;
defaults-unseen-growing)
	# Issue 15's "or an increasing schedule", on the same unseen split as defaults-unseen:
	# ρ̄ starting small enough to flip signs and growing every iteration until they lock
	# (0.01 ×3: 0.01 → 22 by iteration 8; 0.1 ×2: 0.1 → 12.8), seeds 1-3, every weight.
	D=docs/results/defaults/unseen
	U=$(mktemp -d)
	mkdir -p $D
	python3 bench/budget/testsplit.py $U
	for m in fmnist-resnet fmnist-cnn fmnist-mlp; do
		for seed in 1 2 3; do
			for tag in grow0.01x3 grow0.1x2; do
				r=${tag#grow}
				$QTOOL binarize testmodels/$m.onnx --data $U/test-calib.npz --eval-data $U/test-heldout.npz \
					--seed $seed --rho ${r%x*} --rho-growth ${r#*x} -o $U/out.onnx --json > $D/$m-$tag-$seed.json 2> $D/$m-$tag-$seed.log
			done
		done
	done
	rm -rf $U
	python3 bench/binarize/defaults_unseen.py $D fmnist-mlp,fmnist-cnn,fmnist-resnet \
		defaults,pgd,rho0.3,rho0.1,rho0.03,rho0.01,grow0.01x3,grow0.1x2 > $D/table.md
	;;
torchvision-unseen)
	# Issue 15: the defaults on a real architecture whose exporter folded BatchNorm into the
	# convolutions (so no normalisation follows any weight): torchvision ResNet-18 and
	# MobileNetV2 pretrained on 20 000 Fashion-MNIST training images (bench/budget/pretrain.py), the
	# calibration data it never saw as in defaults-unseen, seeds 1-3, 8 iterations × 1
	# epoch (the default is 8 × 5: a 2-core budget), PGD and ADMM-Q with and without the
	# growth of ρ where no normalisation follows.
	D=docs/results/defaults/unseen/torchvision
	U=$(mktemp -d)
	mkdir -p $D
	python3 bench/budget/testsplit.py $U
	for m in resnet18 mobilenet_v2; do
		[ -s .cache/budget/$m-fmnist.onnx ] || python3 bench/budget/pretrain.py $m
		for seed in 1 2 3; do
			for tag in growth constant pgd; do
				case $tag in growth) a="";; constant) a="--rho-growth-unnormalized 1";; pgd) a="--algo pgd";; esac
				$QTOOL binarize .cache/budget/$m-fmnist.onnx --data $U/test-calib.npz --eval-data $U/test-heldout.npz \
					--seed $seed --iters 8 --inner-epochs 1 $a -o $U/out.onnx --json > $D/$m-$tag-$seed.json 2> $D/$m-$tag-$seed.log
			done
		done
	done
	rm -rf $U
	python3 bench/binarize/defaults_unseen.py $D resnet18,mobilenet_v2 pgd,constant,growth > $D/table.md
	;;
esac
done
