#!/bin/sh
# Reproduces docs/results/budget: `binarize --budget --max-drop 1` on fmnist-cnn and
# fmnist-resnet against all-binary (--grid auto --keep none), int8 (--keep none) and the
# hand-picked "keep first and last" (`--keep first,last`; the defaults also keep depthwise convolutions), every run with the same training budget,
# and the sensitivity plots.
# Usage: [RUNS="analyze budget ..."] [LIMIT=N] [BUDGET=FLAGS] [EXTRA_BUDGET=FLAGS] bench/budget/run.sh [MODEL...]
# (default: fmnist-cnn fmnist-resnet; RUNS: analyze budget binary int8 keep-first-last).
# MODEL is testmodels/MODEL.onnx or, for resnet18-fmnist and mobilenet_v2-fmnist,
# .cache/budget/MODEL.onnx (bench/budget/pretrain.py writes them). docs/results/budget's
# ResNet-18 rows: LIMIT=1000 BUDGET="--iters 1 --inner-epochs 1" \
#     EXTRA_BUDGET="--budget-grids binary,int8" bench/budget/run.sh resnet18-fmnist
# Needs: apt-get install dataset-fashion-mnist. Runs from the repository root.
#
# SPLIT=test takes the data from the test set instead (bench/budget/testsplit.py): a seeded
# half of its 10 000 images as calibration data (half of that the validation split), the
# other half held out; images the shipped models never trained on, unlike the training set's.
# LIMIT does not apply. OUT=docs/results/budget/testsplit SPLIT=test bench/budget/run.sh
#
# Data: LIMIT (default 4 000) seeded training images as calibration data, half of them the
# validation split binarize carves (--validation 0.5: every choice of --budget is made
# there, and its acceptance margin shrinks with the split's size), and LIMIT seeded test
# images held out (--limit applies to both), measured once per file.
set -eu
FM=/usr/share/datasets/fashion-mnist
TRAIN=$FM/train-images-idx3-ubyte.gz
TEST=$FM/t10k-images-idx3-ubyte.gz
OUT=${OUT:-docs/results/budget}
SPLIT=${SPLIT:-train}
# The files themselves are not kept in the repository.
FILES=${FILES:-/tmp/qtool-budget}
QTOOL=${QTOOL:-/tmp/qtool-bench}
# 4 outer iterations × 2 inner epochs: what fits a shared 2-core machine, for every row.
BUDGET=${BUDGET:---iters 4 --inner-epochs 2}
RUNS=${RUNS:-analyze budget binary int8 keep-first-last}
EXTRA_BUDGET=${EXTRA_BUDGET:-}
mkdir -p "$OUT" "$FILES"
[ -x "$QTOOL" ] || go build -o "$QTOOL" ./cmd/qtool
LIMIT=${LIMIT:-4000}
DATA="--data $TRAIN --eval-data $TEST --limit $LIMIT --seed 1 --validation 0.5"
ANALYZE="--data $TRAIN --limit $LIMIT --seed 1 --validation 0.5"
SETTINGS="$LIMIT calibration and $LIMIT held-out images"
if [ "$SPLIT" = test ]; then
	/usr/bin/python3 bench/budget/testsplit.py "$FILES" --seed 1
	DATA="--data $FILES/test-calib.npz --eval-data $FILES/test-heldout.npz --seed 1 --validation 0.5"
	ANALYZE="--data $FILES/test-calib.npz --seed 1 --validation 0.5"
	SETTINGS="5000 calibration images (half of them validation) and 5000 held-out images, both from the test set"
fi
for m in ${*:-fmnist-cnn fmnist-resnet}; do
	M=testmodels/$m.onnx
	[ -f "$M" ] || M=.cache/budget/$m.onnx
	echo "$SETTINGS; every run \`$BUDGET\`${EXTRA_BUDGET:+; \`--budget\` with \`$EXTRA_BUDGET\`}." > $OUT/$m-settings.txt
	case " $RUNS " in *" analyze "*)
	/usr/bin/time -f "%e s wall, %U s user" $QTOOL analyze $M $ANALYZE \
		--plot $OUT/$m-sensitivity.png --json > $OUT/$m-analyze.json 2> $OUT/$m-analyze.log ;;
	esac
	for run in "budget:--budget --max-drop 1 --max-trials 3 $EXTRA_BUDGET" "binary:--grid auto --keep none" "int8:--grid int8 --keep none" \
		"keep-first-last:--grid auto --keep first,last"; do
		name=${run%%:*}
		flags=${run#*:}
		case " $RUNS " in *" $name "*) ;; *) continue ;; esac
		# Exit 3 (a missed gate or budget) is a result, not a failure of the script.
		/usr/bin/time -f "%e s wall, %U s user" $QTOOL binarize $M $DATA $BUDGET $flags -o $FILES/$m-$name.onnx \
			--json --log-every 120s > $OUT/$m-$name.json 2> $OUT/$m-$name.log || [ $? -eq 3 ]
	done
done
/usr/bin/python3 bench/budget/table.py "$OUT" > "$OUT/README.md"
