"""Merges bench/paper results.json files (one table's seeds, possibly run in several
processes) and prints each row's mean ± sample sd and the paired 95 % t intervals of
ADMM-Q minus the other rows over the seeds they share.

    /usr/bin/python3 bench/paper/paired.py docs/results/paper/mlp-256/results.json ...
    /usr/bin/python3 bench/paper/paired.py old/results.json:pgd,gd-proj new/results.json
"""
import json
import math
import sys

from scipy.stats import t

acc = {}
for arg in sys.argv[1:]:
    # FILE:ALGO,ALGO takes only those rows of FILE (a file that also holds rows run with
    # other settings).
    path, _, only = arg.partition(":")
    keep = set(only.split(",")) if only else None
    for r in json.load(open(path)):
        if keep is None or r["algo"] in keep:
            acc.setdefault(r["algo"], {})[r["seed"]] = 100 * r["accuracy"]

print("| algorithm | test accuracy, mean ± sd | seeds | per seed |\n|---|---|---|---|")
for a, by in acc.items():
    v = [by[s] for s in sorted(by)]
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0
    print(f"| {a} | {m:.2f} ± {sd:.2f} % | {len(v)} | " + ", ".join(f"{x:.2f}" for x in v) + " |")
print()
for b in acc:
    if b == "admm-q" or "admm-q" not in acc:
        continue
    seeds = sorted(set(acc["admm-q"]) & set(acc[b]))
    d = [acc["admm-q"][s] - acc[b][s] for s in seeds]
    n = len(d)
    m = sum(d) / n
    if n < 2:
        print(f"- admm-q − {b}: {m:+.2f} pp (1 seed, no interval)")
        continue
    h = t.ppf(0.975, n - 1) * math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)) / math.sqrt(n)
    print(f"- admm-q − {b}: {m:+.2f} pp, 95 % paired t interval [{m - h:+.2f}, {m + h:+.2f}] over {n} seeds")
