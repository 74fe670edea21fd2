#!/usr/bin/python3
"""Which cells of a loss table are separable from the best of their column.

Reads a Markdown table of `harness export table` (cells "mean ± se (n…)", se over seeds) on stdin
and prints, per column, the best row and the rows within K combined standard errors of it:
(mean − best) / √(se² + se_best²) < K (default 2). The validation windows are the same for every
run, so a difference between two cells carries the seeds' error; the windows' error mostly cancels.
  build/harness export table sweeps/table1.yaml --metric analysis/loss | scripts/separable.py
"""
import math
import re
import sys

K = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("|")]
header = [p.strip() for p in lines[0].strip("|").split("|")]
cell = re.compile(r"^\**([-\d.]+) ± ([\d.]+) \(")
table = [[p.strip() for p in line.strip("|").split("|")] for line in lines[2:]]
# Value columns: those where some row holds a "mean ± se" cell; the others label the row.
value = [any(cell.match(r[i]) for r in table) for i in range(len(header))]
rows = [(" ".join(p for p, v in zip(r, value) if not v), [cell.match(p) for p, v in zip(r, value) if v])
        for r in table]
columns = [h for h, v in zip(header, value) if v]
for c, name in enumerate(columns):
    cells = sorted((float(v[c].group(1)), float(v[c].group(2)), label) for label, v in rows if v[c])
    if len(cells) < 2:
        continue
    mean, se, best = cells[0]
    near = [f"{label} ({(m - mean) / math.hypot(s, se):.1f})" for m, s, label in cells[1:]
            if (m - mean) / math.hypot(s, se) < K]
    print(f"- {name}: best {best}; within {K:g} s.e. of it (gap in s.e.): {', '.join(near) or 'none'}")
