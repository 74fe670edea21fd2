#!/usr/bin/python3
"""Needle retrieval by where the needle stands: is a miss beyond L a needle the model cannot find
far back, or one it cannot copy at all?

For every finished needle run of a sweep's run directory (runs.tsv names its settings), and each
evaluation context, the fraction of cities and of numbers retrieved by needle depth (the needle's
start over the prompt's length, run.h5 /needle/<T>/needle_depth: depth ≥ 0.75 at 4L is within
about L bytes of the question). Groups are the runs that differ only in train.seed (needles of all
seeds pooled).
  scripts/needle_depth.py runs/needle-search [1024 4096]
"""
import csv
import os
import sys

import h5py
import numpy as np

BINS = [(0.0, 0.5), (0.5, 0.75), (0.75, 1.01)]

root = sys.argv[1]
contexts = sys.argv[2:]
with open(os.path.join(root, "runs.tsv")) as f:
    rows = list(csv.DictReader(f, delimiter="\t"))
groups = {}
for row in rows:
    path = os.path.join(root, row["run_id"], "run.h5")
    if not os.path.exists(path):
        continue
    with h5py.File(path, "r") as h5:
        if "needle" not in h5:
            continue
        label = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("index", "run_id", "train.seed"))
        for T in contexts or sorted(h5["needle"].keys(), key=int):
            g = h5["needle"][T]
            entry = groups.setdefault((label, int(T)), {"depth": [], "city": [], "number": [], "runs": 0})
            entry["depth"].append(g["needle_depth"][...].ravel())
            entry["city"].append(g["city_correct"][...].ravel())
            entry["number"].append(g["number_correct"][...].ravel())
            entry["runs"] += 1
print("| runs | T | " + " | ".join(f"depth [{lo:g}, {min(hi, 1):g}): n, city, number" for lo, hi in BINS) + " |")
print("| --- | --- |" + " --- |" * len(BINS))
for (label, T), e in sorted(groups.items()):
    depth, city, number = (np.concatenate(e[k]) for k in ("depth", "city", "number"))
    cells = []
    for lo, hi in BINS:
        sel = (depth >= lo) & (depth < hi)
        n = int(sel.sum())
        cells.append(f"{n}, {city[sel].mean():.3f}, {number[sel].mean():.3f}" if n else "0, –, –")
    print(f"| {label} ({e['runs']} runs) | {T} | " + " | ".join(cells) + " |")
