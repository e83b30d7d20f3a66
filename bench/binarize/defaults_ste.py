"""Prints issue 15's STE table: per network and seed, the validation accuracy of the exported
iterate (the split every choice reads) and the held-out accuracy of PGD, ADMM-Q (the defaults,
run.sh defaults / defaults-resnet) and `--algo ste` (run.sh defaults-ste), then per network
the held-out means, STE − ADMM-Q with its paired 95 % t interval over the seeds, and what a
per-run choice between ADMM-Q and STE on the validation split would export (computed from the
two runs of each seed: the one with the higher validation accuracy, ADMM-Q on a tie).
Usage: defaults_ste.py [DIR]"""
import os
import sys

from defaults_runs import compare_runs, interval, mean, read_run, std

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults"
ALGOS = ["pgd", "i-admm-q", "ste"]


def runs(net):
    """{(algo, seed): (validation, held-out)} and the full-precision accuracy."""
    out, fp = compare_runs(d, net)
    short = net.replace("fmnist-", "")
    for a in ALGOS:
        for seed in [1, 2, 3]:
            for f in [os.path.join(d, "%s-%s-%d.json" % (short, a, seed)),
                      os.path.join(d, "tune", "%s-%s-%d.json" % (net, a, seed))]:
                r = read_run(f)
                if (a, seed) in out or r is None:
                    continue
                out[(a, seed)], fp = r[:2], r[2]
    return out, fp


print("Per seed: validation accuracy of the exported iterate / held-out accuracy (%).\n")
print("| network | seed | PGD | ADMM-Q | STE | chosen on validation |")
print("|---|---:|---:|---:|---:|---|")
summary = []
for net in ["fmnist-mlp", "fmnist-cnn", "fmnist-resnet"]:
    r, fp = runs(net)
    seeds = [s for s in [1, 2, 3] if all((a, s) in r for a in ALGOS)]
    chosen = []
    for s in seeds:
        pick = "ste" if r[("ste", s)][0] > r[("i-admm-q", s)][0] else "i-admm-q"
        chosen.append(r[(pick, s)][1])
        print("| %s | %d | %s | %s | %s | %s |" % (net, s, *("%.2f / %.2f" % r[(a, s)] for a in ALGOS),
                                                  "STE" if pick == "ste" else "ADMM-Q"))
    if seeds:
        summary.append((net, seeds, fp, r, chosen))

print("\nHeld-out test set, mean ± std over the seeds; intervals are paired t intervals over the seeds.\n")
print("| network | seeds | FP | PGD | ADMM-Q | STE | STE − ADMM-Q (pp) | FP − STE (pp) | validation-chosen ADMM-Q/STE | its − ADMM-Q (pp) | FP − it (pp) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for net, seeds, fp, r, chosen in summary:
    held = {a: [r[(a, s)][1] for s in seeds] for a in ALGOS}
    d_ste = [x - y for x, y in zip(held["ste"], held["i-admm-q"])]
    d_ch = [x - y for x, y in zip(chosen, held["i-admm-q"])]
    print("| %s | %s | %.2f | %s | %.2f ± %.2f | %+.2f %s | %.2f | %.2f | %+.2f %s | %.2f |" % (
        net, ",".join(map(str, seeds)), fp,
        " | ".join("%.2f ± %.2f" % (mean(held[a]), std(held[a])) for a in ["pgd", "i-admm-q"]),
        mean(held["ste"]), std(held["ste"]), mean(d_ste), interval(d_ste), fp - mean(held["ste"]),
        mean(chosen), mean(d_ch), interval(d_ch), fp - mean(chosen)))
