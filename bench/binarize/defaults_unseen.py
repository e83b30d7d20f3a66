"""Prints issue 15's ρ̄ ladder on calibration data the shipped models never saw (run.sh
defaults-unseen): for each network and setting, the validation accuracy of the exported
iterate (the split a choice reads), the signs flipped over the run, and the held-out
accuracy, each with its paired 95 % t interval against the first setting (the defaults,
ρ̄ = 1, unless told) over seeds 1-3.
Usage: defaults_unseen.py [DIR [NET,... [TAG,...]]] (TAG: defaults, pgd, constant, growth, rhoR or
growRxG (ρ̄ = R growing ×G), the first the reference of the Δ columns; by default the three shipped nets and the
defaults, PGD and the ρ̄ ladder)"""
import json
import os
import sys

from defaults_runs import interval, mean, read_run

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults/unseen"
SEEDS = [1, 2, 3]
NETS = sys.argv[2].split(",") if len(sys.argv) > 2 else ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]
TAGS = sys.argv[3].split(",") if len(sys.argv) > 3 else ["defaults", "pgd", "rho0.3", "rho0.1", "rho0.03", "rho0.01"]


def label(tag):
    if tag == "defaults":
        return "ADMM-Q, defaults (ρ̄ = 1)"
    if tag == "pgd":
        return "PGD"
    if tag == "constant":
        return "ADMM-Q, ρ̄ = 1 constant (--rho-growth-unnormalized 1)"
    if tag == "growth":
        return "ADMM-Q, defaults (ρ̄ = 1, ×10 an iteration where no normalisation follows)"
    if tag.startswith("grow"):
        r, g = tag[len("grow"):].split("x")
        return "ADMM-Q, ρ̄ = %s growing ×%s an iteration" % (r, g)
    return "ADMM-Q, ρ̄ = " + tag[len("rho"):]


SETTINGS = [(t, label(t)) for t in TAGS]
REF = TAGS[0]


def load(net):
    """{(tag, seed): (validation, held-out, flipped %)} and the full-precision held-out accuracy."""
    out, fp = {}, None
    for tag, _ in SETTINGS:
        for s in SEEDS:
            f = os.path.join(d, "%s-%s-%d.json" % (net, tag, s))
            r = read_run(f)
            if r is None:
                continue
            h = json.load(open(f))["history"]
            out[(tag, s)] = (r[0], r[1], sum(x["flipped_pct"] for x in h))
            fp = r[2]
    return out, fp


print("Calibration data: 5 000 test images the models never trained on (4 000 train, 1 000")
print("validation); held out: the other 5 000 test images (bench/budget/testsplit.py, seed 1).")
print("Validation (val.) is what a choice reads; the held-out column is reported, not chosen on.")
print("Flipped: the percentage of binarized signs changed, summed over the outer iterations.")
print("Δ: paired against %s, mean [95 %% t interval] over seeds 1–3, in pp.\n" % label(REF))
print("| network | setting | val. | Δ val. | flipped | held-out | Δ held-out |")
print("|---|---|---:|---:|---:|---:|---:|")
for net in NETS:
    r, fp = load(net)
    if fp is None:
        continue
    print("| %s | full precision | | | | %.2f | |" % (net, fp))
    for tag, what in SETTINGS:
        seeds = [s for s in SEEDS if (tag, s) in r and (REF, s) in r]
        if not seeds:
            continue
        val = [r[(tag, s)][0] for s in seeds]
        held = [r[(tag, s)][1] for s in seeds]
        flip = [r[(tag, s)][2] for s in seeds]
        dv = [r[(tag, s)][0] - r[(REF, s)][0] for s in seeds]
        dh = [r[(tag, s)][1] - r[(REF, s)][1] for s in seeds]
        n = "" if len(seeds) == len(SEEDS) else " (%d seed%s)" % (len(seeds), "s" if len(seeds) > 1 else "")
        if tag == REF:
            print("| %s | %s%s | %.2f | | %.3f | %.2f | |" % (net, what, n, mean(val), mean(flip), mean(held)))
        else:
            print("| %s | %s%s | %.2f | %+.2f %s | %.3f | %.2f | %+.2f %s |" % (
                net, what, n, mean(val), mean(dv), interval(dv), mean(flip), mean(held), mean(dh), interval(dh)))
