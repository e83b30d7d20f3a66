#!/usr/bin/python3
"""Writes docs/results/budget/README.md from bench/budget/run.sh's JSON files."""
import json
import os
import sys

out = sys.argv[1]
runs = [("budget", "`--budget --max-drop 1`"), ("binary", "all binary (`--grid auto --keep none`)"),
        ("int8", "all int8 (`--grid int8 --keep none`)"),
        ("keep-first-last", "`--keep first,last` (`--grid auto`, kept weights at `--lr` × mean \\|w\\|)")]
print("# Binarizing to a budget (bench/budget/run.sh)\n")
if os.path.exists(f"{out}/header.md"):
    # A section measured under another protocol (run.sh SPLIT=test) states its own.
    with open(f"{out}/header.md") as f:
        print(f.read().strip() + "\n")
else:
    print("LIMIT (4 000 unless a section says otherwise) seeded Fashion-MNIST training images as calibration")
    print("data, half of them (`--validation 0.5`) the validation split every choice is made on; LIMIT")
    print("seeded test images held out and measured once per file; seed 1, one seed, nothing tuned on the")
    print("held-out images. Drops in percentage points below the full-precision model on the same held-out")
    print("images; the interval is the binarized accuracy's Wilson 95 % interval. A budget trial meets")
    print("`--max-drop 1` when the upper one-sided 95 % bound of its validation drop (\"bound\") is ≤ 1 pp.")
    print("Fine-tuning budget per section. Measured on the shared 2-core machine (other jobs running).\n")

def timing(path):
    try:
        with open(path) as f:
            lines = [l.strip() for l in f if "s wall" in l]
        return lines[-1] if lines else "?"
    except OSError:
        return "?"


for m in ["fmnist-cnn", "fmnist-resnet", "mobilenet_v2-fmnist", "resnet18-fmnist"]:
    if not os.path.exists(f"{out}/{m}-budget.json"):
        continue
    print(f"## {m}\n")
    try:
        with open(f"{out}/{m}-settings.txt") as f:
            print(f.read().strip() + "\n")
    except OSError:
        pass
    print("| run | file bytes | × smaller | held-out accuracy | 95 % interval | drop (pp) | gate 1 pp | time |")
    print("|---|--:|--:|--:|---|--:|---|---|")
    for name, label in runs:
        p = f"{out}/{m}-{name}.json"
        try:
            with open(p) as f:
                s = json.load(f)
        except (OSError, ValueError):
            print(f"| {label} | — | | | | | | |")
            continue
        if "binary_accuracy_pct" not in s:
            print(f"| {label} | no file: the budget was missed on validation | | | | | | {timing(p[:-5] + '.log')} |")
            continue
        ci = s.get("binary_accuracy_ci95_pct") or [0, 0]
        gate = "—"
        if name == "budget":
            gate = "passed" if s.get("gate_passed") else "failed"
        else:
            gate = "passed" if s["drop_pct"] <= 1 else "failed"
        print(f"| {label} | {s['output_bytes']} | {s['input_bytes'] / s['output_bytes']:.1f} | "
              f"{s['binary_accuracy_pct']:.2f} % | {ci[0]:.2f}–{ci[1]:.2f} | {s['drop_pct']:.2f} | {gate} | {timing(p[:-5] + '.log')} |")
    print(f"\nFull precision: {s['fp_accuracy_pct']:.2f} % on the same {s['splits']['held_out']} held-out images; "
          f"original file {s['input_bytes']} B.\n")
    with open(f"{out}/{m}-budget.json") as f:
        s = json.load(f)
    b = s.get("budget")
    if b:
        print(f"Budget trials (validation split, {b['validation_samples']} images; sensitivities in "
              f"{b['analysis_seconds']:.1f} s):\n")
        print("| trial | allowance | file bytes | predicted drop | validation drop | bound | met | next |")
        print("|--:|--:|--:|--:|--:|--:|---|---|")
        for t in b["trials"]:
            vd = t.get("validation_drop_pct")
            vd = "—" if vd is None else f"{vd:.2f}"
            nxt = "relax " + t["relaxed"] if t.get("relaxed") else ("2× allowance" if t.get("tightened") else ("every weight on its widest grid" if t.get("widened") else ("trial 1's first %d moves on the widest grids" % t["bisect_moves"] if t.get("bisect_moves") else "")))
            print(f"| {t['trial']} | {t['allowance_scale']:g}× | {t['file_bytes']} | {t['predicted_drop_pct']:.2f} | {vd} | {t.get('validation_drop_bound_pct', float('nan')):.2f} | {t['met']} | {nxt} |")
        last = b["trials"][b["chosen_trial"] - 1] if b["chosen_trial"] > 0 else b["trials"][-1]
        what = "the file written" if b["chosen_trial"] > 0 else "the last trial; no file was written"
        print(f"\nGrids of trial {last['trial']} ({what}):\n")
        print("| weight | grid | bytes | why |")
        print("|---|---|--:|---|")
        for c in last["choices"]:
            print(f"| `{c['weight']}` | {c['grid']} | {c['bytes']} | {c['reason']} |")
        print()
    if os.path.exists(f"{out}/{m}-analyze.log"):
        print(f"Sensitivity plot: [{m}-sensitivity.png]({m}-sensitivity.png); analysis: {timing(f'{out}/{m}-analyze.log')}.\n")
