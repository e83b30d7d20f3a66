"""Prints the README's table of issue 15's goals from docs/results/defaults/NET/compare.json
(bench/binarize/run.sh defaults): per network, full precision, PGD and ADMM-Q (mean ± std over
the seeds, held-out test set), ADMM-Q − PGD with its paired 95 % t interval, and the drop of
ADMM-Q from full precision. A network without compare.json is read from its single runs
(run.sh defaults-resnet), the seeds whose two runs finished.
Usage: defaults_table.py [DIR]"""
import json
import os
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults"
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}  # t(0.975; n−1)


def single(net):
    """A net measured one binarize run at a time (run.sh defaults-resnet): the seeds with
    both runs finished, paired as compare pairs them."""
    short = net.replace("fmnist-", "")
    runs = {}
    for a in ["pgd", "i-admm-q"]:
        for seed in [1, 2, 3]:
            f = os.path.join(d, "%s-%s-%d.json" % (short, a, seed))
            if os.path.exists(f) and os.path.getsize(f) > 0:
                runs[(a, seed)] = json.load(open(f))
    seeds = [s for s in [1, 2, 3] if ("pgd", s) in runs and ("i-admm-q", s) in runs]
    if not seeds:
        print("| %s | 0 | not measured (no pair finished) | | | | | |" % net)
        return
    acc = {a: [runs[(a, s)]["binary_accuracy_pct"] for s in seeds] for a in ["pgd", "i-admm-q"]}
    fp = runs[("pgd", seeds[0])]["fp_accuracy_pct"]
    diffs = [x - y for x, y in zip(acc["i-admm-q"], acc["pgd"])]
    n = len(seeds)
    mean = lambda v: sum(v) / len(v)
    std = lambda v: (sum((x - mean(v)) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0
    ci = "no interval (1 seed)"
    if n > 1:
        h = T975[n - 1] * std(diffs) / n ** 0.5
        ci = "[%+.2f, %+.2f]" % (mean(diffs) - h, mean(diffs) + h)
    print("| %s (seeds %s) | %d | %.2f %% | %.2f ± %.2f | %.2f ± %.2f | %+.2f %s | %d / %d / %d | %.2f |" % (
        net, ",".join(map(str, seeds)), n, fp, mean(acc["pgd"]), std(acc["pgd"]), mean(acc["i-admm-q"]),
        std(acc["i-admm-q"]), mean(diffs), ci, sum(x > 0 for x in diffs), sum(x < 0 for x in diffs),
        sum(x == 0 for x in diffs), fp - mean(acc["i-admm-q"])))

print("| network (defaults, 10 000 calibration images, test set held out) | seeds | FP | PGD | ADMM-Q | ADMM-Q − PGD (pp), 95 % paired interval | seeds ADMM-Q > / < / = PGD | FP − ADMM-Q (pp) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for net in ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]:
    path = os.path.join(d, net, "compare.json")
    if not os.path.exists(path):
        single(net)
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
