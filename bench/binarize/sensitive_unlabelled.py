#!/usr/bin/env python3
"""The table of docs/results/defaults/sensitive/unlabelled (run.sh sensitive-unlabelled).

Reads DIR/<net>-labels-<seed>.json and DIR/<net>-nolabels-<seed>.json (the same validation
split scored with and without labels: what --keep sensitive measured and kept each way)
and DIR/resnet-{defaults,keep-fld}-<seed>.json (fmnist-resnet binarized without labels with
the defaults, and with the keep before them, first,last,depthwise; held-out accuracy on the
test set), and prints markdown.

    python3 bench/binarize/sensitive_unlabelled.py DIR
"""
import json
import math
import os
import sys

NETS = ["fmnist-mlp", "fmnist-resnet"]
SEEDS = [1, 2, 3]


def load(path):
    with open(path) as f:
        return json.load(f)


def held_out(d):
    """The exported model's accuracy on the held-out --eval-data, in percent."""
    if d.get("accuracy_split") != "held-out":
        sys.exit("%s: accuracy on the %s split, want held-out" % (d.get("output"), d.get("accuracy_split")))
    return float(d["binary_accuracy_pct"])


def main(dir):
    print("# `--keep sensitive` without labels: expected drops against labelled ones\n")
    print("Each weight projected alone (BatchNorm re-estimated) on the validation split (1 000 of "
          "10 000 training images, seeded by `--seed`), scored with the labels (drop, and its "
          "one-sided 95 % lower bound) and without them (the drop the full-precision model's own "
          "softmax expects, and its bound). Percentage points; **kept** marks what each rule "
          "kept (share ≤ 0.25 of the binarized values).\n")
    print("| net | seed | weight | values | drop (labels) | lower | expected drop (no labels) | lower | disagree | kept, labels | kept, no labels |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|")
    same = 0
    for net in NETS:
        for seed in SEEDS:
            lab = load(os.path.join(dir, "%s-labels-%d.json" % (net, seed)))["sensitive"]
            unl = load(os.path.join(dir, "%s-nolabels-%d.json" % (net, seed)))["sensitive"]
            if lab.get("basis") != "labels" or unl.get("basis") != "expected":
                sys.exit("%s seed %d: bases %s and %s, want labels and expected" % (net, seed, lab.get("basis"), unl.get("basis")))
            if sorted(lab["kept"]) == sorted(unl["kept"]):
                same += 1
            by = {l["name"]: l for l in unl["layers"]}
            for l in lab["layers"]:
                u = by[l["name"]]
                print("| %s | %d | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s |" % (
                    net, seed, l["name"], l["params"], l["drop_pct"], l["drop_lower95_pct"],
                    u["drop_pct"], u["drop_lower95_pct"], u["disagree_pct"],
                    "**kept**" if l["kept"] else "", "**kept**" if u["kept"] else ""))
    print("\nThe same weights kept with and without labels on %d of %d splits.\n" % (same, len(NETS) * len(SEEDS)))

    rows = []
    for tag, what in (("keep-fld", "`--keep first,last,depthwise` (before: sensitive kept nothing without labels)"),
                      ("defaults", "the defaults (`first,last,depthwise,sensitive`, expected drops)")):
        accs, kept = [], []
        for seed in SEEDS:
            d = load(os.path.join(dir, "resnet-%s-%d.json" % (tag, seed)))
            accs.append(held_out(d))
            s = d.get("sensitive") or {}
            kept.append(len(s.get("kept", [])))
        rows.append((what, accs, kept))
    print("fmnist-resnet binarized **without labels** (loss distill, every other setting the "
          "default; 10 000 training images, the 10 000 test images held out and read once):\n")
    print("| keep | held-out accuracy, seeds 1 / 2 / 3 | mean | weights kept as sensitive |")
    print("|---|---|---:|---|")
    for what, accs, kept in rows:
        print("| %s | %s | %.2f | %s |" % (what, " / ".join("%.2f" % a for a in accs), sum(accs) / len(accs),
                                        " / ".join(str(k) for k in kept)))
    a, b = rows[0][1], rows[1][1]
    d = [y - x for x, y in zip(a, b)]
    m = sum(d) / len(d)
    sd = math.sqrt(sum((v - m) ** 2 for v in d) / (len(d) - 1))
    t = 4.302652729911275  # t(0.975, 2)
    print("\nDefaults − before: %+.2f pp, paired 95 %% t interval [%+.2f, %+.2f] over %d seeds." % (
        m, m - t * sd / math.sqrt(len(d)), m + t * sd / math.sqrt(len(d)), len(d)))


if __name__ == "__main__":
    main(sys.argv[1])
