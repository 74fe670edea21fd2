#!/usr/bin/env bash
# The τ law on the √2 grid (sweeps/tau-law-sqrt2.yaml; docs/tau-vs-context.md): its page,
# docs/results/tau-law-sqrt2.md, rendered from committed data by the harness's own code.
#
#   scripts/results-tau-law.sh [BUILD]                 from the runs: re-validates every finished run
#       on 65,536 tokens per context (`harness analyse --tokens`), writes the per-seed curves, the
#       law's tables and figures and the provenance into docs/results/tau-law-sqrt2/, then renders
#   scripts/results-tau-law.sh --render [BUILD] [DIR]  from the committed per-seed curves only (no
#       runs needed): the page into DIR (default docs/results), what the CTest
#       results_pages_regenerate compares with the committed page
#
# Every number on the page is `harness tau law --curves`'s output on the committed CSV, or the
# provenance the first form measured (revision, machine, runs, their time); the prose names none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/results-lib.sh  # results_args and what the scripts share
results_args results-tau-law docs/results "$@"
DATA=docs/results/tau-law-sqrt2
SWEEP=sweeps/tau-law-sqrt2.yaml
TOKENS=${RESULTS_TOKENS:-65536}

if [ "$render_only" = 0 ]; then
  "$HARNESS" analyse "$SWEEP" --tokens "$TOKENS" --threads "${RESULTS_JOBS:-$(nproc)}" >/dev/null
  mkdir -p "$DATA"
  "$HARNESS" tau law "$SWEEP" --out "$DATA.tmp" >/dev/null
  rm -rf "$DATA" && mkdir -p "$DATA"
  cp "$DATA.tmp"/tau-law-curves.csv "$DATA.tmp"/*.png "$DATA.tmp"/tau_law_*.csv "$DATA" && rm -rf "$DATA.tmp"
  runs=$(awk -F, 'NR > 1 {print $1 "," $3 "," $4}' "$DATA/tau-law-curves.csv" | sort -u | wc -l)
  # the finished runs only, for their revisions and training time
  mapfile -t done_runs < <("$HARNESS" sweep plan "$SWEEP" | awk '$2 ~ /^#/ && $NF == "done" {print "runs/tau-law-sqrt2/" $1}')
  {
    echo "Data written by \`scripts/results-tau-law.sh\` on $(date -u +%Y-%m-%d) at revision"
    echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/results' || echo -dirty), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores:"
    echo "$runs runs of \`$SWEEP\` used (each τ with all its L's seeds done; ${#done_runs[@]} of its"
    echo "$("$HARNESS" sweep plan "$SWEEP" | grep -c ' #') runs finished), the finished ones trained at revision(s)"
    echo "$(trained "${done_runs[@]}") (each run.h5's /config git_revision), each re-validated on"
    echo "$TOKENS tokens per context. Their training took $("$HARNESS" export revisions "${done_runs[@]}" --train-minutes) run-minutes in all"
    echo "(run.h5's /train/seconds, validation excluded; 2 runs at a time on the 2 cores, beside other work)."
  } > "$DATA/provenance.md"
fi

[ -f "$DATA/tau-law-curves.csv" ] || { echo "results-tau-law: no $DATA/tau-law-curves.csv" >&2; exit 2; }
mkdir -p "$PAGE_DIR"
law=$("$HARNESS" tau law --curves "$DATA/tau-law-curves.csv" 2>/dev/null)
{
  echo "# The best τ at L = 64 and 128 on a √2 grid"
  echo
  cat "$DATA/provenance.md"
  echo
  echo "Scale-invariant p-RoPE (p-RoPE base L/4), the model, steps and tokens per step of"
  echo "[tau-vs-context.md](../tau-vs-context.md)'s τ-law study, at the two training contexts where"
  echo "its intervals were widest, on a τ grid spaced √2 around the minima at 4L and 16L, with seeds"
  echo "paired across τ. Rendered by \`scripts/results-tau-law.sh --render\` from the per-seed losses in"
  echo "[tau-law-sqrt2/tau-law-curves.csv](tau-law-sqrt2/tau-law-curves.csv): what follows is"
  echo "\`harness tau law --curves\` on that file, word for word — the interval's method, and the words"
  echo "for the law chosen by rule from its ends, are in tau-vs-context.md."
  echo
  echo "$law"
  echo
  echo "![τ* against L](tau-law-sqrt2/tau_law_star.png)"
  echo
  echo "![loss above each L's best at 4L](tau-law-sqrt2/tau_law_loss_4L.png)"
} > "$PAGE_DIR/tau-law-sqrt2.md"
echo "results-tau-law: $PAGE_DIR/tau-law-sqrt2.md"
