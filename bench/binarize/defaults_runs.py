"""What issue 15's table scripts share: reading the runs of docs/results/defaults and the
paired t interval over seeds."""
import json
import os

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}  # t(0.975; n−1)


def validation(history):
    """The validation accuracy of the exported (best) iterate."""
    best = [x for x in history if x.get("best")]
    return (best[0] if best else history[-1])["accuracy_pct"]


def read_run(path):
    """(validation, held-out, fp) of one binarize --json run, or None when absent or empty."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    j = json.load(open(path))
    return validation(j["history"]), j["binary_accuracy_pct"], j["fp_accuracy_pct"]


def compare_runs(d, net):
    """{(algo, seed): (validation, held-out)} of d/NET/compare.json and its full-precision
    accuracy ({} and None without one)."""
    path = os.path.join(d, net, "compare.json")
    if not os.path.exists(path):
        return {}, None
    c = json.load(open(path))
    out = {}
    for row in c["rows"]:
        for r in row["runs"]:
            out[(row["algo"], r["seed"])] = (validation(r["history"]), r["accuracy_pct"])
    return out, c["fp_accuracy_pct"]


def mean(v):
    return sum(v) / len(v)


def std(v):
    return (sum((x - mean(v)) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0


def interval(diffs):
    """The paired 95 % t interval of the mean of diffs."""
    if len(diffs) < 2:
        return "no interval (1 seed)"
    h = T975[len(diffs) - 1] * std(diffs) / len(diffs) ** 0.5
    return "[%+.2f, %+.2f]" % (mean(diffs) - h, mean(diffs) + h)


def print_validation_rows(data, nets, settings, seeds):
    """The validation table's rows: per network and (tag, what) setting, the validation
    accuracy of each seed's run (— when not run) and their mean; data[net] is
    ({(tag, seed): (validation, ...)}, fp)."""
    for net in nets:
        r, _ = data[net]
        for tag, what in settings:
            v = [r[(tag, s)][0] for s in seeds if (tag, s) in r]
            if not v:
                continue
            cells = ["%.2f" % r[(tag, s)][0] if (tag, s) in r else "—" for s in seeds]
            print("| %s | %s | %s | %.2f |" % (net, what, " | ".join(cells), mean(v)))
