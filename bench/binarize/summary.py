"""One line per binarize --json run: the validation accuracy of the exported iterate (what
the defaults are decided on), the held-out accuracy, and the signs flipped over the run.
Usage: summary.py RUN.json NETWORK SETTING"""
import json
import sys

d = json.load(open(sys.argv[1]))
h = d["history"]
best = [x for x in h if x.get("best")]
b = best[0] if best else h[-1]
print("%s algo=%s rho=%s seed=%s validation(exported iter %d)=%.2f held-out=%.2f flipped(sum over iters)=%.3f%%" % (
    sys.argv[2], d["algo"], sys.argv[3], d["seed"], d["exported_iter"], b["accuracy_pct"],
    d["binary_accuracy_pct"], sum(x["flipped_pct"] for x in h)))
