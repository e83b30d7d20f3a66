"""Prints issue 15's table for `--keep sensitive` in the defaults (run.sh defaults-sensitive)
against the depthwise defaults before it (run.sh defaults-depthwise): validation accuracy of
the exported iterate (the split every choice reads), then the held-out test accuracy with
paired 95 % t intervals over seeds 1-3 (read once for this table; nothing was chosen on it),
the exported file's size and the weights kept.
Usage: defaults_sensitive.py [DIR]"""
import json
import os
import sys

from defaults_runs import interval, mean, print_validation_rows, read_run, std

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults"
SEEDS = [1, 2, 3]
NETS = ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]
# (tag, folder, algo, what it is)
SETTINGS = [
    ("before", "depthwise", "i-admm-q", "ADMM-Q, previous defaults (first,last,depthwise)"),
    ("pgd-before", "depthwise", "pgd", "PGD, previous defaults"),
    ("new", "sensitive", "i-admm-q", "ADMM-Q, new defaults (+ sensitive)"),
    ("pgd-new", "sensitive", "pgd", "PGD, new defaults"),
]


def load(net):
    """{(tag, seed): (validation, held-out, bytes, kept)} and the full-precision accuracy."""
    out, fp = {}, None
    for tag, folder, algo, _ in SETTINGS:
        for s in SEEDS:
            f = os.path.join(d, folder, "%s-%s-%d.json" % (net, algo, s))
            r = read_run(f)
            if r is None:
                continue
            j = json.load(open(f))
            kept = (j.get("sensitive") or {}).get("kept")
            out[(tag, s)] = (r[0], r[1], j["output_bytes"], kept)
            fp = r[2]
    return out, fp


data = {net: load(net) for net in NETS}
print("Validation accuracy of the exported iterate (%), seeds 1 / 2 / 3; 1 000 of the 10 000")
print("calibration images (which the pretrained models were trained on), the split that")
print("`--keep sensitive` measured its drops on.\n")
print("| network | setting | seed 1 | seed 2 | seed 3 | mean |")
print("|---|---|---:|---:|---:|---:|")
print_validation_rows(data, NETS, [(tag, what) for tag, _, _, what in SETTINGS], SEEDS)

print("\nHeld-out test set (10 000 images), mean ± std over seeds 1–3; intervals are paired t")
print("intervals over the seeds; nothing was chosen on these numbers.\n")
print("| network | setting | held-out | − previous defaults' ADMM-Q (pp) | FP − it (pp) | file (bytes, seeds 1/2/3) |")
print("|---|---|---:|---:|---:|---:|")
for net in NETS:
    r, fp = data[net]
    if fp is None:
        continue
    print("| %s | full precision | %.2f | | | |" % (net, fp))
    for tag, _, _, what in SETTINGS:
        seeds = [s for s in SEEDS if (tag, s) in r and ("before", s) in r]
        if len(seeds) < len(SEEDS):
            continue
        held = [r[(tag, s)][1] for s in seeds]
        diff = [r[(tag, s)][1] - r[("before", s)][1] for s in seeds]
        delta = "" if tag == "before" else "%+.2f %s" % (mean(diff), interval(diff))
        size = " / ".join(str(r[(tag, s)][2]) for s in seeds)
        print("| %s | %s | %.2f ± %.2f | %s | %.2f | %s |" % (net, what, mean(held), std(held), delta, fp - mean(held), size))
    if all(("new", s) in r and ("pgd-new", s) in r for s in SEEDS):
        diff = [r[("new", s)][1] - r[("pgd-new", s)][1] for s in SEEDS]
        print("| %s | new defaults: ADMM-Q − PGD (pp) | %+.2f %s | | | |" % (net, mean(diff), interval(diff)))

print("\nWeights `--keep sensitive` kept in float (ADMM-Q runs; largest drop first):\n")
for net in NETS:
    r, _ = data[net]
    for s in SEEDS:
        if ("new", s) in r:
            kept = r[("new", s)][3]
            print("- %s, seed %d: %s" % (net, s, ", ".join(kept) if kept else "none"))

print("\nREADME's defaults-table row for the new defaults (same columns as defaults_table.py).\n")
for net in NETS:
    r, fp = data[net]
    if not all(("new", s) in r and ("pgd-new", s) in r for s in SEEDS):
        continue
    q = [r[("new", s)][1] for s in SEEDS]
    p = [r[("pgd-new", s)][1] for s in SEEDS]
    diff = [a - b for a, b in zip(q, p)]
    wins = (sum(x > 0 for x in diff), sum(x < 0 for x in diff), sum(x == 0 for x in diff))
    print("| %s, new defaults (sensitive kept; seeds 1,2,3) | 3 | %.2f %% | %.2f ± %.2f | %.2f ± %.2f | %+.2f %s | %d / %d / %d | %.2f |" % (
        net, fp, mean(p), std(p), mean(q), std(q), mean(diff), interval(diff), *wins, fp - mean(q)))
