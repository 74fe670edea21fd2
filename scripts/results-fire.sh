#!/usr/bin/env bash
# FIRE beside KERPLE-log and T5 (#48 item 3; called by scripts/results.sh, runs alone too):
# sweeps/fire.yaml (18 runs: each method as its preset and with p-RoPE, 3 seeds, in
# sweeps/table1-same-text.yaml's setting). Runs or resumes it (finished runs are skipped), then
# writes docs/results/fire.md with its figures and CSV: every number that page and docs/results.md
# quote about FIRE is printed here.
#   scripts/results-fire.sh [BUILD]      RESULTS_JOBS: runs at a time (default: the cores)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HARNESS="$BUILD/harness"
JOBS=${RESULTS_JOBS:-$(nproc)}
OUT=docs/results
[ -x "$HARNESS" ] || { echo "results: $HARNESS not found; run make build first" >&2; exit 2; }

"$HARNESS" sweep run sweeps/fire.yaml --jobs "$JOBS" --threads-per-job 1 --no-live >/dev/null
rm -rf "$OUT/fire.tmp" && "$HARNESS" export curves sweeps/fire.yaml --out "$OUT/fire.tmp" >/dev/null 2>&1
rm -rf "$OUT/fire" && mkdir -p "$OUT/fire" && cp "$OUT/fire.tmp"/*.png "$OUT/fire.tmp"/*.csv "$OUT/fire" && rm -rf "$OUT/fire.tmp"
trained() {  # the revisions the runs were trained at (each run.h5 records its own)
  "${PYTHON:-.venv/bin/python}" - "$1" <<'PY'
import collections, glob, sys
import h5py
count = collections.Counter()
for path in glob.glob(f"{sys.argv[1]}/*/run.h5"):
    with h5py.File(path, "r") as f:
        rev = f["config"].attrs.get("git_revision", "unknown")
        rev = rev.decode() if isinstance(rev, bytes) else str(rev)
        count[rev[:7] + ("-dirty" if rev.endswith("-dirty") else "")] += 1
print(", ".join(f"{rev} ({n} runs)" for rev, n in sorted(count.items())) or "none")
PY
}
same_runs() {  # kerple and t5 (seeds 0-2) here against the same runs of table1-same-text, by final loss
  local here there
  here=$(mktemp) there=$(mktemp)
  "$HARNESS" sweep table sweeps/fire.yaml --csv "$here" >/dev/null 2>&1
  "$HARNESS" sweep table sweeps/table1-same-text.yaml --csv "$there" >/dev/null 2>&1
  "${PYTHON:-.venv/bin/python}" - "$here" "$there" <<'PY'
import csv, sys
here, there = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
there = {(r["attention.method"], r["train.seed"]): r for r in there}
same = differ = 0
for r in here:
    if r["attention.positional"] != "–" or r["attention.method"] == "fire":
        continue
    o = there.get((r["attention.method"], r["train.seed"]))
    if o is None:
        continue
    losses = [c for c in r if c.startswith("loss_")]
    same, differ = (same + 1, differ) if all(r[c] == o[c] for c in losses) else (same, differ + 1)
print(f"{same} of {same + differ} kerple and t5 runs reproduce table1-same-text.md's final losses exactly")
PY
  rm -f "$here" "$there"
}
{
  echo "# FIRE beside KERPLE and T5 (L = 256)"
  echo
  echo "Written by \`scripts/results-fire.sh\` (\`make results\`) on $(date -u +%Y-%m-%d) at revision"
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo ' (with uncommitted changes)'),"
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores. The runs were trained"
  echo "at revision(s) $(trained runs/fire) (each run.h5's /config git_revision)."
  echo
  echo "The three learned biases (FIRE, KERPLE-log, T5), each as its preset (NoPE: \`positional –\`)"
  echo "and with p-RoPE (base L/4), × 3 seeds, in [table1-same-text.md](table1-same-text.md)'s setting:"
  echo "byte-level models (2 layers, d_model 128, 4 heads) trained at L = 256 for 800 steps, validated"
  echo "at 1L, 4L and 16L on the same 131,072 target tokens (sweeps/fire.yaml). FIRE as the harness"
  echo "implements it ([attention.md](../attention.md)): f_h(ψ(t)/ψ(max(L_h, i))) with f_h a"
  echo "1 → 32 → 1 MLP read on a 128-point grid, every parameter per head, starting as NoPE."
  echo "Cells: final validation loss (nats/byte), mean ± standard error over seeds (number of seeds)."
  echo
  "$HARNESS" export table sweeps/fire.yaml 2>/dev/null
  echo
  echo "By seed:"
  echo
  "$HARNESS" export table sweeps/fire.yaml --rows attention.method,attention.positional,train.seed \
    --best none 2>/dev/null | sed 's/ (1) / /g; /^mean ± standard error/d; /^$/d'
  echo
  echo "$(same_runs) (same config, seed and code path: a check that the runs are deterministic and"
  echo "that FIRE's path changed nothing for them)."
  echo
  echo "## Which differences are resolved"
  echo
  echo "\`harness export pairs sweeps/fire.yaml\`: every pair of the six arms at each context, the"
  echo "seed-paired gap with windows clustered by document, resolved by Holm's procedure over the"
  echo "context's 15 pairs at a family-wise 5% ([export.md](../export.md)). With 3 seeds a pair has 2"
  echo "degrees of freedom: only large gaps resolve."
  echo
  "$HARNESS" export pairs sweeps/fire.yaml --out "$OUT/fire/pairs.csv" --format csv >/dev/null 2>&1
  "$HARNESS" export pairs sweeps/fire.yaml 2>/dev/null | sed 's/^### /### At /'
  echo "## Loss by position in the 16L windows"
  echo
  echo "![loss by position](fire/position_loss_T4096.png)"
  echo
  echo "Every figure with its CSV: [fire/](fire/) (pairs.csv: every pair's gap, interval, p-value"
  echo "and verdict)."
} > "$OUT/fire.md"
echo "results: $OUT/fire.md"
