"""Prints issue 15's augmentation table (run.sh defaults-augment): fmnist-resnet with
--augment against the defaults and against STE with distillation, the validation accuracy
of the exported iterate (the split a default would be chosen on) and the held-out test
accuracy, read once for this table, with paired 95 % t intervals over the seeds where
there are several. Usage: defaults_augment.py [DIR]"""
import os
import sys

from defaults_runs import interval, mean, read_run

d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/defaults"
NET = "fmnist-resnet"
# (setting, flags, file pattern with %d for the seed, the setting it is compared with)
ROWS = [
    ("defaults", "", os.path.join(d, "depthwise", NET + "-i-admm-q-%d.json"), None),
    ("defaults + `--augment shift`", "", os.path.join(d, "augment", NET + "-shift2-%d.json"), "defaults"),
    ("defaults + `--augment flip`", "", os.path.join(d, "augment", NET + "-flip-%d.json"), "defaults"),
    ("`--algo ste --loss distill`", "", os.path.join(d, "tune", NET + "-ste-keepdw-distill-%d.json"), None),
    ("`--algo ste --loss distill --augment shift`", "", os.path.join(d, "augment", NET + "-shift2-ste-distill-%d.json"), "`--algo ste --loss distill`"),
    ("`--algo ste --loss distill --augment shift=1`", "", os.path.join(d, "augment", NET + "-shift1-ste-distill-%d.json"), "`--algo ste --loss distill`"),
    ("`--algo ste --loss distill --augment flip`", "", os.path.join(d, "augment", NET + "-flip-ste-distill-%d.json"), "`--algo ste --loss distill`"),
]
runs, fp = {}, None
for name, _, pat, _ in ROWS:
    for s in (1, 2, 3):
        r = read_run(pat % s)
        if r:
            runs[(name, s)], fp = r[:2], r[2]
print("fmnist-resnet, 10 000 calibration images (1 000 of them the validation split), the")
print("whole test set held out; full precision %.2f %% held-out. Seeds as listed." % fp)
print()
print("| setting | seeds | validation | held-out | held-out − compared (pp) | FP − held-out (pp) |")
print("|---|---|---:|---:|---:|---:|")
for name, _, _, base in ROWS:
    seeds = [s for s in (1, 2, 3) if (name, s) in runs]
    if not seeds:
        continue
    val = mean([runs[(name, s)][0] for s in seeds])
    held = mean([runs[(name, s)][1] for s in seeds])
    diff = ""
    if base:
        paired = [s for s in seeds if (base, s) in runs]
        ds = [runs[(name, s)][1] - runs[(base, s)][1] for s in paired]
        diff = "%+.2f %s" % (mean(ds), interval(ds)) if ds else ""
    print("| %s | %s | %.2f | %.2f | %s | %.2f |" % (name, ",".join(map(str, seeds)), val, held, diff, fp - held))
