"""Prints the README's table of issue 15's goals from docs/results/defaults/NET/compare.json
(bench/binarize/run.sh defaults): per network, full precision, PGD and ADMM-Q (mean ± std over
the seeds, held-out test set), ADMM-Q − PGD with its paired 95 % t interval, and the drop of
ADMM-Q from full precision. Networks whose run has not finished are listed as missing.
Usage: defaults_table.py [DIR]"""
import json
import os
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults"
print("| network (defaults, 10 000 calibration images, test set held out) | seeds | FP | PGD | ADMM-Q | ADMM-Q − PGD (pp), 95 % paired interval | seeds ADMM-Q > / < / = PGD | FP − ADMM-Q (pp) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for net in ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]:
    path = os.path.join(d, net, "compare.json")
    if not os.path.exists(path):
        print("| %s | — | not measured (run did not finish) | | | | | |" % net)
        continue
    c = json.load(open(path))
    rows = {r["algo"]: r for r in c["rows"]}
    pgd, admm = rows["pgd"], rows["i-admm-q"]
    pair = next(p for p in c["pairs"] if {p["a"], p["b"]} == {"pgd", "i-admm-q"})
    sign = 1 if pair["a"] == "i-admm-q" else -1
    lo, hi = (x * sign for x in pair["ci95_pct"])
    lo, hi = min(lo, hi), max(lo, hi)
    wins, losses = (pair["wins"], pair["losses"]) if sign == 1 else (pair["losses"], pair["wins"])
    print("| %s | %d | %.2f %% | %.2f ± %.2f | %.2f ± %.2f | %+.2f [%+.2f, %+.2f] | %d / %d / %d | %.2f |" % (
        net, len(c["seeds"]), c["fp_accuracy_pct"], pgd["accuracy_mean_pct"], pgd["accuracy_std_pct"],
        admm["accuracy_mean_pct"], admm["accuracy_std_pct"], sign * pair["mean_diff_pct"], lo, hi,
        wins, losses, pair["ties"], c["fp_accuracy_pct"] - admm["accuracy_mean_pct"]))
